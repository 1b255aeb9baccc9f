package zarr_test

import (
	"bytes"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
)

// TestNDPrefetch decodes ahead a sequential reader's next mebibytes of
// an N-D array's view (Prefetch, the mount's read-ahead): the blocks go
// into the cache as the reader's gathers keep them, nothing is copied
// or decoded outside the cache, and the reads of that range then decode
// nothing more and return the array's bytes. A read-ahead the reader
// has passed decodes nothing.
func TestNDPrefetch(t *testing.T) {
	for _, nc := range []ndCase{
		{"3d-f4-lz4", []int64{24, 180, 360}, []int64{24, 90, 180}, 4, blosc.CodecLZ4},
		{"3d-f8-zstd", []int64{24, 180, 360}, []int64{24, 90, 180}, 8, blosc.CodecZstd},
	} {
		t.Run(nc.name, func(t *testing.T) {
			store, data := writeNDStore(t, t.TempDir(), nc)
			c := cache.New[pack.BlockKey](256 << 20)
			v, err := all.OpenView(store, c)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			h := v.Size - int64(len(data))
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
			warm := c.Stats()
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
			if s.Loads != warm.Loads || s.Misses != warm.Misses {
				t.Fatalf("the reads after Prefetch decoded again: %d loads, %d misses (%d, %d after Prefetch)", s.Loads, s.Misses, warm.Loads, warm.Misses)
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
