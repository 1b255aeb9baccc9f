package zarr_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
)

// observed is a block cache that counts the blocks decoded outside it
// (pack.DecodeObserver): a sequential reader's whole blocks go straight
// into its buffer.
type observed struct {
	*cache.Cache[pack.BlockKey]
	outside atomic.Int64
}

func (o *observed) Decoded(int, time.Duration) { o.outside.Add(1) }

// openND writes the array of case nc and opens its view over c (closed
// with the test): the view, the array's bytes and the view's header size.
func openND(t *testing.T, nc ndCase, c pack.BlockCache) (*all.View, []byte, int64) {
	t.Helper()
	store, data := writeNDStore(t, t.TempDir(), nc)
	v, err := all.OpenView(store, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v, data, v.Size - int64(len(data))
}

// TestNDPrefetch decodes ahead a sequential reader's next mebibytes of
// an N-D array's view (Prefetch, the mount's read-ahead): the blocks go
// into the cache as the reader's gathers keep them, nothing is copied
// or decoded outside the cache, and the reads of that range then decode
// nothing more, in the cache or outside it, and return the array's
// bytes. A read-ahead the reader has passed decodes nothing.
func TestNDPrefetch(t *testing.T) {
	for _, nc := range []ndCase{
		{"3d-f4-lz4", []int64{24, 180, 360}, []int64{24, 90, 180}, 4, blosc.CodecLZ4},
		{"3d-f8-zstd", []int64{24, 180, 360}, []int64{24, 90, 180}, 8, blosc.CodecZstd},
	} {
		t.Run(nc.name, func(t *testing.T) {
			c := &observed{Cache: cache.New[pack.BlockKey](256 << 20)}
			v, data, h := openND(t, nc, c)
			const step = 1 << 20
			buf := make([]byte, step)
			// The first mebibyte read, the next two decoded ahead.
			if _, err := v.ReadAtOnce(buf, 0); err != nil {
				t.Fatal(err)
			}
			before := c.Stats()
			if err := v.Prefetch(step, 2*step, nil); err != nil {
				t.Fatal(err)
			}
			warm, out := c.Stats(), c.outside.Load()
			if warm.Loads == before.Loads {
				t.Fatal("Prefetch decoded nothing into the cache")
			}
			for off := int64(step); off < 3*step; off += step {
				if _, err := v.ReadAtOnce(buf, off); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf, data[off-h:off-h+step]) {
					t.Fatalf("bytes [%d, %d) of the view differ from the array's", off, off+step)
				}
			}
			s := c.Stats()
			if s.Loads != warm.Loads || s.Misses != warm.Misses || c.outside.Load() != out {
				t.Fatalf("the reads after Prefetch decoded again: %d loads, %d misses (%d, %d after Prefetch), %d blocks outside the cache",
					s.Loads, s.Misses, warm.Loads, warm.Misses, c.outside.Load()-out)
			}
			// A read-ahead that the reader has overtaken decodes nothing.
			if err := v.Prefetch(3*step, step, func() int64 { return 4 * step }); err != nil {
				t.Fatal(err)
			}
			if after := c.Stats(); after.Loads != s.Loads {
				t.Fatalf("a read-ahead behind its reader decoded %d blocks", after.Loads-s.Loads)
			}
		})
	}
}

// TestNDPrefetchInsideStep starts a read-ahead step where the reader is
// inside it: the blocks before the reader, which it has read whole and
// dropped, are not decoded again, and nothing is left in the cache once
// the reader has read the whole view.
func TestNDPrefetchInsideStep(t *testing.T) {
	nc := ndCase{"2d-f8-lz4", []int64{256, 8192}, []int64{128, 1024}, 8, blosc.CodecLZ4}
	c := cache.New[pack.BlockKey](256 << 20)
	v, _, h := openND(t, nc, c)
	const step = 1 << 20
	buf := make([]byte, step/4)
	pos := int64(0)
	readTo := func(end int64) {
		for pos < end {
			n, err := v.ReadAtOnce(buf[:min(int64(len(buf)), end-pos)], pos)
			if err != nil && n == 0 {
				t.Fatal(err)
			}
			pos += int64(n)
		}
	}
	readTo(h + 8*step + step/4) // a quarter MiB into the second band of chunks
	before := c.Stats()
	if err := v.Prefetch(h+7*step+step/2, step, func() int64 { return pos }); err != nil {
		t.Fatal(err)
	}
	if after := c.Stats(); after.Loads != before.Loads {
		t.Errorf("a read-ahead step the reader is inside decoded %d blocks behind it", after.Loads-before.Loads)
	}
	readTo(v.Size)
	if s := c.Stats(); s.Entries != 0 {
		t.Errorf("%d blocks (%d bytes) left in the cache after the whole view was read", s.Entries, s.Bytes)
	}
}

// TestNDPrefetchWholeChunks decodes ahead an N-D array whose blocks are
// larger than the reader decodes block by block (8 MiB against a 16 MiB
// cache's 4 MiB): its chunks are decoded whole into the cache, as a read
// decodes them.
func TestNDPrefetchWholeChunks(t *testing.T) {
	store := filepath.Join(t.TempDir(), "w.zarr")
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := `{"zarr_format":2,"shape":[64,65536],"chunks":[32,32768],"dtype":"<f8","compressor":{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1,"blocksize":0},"fill_value":0.0,"order":"C","filters":null}`
	if err := os.WriteFile(filepath.Join(store, ".zarray"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 32*32768*8)
	for i := range chunk {
		chunk[i] = byte(i * 7 % 251)
	}
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Blosc1: true, Blocksize: len(chunk)}
	p.Filters[5] = blosc.FilterShuffle
	enc, err := blosc.Compress(nil, chunk, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"0.0", "0.1", "1.0", "1.1"} {
		if err := os.WriteFile(filepath.Join(store, n), enc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := cache.New[pack.BlockKey](16 << 20)
	v, err := all.OpenView(store, c)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := v.Prefetch(1<<20, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Loads != 2 {
		t.Fatalf("Prefetch decoded %d chunks into the cache, want the 2 its rows lie in", s.Loads)
	}
}
