package pack

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
)

// memSource is a ChunkSource of in-memory chunks.
type memSource struct {
	chunks [][]byte
	offs   []int64
}

func (m *memSource) NumChunks() int          { return len(m.chunks) }
func (m *memSource) ChunkOffset(i int) int64 { return m.offs[i] }
func (m *memSource) OpenChunk(i int) (*blosc.Chunk, error) {
	return blosc.NewChunkBytes(m.chunks[i])
}

func newMemSource(t testing.TB, plain []byte, chunkSize int, p blosc.Params) *memSource {
	m := &memSource{offs: []int64{0}}
	for off := 0; off < len(plain); off += chunkSize {
		c, err := blosc.Compress(nil, plain[off:min(off+chunkSize, len(plain))], p)
		if err != nil {
			t.Fatal(err)
		}
		m.chunks = append(m.chunks, c)
		m.offs = append(m.offs, int64(min(off+chunkSize, len(plain))))
	}
	return m
}

func testPlain(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i/7) ^ byte(i>>12)
	}
	return b
}

func TestChunkReader(t *testing.T) {
	plain := testPlain(3<<20 + 12345)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 4, Blocksize: 64 << 10}
	p.Filters[4], p.Filters[5] = blosc.FilterDelta, blosc.FilterShuffle // delta: block 0 dependency
	src := newMemSource(t, plain, 1<<20, p)
	for _, c := range []BlockCache{NoCache{}, cache.New[BlockKey](256 << 10), nil} {
		r := NewChunkReader("mem", src, c)
		if r.Size() != int64(len(plain)) {
			t.Fatalf("Size %d", r.Size())
		}
		rnd := rand.New(rand.NewPCG(1, 1))
		for k := 0; k < 500; k++ {
			off := rnd.Int64N(int64(len(plain)) + 100)
			buf := make([]byte, rnd.IntN(3<<20))
			n, err := r.ReadAt(buf, off)
			want := max(0, min(int64(len(buf)), int64(len(plain))-off))
			if int64(n) != want || (want < int64(len(buf)) && err != io.EOF) || (want == int64(len(buf)) && err != nil) {
				t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", len(buf), off, n, err)
			}
			if n > 0 && !bytes.Equal(buf[:n], plain[off:off+int64(n)]) {
				t.Fatalf("ReadAt(%d bytes at %d): wrong bytes", len(buf), off)
			}
		}
	}
}

// BenchmarkReadAt4KCached measures a cached 4 KiB read: it must not
// allocate.
func BenchmarkReadAt4KCached(b *testing.B) {
	plain := testPlain(8 << 20)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8}
	p.Filters[5] = blosc.FilterShuffle
	r := NewChunkReader("mem", newMemSource(b, plain, 1<<20, p), cache.New[BlockKey](64<<20))
	buf := make([]byte, 4096)
	r.ReadAt(make([]byte, len(plain)), 0) // warm the cache
	b.ReportAllocs()
	b.SetBytes(4096)
	i := 0
	for b.Loop() {
		off := int64(i*40961) % int64(len(plain)-4096)
		if _, err := r.ReadAt(buf, off); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkReadAt64KCached measures a cached read spanning several
// blocks: it must not allocate either.
func BenchmarkReadAt64KCached(b *testing.B) {
	plain := testPlain(8 << 20)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: 16 << 10}
	p.Filters[5] = blosc.FilterShuffle
	r := NewChunkReader("mem", newMemSource(b, plain, 1<<20, p), cache.New[BlockKey](64<<20))
	buf := make([]byte, 64<<10)
	r.ReadAt(make([]byte, len(plain)), 0)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	i := 0
	for b.Loop() {
		off := int64(i*40961) % int64(len(plain)-len(buf))
		if _, err := r.ReadAt(buf, off); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
