package blosc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// interopScript decodes the chunks we wrote (go_N.blosc → go_N.out) and
// writes chunks of its own (py_N.in → py_N.blosc, parameters in py.jobs)
// with python-blosc, i.e. c-blosc 1.21.
const interopScript = `
import blosc, glob, os, sys
d = sys.argv[1]
blosc.set_nthreads(1)
for f in sorted(glob.glob(os.path.join(d, "go_*.blosc"))):
    with open(f, "rb") as fh:
        data = fh.read()
    try:
        out = blosc.decompress(data)
    except Exception as e:
        out = ("ERROR: %r" % (e,)).encode()
    with open(f[:-6] + ".out", "wb") as fh:
        fh.write(out)
for line in open(os.path.join(d, "py.jobs")):
    n, cname, ts, shuf, clevel, bs = line.split()
    with open(os.path.join(d, "py_%s.in" % n), "rb") as fh:
        data = fh.read()
    blosc.set_blocksize(int(bs))
    c = blosc.compress(data, typesize=int(ts), clevel=int(clevel), shuffle=int(shuf), cname=cname)
    with open(os.path.join(d, "py_%s.blosc" % n), "wb") as fh:
        fh.write(c)
blosc.set_blocksize(0)
`

// TestCInterop checks, with Debian's python3-blosc (c-blosc 1.21), that
// the reference decodes the Blosc1 chunks we write bit-exact, for all its
// codecs, shuffles and typesizes, and that we decode the chunks it writes.
func TestCInterop(t *testing.T) {
	py := testkit.Python(t, "blosc")
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(7, 7))
	type job struct {
		name string
		src  []byte
	}
	var ours, theirs []job
	var jobs strings.Builder
	n, compressed, split := 0, 0, 0
	codecs := []string{"blosclz", "lz4", "lz4hc", "zlib", "zstd"}
	for _, cname := range append(codecs, "snappy") {
		for _, shuf := range []int{0, 1, 2} {
			for _, ts := range []int{1, 2, 3, 4, 8, 12, 16, 17, 255} {
				// Mostly compressible data at clevel 1–9, with a share
				// of edge cases: empty and tiny inputs, clevel 0,
				// incompressible data, forced small blocks.
				size := []int{1000, 40000, 131072 + 13, 70001}[n%4]
				kind := []int{0, 5, 0, 5}[n%4] // float series, runs: compressible under any shuffle
				clevel := []int{1, 5, 9}[n%3]
				bs := []int{0, 0, 0, 4096, 65536}[n%5]
				switch n % 11 {
				case 3:
					size = []int{0, 5, 127, 128}[n%4]
				case 7:
					clevel = 0
				case 9:
					kind = 2
				}
				src := testData(r, kind, size)
				n++
				// Ours → theirs.
				if cname != "snappy" {
					code, _ := CodecByName(cname)
					p := Params{Codec: code, Clevel: clevel, Typesize: ts, Blocksize: bs, Blosc1: true, Split: SplitMode(n % 4)}
					if shuf > 0 {
						p.Filters[5] = uint8(shuf)
					}
					chunk, err := Compress(nil, src, p)
					if err != nil {
						t.Fatalf("%+v: %v", p, err)
					}
					name := fmt.Sprintf("go_%d_%s_shuf%d_ts%d_n%d_cl%d_bs%d_split%d", n, cname, shuf, ts, size, clevel, bs, p.Split)
					if err := os.WriteFile(filepath.Join(dir, name+".blosc"), chunk, 0o644); err != nil {
						t.Fatal(err)
					}
					ours = append(ours, job{name, src})
					if h, _ := ParseHeader(chunk); !h.Memcpyed() {
						compressed++
						if h.Flags&flagDontSplit == 0 {
							split++
						}
					}
				}
				// Theirs → ours.
				name := fmt.Sprintf("py_%d", n)
				if err := os.WriteFile(filepath.Join(dir, name+".in"), src, 0o644); err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&jobs, "%d %s %d %d %d %d\n", n, cname, ts, shuf, clevel, bs)
				theirs = append(theirs, job{fmt.Sprintf("%s_%s_shuf%d_ts%d_n%d_cl%d_bs%d", name, cname, shuf, ts, size, clevel, bs), src})
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "py.jobs"), []byte(jobs.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", interopScript, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python-blosc: %v\n%s", err, out)
	}
	for _, j := range ours {
		got, err := os.ReadFile(filepath.Join(dir, j.name+".out"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, j.src) {
			t.Errorf("c-blosc decodes our %s differently: %.80q", j.name, got)
		}
	}
	for _, j := range theirs {
		id := strings.SplitN(j.name, "_", 3)[1]
		chunk, err := os.ReadFile(filepath.Join(dir, "py_"+id+".blosc"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decompress(chunk)
		if err != nil {
			t.Errorf("decoding c-blosc's %s: %v", j.name, err)
			continue
		}
		if !bytes.Equal(got, j.src) {
			t.Errorf("our decode of c-blosc's %s differs", j.name)
			continue
		}
		checkBlocks(t, chunk, j.src)
	}
	if compressed < len(ours)*2/3 { // about 27% are deliberate stored-chunk cases
		t.Errorf("only %d of our %d chunks are compressed: the test no longer exercises the codecs", compressed, len(ours))
	}
	t.Logf("%d chunks of ours (%d compressed, %d split) decoded by c-blosc, %d of c-blosc's decoded by us", len(ours), compressed, split, len(theirs))
}
