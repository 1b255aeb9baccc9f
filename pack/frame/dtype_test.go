package frame

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit"
)

// TestNPYDescrInjection is finding 9 of issue 11: a .b2nd's dtype string
// is data. One that closes the descr and adds its own keys must not reach
// the NPY header; numpy.load must see the stored shape and item size.
func TestNPYDescrInjection(t *testing.T) {
	py := testkit.Python(t, "numpy")
	evil := "[('a', '<i4')], 'fortran_order': True, 'shape': (2, 3)} #]"
	a := &Array{Shape: []int64{4, 4}, ChunkShape: []int32{4, 4}, BlockShape: []int32{2, 2}, Itemsize: 8, Dtype: evil}
	if err := a.derive(); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 4*4*8)
	for i := range raw {
		raw[i] = byte(i)
	}
	f := reopen(t, writeArray(t, a, raw, blosc.DefaultParams(8)), newCache())
	if d := f.Array().NPYDescr(); d != "'|V8'" {
		t.Errorf("descr of an injected dtype: %s, want '|V8'", d)
	}
	npy, err := f.NPY()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.npy")
	if err := os.WriteFile(path, readAll(t, npy, npy.Size()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "-c", `
import sys, numpy
a = numpy.load(sys.argv[1])
print(a.shape, a.dtype.itemsize, a.flags['F_CONTIGUOUS'] and not a.flags['C_CONTIGUOUS'])
`, path).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy.load: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "(4, 4) 8 False" {
		t.Fatalf("numpy.load of the view: %s, want (4, 4) 8 False", got)
	}
}

// TestNPYDescrParse checks the dtype grammar: valid literals are rebuilt
// canonically, anything else (or a wrong item size) gives raw bytes.
func TestNPYDescrParse(t *testing.T) {
	cases := []struct {
		dtype    string
		itemsize int
		want     string
	}{
		{"[('a', '<f8', (37,)), ('b', '|S4')]", 300, "[('a', '<f8', (37,)), ('b', '|S4')]"},
		{`[("x", "<i4"), ('y', [('p', '|u1'), ('q', '<u2', 3)],)]`, 11, "[('x', '<i4'), ('y', [('p', '|u1'), ('q', '<u2', (3,))])]"},
		{`[('it\'s', '<i2')]`, 2, `[('it\'s', '<i2')]`},
		{"[('a', '<i4')]", 8, "'|V8'"}, // item size mismatch
		{"[('a', '<i4')], 'fortran_order': True, 'shape': (2, 3)} #]", 4, "'|V4'"},
		{"[('a', '<i4'), ]", 4, "[('a', '<i4')]"},
		{"[('a', '<i4' + 'x')]", 4, "'|V4'"},
		{"[('a', '<q9')]", 9, "'|V9'"},
		{"[]", 4, "'|V4'"},
		{"[('a\n', '<i4')]", 4, "'|V4'"},
		{strings.Repeat("[('a', ", 40) + "'<i4'" + strings.Repeat(")]", 40), 4, "'|V4'"},
	}
	for _, c := range cases {
		a := &Array{Itemsize: c.itemsize, Dtype: c.dtype}
		if got := a.NPYDescr(); got != c.want {
			t.Errorf("NPYDescr(%q, %d) = %s, want %s", c.dtype, c.itemsize, got, c.want)
		}
	}
}

// TestIndexBomb is part of finding 3 of issue 11: an index chunk of 32
// bytes (a special chunk other than zeros or one value) claiming 2^24
// entries is refused before its table is allocated.
func TestIndexBomb(t *testing.T) {
	m := &memFile{}
	w, err := NewWriter(m, Params{Chunk: blosc.DefaultParams(1), ChunkSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := w.AddSpecial(blosc.SpecialZero, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := m.b
	be := binary.BigEndian
	ic := int(int32(be.Uint32(b[offHeaderLen:]))) + int(be.Uint64(b[offCbytes:]))
	ix := b[ic : ic+blosc.ExtHeaderLen]
	clear(ix)
	ix[0], ix[1], ix[2], ix[3] = blosc.VersionStable, 1, 0x05, 8
	binary.LittleEndian.PutUint32(ix[4:], 8<<24)
	binary.LittleEndian.PutUint32(ix[8:], 1<<18)
	binary.LittleEndian.PutUint32(ix[12:], blosc.ExtHeaderLen)
	ix[31] = byte(blosc.SpecialUninit) << 4
	be.PutUint64(b[offNbytes:], 1<<24*(1<<20))
	var a, z runtime.MemStats
	runtime.ReadMemStats(&a)
	_, err = Open(bytes.NewReader(b), int64(len(b)), "bomb", nil)
	runtime.ReadMemStats(&z)
	if err == nil {
		t.Fatal("an index of 2^24 undefined entries opened")
	}
	if n := z.TotalAlloc - a.TotalAlloc; n > 64<<20 {
		t.Fatalf("refusing the index allocated %d bytes (%v)", n, err)
	}
}
