package pack

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
)

// countingSource is a ChunkSource whose chunks are read through a
// reader that counts the reads of the compressed bytes of one block
// (bad) and fails the first fail of them with EIO.
type countingSource struct {
	memSource
	bad     [2]int // chunk, block
	badExt  [2]int64
	mu      sync.Mutex
	reads   int
	failEIO int
}

func (s *countingSource) OpenChunk(i int) (*blosc.Chunk, error) {
	return blosc.NewChunk(countingReader{s, i}, int64(len(s.chunks[i])))
}

type countingReader struct {
	s *countingSource
	i int
}

func (r countingReader) ReadAt(p []byte, off int64) (int, error) {
	s := r.s
	if r.i == s.bad[0] && off < s.badExt[1] && off+int64(len(p)) > s.badExt[0] {
		s.mu.Lock()
		s.reads++
		eio := s.failEIO > 0
		if eio {
			s.failEIO--
		}
		s.mu.Unlock()
		if eio {
			return 0, syscall.EIO
		}
	}
	c := s.chunks[r.i]
	if off >= int64(len(c)) {
		return 0, io.EOF
	}
	n := copy(p, c[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestFailedBlockRemembered reads a block that does not decode again
// and again, through every path of a read (a whole block, a part of it
// as a random and as a sequential reader, a gather, a read-ahead): it
// is decoded once, and then fails at once with the same error. A failed
// read of its bytes (EIO) is not remembered.
func TestFailedBlockRemembered(t *testing.T) {
	plain := make([]byte, 2<<20)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range plain {
		plain[i] = byte(rng.IntN(16)) // chunks larger than blosc.HeadRead
	}
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 4, Blocksize: 256 << 10}
	p.Filters[5] = blosc.FilterShuffle
	for _, c := range []BlockCache{NoCache{}, cache.New[BlockKey](64 << 20)} {
		s := &countingSource{memSource: *newMemSource(t, plain, 1<<20, p), bad: [2]int{1, 2}}
		s.chunks = slices.Clone(s.chunks)
		s.chunks[1] = slices.Clone(s.chunks[1])
		ch, err := blosc.NewChunkBytes(s.chunks[1])
		if err != nil {
			t.Fatal(err)
		}
		s.badExt[0], s.badExt[1] = ch.CompressedExtent(2)
		// The first stream's size: far past the block.
		copy(s.chunks[1][s.badExt[0]:], []byte{0xff, 0xff, 0xff, 0x7f})
		s.failEIO = 1
		r := NewChunkReader("mem", s, c)
		blockAt := int64(1<<20 + 2*256<<10)
		// The first read meets EIO: not remembered, the next reads the
		// bytes again and finds them corrupt.
		buf := make([]byte, 256<<10)
		if _, err := r.ReadAt(buf, blockAt); !errors.Is(err, syscall.EIO) {
			t.Fatalf("first read: %v, want EIO", err)
		}
		reads := []func() error{
			func() error { _, err := r.ReadAt(buf, blockAt); return err },
			func() error { _, err := r.ReadAt(buf[:4096], blockAt+5000); return err },
			func() error { _, err := r.ReadAtOnce(buf, blockAt); return err },
			func() error { _, err := r.ReadAtOnce(buf[:200<<10], blockAt); return err },
			func() error {
				return r.ReadRuns(buf, []Run{{At: blockAt, To: 0, N: 100}, {At: blockAt + 1000, To: 100, N: 100}}, true)
			},
			func() error {
				return r.ReadRuns(buf, []Run{{At: blockAt, To: 0, N: 720, Rows: 90, AtStride: 720, ToStride: 2880}}, true)
			},
			func() error { return r.Prefetch(blockAt, 256<<10, nil) },
		}
		for round := range 3 {
			for k, read := range reads {
				err := read()
				if _, none := c.(NoCache); none && k == len(reads)-1 {
					continue // Prefetch does nothing without a cache
				}
				if !errors.Is(err, blosc.ErrCorrupt) || blosc.ReadFailed(err) {
					t.Fatalf("round %d, read %d: %v, want the block's ErrCorrupt", round, k, err)
				}
			}
		}
		if s.reads != 2 {
			t.Errorf("%T: the corrupt block's bytes were read %d times (once failing with EIO); want 2", c, s.reads)
		}
		// The other blocks read.
		if _, err := r.ReadAt(buf, blockAt-256<<10); err != nil || !bytes.Equal(buf, plain[blockAt-256<<10:blockAt]) {
			t.Fatalf("the block before: %v", err)
		}
	}
}

// flakySource fails the first header read of its chunks with an error
// of the store (not an errno), as a bucket's failed GET is.
type flakySource struct {
	memSource
	fails int
}

var errStore = errors.New("the store failed")

func (s *flakySource) OpenChunk(i int) (*blosc.Chunk, error) {
	return blosc.NewChunk(flakyReader{s, i}, int64(len(s.chunks[i])))
}

type flakyReader struct {
	s *flakySource
	i int
}

func (r flakyReader) ReadAt(p []byte, off int64) (int, error) {
	if r.s.fails > 0 {
		r.s.fails--
		return 0, errStore
	}
	return copy(p, r.s.chunks[r.i][off:]), nil
}

// TestChunkReadFailureNotKept: a chunk whose header could not be read
// is parsed again at the next read, not failed for good.
func TestChunkReadFailureNotKept(t *testing.T) {
	plain := bytes.Repeat([]byte("abcdefgh"), 1<<16)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: 64 << 10}
	s := &flakySource{memSource: *newMemSource(t, plain, 256<<10, p), fails: 1}
	r := NewChunkReader("flaky", s, NoCache{})
	buf := make([]byte, 4096)
	if _, err := r.ReadAt(buf, 0); !errors.Is(err, errStore) {
		t.Fatalf("first read: %v, want the store's error", err)
	}
	if _, err := r.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, plain[:4096]) {
		t.Fatalf("the read after the store recovered: %v", err)
	}
}
