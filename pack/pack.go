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
	"sync"
	"sync/atomic"

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
	ErrFormat = errors.New("pack: invalid container")
	// ErrChecksum reports a chunk whose stored checksum does not match.
	ErrChecksum = errors.New("pack: checksum mismatch")
	// ErrUnsupported reports a container version or feature not handled.
	ErrUnsupported = errors.New("pack: unsupported")
)

// BlockKey names one decoded block of one open container.
type BlockKey struct {
	Container uint64 // unique per opened container (see NewContainerID)
	Chunk     int64
	Block     int32
}

// BlockCache holds decoded blocks. GetOrLoad returns the block for key,
// calling load on a miss; concurrent misses for one key may share one
// load. The returned slice must not be modified by the caller. A
// BlockCache must be safe for concurrent use.
type BlockCache interface {
	GetOrLoad(key BlockKey, load func() ([]byte, error)) ([]byte, error)
}

// NoCache is a BlockCache that keeps nothing: every call decodes.
type NoCache struct{}

// GetOrLoad calls load.
func (NoCache) GetOrLoad(_ BlockKey, load func() ([]byte, error)) ([]byte, error) { return load() }

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

	mu     sync.Mutex
	chunks *simplelru.LRU[int, *chunkSlot] // parsed chunks, the most recently used
}

type chunkSlot struct {
	once sync.Once
	done atomic.Bool // set after once ran: skips building its closure
	c    *blosc.Chunk
	err  error
}

// maxParsedChunks bounds the number of parsed chunk headers kept.
const maxParsedChunks = 4096

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
	chunks, _ := simplelru.NewLRU[int, *chunkSlot](maxParsedChunks, nil)
	return &ChunkReader{src: src, cache: cache, id: NewContainerID(), name: name, chunks: chunks}
}

// Size returns the plain size.
func (r *ChunkReader) Size() int64 { return r.src.ChunkOffset(r.src.NumChunks()) }

// Chunk returns parsed chunk i.
func (r *ChunkReader) Chunk(i int) (*blosc.Chunk, error) {
	r.mu.Lock()
	s, ok := r.chunks.Get(i)
	if !ok {
		s = new(chunkSlot)
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
		})
	}
	return s.c, s.err
}

// chunkAt returns the chunk holding plain offset off (0 ≤ off < Size).
func (r *ChunkReader) chunkAt(off int64) int {
	lo, hi := 0, r.src.NumChunks()-1
	for lo < hi {
		mid := int(uint(lo+hi+1) >> 1)
		if r.src.ChunkOffset(mid) <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// CacheGetter is implemented by caches that can be asked without a
// loader; ChunkReader then builds no closure on a hit.
type CacheGetter interface {
	Get(key BlockKey) ([]byte, bool)
}

// block returns decoded block b of chunk i through the cache.
func (r *ChunkReader) block(i int, c *blosc.Chunk, b int) ([]byte, error) {
	if g, ok := r.cache.(CacheGetter); ok {
		if blk, ok := g.Get(BlockKey{r.id, int64(i), int32(b)}); ok {
			return blk, nil
		}
	}
	return r.cache.GetOrLoad(BlockKey{r.id, int64(i), int32(b)}, func() ([]byte, error) {
		var ref []byte
		if b > 0 && c.NeedsBlock0() {
			var err error
			if ref, err = r.block(i, c, 0); err != nil {
				return nil, err
			}
		}
		out := make([]byte, c.BlockLen(b))
		if err := c.DecodeBlockRef(out, b, ref); err != nil {
			return nil, fmt.Errorf("%s: chunk %d: %w", r.name, i, err)
		}
		return out, nil
	})
}

// piece is one block's share of a ReadAt.
type piece struct {
	chunk, block int
	c            *blosc.Chunk
	from         int // offset within the block
	dst          []byte
}

// ReadAt reads plain bytes. It is safe for concurrent use.
func (r *ChunkReader) ReadAt(p []byte, off int64) (int, error) {
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
	pieces := small[:0]
	pos := off
	done := 0
	for done < len(p) {
		i := r.chunkAt(pos)
		c, err := r.Chunk(i)
		if err != nil {
			return 0, err
		}
		cstart := r.src.ChunkOffset(i)
		if int64(c.Nbytes) != r.src.ChunkOffset(i+1)-cstart {
			return 0, fmt.Errorf("%s: chunk %d: %w: header says %d bytes, index %d", r.name, i, ErrFormat, c.Nbytes, r.src.ChunkOffset(i+1)-cstart)
		}
		in := pos - cstart
		b := c.BlockAt(in)
		from := int(in - c.BlockOffset(b))
		n := min(c.BlockLen(b)-from, len(p)-done)
		if n <= 0 {
			return 0, fmt.Errorf("%s: chunk %d: %w: no block holds offset %d", r.name, i, ErrFormat, in)
		}
		pieces = append(pieces, piece{i, b, c, from, p[done : done+n]})
		done += n
		pos += int64(n)
	}
	if err := r.fill(pieces); err != nil {
		return 0, err
	}
	if len(p) < want {
		return len(p), io.EOF
	}
	return len(p), nil
}

// fillOne copies one piece out of its decoded block. Without a cache, a
// piece that is a whole block is decoded straight into place.
func (r *ChunkReader) fillOne(pc piece) error {
	if _, none := r.cache.(NoCache); none && pc.from == 0 && len(pc.dst) == pc.c.BlockLen(pc.block) &&
		(pc.block == 0 || !pc.c.NeedsBlock0()) {
		if err := pc.c.DecodeBlockRef(pc.dst, pc.block, nil); err != nil {
			return fmt.Errorf("%s: chunk %d: %w", r.name, pc.chunk, err)
		}
		return nil
	}
	blk, err := r.block(pc.chunk, pc.c, pc.block)
	if err != nil {
		return err
	}
	copy(pc.dst, blk[pc.from:])
	return nil
}

// fill copies each piece out of its decoded block. Cached blocks are
// copied at once; when several are missing they decode in parallel,
// bounded by the number of CPUs.
func (r *ChunkReader) fill(pieces []piece) error {
	if len(pieces) == 1 {
		return r.fillOne(pieces[0])
	}
	if g, ok := r.cache.(CacheGetter); ok {
		missing := pieces[:0:0]
		for k, pc := range pieces {
			if blk, ok := g.Get(BlockKey{r.id, int64(pc.chunk), int32(pc.block)}); ok {
				copy(pc.dst, blk[pc.from:])
				continue
			}
			if missing == nil {
				missing = pieces[k:k:len(pieces)] // reuse the array: k ≥ len(missing)
			}
			missing = append(missing, pc)
		}
		pieces = missing
		if len(pieces) <= 1 {
			if len(pieces) == 1 {
				return r.fillOne(pieces[0])
			}
			return nil
		}
	}
	errs := make([]error, len(pieces))
	sem := make(chan struct{}, parallelism())
	var wg sync.WaitGroup
	for k, pc := range pieces {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = r.fillOne(pc)
			<-sem
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
