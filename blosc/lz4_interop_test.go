package blosc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// TestLZ4CDecodes has c-blosc 1.21 (Debian's python3-blosc,
// blosc.decompress) decode the Blosc1 chunks that our LZ4 encoder
// (lz4fast) writes of the data sets of `make bench-table` (a float64
// random walk and a smooth series with shuffle at typesize 8, CSV text at
// typesize 1) and of noise, at clevels 1, 5 and 9, whole and with a
// leftover block, split and not: streams from 12 KiB to 256 KiB, on both
// sides of LZ4's 64 KiB table switch, and incompressible ones that fall
// back to stored streams or a stored chunk. It wants the source back bit
// for bit.
func TestLZ4CDecodes(t *testing.T) {
	py := testkit.Python(t, "blosc")
	dir := t.TempDir()
	noise := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	sets := []struct {
		name string
		data []byte
		ts   int
		f    uint8
	}{
		{"walk", lz4Walk(1 << 20), 8, FilterShuffle},
		{"smooth", lz4Smooth(1 << 20), 8, FilterShuffle},
		{"csv", lz4CSV(1 << 20), 1, FilterNone},
		{"noise", noise, 8, FilterShuffle},
	}
	type job struct {
		name string
		src  []byte
	}
	var jobs []job
	compressed := 0
	for _, s := range sets {
		for _, clevel := range []int{1, 5, 9} {
			for _, size := range []int{1 << 20, 1<<20 - 4093} {
				for _, split := range []SplitMode{SplitForwardCompat, SplitNever} {
					p := Params{Codec: CodecLZ4, Clevel: clevel, Typesize: s.ts, Blosc1: true, Split: split}
					p.Filters[5] = s.f
					src := s.data[:size]
					chunk, err := Compress(nil, src, p)
					if err != nil {
						t.Fatalf("%s: %v", s.name, err)
					}
					if h, _ := ParseHeader(chunk); !h.Memcpyed() {
						compressed++
					}
					name := fmt.Sprintf("go_%s_cl%d_n%d_split%d", s.name, clevel, size, split)
					if err := os.WriteFile(filepath.Join(dir, name+".blosc"), chunk, 0o644); err != nil {
						t.Fatal(err)
					}
					jobs = append(jobs, job{name, src})
				}
			}
		}
	}
	// interopScript also compresses the jobs of py.jobs: none here.
	if err := os.WriteFile(filepath.Join(dir, "py.jobs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(py, "-c", interopScript, dir).CombinedOutput(); err != nil {
		t.Fatalf("python-blosc: %v\n%s", err, out)
	}
	for _, j := range jobs {
		got, err := os.ReadFile(filepath.Join(dir, j.name+".out"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, j.src) {
			t.Errorf("c-blosc decodes our %s differently: %.80q", j.name, got)
		}
	}
	if compressed < len(jobs)*3/4-1 {
		t.Errorf("only %d of %d chunks compressed", compressed, len(jobs))
	}
	t.Logf("%d LZ4 chunks (%d compressed) decoded bit-exact by c-blosc 1.21", len(jobs), compressed)
}
