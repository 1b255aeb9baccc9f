package blosclz

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// systemPython is Debian's interpreter, for which python3-blosc (c-blosc
// 1.21) is installed; the python3 first on PATH may be another one.
const systemPython = "/usr/bin/python3"

// interopScript decompresses every *.blosc file of a directory with
// python-blosc and writes the result next to it (*.out), or the error
// (*.err).
const interopScript = `
import os, sys, blosc
d = sys.argv[1]
names = sorted(f for f in os.listdir(d) if f.endswith(".blosc"))
for f in names:
    p = os.path.join(d, f)
    with open(p, "rb") as fh:
        data = fh.read()
    try:
        out = blosc.decompress(data)
    except Exception as e:
        with open(p[:-6] + ".err", "w") as fh:
            fh.write(repr(e))
        continue
    with open(p[:-6] + ".out", "wb") as fh:
        fh.write(out)
print("decoded", len(names), "chunks with c-blosc", blosc.blosclib_version)
`

// wrapChunk wraps one BloscLZ stream of an n-byte input into a minimal
// version-2 Blosc chunk: one block, one stream, typesize 1, no shuffle.
func wrapChunk(stream []byte, n int) []byte {
	c := make([]byte, 16+4+4+len(stream))
	c[0] = 2    // format version (Blosc1)
	c[1] = 1    // BloscLZ format version
	c[2] = 0x10 // dont_split, codec format 0 (BloscLZ), no shuffle
	c[3] = 1    // typesize
	binary.LittleEndian.PutUint32(c[4:], uint32(n))
	binary.LittleEndian.PutUint32(c[8:], uint32(n)) // one block
	binary.LittleEndian.PutUint32(c[12:], uint32(len(c)))
	binary.LittleEndian.PutUint32(c[16:], 20) // bstarts[0]
	binary.LittleEndian.PutUint32(c[20:], uint32(len(stream)))
	copy(c[24:], stream)
	return c
}

// TestCInteropDecode has the reference C decoder (c-blosc 1.21 through
// python-blosc) decode streams written by Compress.
func TestCInteropDecode(t *testing.T) {
	if out, err := exec.Command(systemPython, "-c", "import blosc").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("%s cannot import blosc (Debian package python3-blosc): %v %s",
			systemPython, err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	type item struct {
		name string
		src  []byte
	}
	var items []item
	add := func(name string, src []byte, clevel int) {
		dst := make([]byte, len(src))
		c := Compress(dst, src, clevel)
		if c == 0 {
			return
		}
		name = fmt.Sprintf("%03d-%s-l%d", len(items), name, clevel)
		if err := os.WriteFile(filepath.Join(dir, name+".blosc"), wrapChunk(dst[:c], len(src)), 0o644); err != nil {
			t.Fatal(err)
		}
		items = append(items, item{name, src})
	}
	for _, g := range generators {
		for _, n := range []int{67, 100, 1000, 4097, 65536, 70001, 256 << 10} {
			for _, clevel := range []int{1, 3, 5, 7, 9} {
				add(fmt.Sprintf("%s-%d", g.name, n), g.gen(n, uint64(n+clevel)), clevel)
			}
		}
	}
	// Far matches near the distance limit.
	for _, dist := range []int{8191, 8192, 8193, 65535 + 8192, 73724} {
		src := genText(dist+30000, 5)
		piece := genRandom(5000, uint64(dist))
		copy(src[1000:], piece)
		copy(src[1000+dist:], piece)
		add(fmt.Sprintf("far-%d", dist), src, 9)
	}
	// Long runs, whose lengths need many 255 bytes.
	src := make([]byte, 200000)
	for i := range src {
		src[i] = byte(i / 50000)
	}
	add("longruns", src, 5)
	if len(items) < 100 {
		t.Fatalf("only %d inputs compressed", len(items))
	}
	// A control: the last byte of a stream is always a literal; changing
	// it must change the C decoder's output.
	control := genText(10000, 1)
	cdst := make([]byte, len(control))
	cn := Compress(cdst, control, 5)
	cdst[cn-1] ^= 0xff
	if err := os.WriteFile(filepath.Join(dir, "control.blosc"), wrapChunk(cdst[:cn], len(control)), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(systemPython, "-c", interopScript, dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", systemPython, err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
	if got, err := os.ReadFile(filepath.Join(dir, "control.out")); err != nil ||
		len(got) != len(control) || firstDiff(got, control) != len(control)-1 {
		t.Fatalf("control: c-blosc did not return the altered data (err=%v)", err)
	}
	for _, it := range items {
		got, err := os.ReadFile(filepath.Join(dir, it.name+".out"))
		if err != nil {
			msg, _ := os.ReadFile(filepath.Join(dir, it.name+".err"))
			t.Errorf("%s: c-blosc failed: %s", it.name, msg)
			continue
		}
		if string(got) != string(it.src) {
			t.Errorf("%s: c-blosc output differs (%d bytes, want %d, first diff at %d)",
				it.name, len(got), len(it.src), firstDiff(got, it.src))
		}
	}
}
