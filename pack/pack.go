// Package pack reads and writes the containers that hold Blosc chunks:
// Bloscpack files (.blp, package pack/bloscpack) and Blosc2 frames
// (contiguous .b2frame, sparse frame directories and .b2nd arrays, package
// pack/frame).
//
// Every container is an io.ReaderAt over its plain bytes, safe for
// concurrent use, that reads and decodes only the chunks and blocks a call
// touches. Decoded blocks go through a BlockCache, so that the mount can
// share one byte-bounded cache among all open files. Parsers take an
// io.ReaderAt and a size, as archive/zip does, and never own the file.
package pack

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	bcache "github.com/bloscfs/bloscfs/cache"
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Errors returned by the container parsers, wrapped with context (file
// offset, chunk number); test with errors.Is. Errors from decoding a chunk
// wrap blosc.ErrCorrupt or blosc.ErrUnsupported.
var (
	// ErrFormat reports a file that is not a container of the expected
	// kind, or whose structure is broken.
	ErrFormat = errors.New("invalid container")
	// ErrChecksum reports a chunk whose stored checksum does not match.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrUnsupported reports a container version or feature not handled.
	ErrUnsupported = errors.New("not supported")
	// ErrStale reports a chunk whose stored bytes are no longer those it
	// was parsed from (a Zarr chunk file replaced while its array is
	// open). The read fails; the ChunkReader forgets the parsed chunk
	// and its cached blocks, so that a later read parses it anew.
	ErrStale = errors.New("chunk changed since it was parsed")
)

// BlockKey names one decoded block of one open container.
type BlockKey struct {
	Container uint64 // unique per opened container (see NewContainerID)
	Chunk     int64
	Block     int32
}

// BlockCache holds decoded blocks. A BlockCache must be safe for
// concurrent use; *cache.Cache[BlockKey] is one.
type BlockCache interface {
	// Acquire returns the block for key, pinned, calling load on a miss;
	// concurrent misses for one key may share one load. The caller must
	// not modify the block, and must release it.
	Acquire(key BlockKey, load func() ([]byte, error)) (*bcache.Ref, error)
	// TryAcquire returns the block for key, pinned, if it is cached.
	TryAcquire(key BlockKey) (*bcache.Ref, bool)
	// Alloc returns n bytes for a loader to decode into, ideally the
	// memory of a released block. Its content is undefined.
	Alloc(n int) []byte
	// Contains reports whether key is cached or being loaded.
	Contains(key BlockKey) bool
	// RemoveRef drops the block for key, which will not be read again
	// soon, if the cache still holds r for it.
	RemoveRef(key BlockKey, r *bcache.Ref)
}

// NoCache is a BlockCache that keeps nothing: every call decodes.
type NoCache struct{}

// Acquire calls load.
func (NoCache) Acquire(_ BlockKey, load func() ([]byte, error)) (*bcache.Ref, error) {
	b, err := load()
	if err != nil {
		return nil, err
	}
	return bcache.Unowned(b), nil
}

// TryAcquire finds nothing.
func (NoCache) TryAcquire(BlockKey) (*bcache.Ref, bool) { return nil, false }

// Alloc returns a new slice.
func (NoCache) Alloc(n int) []byte { return make([]byte, n) }

// Contains reports false.
func (NoCache) Contains(BlockKey) bool { return false }

// RemoveRef does nothing.
func (NoCache) RemoveRef(BlockKey, *bcache.Ref) {}

var containerIDs atomic.Uint64

// NewContainerID returns a process-unique id for BlockKey.Container.
func NewContainerID() uint64 { return containerIDs.Add(1) }

// Info describes how a container stores its data.
type Info struct {
	Format      string            // "bloscpack", "b2frame", "sframe", "b2nd", "chunk"
	Version     int               // container format version
	Size        int64             // plain size of the default view
	StoredSize  int64             // bytes on disk
	Chunks      int               // number of chunks
	ChunkSize   int64             // nominal plain chunk size (0 if chunks vary)
	Blocksize   int               // block size of the first stored chunk
	Codec       string            // codec of the first stored chunk
	Clevel      int               // compression level, when the container records it (-1 if not)
	Typesize    int               // element size
	Filters     [6]uint8          // filter pipeline of the first stored chunk
	FiltersMeta [6]uint8          // filter parameters
	Checksum    string            // bloscpack checksum kind
	Meta        map[string][]byte // metadata: bloscpack JSON, frame metalayers and vlmetalayers
}

// Container is an opened container: an io.ReaderAt over its plain bytes.
type Container interface {
	io.ReaderAt
	// Size returns the plain size.
	Size() int64
	// Info describes the container.
	Info() Info
}

// ChunkSource describes the chunks of a container for a ChunkReader.
type ChunkSource interface {
	// NumChunks returns the number of chunks.
	NumChunks() int
	// ChunkOffset returns the plain offset of chunk i; ChunkOffset(NumChunks())
	// is the plain size.
	ChunkOffset(i int) int64
	// OpenChunk parses chunk i (header, block starts, dictionary), verifying
	// what can be verified. It is called at most once per chunk while the
	// parsed chunk stays in the ChunkReader's table.
	OpenChunk(i int) (*blosc.Chunk, error)
}

// ChunkReader serves ReadAt over a ChunkSource: it maps a plain offset to
// a chunk and block, decodes the blocks a call touches through a
// BlockCache, and decodes several missing blocks of one call in parallel.
type ChunkReader struct {
	src   ChunkSource
	cache BlockCache
	id    uint64
	name  string

	maxBlock int // largest decoded block, in bytes

	mu        sync.Mutex
	chunks    *simplelru.LRU[int, *chunkSlot] // parsed chunks, the most recently used
	parsed    *parsedBytes                    // their memory, charged to the cache
	maxParsed int64                           // bound on parsed.n
	charger   Charger                         // nil: the cache takes no charges
	adding    int                             // the chunk being added: not evicted for room

	direct atomic.Int64 // blocks decoded straight into a read's buffer, bypassing the cache
	ranged atomic.Int64 // parts of blocks decoded alone into a read's buffer

	gens atomic.Uint64 // numbers the parsed chunks (chunkSlot.gen)

	// bad remembers the blocks that failed to decode, by chunk, block and
	// the parse of the chunk (its gen): reading one again gives the same
	// error without reading or decoding it. badN counts them, so that a
	// read looks nothing up while none failed.
	badMu sync.Mutex
	bad   map[badKey]error
	badN  atomic.Int32

	partMu sync.Mutex
	parts  [partsKept]BlockKey // the blocks of the last partial decodes
	partN  int                 // how many parts were ever recorded
	rests  *restSet            // the parts of blocks a sequential reader's reads left for the reads that take them (see rest)
}

// rest is a part of a block, bytes [from, from+n) of it, decoded with a
// sequential read that took another part of the block and kept for the
// read that takes it, at buf.b[off:off+n]. gen is the parse of the chunk
// it was decoded from: a chunk parsed anew (its file changed) takes no
// rest of the old one.
type rest struct {
	key          BlockKey
	gen          uint64
	from, n, off int
	buf          *restBuf
}

// restBuf is the buffer of a decode's rests, maxRest bytes. Each rest in
// a reader's slots, each read copying from one and the decode writing to
// it hold a reference: the last one gives it back.
type restBuf struct {
	b    []byte
	refs atomic.Int32
	done chan struct{} // closed when the decode ends
	ok   bool          // the decode succeeded (set before done is closed)
}

// unref drops a reference to rb, giving it back when it was the last.
func (rb *restBuf) unref() {
	if rb.refs.Add(-1) == 0 {
		restsHeld.Add(-maxRest)
		restBufs.Put(rb)
	}
}

// ended reports whether the decode of rb has ended.
func (rb *restBuf) ended() bool {
	select {
	case <-rb.done:
		return true
	default:
		return false
	}
}

// restSet is a reader's rests, at most restsKept of them.
type restSet struct {
	mu    sync.Mutex
	slots [restsKept]*rest
	next  int          // the slot a full set gives up next, round the slots
	live  atomic.Int32 // rests in slots: none, and a read looks nothing up
}

// Rests: a sequential reader's read that takes part of a block not
// cached, all of it but maxRest bytes or fewer, decodes the block
// straight into its buffer and keeps the block's other bytes, before its
// part and after it, for the reads that take them, instead of decoding
// the whole block into the cache and copying out of it (or, for the rows
// of an N-D array's view, keeping the block as byte planes in the cache
// and unshuffling each read's rows out of them). The 1 MiB READs of a
// Zarr array's NPY view lie 128 bytes (the NPY header) off its chunks of
// one 1 MiB block each; a READ of a 3-D cube's view takes a slice of each
// of 16 chunks, and most of their 32 KiB blocks lie across two slices.
// The kernel sends such READs two at a time: of two reads that reach a
// block at once, one decodes it and the other waits for its part, rather
// than decode the block again. restsKept covers the chunks of two such
// READs.
const (
	restsKept = 64
	maxRest   = 64 << 10
)

// restsHeld is the memory of the rests' buffers in the process (maxRest
// bytes each), at most maxRestsHeld: a reader that would pass it drops
// the oldest rests of the process first (restRing), and keeps none when
// that does not make room, its block going through the cache.
var restsHeld atomic.Int64

const maxRestsHeld = 64 << 20

// restBufs holds free rest buffers.
var restBufs = sync.Pool{New: func() any { return &restBuf{b: make([]byte, maxRest)} }}

// restRing lists the rests kept in the process, the oldest first, so
// that a reader short of room drops the rests that readers left and did
// not come back for (a reader that read the start of a view and
// stopped) rather than keep none itself. Entries whose rest was taken
// since are skipped; the oldest entries of a full ring are forgotten.
var restRing struct {
	mu      sync.Mutex
	ents    [restRingLen]restEnt
	head, n int
}

// restRingLen is four entries for each rest buffer the process may hold.
const restRingLen = 4 * maxRestsHeld / maxRest

// restEnt is an entry of restRing: a rest and the set it was kept in.
type restEnt struct {
	set *restSet
	rs  *rest
}

// pushRest adds a rest just kept in set to restRing.
func pushRest(set *restSet, rs *rest) {
	restRing.mu.Lock()
	defer restRing.mu.Unlock()
	if restRing.n == restRingLen {
		restRing.ents[restRing.head] = restEnt{}
		restRing.head = (restRing.head + 1) % restRingLen
		restRing.n--
	}
	restRing.ents[(restRing.head+restRing.n)%restRingLen] = restEnt{set, rs}
	restRing.n++
}

// popRest takes the oldest entry out of restRing.
func popRest() (restEnt, bool) {
	restRing.mu.Lock()
	defer restRing.mu.Unlock()
	if restRing.n == 0 {
		return restEnt{}, false
	}
	e := restRing.ents[restRing.head]
	restRing.ents[restRing.head] = restEnt{}
	restRing.head = (restRing.head + 1) % restRingLen
	restRing.n--
	return e, true
}

// reserveLocked takes room for one rest buffer in the process's budget
// (s.mu held), dropping the process's oldest rests as needed: s's own,
// and those of other sets whose lock is free. It reports whether it
// made room.
func (s *restSet) reserveLocked() bool {
	for tries := 0; ; tries++ {
		if restsHeld.Add(maxRest) <= maxRestsHeld {
			return true
		}
		restsHeld.Add(-maxRest)
		if tries == 2*restsKept {
			return false
		}
		e, ok := popRest()
		if !ok {
			return false
		}
		switch {
		case e.set == s:
			s.dropLocked(e.rs)
		case e.set.mu.TryLock():
			e.set.dropLocked(e.rs)
			e.set.mu.Unlock()
		}
	}
}

// dropLocked drops rs if it is still in s's slots (s.mu held).
func (s *restSet) dropLocked(rs *rest) {
	for j := range s.slots {
		if s.slots[j] == rs {
			s.slots[j] = nil
			s.live.Add(-1)
			rs.buf.unref()
			return
		}
	}
}

// keepLocked puts rs, holding a reference to its buffer, in a free slot
// of s (s.mu held), or in place of the rest kept longest ago, and lists
// it in restRing.
func (s *restSet) keepLocked(rs *rest) {
	j := -1
	for k := range s.slots {
		if s.slots[k] == nil {
			j = k
			break
		}
	}
	if j < 0 {
		j = s.next
		s.next = (s.next + 1) % restsKept
		s.slots[j].buf.unref() // pushed out, never taken
	} else {
		s.live.Add(1)
	}
	s.slots[j] = rs
	pushRest(s, rs)
}

// dropAll drops every rest of s: its reader is gone.
func (s *restSet) dropAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for j := range s.slots {
		if rs := s.slots[j]; rs != nil {
			s.slots[j] = nil
			s.live.Add(-1)
			rs.buf.unref()
		}
	}
}

