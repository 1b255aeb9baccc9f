package zarr

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/bloscfs/bloscfs/npy"
)

// TestGzipThatIsZlib reads a v2 array under "id": "gzip" whose chunks
// are zlib streams (as z5py writes them), beside real gzip chunks: the
// header tells which. A chunk that is neither is ErrCorrupt.
func TestGzipThatIsZlib(t *testing.T) {
	plain := make([]byte, 4*100)
	for i := range 100 {
		binary.LittleEndian.PutUint32(plain[4*i:], uint32(i*i))
	}
	var z, g bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, 6)
	zw.Write(plain[:200])
	zw.Close()
	gw := gzip.NewWriter(&g)
	gw.Write(plain[200:])
	gw.Close()
	m := &memStore{m: map[string][]byte{
		".zarray": []byte(`{"zarr_format":2,"shape":[100],"chunks":[50],"dtype":"<u4","compressor":{"id":"gzip","level":6},"fill_value":0,"order":"C","filters":null}`),
		"0":       z.Bytes(),
		"1":       g.Bytes(),
	}}
	a, err := Open(m, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, a.Size())
	if _, err := a.ReadAt(got, 0); err != nil {
		t.Fatalf("a zlib chunk under gzip: %v", err)
	}
	if want := append(npy.Header("'<u4'", []int64{100}), plain...); !bytes.Equal(got, want) {
		t.Fatal("the array differs from what was written")
	}
	m.m["1"] = []byte("neither gzip nor zlib")
	a, _ = Open(m, "", nil)
	if _, err := a.ReadAt(got, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a chunk that is neither: %v, want ErrCorrupt", err)
	}
	for _, c := range []struct {
		b    []byte
		zlib bool
	}{{z.Bytes(), true}, {g.Bytes(), false}, {[]byte{0x78}, false}, {[]byte{0x78, 0x9c}, true}, {[]byte{0x78, 0x01}, true}, {[]byte{0x78, 0xda}, true}, {[]byte{0x88, 0x9c}, false}, {nil, false}} {
		if isZlib(c.b) != c.zlib {
			t.Errorf("isZlib(% x) = %v", c.b, !c.zlib)
		}
	}
}
