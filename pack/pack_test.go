package pack

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/internal/testkit"
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
		reads := 500
		if testkit.RaceEnabled {
			reads = 50 // 500 read about 0.7 GiB per cache; make purego runs them
		}
		for k := 0; k < reads; k++ {
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

// TestReadAtOnce checks that sequential reads whose pieces arrive out of
// order return the right bytes and drop each block once all of it has
// been read, except the block 0 that delta chunks decode against; and
// that a block read only in part stays cached.
func TestReadAtOnce(t *testing.T) {
	plain := testPlain(3<<20 + 12345)
	for _, delta := range []bool{false, true} {
		p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 4, Blocksize: 64 << 10}
		p.Filters[5] = blosc.FilterShuffle
		if delta {
			p.Filters[4] = blosc.FilterDelta
		}
		src := newMemSource(t, plain, 1<<20, p)
		c := cache.New[BlockKey](64 << 20)
		r := NewChunkReader("mem", src, c)

		// A part of a block stays; the rest of it, read later, drops it.
		buf := make([]byte, 1000)
		if _, err := r.ReadAtOnce(buf, 64<<10); err != nil {
			t.Fatal(err)
		}
		if !c.Contains(r.key(0, 1)) {
			t.Fatal("a block read in part was dropped")
		}
		rest := make([]byte, 64<<10-1000)
		if _, err := r.ReadAtOnce(rest, 64<<10+1000); err != nil {
			t.Fatal(err)
		}
		if c.Contains(r.key(0, 1)) {
			t.Fatal("a block read whole, in two parts, stayed cached")
		}

		// Pieces of 96 KiB, each window of 4 read in reverse order: each
		// block decodes once (chunk 0's block 0 of a delta frame is
		// cached already).
		loads, direct, ranged := c.Stats().Loads, r.direct.Load(), r.ranged.Load()
		const piece = 96 << 10
		got := make([]byte, len(plain))
		for w := 0; w < len(plain); w += 4 * piece {
			for k := 3; k >= 0; k-- {
				off := w + k*piece
				if off >= len(plain) {
					continue
				}
				end := min(off+piece, len(plain))
				n, err := r.ReadAtOnce(got[off:end], int64(off))
				if n != end-off || (err != nil && err != io.EOF) {
					t.Fatalf("delta %v: ReadAtOnce(%d bytes at %d) = %d, %v", delta, end-off, off, n, err)
				}
			}
		}
		if !bytes.Equal(got, plain) {
			t.Fatalf("delta %v: ReadAtOnce returned wrong bytes", delta)
		}
		s := c.Stats()
		want, wantLoads := 0, int64(0)
		for i := range src.NumChunks() {
			ch, err := r.Chunk(i)
			if err != nil {
				t.Fatal(err)
			}
			wantLoads += int64(ch.NumBlocks())
		}
		if delta {
			want = src.NumChunks() // each chunk's block 0
			wantLoads--
		}
		// Blocks a piece covers whole decode straight into it (bar those
		// that need block 0, which is cached); those that two pieces share
		// decode straight into the first piece to reach them, which keeps
		// the other's part as a rest, or, for delta frames, through the
		// cache.
		d, rd := r.direct.Load()-direct, r.ranged.Load()-ranged
		if s.Loads-loads+d+rd != wantLoads || d == 0 && !delta || rd == 0 && !delta {
			t.Errorf("delta %v: a sequential read decoded %d blocks through the cache, %d straight and %d with a rest, want %d in all", delta, s.Loads-loads, d, rd, wantLoads)
		}
		if s.Entries != want {
			t.Errorf("delta %v: %d blocks stay cached after a whole sequential read, want %d (%+v)", delta, s.Entries, want, s)
		}
		if delta && s.Reused == 0 {
			t.Errorf("delta %v: no block memory was reused: %+v", delta, s)
		}
		for _, rs := range r.rests.slots {
			if rs != nil {
				t.Errorf("delta %v: a rest of bytes [%d, %d) of block %d of chunk %d never taken", delta, rs.from, rs.from+rs.n, rs.key.Block, rs.key.Chunk)
			}
		}
	}
}

