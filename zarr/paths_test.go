package zarr

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
)

// wholeChunkView opens the array at path with the reading of its Blosc
// chunks through a pack.ChunkReader turned off: every chunk is read and
// decoded whole, serially, through the cache (the reference).
func wholeChunkView(t *testing.T, s Store, path string) *Array {
	t.Helper()
	a, err := Open(s, path, cache.New[pack.BlockKey](64<<20))
	if err != nil {
		t.Fatal(err)
	}
	a.cr = nil
	return a
}

// readPieces reads the whole view in pieces of n bytes (the last one
// shorter) with read, in order, and returns what it read.
func readPieces(t *testing.T, a *Array, n int64, read func(p []byte, off int64) (int, error)) []byte {
	t.Helper()
	out := make([]byte, a.Size())
	for off := int64(0); off < a.Size(); off += n {
		p := out[off:min(off+n, a.Size())]
		if k, err := read(p, off); k != len(p) || (err != nil && err != io.EOF) {
			t.Fatalf("read %d at %d: %d, %v", len(p), off, k, err)
		}
	}
	return out
}

// TestChunkReaderPathsMatchWholeChunk reads every fixture array whose
// chunks are Blosc chunks of the plain bytes through each path of the
// ChunkReader (ReadAt, ReadAtOnce in pieces that straddle chunks, two
// sequential readers at once, Prefetch, a chunk too large for its
// blocks and so decoded whole) and compares with a serial whole-chunk
// decode of every chunk.
func TestChunkReaderPathsMatchWholeChunk(t *testing.T) {
	roots := []string{"../testdata/zarr/zarrita"}
	if !testing.Short() {
		roots = append(roots, v2Stores(t))
	}
	kinds := map[string]int{}
	for _, root := range roots {
		s, err := OpenDirStore(root)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, fx := range readManifest(t, root) {
			a, err := Open(s, fx.path, cache.New[pack.BlockKey](64<<20))
			if err != nil || a.cr == nil {
				continue
			}
			if a.contig {
				kinds["contiguous"]++
			} else {
				kinds["runs"]++
			}
			t.Run(fx.path, func(t *testing.T) {
				ref := wholeChunkView(t, s, fx.path)
				want := readPieces(t, ref, ref.Size(), ref.ReadAt)
				for _, n := range []int64{a.Size(), 4099, a.ChunkBytes() + 3} {
					if got := readPieces(t, a, n, a.ReadAt); !bytes.Equal(got, want) {
						t.Fatalf("ReadAt in pieces of %d differs from the whole-chunk decode", n)
					}
					fresh, err := Open(s, fx.path, cache.New[pack.BlockKey](64<<20))
					if err != nil {
						t.Fatal(err)
					}
					if got := readPieces(t, fresh, n, fresh.ReadAtOnce); !bytes.Equal(got, want) {
						t.Fatalf("ReadAtOnce in pieces of %d differs from the whole-chunk decode", n)
					}
				}
				// Two sequential readers at once, a prefetch ahead of them.
				b, err := Open(s, fx.path, cache.New[pack.BlockKey](64<<20))
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Prefetch(0, b.Size()/2, nil); err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				got := make([][]byte, 2)
				for k := range got {
					wg.Add(1)
					go func() {
						defer wg.Done()
						got[k] = readPieces(t, b, 1000+int64(k)*777, b.ReadAtOnce)
					}()
				}
				wg.Wait()
				for k := range got {
					if !bytes.Equal(got[k], want) {
						t.Fatalf("sequential reader %d alongside another differs from the whole-chunk decode", k)
					}
				}
				// Blocks larger than the reader takes: chunks decode whole.
				w, err := Open(s, fx.path, cache.New[pack.BlockKey](64<<20))
				if err != nil {
					t.Fatal(err)
				}
				w.maxBlock = 1
				if got := readPieces(t, w, 3000, w.ReadAtOnce); !bytes.Equal(got, want) {
					t.Fatal("the whole-chunk fallback differs from the whole-chunk decode")
				}
				rng := rand.New(rand.NewPCG(5, uint64(a.Size())))
				for range 20 {
					off := rng.Int64N(a.Size())
					p := make([]byte, min(rng.Int64N(9000)+1, a.Size()-off))
					if _, err := a.ReadAt(p, off); err != nil && err != io.EOF {
						t.Fatal(err)
					}
					if !bytes.Equal(p, want[off:off+int64(len(p))]) {
						t.Fatalf("ReadAt(%d, %d) differs from the whole-chunk decode", len(p), off)
					}
				}
			})
		}
	}
	if !testing.Short() && (kinds["contiguous"] == 0 || kinds["runs"] == 0) {
		t.Fatalf("fixtures read through the ChunkReader: %v; want both kinds", kinds)
	}
}

// TestDirStoreObjectReader reads part of an object, and reports a
// missing one as ErrNotExist.
func TestDirStoreObjectReader(t *testing.T) {
	s, err := OpenDirStore("../testdata/zarr/zarrita")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.ObjectReader("no/such/key"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("missing object: %v, want ErrNotExist", err)
	}
	whole, err := s.Get("MANIFEST.tsv", MaxObject)
	if err != nil {
		t.Fatal(err)
	}
	r, size, err := s.ObjectReader("MANIFEST.tsv")
	if err != nil || size != int64(len(whole)) {
		t.Fatalf("ObjectReader: size %d, %v; want %d", size, err, len(whole))
	}
	for _, off := range []int64{0, 1, size / 2, size - 3} {
		p := make([]byte, 3)
		if n, err := r.ReadAt(p, off); n != 3 || err != nil && err != io.EOF || !bytes.Equal(p, whole[off:off+3]) {
			t.Fatalf("ReadAt(3, %d) = %d, %v, %q; want %q", off, n, err, p, whole[off:off+3])
		}
	}
	if _, err := r.ReadAt(make([]byte, 4), size-2); err != io.EOF {
		t.Fatalf("a read past the end: %v, want io.EOF", err)
	}
}
