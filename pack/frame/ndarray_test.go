package frame

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/npy"
	"github.com/bloscfs/bloscfs/pack"
)

// manifestShape parses the manifest's "123x45" shape notation.
func manifestShape(t testing.TB, s string) []int64 {
	var out []int64
	for _, p := range strings.Split(s, "x") {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			t.Fatalf("manifest shape %q", s)
		}
		out = append(out, v)
	}
	return out
}

// TestB2NDFixtures checks the three views of every b2nd fixture.
func TestB2NDFixtures(t *testing.T) {
	for _, fx := range frameFixtures(t, "b2nd") {
		t.Run(fx.Name, func(t *testing.T) {
			t.Parallel()
			f := openFixture(t, fx.Path, newCache())
			a := f.Array()
			if a == nil {
				t.Fatal("no b2nd geometry")
			}
			if f.Info().Format != "b2nd" {
				t.Errorf("Info.Format %q", f.Info().Format)
			}
			if fmt.Sprint(a.Shape) != fmt.Sprint(manifestShape(t, fx.Shape)) || a.Dtype != fx.Dtype {
				t.Errorf("shape %v dtype %q, manifest %s %q", a.Shape, a.Dtype, fx.Shape, fx.Dtype)
			}
			if meta, _ := f.Meta("b2nd"); !bytes.Equal(a.MarshalMeta(), meta) {
				t.Errorf("MarshalMeta %x, stored %x", a.MarshalMeta(), meta)
			}
			raw := readAll(t, f, f.Size())
			if int64(len(raw)) != fx.RawSize || sha(raw) != fx.RawSHA {
				t.Fatalf("raw view: %d bytes sha %s, manifest %d %s", len(raw), sha(raw), fx.RawSize, fx.RawSHA)
			}
			c, err := f.COrder()
			if err != nil {
				t.Fatal(err)
			}
			corder := readAll(t, c, c.Size())
			if int64(len(corder)) != fx.PlainSize || sha(corder) != fx.COrderSHA || fx.COrderSHA != fx.PlainSHA {
				t.Fatalf("C order: %d bytes sha %s, manifest %d %s (plain %s)", len(corder), sha(corder), fx.PlainSize, fx.COrderSHA, fx.PlainSHA)
			}
			if !bytes.Equal(corder, naiveCOrder(a, raw)) {
				t.Fatal("C order differs from the element-by-element reference")
			}
			testReader(t, c, corder, c.Size()/2)
			npy, err := f.NPY()
			if err != nil {
				t.Fatal(err)
			}
			hdr := npy.Header()
			if len(hdr)%64 != 0 || !bytes.HasPrefix(hdr, []byte("\x93NUMPY\x01\x00")) {
				t.Fatalf("NPY header %q", hdr)
			}
			all := readAll(t, npy, npy.Size())
			if !bytes.Equal(all, append(hdr, corder...)) {
				t.Fatal("NPY view is not header + C order")
			}
			testReader(t, npy, all, int64(len(hdr)))
			if c.Info().Size != c.Size() || npy.Info().Size != npy.Size() || npy.Info().Format != "b2nd" {
				t.Errorf("view Info: %+v / %+v", c.Info(), npy.Info())
			}
		})
	}
}

// naiveCOrder maps every element on its own (FORMATS §7.2).
func naiveCOrder(a *Array, raw []byte) []byte {
	it := a.Itemsize
	nd := len(a.Shape)
	out := make([]byte, 0, a.Len()*int64(it))
	g := make([]int64, nd)
	for e := int64(0); e < a.Len(); e++ {
		rem := e
		for d := nd - 1; d >= 0; d-- {
			g[d] = rem % a.Shape[d]
			rem /= a.Shape[d]
		}
		var ci, bi, ei int64
		for d := 0; d < nd; d++ {
			cs, bs := int64(a.ChunkShape[d]), int64(a.BlockShape[d])
			ext := (cs + bs - 1) / bs * bs
			nc := (a.Shape[d] + cs - 1) / cs
			ci = ci*nc + g[d]/cs
			bi = bi*(ext/bs) + g[d]%cs/bs
			ei = ei*bs + g[d]%cs%bs
		}
		chunkItems, blockItems := int64(1), int64(1)
		for d := 0; d < nd; d++ {
			cs, bs := int64(a.ChunkShape[d]), int64(a.BlockShape[d])
			chunkItems *= (cs + bs - 1) / bs * bs
			blockItems *= bs
		}
		p := (ci*chunkItems + bi*blockItems + ei) * int64(it)
		out = append(out, raw[p:p+int64(it)]...)
	}
	return out
}