// TestPrefetch checks that Prefetch decodes the blocks of a range into
// the cache (so that reads of it miss nothing), skips the blocks behind
// the reader, and does nothing without a cache.
func TestPrefetch(t *testing.T) {
	plain := testPlain(2<<20 + 777)
	p := blosc.Params{Codec: blosc.CodecZstd, Clevel: 3, Typesize: 8, Blocksize: 128 << 10}
	p.Filters[5] = blosc.FilterShuffle
	src := newMemSource(t, plain, 1<<20, p)
	c := cache.New[BlockKey](64 << 20)
	r := NewChunkReader("mem", src, c)

	// [100 KiB, 1 MiB + 300 KiB) covers blocks 0-7 of chunk 0 and 0-2
	// of chunk 1; the reader is at 512 KiB, past blocks 0-3 of chunk 0.
	if err := r.Prefetch(100<<10, 1<<20+200<<10, func() int64 { return 512 << 10 }); err != nil {
		t.Fatal(err)
	}
	for b := 0; b < 8; b++ {
		if c.Contains(r.key(0, b)) != (b >= 4) {
			t.Errorf("chunk 0 block %d: cached %v", b, c.Contains(r.key(0, b)))
		}
	}
	for b := 0; b < 8; b++ {
		if c.Contains(r.key(1, b)) != (b <= 2) {
			t.Errorf("chunk 1 block %d: cached %v", b, c.Contains(r.key(1, b)))
		}
	}
	if s := c.Stats(); s.Loads != 7 {
		t.Errorf("Prefetch made %d loads, want 7", s.Loads)
	}
	// Prefetching again loads nothing; reading the range misses nothing.
	if err := r.Prefetch(512<<10, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	before := c.Stats()
	buf := make([]byte, 1<<20)
	if _, err := r.ReadAt(buf, 512<<10); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, plain[512<<10:512<<10+1<<20]) {
		t.Fatal("wrong bytes after Prefetch")
	}
	if s := c.Stats(); s.Loads != before.Loads || s.Misses != before.Misses {
		t.Errorf("a read of a prefetched range missed: before %+v, after %+v", before, s)
	}
	// Past the end, and without a cache: nothing, no error.
	if err := r.Prefetch(int64(len(plain)), 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	if err := NewChunkReader("mem", src, NoCache{}).Prefetch(0, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
}

// TestPartialDecode checks how a random reader's small read of a large
// block that is not cached is served: decoded alone into the read's
// buffer (the block stays out of the cache), and the second small read
// of that block decodes it whole into the cache, which serves the reads
// after it.
func TestPartialDecode(t *testing.T) {
	plain := testPlain(4 << 20)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: 1 << 20}
	p.Filters[5] = blosc.FilterShuffle
	src := newMemSource(t, plain, 1<<20, p)
	c := cache.New[BlockKey](64 << 20)
	r := NewChunkReader("mem", src, c)
	read := func(off int64, n int) {
		t.Helper()
		buf := make([]byte, n)
		if _, err := r.ReadAt(buf, off); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, plain[off:off+int64(n)]) {
			t.Fatalf("ReadAt(%d bytes at %d): wrong bytes", n, off)
		}
	}
	read(1<<20+12345, 4096)
	if k := r.key(1, 0); c.Contains(k) {
		t.Fatal("a 4 KiB read of a 1 MiB block put the block in the cache")
	}
	if got := r.ranged.Load(); got != 1 {
		t.Fatalf("%d partial decodes, want 1", got)
	}
	read(1<<20+500000, 4096) // the same block again: decoded whole
	if !c.Contains(r.key(1, 0)) {
		t.Fatal("the second read of a block did not decode it into the cache")
	}
	read(1<<20+700001, 3) // from the cache
	if got, s := r.ranged.Load(), c.Stats(); got != 1 || s.Loads != 1 || s.Hits < 1 {
		t.Fatalf("%d partial decodes, %d loads, %d hits; want 1, 1 and at least 1", got, s.Loads, s.Hits)
	}
	read(2<<20, 300<<10) // more than a quarter of the block: whole, cached
	if !c.Contains(r.key(2, 0)) || r.ranged.Load() != 1 {
		t.Fatal("a read of 300 KiB of a 1 MiB block was decoded alone")
	}
	// Without a cache every part is decoded alone.
	r = NewChunkReader("mem", src, NoCache{})
	read(3<<20+77, 4096)
	read(3<<20+9999, 4096)
	if got := r.ranged.Load(); got != 2 {
		t.Fatalf("without a cache: %d partial decodes, want 2", got)
	}
}