// takeRest copies piece pc out of a kept rest of its block whose decode
// has ended, reporting whether one held the piece. (A rest being decoded
// is left to the piece's fillOne, which waits for it beside the read's
// other decodes.)
func (r *ChunkReader) takeRest(pc piece) bool {
	rs, _ := r.restOf(pc, false, false)
	return rs != nil && rs.copyTo(pc)
}

// restOf returns the part of a kept rest of piece pc's block that holds
// the piece, taken out of the reader's slots (the rest's bytes before
// the piece and after it stay there, for the reads that take them).
// Without wait, only a rest whose decode has ended is taken. When none
// holds it and start is set, it starts instead the rests of the block's
// bytes before the piece and after it, for the caller to decode with the
// piece; nil when they are more than maxRest bytes or the process keeps
// as many rests as it may. All under one lock: of two reads that take
// two parts of a block at once, one decodes the block and the other
// takes its part from the rest.
func (r *ChunkReader) restOf(pc piece, start, wait bool) (*rest, *restDecode) {
	k, from, end, bl := r.key(pc.chunk, pc.block), pc.from, pc.end(), pc.c.BlockLen(pc.block)
	s := r.rests
	if !start && s.live.Load() == 0 {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for j := range s.slots {
		x := s.slots[j]
		if x == nil || x.key != k || x.gen != pc.gen || from < x.from || end > x.from+x.n || !wait && !x.buf.ended() {
			continue
		}
		s.slots[j] = nil
		s.live.Add(-1)
		if x.buf.ended() && !x.buf.ok { // its decode failed: no part of it is worth keeping
			x.buf.unref()
			continue
		}
		if from > x.from {
			x.buf.refs.Add(1)
			s.keepLocked(&rest{key: k, gen: x.gen, from: x.from, n: from - x.from, off: x.off, buf: x.buf})
		}
		if end < x.from+x.n {
			x.buf.refs.Add(1)
			s.keepLocked(&rest{key: k, gen: x.gen, from: end, n: x.from + x.n - end, off: x.off + end - x.from, buf: x.buf})
		}
		// The piece's part, with the slot's reference.
		return &rest{key: k, gen: x.gen, from: from, n: end - from, off: x.off + from - x.from, buf: x.buf}, nil
	}
	if !start || from < 0 || end > bl || end-from >= bl || bl-(end-from) > maxRest || !s.reserveLocked() {
		return nil, nil
	}
	rb := restBufs.Get().(*restBuf)
	rb.done, rb.ok = make(chan struct{}), false
	d := &restDecode{buf: rb}
	refs := int32(1) // the decode's
	for i, part := range [2][2]int{{0, from}, {end, bl}} {
		if part[1] > part[0] {
			d.parts[i] = &rest{key: k, gen: pc.gen, from: part[0], n: part[1] - part[0], off: i * from, buf: rb}
			refs++
		}
	}
	rb.refs.Store(refs)
	for _, rs := range d.parts {
		if rs != nil {
			s.keepLocked(rs)
		}
	}
	return nil, d
}

// fromRest serves a sequential reader's piece pc out of a rest of its
// block that another read keeps, waiting for its decode, reporting done;
// otherwise, with start, it starts the rests of the block's other bytes
// for the caller to decode with the piece (restOf), after checking the
// block against the reader's bound.
func (r *ChunkReader) fromRest(pc piece, start bool) (done bool, d *restDecode, err error) {
	if start {
		if err := r.checkBlock(pc.chunk, pc.c, pc.block); err != nil {
			return false, nil, err
		}
	}
	taken, d := r.restOf(pc, start, true)
	if taken != nil && taken.copyTo(pc) {
		return true, nil, nil
	}
	return false, d, nil
}

// copyTo copies piece pc, which rs holds, out of rs once it is decoded,
// and drops rs's reference; it reports false, copying nothing, when the
// decode failed.
func (rs *rest) copyTo(pc piece) bool {
	<-rs.buf.done
	defer rs.buf.unref()
	if !rs.buf.ok {
		return false
	}
	b := rs.buf.b[rs.off : rs.off+rs.n]
	if pc.wins == nil {
		copy(pc.dst, b[pc.from-rs.from:])
		return true
	}
	for _, w := range pc.wins {
		for k := range w.rows {
			copy(w.row(k), b[w.from+k*w.skip-rs.from:])
		}
	}
	return true
}

// restDecode is a decode that keeps the parts of its block before and
// after its read's part (either may be empty) as rests.
type restDecode struct {
	parts [2]*rest // before, after; nil where empty
	buf   *restBuf
}

// windows returns ws, the windows of the decode's read in the block, with
// those of its rests around them.
func (d *restDecode) windows(ws []blosc.Window) []blosc.Window {
	if rs := d.parts[0]; rs != nil {
		ws = append(ws, blosc.Window{})
		copy(ws[1:], ws)
		ws[0] = blosc.Window{From: rs.from, Dst: d.buf.b[rs.off : rs.off+rs.n]}
	}
	if rs := d.parts[1]; rs != nil {
		ws = append(ws, blosc.Window{From: rs.from, Dst: d.buf.b[rs.off : rs.off+rs.n]})
	}
	return ws
}

// finish publishes the outcome of the decode to the reads that take its
// rests.
func (d *restDecode) finish(err error) {
	d.buf.ok = err == nil
	close(d.buf.done)
	d.buf.unref()
}

// partsKept is how many blocks a reader remembers having decoded part of:
// a second read of one of them decodes the block whole into the cache.
const partsKept = 16

// Partial decodes: a read of a small part of a large block that is not
// cached decodes that part alone (blosc.Chunk.DecodeBlockRange), straight
// into the read's buffer, when the block is at least partMinBlock bytes
// and the part at most 1/partMaxShare of it.
const (
	partMinBlock = 64 << 10
	partMaxShare = 4
)

// parsedBytes is the memory a reader's parsed chunks hold; it is given
// back to the cache when the reader is collected.
type parsedBytes struct{ n int64 }

type chunkSlot struct {
	once  sync.Once
	done  atomic.Bool // set after once ran: skips building its closure
	c     *blosc.Chunk
	err   error
	bytes int64  // memory charged for c (guarded by the reader's mu)
	gen   uint64 // the reader's number of this parse of the chunk
}

// badKey names a block of one parse of a chunk (see ChunkReader.bad).
type badKey struct {
	chunk int
	block int
	gen   uint64
}

// maxBadBlocks bounds the failed blocks a reader remembers; past it one
// is forgotten for each new one.
const maxBadBlocks = 256

// maxParsedChunks bounds the number of parsed chunk headers kept.
const maxParsedChunks = 4096

// Memory bounds that a file's claims cannot move.
const (
	// DefaultMaxBlock is the largest decoded block a container reads
	// when its cache sets no bound (see MaxBlocker): a larger block is
	// refused with ErrUnsupported rather than allocated.
	DefaultMaxBlock = 64 << 20
	// minMaxBlock is the least bound a cache may set: blocks that
	// c-blosc picks itself are smaller.
	minMaxBlock = 4 << 20
	// maxBatch bounds the block pieces one ReadAt plans at a time, so
	// that a read across millions of tiny chunks does not build a list
	// of millions of pieces.
	maxBatch = 1024
	// defaultParsedBytes bounds the memory of the parsed chunks (block
	// starts, dictionaries) one reader keeps when its cache sets no
	// budget.
	defaultParsedBytes = 16 << 20
)

// MaxMetaLayer bounds the decoded size of one metadata layer (a frame's
// vlmetalayer, a Bloscpack file's metadata): metadata is decoded only
// when asked for, and a layer that would decode to more is an error
// naming the file (ErrUnsupported). Set it before opening files to read
// larger metadata.
var MaxMetaLayer int64 = 16 << 20

// InfoMetaMax bounds what Info decodes of metadata: a layer that decodes
// to more is left out of Info.Meta (it can still be read on its own), and
// so are layers once their total passes InfoMetaTotal.
const (
	InfoMetaMax   = 64 << 10
	InfoMetaTotal = 1 << 20
)

// MaxBlocker is implemented by caches that bound the size of one decoded
// block: a ChunkReader refuses larger blocks (ErrUnsupported, naming the
// file, chunk and block) instead of allocating them. *cache.Cache sets an
// eighth of its size, at most 64 MiB.
type MaxBlocker interface {
	MaxBlock() int
}

// Charger is implemented by caches that take other memory into their
// byte budget: a ChunkReader charges the parsed chunks it keeps (n > 0)
// and gives the charge back when it drops them (n < 0).
type Charger interface {
	Charge(n int64)
}

// DecodeObserver is implemented by caches that account for decoding: a
// ChunkReader reports to it the blocks it decodes straight into a
// caller's buffer, which never pass through the cache (n decoded bytes,
// taking d).
type DecodeObserver interface {
	Decoded(n int, d time.Duration)
}

// maxBlockOf returns the block bound for cache.
func maxBlockOf(cache BlockCache) int {
	if m, ok := cache.(MaxBlocker); ok {
		return max(min(m.MaxBlock(), DefaultMaxBlock), minMaxBlock)
	}
	return DefaultMaxBlock
}

// DefaultCacheSize is the size of the private cache a container gets when
// it is opened with a nil BlockCache.
const DefaultCacheSize = 16 << 20

// NewChunkReader returns a reader over src. name (usually the file name)
// prefixes errors. A nil cache gives the reader a private cache of
// DefaultCacheSize bytes; pass NoCache{} to decode on every call.
func NewChunkReader(name string, src ChunkSource, cache BlockCache) *ChunkReader {
	if cache == nil {
		cache = bcache.New[BlockKey](DefaultCacheSize)
	}
	r := &ChunkReader{src: src, cache: cache, id: NewContainerID(), name: name, maxBlock: maxBlockOf(cache),
		parsed: &parsedBytes{}, maxParsed: defaultParsedBytes, adding: -1, rests: &restSet{}}
	// The rests the reader still keeps when it is dropped go back to the
	// process's budget.
	runtime.AddCleanup(r, (*restSet).dropAll, r.rests)
	if c, ok := cache.(Charger); ok {
		r.charger = c
		if m, ok := cache.(interface{ MaxBytes() int64 }); ok {
			r.maxParsed = max(m.MaxBytes()/4, 1<<20)
		}
		// Whatever the reader still holds when it is dropped goes back
		// to the cache's budget.
		runtime.AddCleanup(r, func(p *parsedBytes) { c.Charge(-p.n) }, r.parsed)
	}
	r.chunks, _ = simplelru.NewLRU[int, *chunkSlot](maxParsedChunks, func(_ int, s *chunkSlot) {
		r.uncharge(s)
	})
	return r
}

// chargeLocked records the memory of a parsed chunk (r.mu held) and drops
// the least recently used others while the reader holds more than its
// bound.
func (r *ChunkReader) chargeLocked(s *chunkSlot) {
	if s.c == nil {
		return
	}
	s.bytes = s.c.MemSize()
	r.parsed.n += s.bytes
	if r.charger != nil {
		r.charger.Charge(s.bytes)
	}
	for r.parsed.n > r.maxParsed && r.chunks.Len() > 1 {
		k, _, ok := r.chunks.GetOldest()
		if !ok || k == r.adding {
			break
		}
		r.chunks.RemoveOldest()
	}
}

// uncharge gives back the memory of a dropped parsed chunk (r.mu held).
func (r *ChunkReader) uncharge(s *chunkSlot) {
	if s.bytes == 0 {
		return
	}
	r.parsed.n -= s.bytes
	if r.charger != nil {
		r.charger.Charge(-s.bytes)
	}
	s.bytes = 0
}

// MaxBlock returns the largest decoded block the reader decodes: a
// larger one is refused with ErrUnsupported (see MaxBlocker).
func (r *ChunkReader) MaxBlock() int { return r.maxBlock }

// Size returns the plain size.
func (r *ChunkReader) Size() int64 { return r.src.ChunkOffset(r.src.NumChunks()) }

// Chunk returns parsed chunk i.
func (r *ChunkReader) Chunk(i int) (*blosc.Chunk, error) {
	c, _, err := r.chunk(i)
	return c, err
}

// chunk returns parsed chunk i and the number of its parse.
func (r *ChunkReader) chunk(i int) (*blosc.Chunk, uint64, error) {
	r.mu.Lock()
	s, ok := r.chunks.Get(i)
	if !ok {
		s = &chunkSlot{gen: r.gens.Add(1)}
		r.chunks.Add(i, s)
	}
	r.mu.Unlock()
	if !s.done.Load() {
		s.once.Do(func() {
			s.c, s.err = r.src.OpenChunk(i)
			if s.err != nil {
				s.err = fmt.Errorf("%s: chunk %d: %w", r.name, i, s.err)
			}
			s.done.Store(true)
			r.mu.Lock()
			if cur, ok := r.chunks.Peek(i); ok && cur == s {
				r.adding = i
				r.chargeLocked(s)
				r.adding = -1
			}
			r.mu.Unlock()
		})
	}
	if s.err != nil && (Transient(s.err) || blosc.ReadFailed(s.err)) {
		// Not a fact about the chunk (out of something, or a read of its
		// bytes failed: a bucket's GET): try again next time.
		r.mu.Lock()
		if cur, ok := r.chunks.Peek(i); ok && cur == s {
			r.chunks.Remove(i)
		}
		r.mu.Unlock()
	}
	return s.c, s.gen, s.err
}

// ChunkSpecial reports whether chunk i is a special chunk (zeros, NaN,
// uninitialised, a repeated value): nothing stored to decode. A chunk
// that does not parse is not special.
func (r *ChunkReader) ChunkSpecial(i int) bool {
	c, err := r.Chunk(i)
	return err == nil && c.Special() != blosc.SpecialNone
}

// CheckChunk parses chunk i, checking its header, without decoding it.
func (r *ChunkReader) CheckChunk(i int) error {
	_, err := r.Chunk(i)
	return err
}

// chunkAt returns the chunk holding plain offset off (0 ≤ off < Size).
func (r *ChunkReader) chunkAt(off int64) int { return ChunkAt(r.src, off) }

// ChunkAt returns the chunk of src holding plain offset off: the last
// chunk starting at or before it (0 for a negative off, the last chunk
// for one past the end).
func ChunkAt(src ChunkSource, off int64) int {
	lo, hi := 0, src.NumChunks()-1
	for lo < hi {
		mid := int(uint(lo+hi+1) >> 1)
		if src.ChunkOffset(mid) <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// key returns the cache key of block b of chunk i.
func (r *ChunkReader) key(i, b int) BlockKey { return BlockKey{r.id, int64(i), int32(b)} }

// planesKey returns the cache key of block b of chunk i kept as its byte
// planes (blosc.DecodeBlockPlanes).
func (r *ChunkReader) planesKey(i, b int) BlockKey { return BlockKey{r.id, int64(i), int32(-2 - b)} }

// pieceKey returns the cache key of the block that piece pc is read
// from.
func (r *ChunkReader) pieceKey(pc piece) BlockKey {
	if pc.planes > 1 {
		return r.planesKey(pc.chunk, pc.block)
	}
	return r.key(pc.chunk, pc.block)
}

// planesBlock returns block b of chunk i as its byte planes, through the
// cache, pinned.
func (r *ChunkReader) planesBlock(i int, c *blosc.Chunk, b int) (*bcache.Ref, error) {
	k := r.planesKey(i, b)
	if ref, ok := r.cache.TryAcquire(k); ok {
		return ref, nil
	}
	return r.cache.Acquire(k, func() ([]byte, error) {
		if err := r.checkBlock(i, c, b); err != nil {
			return nil, err
		}
		out := r.cache.Alloc(c.BlockLen(b))
		if err := c.DecodeBlockPlanes(out, b); err != nil {
			return nil, fmt.Errorf("%s: chunk %d: %w", r.name, i, err)
		}
		return out, nil
	})
}

// block returns decoded block b of chunk i through the cache, pinned.
func (r *ChunkReader) block(i int, c *blosc.Chunk, b int) (*bcache.Ref, error) {
	k := r.key(i, b)
	if ref, ok := r.cache.TryAcquire(k); ok {
		return ref, nil
	}
	return r.cache.Acquire(k, func() ([]byte, error) {
		var ref0 []byte
		if b > 0 && c.NeedsBlock0() {
			r0, err := r.block(i, c, 0)
			if err != nil {
				return nil, err
			}
			defer r0.Release()
			ref0 = r0.Bytes()
		}
		if err := r.checkBlock(i, c, b); err != nil {
			return nil, err
		}
		out := r.cache.Alloc(c.BlockLen(b))
		if err := c.DecodeBlockRef(out, b, ref0); err != nil {
			return nil, fmt.Errorf("%s: chunk %d: %w", r.name, i, err)
		}
		return out, nil
	})
}

// checkBlock refuses to decode a block larger than the reader's bound:
// its size comes from the file, and decoding it would allocate it whole
// (for every READ, if it does not fit the cache).
func (r *ChunkReader) checkBlock(i int, c *blosc.Chunk, b int) error {
	if n := c.BlockLen(b); n > r.maxBlock || (b > 0 && c.NeedsBlock0() && c.BlockLen(0) > r.maxBlock) {
		return fmt.Errorf("%s: chunk %d: block %d: %w: a decoded block of %d bytes exceeds the %d-byte limit (raise the cache size)", r.name, i, b, ErrUnsupported, max(n, c.BlockLen(0)), r.maxBlock)
	}
	return nil
}

// Streamer is implemented by containers that serve sequential readers
// (each ChunkReader, so every container of this package's formats): see
// ChunkReader.ReadAtOnce and ChunkReader.Prefetch.
type Streamer interface {
	ReadAtOnce(p []byte, off int64) (int, error)
	Prefetch(off, n int64, reader func() int64) error
}

var _ Streamer = (*ChunkReader)(nil)

// readMode says what a read does with the blocks it touches.
type readMode int

const (
	readKeep readMode = iota // copy out, leave the blocks cached (ReadAt)
	readOnce                 // copy out, drop blocks once read whole (ReadAtOnce)
	readWarm                 // decode into the cache, copy nothing (Prefetch)
)

// piece is one block's share of a read.
type piece struct {
	chunk, block int
	c            *blosc.Chunk
	gen          uint64 // the parse of the chunk c is
	from, n      int    // the byte range [from, from+n) of the block (n: of all wins)
	dst          []byte // where it goes; nil for readWarm and a gather
	// wins, when not nil, are the block's pieces of a gather (ReadRuns),
	// which follow one another in the block, each with where it goes;
	// rows is the number of their rows.
	wins []window
	rows int
	win0 int // where wins start in the gather's list, while it is built
	// planes is the item size of the byte planes that a gather's block
	// is cached as (blosc.DecodeBlockPlanes), 0 or 1 for its bytes.
	planes int
}

// end returns where the piece ends in its block.
func (pc *piece) end() int {
	if pc.wins != nil {
		return pc.wins[len(pc.wins)-1].end()
	}
	return pc.from + pc.n
}

// ReadAt reads plain bytes. It is safe for concurrent use.
func (r *ChunkReader) ReadAt(p []byte, off int64) (int, error) {
	return r.read(p, off, readKeep)
}

// ReadAtOnce is ReadAt for a sequential reader that keeps what it reads
// (the kernel's page cache behind a mount): blocks such reads have read
// all of are dropped from the cache, and their memory reused, so that streaming
// a large file neither pushes out the blocks other readers use nor
// spreads over fresh memory.
func (r *ChunkReader) ReadAtOnce(p []byte, off int64) (int, error) {
	return r.read(p, off, readOnce)
}

// Prefetch decodes the blocks holding [off, off+n) into the cache,
// several in parallel, so that reads that follow find them there. It
// copies nothing and does nothing without a cache. reader, when not nil,
// returns where the reader being served has got to: blocks that end
// before it are skipped, for that reader has decoded them itself (and
// with ReadAtOnce dropped them).
func (r *ChunkReader) Prefetch(off, n int64, reader func() int64) error {
	if _, none := r.cache.(NoCache); none || off < 0 {
		return nil
	}
	size := r.Size()
	if off >= size || n <= 0 {
		return nil
	}
	n = min(n, size-off)
	for n > 0 {
		pieces, done, err := r.split(nil, off, n, nil)
		if err != nil {
			return err
		}
		if err := r.fill(pieces, readWarm, reader); err != nil {
			return err
		}
		off, n = off+done, n-done
	}
	return nil
}

// A Run is one piece of a gather (ChunkReader.ReadRuns): the N plain
// bytes at offset At go to p[To:To+N]. A run of Rows > 1 is that many
// rows of N bytes at strides of at least N: row r is the N bytes at
// At+r*AtStride, to p[To+r*ToStride:]. The rows of an N-D array's chunk
// that one read of its view takes are one run (AtStride the chunk's row
// length in bytes, ToStride the view's), served by one call of the
// unshuffle kernel rather than a call per row.
type Run struct{ At, To, N, Rows, AtStride, ToStride int64 }

// A window is where a gather's rows of one block go: rows rows of n
// bytes, row r the block's bytes from from+r*skip on, to
// dst[r*stride:r*stride+n]; dst runs from the first row's place to the
// end of the last's.
type window struct {
	from, n            int
	rows, skip, stride int
	dst                []byte
}

// end returns where the window's last row ends in the block.
func (w window) end() int { return w.from + (w.rows-1)*w.skip + w.n }

// row returns where row r goes.
func (w window) row(r int) []byte { return w.dst[r*w.stride : r*w.stride+w.n] }

// ReadRuns copies the plain bytes of each run into p: a gather, such as
// the rows of an N-D array's chunks that one read of its C-order view
// takes. The runs of one block should be adjacent in runs (those of a
// chunk together, in the order of their offsets): a block that several
// adjacent runs read is pinned once for all of them. A sequential reader
// (once, as ReadAtOnce) that takes all of a block nobody has decoded,
// and a random reader that takes a small part of a large one, decode
// the runs straight into place (blosc.Chunk.DecodeBlockWindows). A
// sequential reader that takes part of a block whose other bytes are at
// most maxRest decodes its runs into place too, and keeps those bytes as
// rests for the calls that take them (see rest). Other blocks are
// decoded into the cache, where the calls that read their other runs
// find them (the rows of a chunk of a 2-D array lie in many reads of its
// view, a few kilobytes in each): as byte planes, each run unshuffled
// from them into place, where the runs are long enough. A block that
// one run reads alone is read as ReadAt reads it. The missing blocks of
// a call decode in parallel; those that such sequential reads have read
// all of leave the cache. It is safe for concurrent use.
func (r *ChunkReader) ReadRuns(p []byte, runs []Run, once bool) error {
	mode := readKeep
	if once {
		mode = readOnce
	}
	return r.readRuns(p, runs, mode)
}

// WarmRuns decodes the blocks that ReadRuns(p, runs, true) would read
// into the cache, as ReadRuns would keep them (byte planes where its
// windows are long rows), and copies nothing: a sequential reader's
// gathers that follow find them there (see Streamer). p is only the
// bounds of the runs' destinations.
func (r *ChunkReader) WarmRuns(p []byte, runs []Run) error {
	if _, none := r.cache.(NoCache); none {
		return nil
	}
	return r.readRuns(p, runs, readWarm)
}

func (r *ChunkReader) readRuns(p []byte, runs []Run, mode readMode) error {
	size := r.Size()
	g := gathers.Get().(*gather)
	defer g.put()
	ci, cstart, cend := -1, int64(0), int64(0)
	var c *blosc.Chunk
	var gen uint64
	// chunkOf makes c the chunk holding plain offset at (ci, its parse
	// gen, its plain bytes [cstart, cend)).
	chunkOf := func(at int64) error {
		if at >= cstart && at < cend {
			return nil
		}
		i := r.chunkAt(at)
		cc, cg, err := r.chunk(i)
		if err != nil {
			return err
		}
		cstart, cend = r.src.ChunkOffset(i), r.src.ChunkOffset(i+1)
		if int64(cc.Nbytes) != cend-cstart {
			return fmt.Errorf("%s: chunk %d: %w: header says %d bytes, index %d", r.name, i, ErrFormat, cc.Nbytes, cend-cstart)
		}
		ci, c, gen = i, cc, cg
		return nil
	}
	for _, run := range runs {
		if run.N <= 0 {
			continue
		}
		rows := max(run.Rows, 1)
		if run.At < 0 || run.At > size-run.N || run.To < 0 || run.To > int64(len(p))-run.N ||
			rows > 1 && (run.AtStride < run.N || run.ToStride < run.N ||
				rows-1 > (size-run.N-run.At)/run.AtStride || rows-1 > (int64(len(p))-run.N-run.To)/run.ToStride) {
			return fmt.Errorf("%s: run of %d rows of %d bytes from %d (stride %d) to %d (stride %d): outside the %d plain bytes or the %d-byte buffer, or rows that overlap",
				r.name, rows, run.N, run.At, run.AtStride, run.To, run.ToStride, size, len(p))
		}
		for row := int64(0); row < rows; {
			at, to := run.At+row*run.AtStride, run.To+row*run.ToStride
			if err := chunkOf(at); err != nil {
				return err
			}
			in := at - cstart
			b := c.BlockAt(in)
			bstart := c.BlockOffset(b)
			bend := bstart + int64(c.BlockLen(b))
			if in < bstart || in >= bend {
				return fmt.Errorf("%s: chunk %d: %w: no block holds offset %d", r.name, ci, ErrFormat, in)
			}
			if in+run.N <= bend {
				// The rows from this one on that lie in this block.
				k := int64(1)
				if rows-row > 1 {
					k = min(rows-row, (bend-run.N-in)/run.AtStride+1)
				}
				w := window{from: int(in - bstart), n: int(run.N), rows: int(k), skip: int(run.AtStride), stride: int(run.ToStride)}
				w.dst = p[to : to+(k-1)*run.ToStride+run.N : to+(k-1)*run.ToStride+run.N]
				if err := g.add(r, p, mode, ci, b, c, gen, w); err != nil {
					return err
				}
				row += k
				continue
			}
			// A row across the end of its block: its pieces one by one.
			for n := run.N; n > 0; {
				if err := chunkOf(at); err != nil {
					return err
				}
				in := at - cstart
				b := c.BlockAt(in)
				from := in - c.BlockOffset(b)
				k := min(int64(c.BlockLen(b))-from, n)
				if k <= 0 {
					return fmt.Errorf("%s: chunk %d: %w: no block holds offset %d", r.name, ci, ErrFormat, in)
				}
				w := window{from: int(from), n: int(k), rows: 1, dst: p[to : to+k : to+k]}
				if err := g.add(r, p, mode, ci, b, c, gen, w); err != nil {
					return err
				}
				at, to, n = at+k, to+k, n-k
			}
			row++
		}
	}
	return g.flush(r, p, mode)
}

// add adds window w of block b of chunk ci (parsed as c) to the gather:
// to the last piece where that is the same block and w follows its last
// window there, else as a piece of its own (serving the pieces so far
// first when there are maxBatch of them).
func (g *gather) add(r *ChunkReader, p []byte, mode readMode, ci, b int, c *blosc.Chunk, gen uint64, w window) error {
	if l := len(g.pieces) - 1; l >= 0 && g.pieces[l].chunk == ci && g.pieces[l].block == b && g.pieces[l].c == c &&
		w.from >= g.wins[len(g.wins)-1].end() {
		g.pieces[l].n += w.rows * w.n
		g.pieces[l].rows += w.rows
	} else {
		if len(g.pieces) == maxBatch {
			if err := g.flush(r, p, mode); err != nil {
				return err
			}
		}
		g.pieces = append(g.pieces, piece{chunk: ci, block: b, c: c, gen: gen, n: w.rows * w.n, rows: w.rows, win0: len(g.wins)})
	}
	g.wins = append(g.wins, w)
	return nil
}

// planesMinRun is the least mean length of the windows of a gather
// whose block is cached as byte planes: each window is then unshuffled
// from them straight into place, where its block is otherwise
// unshuffled whole into the cache and each window copied out. A window
// of a few items costs more to unshuffle alone (a call of the kernel,
// 30-50 ns) than to copy; from rows of a few hundred bytes on (a 3-D
// float32 cube's chunks: 720 bytes), the planes spare the block's whole
// unshuffle.
const planesMinRun = 256

// gather is the scratch of a ReadRuns call: the pieces of the blocks it
// reads, and their windows.
type gather struct {
	pieces []piece
	wins   []window
}

var gathers = sync.Pool{New: func() any { return new(gather) }}

// put clears g (its pieces point into chunks and buffers) and pools it.
func (g *gather) put() {
	clear(g.pieces)
	clear(g.wins)
	g.pieces, g.wins = g.pieces[:0], g.wins[:0]
	if cap(g.wins) > 1<<16 { // a huge gather: do not keep its memory
		g.wins = nil
	}
	gathers.Put(g)
}

// flush serves the pieces gathered so far and starts afresh. A piece of
// one window is an ordinary piece (a part of a block, whose paths avoid
// the cache where they can); the others gather from their block, kept
// in the cache as its byte planes where it has them.
func (g *gather) flush(r *ChunkReader, p []byte, mode readMode) error {
	for k := range g.pieces {
		pc := &g.pieces[k]
		end := len(g.wins)
		if k+1 < len(g.pieces) {
			end = g.pieces[k+1].win0
		}
		wins := g.wins[pc.win0:end]
		pc.from = wins[0].from
		ts := 1
		if !pc.c.NeedsBlock0() {
			ts = pc.c.PlanesTypesize(pc.block)
		}
		planes := ts > 1 && r.cache.Contains(r.planesKey(pc.chunk, pc.block))
		switch {
		case len(wins) == 1 && wins[0].rows == 1 && !planes:
			pc.dst = wins[0].dst
		case planes:
			// One window is a gather too where its block is cached as
			// planes (the last row of a chunk the read before took the
			// rest of).
			pc.wins, pc.planes = wins, ts
		default:
			pc.wins = wins
			if ts > 1 && pc.n/pc.rows >= planesMinRun && !r.cache.Contains(r.key(pc.chunk, pc.block)) {
				pc.planes = ts
			}
		}
	}
	err := r.fill(g.pieces, mode, nil)
	clear(g.pieces)
	clear(g.wins)
	g.pieces, g.wins = g.pieces[:0], g.wins[:0]
	return err
}

func (r *ChunkReader) read(p []byte, off int64, mode readMode) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", r.name, off)
	}
	size := r.Size()
	if off >= size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := len(p)
	if int64(want) > size-off {
		p = p[:size-off]
	}
	var small [17]piece // a 1 MiB READ over 64 KiB blocks: no allocation
	for pos := int64(0); pos < int64(len(p)); {
		pieces, done, err := r.split(small[:0], off+pos, int64(len(p))-pos, p[pos:])
		if err != nil {
			return 0, err
		}
		if err := r.fill(pieces, mode, nil); err != nil {
			return 0, err
		}
		pos += done
	}
	if len(p) < want {
		return len(p), io.EOF
	}
	return len(p), nil
}

// split appends to pieces the block pieces of [off, off+n), which lies
// inside the plain size, up to maxBatch of them, and returns how many
// bytes they cover; p, when not nil, is where the n bytes go.
func (r *ChunkReader) split(pieces []piece, off, n int64, p []byte) ([]piece, int64, error) {
	pos := off
	done := int64(0)
	for start := len(pieces); done < n && len(pieces)-start < maxBatch; {
		i := r.chunkAt(pos)
		c, gen, err := r.chunk(i)
		if err != nil {
			return nil, 0, err
		}
		cstart := r.src.ChunkOffset(i)
		if int64(c.Nbytes) != r.src.ChunkOffset(i+1)-cstart {
			return nil, 0, fmt.Errorf("%s: chunk %d: %w: header says %d bytes, index %d", r.name, i, ErrFormat, c.Nbytes, r.src.ChunkOffset(i+1)-cstart)
		}
		in := pos - cstart
		b := c.BlockAt(in)
		from := int(in - c.BlockOffset(b))
		k := int(min(int64(c.BlockLen(b)-from), n-done))
		if k <= 0 {
			return nil, 0, fmt.Errorf("%s: chunk %d: %w: no block holds offset %d", r.name, i, ErrFormat, in)
		}
		pc := piece{chunk: i, block: b, c: c, gen: gen, from: from, n: k}
		if p != nil {
			pc.dst = p[done : done+int64(k)]
		}
		pieces = append(pieces, pc)
		done += int64(k)
		pos += int64(k)
	}
	return pieces, done, nil
}

// deliver copies a piece out of its pinned block and releases the block;
// in readOnce mode a block that such reads have now read all of is
// dropped (but not a block 0 that the chunk's other blocks need as delta
// reference).
func (r *ChunkReader) deliver(pc piece, blk *bcache.Ref, mode readMode) {
	switch {
	case mode == readWarm:
	case pc.planes > 1:
		for _, w := range pc.wins {
			blosc.UnshufflePlanesRows(w.dst, w.stride, blk.Bytes(), pc.planes, w.from, w.n, w.rows, w.skip)
		}
	case pc.wins != nil:
		b := blk.Bytes()
		for _, w := range pc.wins {
			for k := range w.rows {
				copy(w.row(k), b[w.from+k*w.skip:])
			}
		}
	default:
		copy(pc.dst, blk.Bytes()[pc.from:])
	}
	if mode == readOnce && blk.Consume(pc.n) && (pc.block > 0 || !pc.c.NeedsBlock0()) {
		r.cache.RemoveRef(r.pieceKey(pc), blk) // while pinned: not a reloaded copy
	}
	blk.Release()
}

// fillOne serves one piece. A piece that is a whole block is decoded
// straight into place when there is no cache, and for a sequential reader
// (readOnce) when the block is neither cached nor being decoded (by a
// read-ahead): such a reader would drop it from the cache at once, so
// going through the cache would only add a copy. A sequential reader's
// piece of a block that another read keeps a rest of is copied from it,
// and one that takes half of a block or more keeps the rest of the block
// (see rest). A warm piece whose block the reader has passed is skipped.
func (r *ChunkReader) fillOne(pc piece, mode readMode, reader func() int64) error {
	if err := r.failed(pc); err != nil {
		return err
	}
	err := r.fillPiece(pc, mode, reader)
	switch {
	case err == nil:
	case errors.Is(err, ErrStale):
		r.forget(pc.chunk, pc.c)
	default:
		r.rememberBad(pc, err)
	}
	return err
}

// failed returns the error of piece pc's block if it failed to decode
// before (in this parse of its chunk).
func (r *ChunkReader) failed(pc piece) error {
	if r.badN.Load() == 0 {
		return nil
	}
	r.badMu.Lock()
	defer r.badMu.Unlock()
	return r.bad[badKey{pc.chunk, pc.block, pc.gen}]
}

// rememberBad remembers that piece pc's block failed to decode with err,
// when err says so of its bytes: not a failure to read them (which a
// retry may not meet), nor the refusal of a block larger than the
// reader's bound (which costs nothing to find again). The container is
// one version of its file (a Zarr array's chunks, one version each: a
// chunk parsed anew is decoded anew), so a hostile block costs one
// decode, not one per read.
func (r *ChunkReader) rememberBad(pc piece, err error) {
	if !(errors.Is(err, blosc.ErrCorrupt) || errors.Is(err, blosc.ErrUnsupported)) ||
		blosc.ReadFailed(err) || Transient(err) || errors.Is(err, ErrUnsupported) {
		return
	}
	r.badMu.Lock()
	defer r.badMu.Unlock()
	if r.bad == nil {
		r.bad = map[badKey]error{}
	}
	k := badKey{pc.chunk, pc.block, pc.gen}
	if _, ok := r.bad[k]; !ok && len(r.bad) >= maxBadBlocks {
		for old := range r.bad {
			delete(r.bad, old)
			break
		}
	}
	r.bad[k] = err
	r.badN.Store(int32(len(r.bad)))
}

// forget drops chunk i, parsed as c, and its cached blocks: its stored
// bytes changed (ErrStale), and a later read parses it anew.
func (r *ChunkReader) forget(i int, c *blosc.Chunk) {
	r.mu.Lock()
	if cur, ok := r.chunks.Peek(i); ok && cur.c == c {
		r.chunks.Remove(i)
	}
	r.mu.Unlock()
	for b := range c.NumBlocks() {
		for _, k := range []BlockKey{r.key(i, b), r.planesKey(i, b)} {
			if ref, ok := r.cache.TryAcquire(k); ok {
				r.cache.RemoveRef(k, ref)
				ref.Release()
			}
		}
	}
}

// fillPiece is fillOne.
func (r *ChunkReader) fillPiece(pc piece, mode readMode, reader func() int64) error {
	if reader != nil && r.src.ChunkOffset(pc.chunk)+pc.c.BlockOffset(pc.block)+int64(pc.c.BlockLen(pc.block)) <= reader() {
		return nil
	}
	if pc.wins != nil {
		return r.fillGather(pc, mode)
	}
	// A sequential reader's read takes its part of a block from a rest
	// that another read keeps (see rest); when it takes half of a block
	// not cached or more, it decodes the block straight into place and
	// keeps the rest of it for the reads that take it.
	if mode == readOnce {
		bl := pc.c.BlockLen(pc.block)
		start := 2*pc.n >= bl && pc.n < bl && !pc.c.NeedsBlock0() && !r.cache.Contains(r.key(pc.chunk, pc.block))
		done, d, err := r.fromRest(pc, start)
		if done || err != nil {
			return err
		}
		if d != nil {
			t := time.Now()
			var ws [3]blosc.Window
			ws[0] = blosc.Window{From: pc.from, Dst: pc.dst}
			err := pc.c.DecodeBlockWindows(pc.block, d.windows(ws[:1]))
			d.finish(err)
			if err != nil {
				return fmt.Errorf("%s: chunk %d: %w", r.name, pc.chunk, err)
			}
			r.observe(bl, t)
			r.ranged.Add(1)
			return nil
		}
	}
	if r.partial(pc, mode) {
		if err := r.checkBlock(pc.chunk, pc.c, pc.block); err != nil {
			return err
		}
		t := time.Now()
		if err := pc.c.DecodeBlockRange(pc.dst, pc.block, pc.from); err != nil {
			return fmt.Errorf("%s: chunk %d: %w", r.name, pc.chunk, err)
		}
		r.observe(pc.n, t)
		r.ranged.Add(1)
		return nil
	}
	// (Not for a block 0 that the chunk's other blocks take as delta
	// reference: they would decode it again.)
	_, none := r.cache.(NoCache)
	direct := none && mode != readWarm && (pc.block == 0 || !pc.c.NeedsBlock0()) ||
		mode == readOnce && !pc.c.NeedsBlock0() && !r.cache.Contains(r.key(pc.chunk, pc.block))
	if direct && pc.from == 0 && pc.n == pc.c.BlockLen(pc.block) {
		if err := r.checkBlock(pc.chunk, pc.c, pc.block); err != nil {
			return err
		}
		obs, _ := r.cache.(DecodeObserver)
		var t time.Time
		if obs != nil {
			t = time.Now()
		}
		if err := pc.c.DecodeBlockRef(pc.dst, pc.block, nil); err != nil {
			return fmt.Errorf("%s: chunk %d: %w", r.name, pc.chunk, err)
		}
		if obs != nil {
			obs.Decoded(pc.n, time.Since(t))
		}
		r.direct.Add(1)
		return nil
	}
	blk, err := r.block(pc.chunk, pc.c, pc.block)
	if err != nil {
		return err
	}
	r.deliver(pc, blk, mode)
	return nil
}

// fillGather serves a piece of a gather: several windows of one block.
// A sequential reader (or one without a cache) that takes all of a block
// nobody has decoded, and a random reader that takes a small part of a
// large one (see partial), decode the windows straight into place. A
// sequential reader takes its windows from a rest that another read
// keeps of the block, or decodes them into place and keeps the block's
// other bytes as rests, when they are at most maxRest (see rest).
// Otherwise the block goes through the cache, as its byte planes where
// it has them, for the reads of its other windows to take: the rows of
// an N-D array's chunk lie in many reads of its view.
func (r *ChunkReader) fillGather(pc piece, mode readMode) error {
	bl := pc.c.BlockLen(pc.block)
	_, none := r.cache.(NoCache)
	uncached := !r.cache.Contains(r.key(pc.chunk, pc.block)) && !r.cache.Contains(r.planesKey(pc.chunk, pc.block))
	direct := mode != readWarm && !pc.c.NeedsBlock0() && (pc.n == bl && (mode == readOnce || none) && uncached ||
		r.partial(pc, mode))
	// A sequential reader's read takes its part of a block from a rest
	// that another read keeps (see rest); when it takes part of a block
	// not cached, all of it but maxRest bytes or fewer, it decodes the
	// block and keeps the rest of it for the reads that take it.
	var rd *restDecode
	if !direct && mode == readOnce {
		done, d, err := r.fromRest(pc, !pc.c.NeedsBlock0() && uncached)
		if done || err != nil {
			return err
		}
		rd = d
	}
	if direct || rd != nil {
		if rd == nil {
			if err := r.checkBlock(pc.chunk, pc.c, pc.block); err != nil {
				return err
			}
		}
		t := time.Now()
		ws := blockWindows.Get().(*[]blosc.Window)
		defer func() {
			if cap(*ws) <= 1<<16 { // a huge gather: do not keep its memory
				blockWindows.Put(ws)
			}
		}()
		*ws = (*ws)[:0]
		for _, w := range pc.wins {
			if w.rows > 1 {
				*ws = append(*ws, blosc.Window{From: w.from, Dst: w.dst, Rows: w.rows, N: w.n, Skip: w.skip, Stride: w.stride})
			} else {
				*ws = append(*ws, blosc.Window{From: w.from, Dst: w.row(0)})
			}
		}
		if rd != nil {
			*ws = rd.windows(*ws)
		}
		err := pc.c.DecodeBlockWindows(pc.block, *ws)
		clear(*ws)
		if rd != nil {
			rd.finish(err)
		}
		if err != nil {
			return fmt.Errorf("%s: chunk %d: %w", r.name, pc.chunk, err)
		}
		if rd != nil {
			r.observe(bl, t)
		} else {
			r.observe(pc.n, t)
		}
		if pc.n == bl {
			r.direct.Add(1)
		} else {
			r.ranged.Add(1)
		}
		return nil
	}
	var blk *bcache.Ref
	var err error
	if pc.planes > 1 {
		blk, err = r.planesBlock(pc.chunk, pc.c, pc.block)
	} else {
		blk, err = r.block(pc.chunk, pc.c, pc.block)
	}
	if err != nil {
		return err
	}
	r.deliver(pc, blk, mode)
	return nil
}

// observe reports n bytes decoded since t outside the cache to the
// cache's DecodeObserver, if it has one.
func (r *ChunkReader) observe(n int, t time.Time) {
	if obs, ok := r.cache.(DecodeObserver); ok {
		obs.Decoded(n, time.Since(t))
	}
}

// partial reports whether piece pc is decoded alone, straight into the
// read's buffer, instead of its whole block into the cache: a random
// reader's (or any reader's without a cache) small part of a large block
// that is neither cached nor being decoded, and that the reader has not
// decoded part of lately. Decoding 4 KiB of a 1 MiB block touches a few
// KiB of memory where the whole block fills a mebibyte of it, fresh
// memory for each new block of a random reader: on a virtual machine
// whose page faults cost 20-50 µs each, most of a cold read. A block read
// in part a second time decodes whole into the cache, so that a reader
// that comes back to a block pays at most one partial decode more.
func (r *ChunkReader) partial(pc piece, mode readMode) bool {
	bl := pc.c.BlockLen(pc.block)
	if mode == readWarm || pc.n == bl || pc.c.NeedsBlock0() {
		return false
	}
	_, none := r.cache.(NoCache)
	if none {
		return true
	}
	if mode != readKeep || bl < partMinBlock || pc.n > bl/partMaxShare {
		return false
	}
	k := r.key(pc.chunk, pc.block)
	if r.cache.Contains(k) || pc.wins != nil && r.cache.Contains(r.planesKey(pc.chunk, pc.block)) {
		return false
	}
	r.partMu.Lock()
	defer r.partMu.Unlock()
	for j := range min(r.partN, partsKept) {
		if r.parts[j] == k {
			r.parts[j] = BlockKey{Block: -1}
			return false
		}
	}
	r.parts[r.partN%partsKept] = k
	r.partN++
	return true
}

// fill serves each piece. Cached blocks are served at once; when several
// are missing they decode in parallel, bounded by the number of CPUs.
func (r *ChunkReader) fill(pieces []piece, mode readMode, reader func() int64) error {
	if len(pieces) == 1 && mode != readWarm {
		if mode == readOnce && r.takeRest(pieces[0]) {
			return nil
		}
		return r.fillOne(pieces[0], mode, nil)
	}
	var missing []piece
	for k, pc := range pieces {
		if mode == readOnce && r.takeRest(pc) {
			continue
		}
		if mode == readWarm {
			if r.cache.Contains(r.key(pc.chunk, pc.block)) || pc.planes > 1 && r.cache.Contains(r.planesKey(pc.chunk, pc.block)) {
				continue
			}
		} else if blk, ok := r.cache.TryAcquire(r.pieceKey(pc)); ok {
			r.deliver(pc, blk, mode)
			continue
		}
		if missing == nil {
			missing = pieces[k:k:len(pieces)] // reuse the array: k ≥ len(missing)
		}
		missing = append(missing, pc)
	}
	pieces = missing
	switch len(pieces) {
	case 0:
		return nil
	case 1:
		return r.fillOne(pieces[0], mode, reader)
	}
	return r.fillParallel(pieces, mode, reader)
}

// fillParallel serves the missing pieces of a read, several at once. The
// caller decodes too: a goroutine per piece, with the caller waiting for
// them all, cost a thread wake-up per piece (a mount's READs of two 512
// KiB zstd blocks took 440–527 µs on average, 368–411 µs since). Each
// goroutine takes the pieces of its own contiguous share of the read
// from the front, then, once its share is done, those left of the
// others' from the back: the pieces of one chunk (the rows of its part
// of an N-D view) stay with one goroutine, which writes its part of the
// read, and which decoded, in the read before, the blocks whose other
// rows this read takes (1-5 % of the CPU of reading an N-D view, where
// goroutines taking the next piece in turn wrote rows side by side).
// The goroutines take the pieces from a pooled copy, so that the
// caller's (a read's array on its stack) stay where they are.
func (r *ChunkReader) fillParallel(missing []piece, mode readMode, reader func() int64) error {
	wp := workPieces.Get().(*[]piece)
	pieces := append((*wp)[:0], missing...)
	defer func() {
		clear(pieces)
		*wp = pieces[:0]
		workPieces.Put(wp)
	}()
	errs := make([]error, len(pieces))
	nw := min(parallelism(), len(pieces))
	segs := make([]segment, nw)
	for w := range segs {
		segs[w].set(w*len(pieces)/nw, (w+1)*len(pieces)/nw)
	}
	work := func(w int) {
		for k, ok := segs[w].front(); ok; k, ok = segs[w].front() {
			errs[k] = r.fillOne(pieces[k], mode, reader)
		}
		for v := 1; v < nw; v++ {
			s := &segs[(w+v)%nw]
			for k, ok := s.back(); ok; k, ok = s.back() {
				errs[k] = r.fillOne(pieces[k], mode, reader)
			}
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < nw; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(w)
		}()
	}
	work(0)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// segment is the share [lo, hi) of a fillParallel call's pieces that
// one goroutine takes from the front, and the others, once their own
// are done, from the back.
type segment struct{ v atomic.Uint64 }

// set makes the share [lo, hi).
func (s *segment) set(lo, hi int) { s.v.Store(uint64(lo)<<32 | uint64(hi)) }

// front takes the first piece left.
func (s *segment) front() (int, bool) {
	for {
		old := s.v.Load()
		lo, hi := old>>32, old&(1<<32-1)
		if lo >= hi {
			return 0, false
		}
		if s.v.CompareAndSwap(old, (lo+1)<<32|hi) {
			return int(lo), true
		}
	}
}

// back takes the last piece left.
func (s *segment) back() (int, bool) {
	for {
		old := s.v.Load()
		lo, hi := old>>32, old&(1<<32-1)
		if lo >= hi {
			return 0, false
		}
		if s.v.CompareAndSwap(old, lo<<32|(hi-1)) {
			return int(hi - 1), true
		}
	}
}

// blockWindows holds the row windows that a gather's block decoded
// straight into place is given (blosc.Chunk.DecodeBlockWindows).
var blockWindows = sync.Pool{New: func() any { return new([]blosc.Window) }}

// workPieces holds the copies of the pieces that fillParallel's
// goroutines take.
var workPieces = sync.Pool{New: func() any { return new([]piece) }}