// TestNPYNumpy loads the NPY view of every b2nd fixture with numpy.
func TestNPYNumpy(t *testing.T) {
	py := testkit.Python(t, "numpy")
	dir := t.TempDir()
	for _, fx := range frameFixtures(t, "b2nd") {
		t.Run(fx.Name, func(t *testing.T) {
			f := openFixture(t, fx.Path, newCache())
			npy, err := f.NPY()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, fx.Name+".npy")
			if err := os.WriteFile(path, readAll(t, npy, npy.Size()), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(py, "-c", `
import sys, hashlib, numpy
a = numpy.load(sys.argv[1])
print(hashlib.sha256(a.tobytes()).hexdigest(), "x".join(str(s) for s in a.shape), a.dtype.str)
`, path).CombinedOutput()
			if err != nil {
				t.Fatalf("numpy.load: %v\n%s", err, out)
			}
			want := fx.COrderSHA + " " + fx.Shape + " " + fx.Dtype
			if got := strings.TrimSpace(string(out)); got != want {
				t.Fatalf("numpy says %q, want %q", got, want)
			}
		})
	}
}

// writeArray writes a b2nd frame with the given geometry whose raw
// super-chunk is raw (padding included).
func writeArray(t testing.TB, a *Array, raw []byte, p blosc.Params) *memFile {
	t.Helper()
	m := &memFile{}
	chunk := 1
	for d := range a.Shape {
		cs, bs := int(a.ChunkShape[d]), int(a.BlockShape[d])
		chunk *= (cs + bs - 1) / bs * bs
	}
	block := 1
	for _, bs := range a.BlockShape {
		block *= int(bs)
	}
	chunk *= a.Itemsize
	p.Blocksize = block * a.Itemsize
	w, err := NewWriter(m, Params{Chunk: p, Typesize: a.Itemsize, ChunkSize: chunk,
		Metalayers: []Metalayer{{Name: "b2nd", Value: a.MarshalMeta()}}})
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(raw); off += chunk {
		if err := w.AddChunk(raw[off : off+chunk]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCOrderGeometries checks C-order views of synthetic arrays against
// the element-by-element mapping: 0-D, 1-D, padding in every dimension,
// blocks equal to chunks, 16 dimensions, item sizes above 255, empty.
func TestCOrderGeometries(t *testing.T) {
	cases := []struct {
		shape             []int64
		chunks, blocks    []int32
		itemsize          int
		dtype             string
		wantDescrContains string
	}{
		{nil, nil, nil, 8, "<f8", "'<f8'"},
		{[]int64{1}, []int32{1}, []int32{1}, 4, "<i4", "'<i4'"},
		{[]int64{1000}, []int32{300}, []int32{300}, 2, "<u2", "'<u2'"},
		{[]int64{37}, []int32{10}, []int32{3}, 1, "|u1", "'|u1'"},
		{[]int64{9, 7}, []int32{4, 5}, []int32{3, 2}, 4, "<i4", "'<i4'"},
		{[]int64{5, 6, 7}, []int32{5, 6, 7}, []int32{2, 3, 7}, 3, "|S3", "'|S3'"},
		{[]int64{4, 3, 5, 2}, []int32{3, 2, 4, 2}, []int32{2, 1, 3, 1}, 2, "<f2", "'<f2'"},
		{[]int64{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3}, []int32{1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 2, 2}, []int32{1, 1, 1, 2, 1, 1, 1, 2, 1, 1, 1, 1, 1, 2, 1, 2}, 1, "|i1", "'|i1'"},
		{[]int64{3, 4}, []int32{2, 3}, []int32{2, 2}, 300, "[('a', '<f8', (37,)), ('b', '|S4')]", "[('a', '<f8', (37,)), ('b', '|S4')]"},
		{[]int64{6}, []int32{4}, []int32{2}, 8, "", "'|V8'"},
		{[]int64{6}, []int32{4}, []int32{2}, 8, "<f4", "'|V8'"}, // itemsize mismatch
		{[]int64{0, 5}, []int32{2, 2}, []int32{1, 1}, 8, "<f8", "'<f8'"},
	}
	for k, c := range cases {
		t.Run(fmt.Sprint(k, c.shape), func(t *testing.T) {
			a := &Array{Shape: c.shape, ChunkShape: c.chunks, BlockShape: c.blocks, Itemsize: c.itemsize, Dtype: c.dtype}
			if c.chunks == nil {
				a.ChunkShape, a.BlockShape = []int32{}, []int32{}
			}
			if err := a.derive(); err != nil {
				t.Fatal(err)
			}
			rawSize := a.nchunks * a.chunkItems * int64(c.itemsize)
			if a.Len() == 0 {
				rawSize = 0
			}
			rng := rand.New(rand.NewPCG(uint64(k), 7))
			raw := make([]byte, rawSize)
			for i := range raw {
				raw[i] = byte(rng.IntN(4))
			}
			ts := c.itemsize
			if ts > 255 {
				ts = 1
			}
			p := blosc.DefaultParams(ts)
			m := writeArray(t, a, raw, p)
			f := reopen(t, m, newCache())
			if f.Array() == nil {
				t.Fatal("not an array")
			}
			if got := f.Array().NPYDescr(); got != c.wantDescrContains {
				t.Errorf("descr %s, want %s", got, c.wantDescrContains)
			}
			cv, err := f.COrder()
			if err != nil {
				t.Fatal(err)
			}
			want := naiveCOrder(f.Array(), raw)
			if cv.Size() != int64(len(want)) {
				t.Fatalf("C-order size %d, want %d", cv.Size(), len(want))
			}
			got := readAll(t, cv, cv.Size())
			if !bytes.Equal(got, want) {
				t.Fatal("C order differs")
			}
			testReader(t, cv, want, cv.Size()/3)
			// Unaligned random reads.
			for i := 0; i < 30 && len(want) > 0; i++ {
				off := rng.IntN(len(want))
				n := rng.IntN(len(want) - off + 1)
				b := make([]byte, n)
				if _, err := cv.ReadAt(b, int64(off)); err != nil || !bytes.Equal(b, want[off:off+n]) {
					t.Fatalf("ReadAt(%d, %d): %v", n, off, err)
				}
			}
			if !strings.Contains(string(npy.Header(f.Array().NPYDescr(), c.shape)), "'shape': (") {
				t.Fatal("bad NPY header")
			}
		})
	}
}

// TestArrayMetaErrors checks the b2nd metalayer parser on bad input.
func TestArrayMetaErrors(t *testing.T) {
	good := (&Array{Shape: []int64{10, 7}, ChunkShape: []int32{4, 5}, BlockShape: []int32{3, 2}, Itemsize: 4, Dtype: "<i4"}).MarshalMeta()
	if _, err := ParseArrayMeta(good, 4); err != nil {
		t.Fatal(err)
	}
	// FORMATS §7.1's verified example.
	ex, _ := hex.DecodeString("97000292d3000000000000000ad300000000000000079" +
		"2d200000004d20000000592d200000003d20000000200db000000033c6934")
	a, err := ParseArrayMeta(ex, 4)
	if err != nil || fmt.Sprintf("%v %v %v %s", a.Shape, a.ChunkShape, a.BlockShape, a.Dtype) != "[10 7] [4 5] [3 2] <i4" {
		t.Fatalf("FORMATS example: %+v %v", a, err)
	}
	// Legacy caterva layout: no dtype.
	if a, err := ParseArrayMeta(good[:len(good)-9], 4); err != nil || a.Dtype != "" {
		t.Fatalf("legacy: %+v %v", a, err)
	}
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	bad := map[string][]byte{
		"empty":          {},
		"not array":      {0x80},
		"ndim 17":        {0x97, 0, 17},
		"truncated":      good[:20],
		"shape marker":   mut(func(b []byte) []byte { b[3] = 0x93; return b }),
		"int marker":     mut(func(b []byte) []byte { b[4] = 0xD2; return b }),
		"negative shape": mut(func(b []byte) []byte { b[5] = 0x80; return b }),
		"zero chunk":     mut(func(b []byte) []byte { b[24], b[25], b[26], b[27] = 0, 0, 0, 0; return b }),
		"block > chunk":  mut(func(b []byte) []byte { b[43] = 9; return b }),
		"dtype length":   mut(func(b []byte) []byte { b[len(b)-4] = 0x7F; return b }),
		"huge":           (&Array{Shape: []int64{1 << 40, 1 << 40}, ChunkShape: []int32{1 << 30, 1 << 30}, BlockShape: []int32{1, 1}, Itemsize: 8}).MarshalMeta(),
	}
	for name, b := range bad {
		if _, err := ParseArrayMeta(b, 4); !errors.Is(err, pack.ErrFormat) {
			t.Errorf("%s: error %v", name, err)
		}
	}
	// Geometry that disagrees with the frame.
	raw := make([]byte, 3*2*4*5*4)
	m := writeArray(t, &Array{Shape: []int64{10, 7}, ChunkShape: []int32{4, 5}, BlockShape: []int32{2, 5}, Itemsize: 4, Dtype: "<i4"}, raw, blosc.DefaultParams(4))
	// Rewrite the metalayer's shape in place (same length): 10 → 13 needs 4 chunk rows.
	i := bytes.Index(m.b, good[:5])
	m.b[i+12] = 13
	if _, err := Open(bytes.NewReader(m.b), int64(len(m.b)), "x", nil); !errors.Is(err, pack.ErrFormat) || !strings.Contains(err.Error(), "needs 8 chunks, the frame has 6") {
		t.Fatalf("mismatched geometry: %v", err)
	}
	// Views of a plain frame.
	f := reopen(t, writeFrame(t, Params{Chunk: blosc.DefaultParams(1), ChunkSize: 10}, [][]byte{{1, 2, 3}}), nil)
	if _, err := f.COrder(); !errors.Is(err, ErrNotArray) {
		t.Fatalf("COrder of a plain frame: %v", err)
	}
	if _, err := f.NPY(); !errors.Is(err, pack.ErrUnsupported) {
		t.Fatalf("NPY of a plain frame: %v", err)
	}
}