// TestSequentialRests reads a file of one-block chunks sequentially
// (ReadAtOnce) in reads that lie 128 bytes off the blocks, as the READs
// of a Zarr array's NPY view do: each read decodes the start of its
// block straight into its buffer and keeps the block's last 128 bytes for
// the next read, so that no block goes through the cache.
func TestSequentialRests(t *testing.T) {
	plain := testPlain(4 << 20)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: 1 << 20}
	p.Filters[5] = blosc.FilterShuffle
	src := newMemSource(t, plain, 1<<20, p)
	c := cache.New[BlockKey](64 << 20)
	r := NewChunkReader("mem", src, c)
	for off := int64(0); off < int64(len(plain)); {
		n := int64(1<<20 - 128)
		if off > 0 {
			n = 1 << 20
		}
		buf := make([]byte, n)
		got, err := r.ReadAtOnce(buf, off)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:got], plain[off:off+int64(got)]) {
			t.Fatalf("ReadAtOnce(%d bytes at %d): wrong bytes", n, off)
		}
		off += int64(got)
	}
	if s := c.Stats(); s.Loads != 0 || s.Entries != 0 {
		t.Fatalf("%d blocks decoded into the cache, %d left there; want none", s.Loads, s.Entries)
	}
	if got := r.ranged.Load(); got != 4 {
		t.Fatalf("%d blocks decoded with their rest kept, want 4", got)
	}
}

// TestRestWait checks that a read of a block's end that another read is
// decoding waits for it and takes its bytes (the kernel sends a
// sequential reader's READs two at a time), rather than decode the block
// again.
func TestRestWait(t *testing.T) {
	plain := testPlain(1 << 20)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: 1 << 20}
	src := newMemSource(t, plain, 1<<20, p)
	c := cache.New[BlockKey](64 << 20)
	r := NewChunkReader("mem", src, c)
	c0, gen, err := r.chunk(0)
	if err != nil {
		t.Fatal(err)
	}
	_, d := r.restOf(piece{c: c0, gen: gen, n: 1<<20 - 128}, true, true)
	if d == nil || d.parts[0] != nil || d.parts[1] == nil {
		t.Fatal("no rest of the block's last 128 bytes started")
	}
	got := make(chan []byte)
	go func() {
		buf := make([]byte, 100)
		if _, err := r.ReadAtOnce(buf, 1<<20-100); err != nil {
			t.Error(err)
		}
		got <- buf
	}()
	select {
	case <-got:
		t.Fatal("the read did not wait for the block's end being decoded")
	case <-time.After(50 * time.Millisecond):
	}
	copy(d.buf.b[d.parts[1].off:], plain[1<<20-128:])
	d.finish(nil)
	if b := <-got; !bytes.Equal(b, plain[1<<20-100:]) {
		t.Fatal("wrong bytes")
	}
	if s := c.Stats(); s.Loads != 0 {
		t.Fatalf("%d blocks decoded into the cache, want none", s.Loads)
	}
}

// observingCache is a cache that counts the decodes reported to it.
type observingCache struct {
	*cache.Cache[BlockKey]
	bytes int
}

func (o *observingCache) Decoded(n int, d time.Duration) { o.bytes += n }

// TestPartialDecodeObserved checks that partial decodes and decodes with
// a kept rest are reported to the cache's DecodeObserver (bloscfs stats
// counts the bytes and time decoded per codec from it).
func TestPartialDecodeObserved(t *testing.T) {
	plain := testPlain(2 << 20)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: 1 << 20}
	src := newMemSource(t, plain, 1<<20, p)
	c := &observingCache{Cache: cache.New[BlockKey](64 << 20)}
	r := NewChunkReader("mem", src, c)
	buf := make([]byte, 4096)
	if _, err := r.ReadAt(buf, 5000); err != nil {
		t.Fatal(err)
	}
	if c.bytes != 4096 {
		t.Fatalf("a partial decode of 4096 bytes reported %d", c.bytes)
	}
	big := make([]byte, 1<<20-128)
	if _, err := r.ReadAtOnce(big, 1<<20); err != nil {
		t.Fatal(err)
	}
	if c.bytes != 4096+1<<20 {
		t.Fatalf("a block decoded with its rest reported %d bytes, want %d", c.bytes-4096, 1<<20)
	}
}
