package frame

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack"
)

// TestWriteArrayRoundTrip writes random arrays with random chunk and block
// shapes (padded edges included) and reads them back in C order.
func TestWriteArrayRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for it := 0; it < 60; it++ {
		nd := r.IntN(4) + 1
		if it%15 == 0 {
			nd = 0
		}
		shape := make([]int64, nd)
		cs, bs := make([]int32, nd), make([]int32, nd)
		n := int64(1)
		for d := range shape {
			shape[d] = int64(r.IntN(40) + 1)
			cs[d] = int32(r.IntN(int(shape[d])+3) + 1)
			bs[d] = int32(r.IntN(int(cs[d])) + 1)
			n *= shape[d]
		}
		is := []int{1, 2, 4, 8, 12}[r.IntN(5)]
		dtype := map[int]string{1: "|u1", 2: "<i2", 4: "<f4", 8: "<f8", 12: "|V12"}[is]
		data := make([]byte, n*int64(is))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		var a *Array
		var err error
		if it%4 == 0 {
			a, err = NewArray(shape, dtype, is, nil, nil) // chosen shapes
		} else {
			a, err = NewArray(shape, dtype, is, cs, bs)
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "a.b2nd")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: is}
		p.Filters[5] = blosc.FilterShuffle
		if err := WriteArray(f, bytes.NewReader(data), a, p); err != nil {
			t.Fatalf("shape %v chunks %v blocks %v: %v", shape, a.ChunkShape, a.BlockShape, err)
		}
		f.Close()
		raw, _ := os.ReadFile(path)
		fr, err := Open(bytes.NewReader(raw), int64(len(raw)), "a.b2nd", pack.NoCache{})
		if err != nil {
			t.Fatal(err)
		}
		cv, err := fr.COrder()
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, cv.Size())
		if _, err := cv.ReadAt(got, 0); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("shape %v chunks %v blocks %v itemsize %d: C-order read differs", shape, a.ChunkShape, a.BlockShape, is)
		}
		// The .npy form parses back to the same geometry.
		npy, err := fr.NPY()
		if err != nil {
			t.Fatal(err)
		}
		info, err := ReadNPYHeader(io.NewSectionReader(npy, 0, npy.Size()))
		if err != nil {
			if nd == 0 || is == 12 {
				continue // void dtypes have no simple descr
			}
			t.Fatal(err)
		}
		if info.Itemsize != is || len(info.Shape) != nd || info.DataOff+int64(len(data)) != npy.Size() {
			t.Fatalf("npy header %+v for shape %v itemsize %d", info, shape, is)
		}
	}
}

func TestReadNPYHeaderRejects(t *testing.T) {
	for _, h := range []string{
		"not npy at all",
		"\x93NUMPY\x01\x00\x20\x00{'descr': '<f8', 'fortran_order': True, 'shape': (3,), }",
		"\x93NUMPY\x01\x00\x30\x00{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (3,), }",
	} {
		if _, err := ReadNPYHeader(bytes.NewReader([]byte(h + "                                  "))); err == nil {
			t.Errorf("accepted %q", h)
		}
	}
}

// TestChunksTouched compares ChunksTouched with a brute-force mapping of
// every element to its chunk.
func TestChunksTouched(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for it := 0; it < 200; it++ {
		nd := r.IntN(3) + 1
		shape := make([]int64, nd)
		cs, bs := make([]int32, nd), make([]int32, nd)
		for d := range shape {
			shape[d] = int64(r.IntN(12) + 1)
			cs[d] = int32(r.IntN(int(shape[d])) + 1)
			bs[d] = int32(r.IntN(int(cs[d])) + 1)
		}
		a, err := NewArray(shape, "|u1", 1, cs, bs)
		if err != nil {
			t.Fatal(err)
		}
		chunkOf := func(e int64) int64 {
			g := unravel(e, shape)
			var c int64
			for d := range shape {
				c = c*a.nchunksD[d] + g[d]/int64(cs[d])
			}
			return c
		}
		start := r.Int64N(a.size)
		end := start + r.Int64N(a.size-start) + 1
		want := map[int64]bool{}
		for e := start; e < end; e++ {
			want[chunkOf(e)] = true
		}
		got := map[int64]bool{}
		a.ChunksTouched(start, end, func(c int64) { got[c] = true })
		if len(got) != len(want) {
			t.Fatalf("shape %v chunks %v [%d,%d): got %v, want %v", shape, cs, start, end, got, want)
		}
		for c := range want {
			if !got[c] {
				t.Fatalf("shape %v chunks %v [%d,%d): chunk %d missing", shape, cs, start, end, c)
			}
		}
	}
}
