package pack

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/internal/testkit"
)

// TestReadRuns gathers random runs (rows of an N-D array's chunks, a
// few bytes to a few blocks long, in chunk order, in the reverse order
// and shuffled, one run per row or several rows to a run) and checks
// each byte against the plain data, with and without a cache, for a
// random and a sequential reader, two gathers at a time.
func TestReadRuns(t *testing.T) {
	plain := testPlain(3<<20 + 12345)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 4, Blocksize: 64 << 10}
	p.Filters[4], p.Filters[5] = blosc.FilterDelta, blosc.FilterShuffle // delta: block 0 dependency
	src := newMemSource(t, plain, 1<<20, p)
	plainShuffle := p
	plainShuffle.Filters[4] = 0
	src2 := newMemSource(t, plain, 1<<20, plainShuffle)
	rounds := 60
	if testkit.RaceEnabled {
		rounds = 10
	}
	for _, s := range []*memSource{src, src2} {
		for _, c := range []BlockCache{NoCache{}, cache.New[BlockKey](256 << 10), nil} {
			r := NewChunkReader("mem", s, c)
			rng := rand.New(rand.NewPCG(2, 3))
			for round := range rounds {
				var wg sync.WaitGroup
				errs := make([]error, 2)
				for g := range 2 {
					runs, size := randomRuns(rng, int64(len(plain)), round%3)
					once := rng.IntN(2) == 0
					wg.Go(func() {
						buf := make([]byte, size)
						if err := r.ReadRuns(buf, runs, once); err != nil {
							errs[g] = err
							return
						}
						for _, run := range runs {
							for k := range max(run.Rows, 1) {
								at, to := run.At+k*run.AtStride, run.To+k*run.ToStride
								if !bytes.Equal(buf[to:to+run.N], plain[at:at+run.N]) {
									errs[g] = fmt.Errorf("run %+v, row %d (once %v): wrong bytes", run, k, once)
									return
								}
							}
						}
					})
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestReadRunsRefuses checks that runs outside the plain bytes or the
// buffer, and runs of rows that overlap, are errors, not panics.
func TestReadRunsRefuses(t *testing.T) {
	plain := testPlain(1 << 20)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 4, Blocksize: 64 << 10}
	p.Filters[5] = blosc.FilterShuffle
	r := NewChunkReader("mem", newMemSource(t, plain, 256<<10, p), nil)
	buf := make([]byte, 64<<10)
	for _, run := range []Run{
		{At: -1, N: 10},
		{At: 1<<20 - 5, N: 10},
		{At: 0, To: 64<<10 - 5, N: 10},
		{At: 0, N: 100, Rows: 3, AtStride: 50, ToStride: 100},              // rows overlap in the plain bytes
		{At: 0, N: 100, Rows: 3, AtStride: 100, ToStride: 99},              // and in the buffer
		{At: 1<<20 - 1000, N: 100, Rows: 20, AtStride: 100, ToStride: 100}, // past the plain bytes
		{At: 0, N: 100, Rows: 700, AtStride: 100, ToStride: 100},           // past the buffer
		{At: 0, N: 100, Rows: 1 << 62, AtStride: 1 << 40, ToStride: 100},
	} {
		if err := r.ReadRuns(buf, []Run{run}, false); err == nil {
			t.Errorf("run %+v: no error", run)
		}
	}
	if err := r.ReadRuns(buf, []Run{{At: 1000, N: 100, Rows: 600, AtStride: 1000, ToStride: 100}}, false); err != nil {
		t.Fatal(err)
	}
	for k := range 600 {
		if !bytes.Equal(buf[k*100:k*100+100], plain[1000+k*1000:1100+k*1000]) {
			t.Fatalf("row %d: wrong bytes", k)
		}
	}
}

// randomRuns returns runs over size plain bytes into a buffer of the
// returned length: rows of stride bytes at a random start, cut into
// pieces, ordered by offset (order 0), by offset downwards (1) or
// shuffled (2); a third of the time as runs of several rows each, at a
// fixed stride in the buffer too (an N-D view's rows of a chunk).
func randomRuns(rng *rand.Rand, size int64, order int) ([]Run, int64) {
	n := 1 + rng.IntN(300)
	scale := []int64{64, 4 << 10, 100 << 10}[rng.IntN(3)] // many rows to a block, or few
	row := 1 + rng.Int64N(scale)
	stride := row + rng.Int64N(2*scale)
	if rng.IntN(4) == 0 {
		stride = row // rows that follow on, as a chunk's whole rows
	}
	at := rng.Int64N(size)
	var runs []Run
	to := int64(0)
	if rng.IntN(3) == 0 {
		tstride := row + rng.Int64N(3*row)
		for at < size && len(runs) < n {
			m := 1 + rng.Int64N(64)
			m = min(m, (size-row-at)/stride+1)
			if m < 1 || at > size-row {
				break
			}
			runs = append(runs, Run{At: at, To: to, N: row, Rows: m, AtStride: stride, ToStride: tstride})
			to += (m-1)*tstride + row + rng.Int64N(3)
			at += m * stride
		}
	}
	for range n {
		if at >= size || len(runs) >= n {
			break
		}
		k := min(row, size-at)
		runs = append(runs, Run{At: at, To: to, N: k})
		to += k + rng.Int64N(3)
		at += stride
	}
	switch order {
	case 1:
		slices.Reverse(runs)
	case 2:
		rng.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
	}
	return runs, to
}

// TestWarmRuns checks that WarmRuns decodes the blocks of a sequential
// reader's gathers into the cache and copies nothing, so that the
// gathers after it decode nothing: as byte planes for long rows, whole
// for short ones; and that it keeps nothing without a cache.
func TestWarmRuns(t *testing.T) {
	plain := testPlain(1 << 20)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 4, Blocksize: 64 << 10}
	p.Filters[5] = blosc.FilterShuffle
	src := newMemSource(t, plain, 256<<10, p) // 4 chunks of 4 blocks
	for _, tc := range []struct {
		name   string
		row    int64 // bytes of a row, each chunk's rows end to end
		planes bool  // kept as byte planes
	}{
		{"long rows", 1024, true},
		{"short rows", 16, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cache.New[BlockKey](16 << 20)
			r := NewChunkReader("mem", src, c)
			// The rows of every chunk, as a read of an N-D view takes
			// them: one run per chunk, its rows 4 apart in the buffer.
			rows := int64(256<<10) / tc.row
			var runs []Run
			for ch := range int64(4) {
				runs = append(runs, Run{At: ch << 18, To: ch * tc.row, N: tc.row, Rows: rows, AtStride: tc.row, ToStride: 4 * tc.row})
			}
			size := rows * 4 * tc.row
			buf := make([]byte, size)
			if err := r.WarmRuns(buf, runs); err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(buf, func(b byte) bool { return b != 0 }) {
				t.Fatal("WarmRuns wrote into the buffer")
			}
			warm := c.Stats()
			if warm.Loads != 16 {
				t.Fatalf("WarmRuns decoded %d blocks, want the 16 blocks the rows lie in", warm.Loads)
			}
			if got := c.Contains(r.planesKey(3, 3)); got != tc.planes {
				t.Fatalf("block kept as planes: %v, want %v", got, tc.planes)
			}
			if err := r.ReadRuns(buf, runs, true); err != nil {
				t.Fatal(err)
			}
			if s := c.Stats(); s.Loads != warm.Loads || r.direct.Load() != 0 || r.ranged.Load() != 0 {
				t.Fatalf("the gather after WarmRuns decoded again: %d cache loads (%d before), %d direct, %d ranged",
					s.Loads, warm.Loads, r.direct.Load(), r.ranged.Load())
			}
			for _, run := range runs {
				for k := range run.Rows {
					at, to := run.At+k*run.AtStride, run.To+k*run.ToStride
					if !bytes.Equal(buf[to:to+run.N], plain[at:at+run.N]) {
						t.Fatalf("run %+v, row %d: wrong bytes", run, k)
					}
				}
			}
			if s := c.Stats(); s.Entries != 0 {
				t.Fatalf("%d blocks left in the cache after the sequential gather read them all", s.Entries)
			}
		})
	}
	// Without a cache there is nothing to warm.
	r := NewChunkReader("mem", src, NoCache{})
	if err := r.WarmRuns(make([]byte, 720), []Run{{At: 0, N: 720}}); err != nil {
		t.Fatal(err)
	}
}

// TestGatherRests reads the C-order view of four chunks side by side (an
// N-D array's: each row of the view a row of each chunk) sequentially,
// in reads of 30 rows, as a mount's READs do: a chunk's 32 KiB blocks
// lie across two or three reads. Each block is decoded once, straight
// into the reads' buffers, the read that decodes it keeping the parts
// that other reads take (rests) outside the cache: in order, each pair
// of reads in reverse order (the kernel's READs two at a time, the
// later one first), and two at a time at once. The rests are all taken
// at the end, and with the process's rests at their bound the reads go
// through the cache instead.
func TestGatherRests(t *testing.T) {
	const (
		rowLen  = 720 // a float32 cube's chunk row
		across  = 4
		rows    = 364
		perRead = 30
	)
	chunkLen := rowLen * rows
	plain := testPlain(across * chunkLen)
	for _, cc := range []int{blosc.CodecLZ4, blosc.CodecZstd} {
		codec := blosc.CodecName(cc)
		p := blosc.Params{Codec: cc, Clevel: 1, Typesize: 4, Blocksize: 32 << 10}
		p.Filters[5] = blosc.FilterShuffle
		src := newMemSource(t, plain, chunkLen, p)
		blocks := 0
		for i := range src.NumChunks() {
			c, err := blosc.NewChunkBytes(src.chunks[i])
			if err != nil {
				t.Fatal(err)
			}
			blocks += c.NumBlocks()
		}
		read := func(r *ChunkReader, r0, r1 int) error {
			return readViewRows(r, plain, across, rowLen, r0, r1)
		}
		var reads [][2]int
		for r0 := 0; r0 < rows; r0 += perRead {
			reads = append(reads, [2]int{r0, min(r0+perRead, rows)})
		}
		for _, order := range []string{"in order", "pairs reversed", "two at once"} {
			c := cache.New[BlockKey](64 << 20)
			r := NewChunkReader("mem", src, c)
			switch order {
			case "in order":
				for _, rd := range reads {
					if err := read(r, rd[0], rd[1]); err != nil {
						t.Fatalf("%s, %s: %v", codec, order, err)
					}
				}
			case "pairs reversed":
				for k := 0; k < len(reads); k += 2 {
					if k+1 < len(reads) {
						if err := read(r, reads[k+1][0], reads[k+1][1]); err != nil {
							t.Fatalf("%s, %s: %v", codec, order, err)
						}
					}
					if err := read(r, reads[k][0], reads[k][1]); err != nil {
						t.Fatalf("%s, %s: %v", codec, order, err)
					}
				}
			case "two at once":
				for k := 0; k < len(reads); k += 2 {
					var wg sync.WaitGroup
					errs := make([]error, 2)
					for j := range 2 {
						if k+j < len(reads) {
							wg.Go(func() { errs[j] = read(r, reads[k+j][0], reads[k+j][1]) })
						}
					}
					wg.Wait()
					if err := errors.Join(errs...); err != nil {
						t.Fatalf("%s, %s: %v", codec, order, err)
					}
				}
			}
			if order != "two at once" {
				if s := c.Stats(); s.Loads != 0 {
					t.Errorf("%s, %s: %d blocks decoded into the cache, want none", codec, order, s.Loads)
				}
				if got := r.direct.Load() + r.ranged.Load(); got != int64(blocks) {
					t.Errorf("%s, %s: %d block decodes for %d blocks", codec, order, got, blocks)
				}
			}
			for _, rs := range r.rests.slots {
				if rs != nil {
					t.Errorf("%s, %s: a rest of bytes [%d, %d) of block %d of chunk %d never taken", codec, order, rs.from, rs.from+rs.n, rs.key.Block, rs.key.Chunk)
				}
			}
			if n := r.rests.live.Load(); n != 0 {
				t.Errorf("%s, %s: %d rests counted live, none kept", codec, order, n)
			}
		}
		// The process's rests at their bound: none kept, the same bytes.
		restsHeld.Add(maxRestsHeld)
		c := cache.New[BlockKey](64 << 20)
		r := NewChunkReader("mem", src, c)
		for _, rd := range reads {
			if err := read(r, rd[0], rd[1]); err != nil {
				restsHeld.Add(-maxRestsHeld)
				t.Fatalf("%s, rests at their bound: %v", codec, err)
			}
		}
		restsHeld.Add(-maxRestsHeld)
		if s, n := c.Stats(), keptRests(r); s.Loads == 0 || n != 0 {
			t.Errorf("%s, rests at their bound: %d rests kept, %d cache loads", codec, n, s.Loads)
		}
	}
}

// keptRests returns how many rests r keeps.
func keptRests(r *ChunkReader) int {
	r.rests.mu.Lock()
	defer r.rests.mu.Unlock()
	n := 0
	for _, rs := range r.rests.slots {
		if rs != nil {
			n++
		}
	}
	return n
}

// TestRestsOfIdleReaders has 400 readers read the first rows of a view
// of four chunks and stop, as head(1) does, each leaving the rests of
// the blocks it read in part: more than the process keeps. A sequential
// reader after them still keeps its rests, the oldest of the idle
// readers' giving way, and the process never holds more than its bound.
// Dropped, the readers give back every rest.
func TestRestsOfIdleReaders(t *testing.T) {
	const (
		rowLen = 720
		across = 4
		rows   = 364
	)
	chunkLen := rowLen * rows
	plain := testPlain(across * chunkLen)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 1, Typesize: 4, Blocksize: 32 << 10}
	p.Filters[5] = blosc.FilterShuffle
	src := newMemSource(t, plain, chunkLen, p)
	base := restsHeld.Load()
	read := func(r *ChunkReader, r0, r1 int) {
		t.Helper()
		if err := readViewRows(r, plain, across, rowLen, r0, r1); err != nil {
			t.Fatal(err)
		}
	}
	var idle []*ChunkReader
	for range 400 {
		r := NewChunkReader("mem", src, cache.New[BlockKey](64<<20))
		read(r, 0, 3)
		idle = append(idle, r)
		if h := restsHeld.Load(); h > maxRestsHeld {
			t.Fatalf("the process holds %d bytes of rests, past its bound of %d", h, maxRestsHeld)
		}
	}
	if h := restsHeld.Load() - base; h < maxRestsHeld/2 {
		t.Fatalf("400 idle readers hold %d bytes of rests; the test wants them near the bound", h)
	}
	c := cache.New[BlockKey](64 << 20)
	r := NewChunkReader("mem", src, c)
	for r0 := 0; r0 < rows; r0 += 30 {
		read(r, r0, min(r0+30, rows))
	}
	if s := c.Stats(); s.Loads != 0 {
		t.Errorf("the sequential reader after the idle ones decoded %d blocks into the cache, want none", s.Loads)
	}
	runtime.KeepAlive(idle)
	idle, r = nil, nil
	deadline := time.Now().Add(10 * time.Second)
	for restsHeld.Load() != base {
		if time.Now().After(deadline) {
			t.Fatalf("the process holds %d bytes of rests after its readers were dropped, want %d", restsHeld.Load(), base)
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}

// verSource is a ChunkSource of two versions of the same chunks, cur the
// one in place: a read of a chunk parsed from the other is ErrStale, as
// a Zarr chunk file's that was replaced.
type verSource struct {
	vers [2]*memSource
	cur  int
}

func (s *verSource) NumChunks() int          { return s.vers[0].NumChunks() }
func (s *verSource) ChunkOffset(i int) int64 { return s.vers[0].ChunkOffset(i) }
func (s *verSource) OpenChunk(i int) (*blosc.Chunk, error) {
	b := s.vers[s.cur].chunks[i]
	return blosc.NewChunk(verReader{s, s.cur, b}, int64(len(b)))
}

// verReader reads one version's chunk while it is in place.
type verReader struct {
	s *verSource
	v int
	b []byte
}

func (r verReader) ReadAt(p []byte, off int64) (int, error) {
	if r.s.cur != r.v {
		return 0, ErrStale
	}
	return bytes.NewReader(r.b).ReadAt(p, off)
}

// TestRestsOfStaleChunk reads the start of a block, keeping its end as a
// rest, then replaces the chunk (a read of it is ErrStale, and the
// reader forgets the chunk and parses it anew): the end of the block
// read next is the new version's, not the old rest's.
func TestRestsOfStaleChunk(t *testing.T) {
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 1, Typesize: 4, Blocksize: 64 << 10}
	p.Filters[5] = blosc.FilterShuffle
	v1 := testPlain(256 << 10)
	v2 := bytes.Clone(v1)
	for i := range v2 {
		v2[i] ^= 0xff
	}
	s := &verSource{vers: [2]*memSource{newMemSource(t, v1, 256<<10, p), newMemSource(t, v2, 256<<10, p)}}
	r := NewChunkReader("ver", s, cache.New[BlockKey](64<<20))
	if _, err := r.ReadAtOnce(make([]byte, 40<<10), 0); err != nil { // block 0's [0, 40 KiB): its end kept
		t.Fatal(err)
	}
	if n := keptRests(r); n == 0 || r.rests.live.Load() != int32(n) {
		t.Fatalf("the read of a block's start kept %d rests, %d counted live; want 1 and 1", n, r.rests.live.Load())
	}
	s.cur = 1
	if _, err := r.ReadAtOnce(make([]byte, 64<<10), 128<<10); !errors.Is(err, ErrStale) {
		t.Fatalf("a read of the replaced chunk: %v, want ErrStale", err)
	}
	got := make([]byte, 24<<10)
	if _, err := r.ReadAtOnce(got, 40<<10); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, v2[40<<10:64<<10]) {
		t.Fatal("the end of the block is not the new version's")
	}
}

// readViewRows gathers rows [r0, r1) of the C-order view of r's chunks,
// across of them side by side, each of rows of rowLen bytes (an N-D
// array's view: a row of the view is a row of each chunk), as one
// sequential read (ReadRuns, once), and checks them against plain.
func readViewRows(r *ChunkReader, plain []byte, across, rowLen, r0, r1 int) error {
	chunkLen := len(plain) / across
	view := across * rowLen
	buf := make([]byte, (r1-r0)*view)
	runs := make([]Run, across)
	for c := range across {
		runs[c] = Run{At: int64(c*chunkLen + r0*rowLen), To: int64(c * rowLen), N: int64(rowLen), Rows: int64(r1 - r0), AtStride: int64(rowLen), ToStride: int64(view)}
	}
	if err := r.ReadRuns(buf, runs, true); err != nil {
		return err
	}
	for k := range r1 - r0 {
		for c := range across {
			at := c*chunkLen + (r0+k)*rowLen
			if !bytes.Equal(buf[k*view+c*rowLen:][:rowLen], plain[at:at+rowLen]) {
				return fmt.Errorf("view row %d, chunk %d: wrong bytes", r0+k, c)
			}
		}
	}
	return nil
}
