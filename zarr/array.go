// Package zarr reads Zarr v2 and v3 arrays and shows each as the bytes of
// the .npy file np.save writes for zarr.open(path)[:]: an NPY header
// followed by the array (C order; Fortran order for a v2 array stored in
// order F, as zarr returns it). It knows nothing of FUSE: objects come
// through a Store (a local directory, or an object store).
//
// An Array is an io.ReaderAt safe for concurrent use. A read decodes only
// the chunks it touches; a missing chunk is the fill value. Where a chunk
// is a Blosc chunk holding the array bytes as they are, only the Blosc
// blocks under the bytes asked for are decoded, through a
// pack.BlockCache. A sharded v3 array reads each shard's index once
// (cached) and then only the inner chunks a read touches, with ranged
// reads.
package zarr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/bloscfs/bloscfs/blosc"
	bcache "github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Array is an opened Zarr array, read as its NPY file.
type Array struct {
	Format string          // "zarr2" or "zarr3"
	Shape  []int64         // array shape
	Chunks []int64         // chunk shape (of the shards, for a sharded array)
	Codecs []string        // filters and codecs, in encoding order
	Attrs  json.RawMessage // user attributes (.zattrs, or zarr.json "attributes"); nil if none
	Path   string          // key prefix of the array in its store

	dt      dtype
	fortran bool // v2 order F: the view is in Fortran order
	fill    []byte
	key     func([]int64) string
	comp    compressor
	filters []filter
	v3      *chain

	store Store
	cache pack.BlockCache
	id    uint64
	hdr   []byte

	// The read grid, in the order of the view's bytes (reversed for a
	// Fortran-order view; inner chunks for a sharded array).
	gshape, gchunk []int64
	nchunksD       []int64
	nchunks        int64
	chunkBytes     int64
	dataSize       int64
	direct         bool // chunks are Blosc chunks of the plain bytes
	encSizes       []int64

	mu       sync.Mutex
	parsed   *simplelru.LRU[int64, *blosc.Chunk]
	indexes  *simplelru.LRU[int64, shardIndex]
	indexing map[int64]chan struct{} // shard indexes being read
}

// Open opens the array at path (a key prefix; "" for the store's root)
// from its zarr.json, or its .zarray and .zattrs. cache may be nil.
func Open(s Store, path string, cache pack.BlockCache) (*Array, error) {
	key := JoinKey(path, "zarr.json")
	b, err := s.Get(key)
	if err == nil {
		a, err := parseV3(b, key)
		if err != nil {
			return nil, err
		}
		return a.init(s, path, cache)
	}
	if !errors.Is(err, ErrNotExist) {
		return nil, err
	}
	key = JoinKey(path, ".zarray")
	if b, err = s.Get(key); err != nil {
		return nil, err
	}
	attrs, err := s.Get(JoinKey(path, ".zattrs"))
	if err != nil && !errors.Is(err, ErrNotExist) {
		return nil, err
	}
	return OpenV2Meta(s, path, b, attrs, cache)
}

// OpenV2Meta opens a v2 array from its .zarray and .zattrs documents
// (attrs may be nil), as consolidated metadata holds them.
func OpenV2Meta(s Store, path string, zarray, attrs []byte, cache pack.BlockCache) (*Array, error) {
	key := JoinKey(path, ".zarray")
	a, err := parseV2(zarray, key)
	if err != nil {
		return nil, err
	}
	if len(attrs) > 0 {
		if err := checkJSON(attrs, JoinKey(path, ".zattrs")); err != nil {
			return nil, err
		}
		a.Attrs = slices.Clone(attrs)
	}
	return a.init(s, path, cache)
}

// OpenV3Meta opens a v3 array from its zarr.json document.
func OpenV3Meta(s Store, path string, zarrJSON []byte, cache pack.BlockCache) (*Array, error) {
	a, err := parseV3(zarrJSON, JoinKey(path, "zarr.json"))
	if err != nil {
		return nil, err
	}
	return a.init(s, path, cache)
}

func (a *Array) init(s Store, path string, cache pack.BlockCache) (*Array, error) {
	if cache == nil {
		cache = pack.NoCache{}
	}
	a.store, a.cache, a.Path, a.id = s, cache, path, pack.NewContainerID()
	nd := len(a.Shape)
	a.gshape, a.gchunk = slices.Clone(a.Shape), slices.Clone(a.Chunks)
	if a.v3 != nil && a.v3.shard != nil {
		a.gchunk = slices.Clone(a.v3.shard.inner)
	}
	if a.fortran {
		slices.Reverse(a.gshape)
		slices.Reverse(a.gchunk)
	}
	a.nchunksD = make([]int64, nd)
	a.nchunks = 1
	a.chunkBytes = int64(a.dt.size)
	a.dataSize = int64(a.dt.size)
	for d := range nd {
		a.nchunksD[d] = (a.gshape[d] + a.gchunk[d] - 1) / a.gchunk[d]
		a.nchunks *= a.nchunksD[d] // bounded: shape*itemsize ≤ MaxArrayBytes
		a.chunkBytes *= a.gchunk[d]
		a.dataSize *= a.gshape[d]
	}
	// Sizes through the v2 filter pipeline, from the plain chunk back to
	// what the compressor must produce.
	a.encSizes = make([]int64, len(a.filters)+1)
	a.encSizes[len(a.filters)] = a.chunkBytes
	for i := len(a.filters) - 1; i >= 0; i-- {
		n := a.filters[i].encodedSize(a.encSizes[i+1])
		if n < 0 || n > MaxChunkBytes {
			return nil, fmt.Errorf("%s: %w: filter %s does not fit %d-byte chunks", JoinKey(path, ".zarray"), ErrFormat, a.filters[i].name(), a.chunkBytes)
		}
		a.encSizes[i] = n
	}
	switch {
	case a.v3 != nil:
		a.direct = a.v3.direct()
	default:
		a.direct = a.comp != nil && a.comp.bloscChunk() && len(a.filters) == 0
	}
	a.parsed, _ = simplelru.NewLRU[int64, *blosc.Chunk](64, nil)
	a.indexes, _ = simplelru.NewLRU[int64, shardIndex](64, nil)
	a.hdr = frame.NPYHeaderOrder(a.dt.descr, a.Shape, a.fortranHeader())
	return a, nil
}

// fortranHeader reports whether np.save writes the array with
// fortran_order True: an F-order array that is not also C-contiguous (at
// least two dimensions longer than 1, and no empty one).
func (a *Array) fortranHeader() bool {
	if !a.fortran {
		return false
	}
	long := 0
	for _, d := range a.Shape {
		if d == 0 {
			return false
		}
		if d > 1 {
			long++
		}
	}
	return long > 1
}

// Descr returns the NPY 'descr' literal of the view.
func (a *Array) Descr() string { return a.dt.descr }

// Fortran reports whether the view is in Fortran order.
func (a *Array) Fortran() bool { return a.fortranHeader() }

// Header returns the NPY header.
func (a *Array) Header() []byte { return slices.Clone(a.hdr) }

// Size returns the size of the NPY view.
func (a *Array) Size() int64 { return int64(len(a.hdr)) + a.dataSize }

// NumChunks returns the number of chunks (of inner chunks for a sharded
// array) of the grid.
func (a *Array) NumChunks() int64 { return a.nchunks }

// ChunkBytes returns the plain size of one chunk (inner chunk).
func (a *Array) ChunkBytes() int64 { return a.chunkBytes }

// Info describes the array as a pack container.
func (a *Array) Info() pack.Info {
	in := pack.Info{Format: a.Format, Size: a.Size(), Chunks: int(min(a.nchunks, 1<<31-1)),
		ChunkSize: a.chunkBytes, Typesize: a.dt.size, Clevel: -1}
	if len(a.Codecs) > 0 {
		in.Codec = a.Codecs[len(a.Codecs)-1]
	}
	return in
}

// chunkKey returns the store key of the chunk (shard) at grid coordinates
// c (in the view's order).
func (a *Array) chunkKey(c []int64) string {
	cc := slices.Clone(c)
	if a.fortran {
		slices.Reverse(cc)
	}
	return JoinKey(a.Path, a.key(cc))
}

// ReadAt reads bytes of the NPY view.
func (a *Array) ReadAt(p []byte, off int64) (int, error) {
	return frame.ReadNPYAt(a.Path, a.hdr, a.Size(), p, off, a.readData)
}

// run is a piece of a read: n bytes at offset at of chunk ci go to
// dst[to:].
type run struct {
	ci     int64
	at, to int64
	n      int64
}

// maxRuns bounds the run table of one pass of readData.
const maxRuns = 1 << 16

// readData reads the array bytes [off, off+len(p)).
func (a *Array) readData(p []byte, off int64) error {
	it := int64(a.dt.size)
	nd := len(a.gshape)
	if nd == 0 {
		return a.serve(p, 0, []run{{0, off, 0, int64(len(p))}})
	}
	g := make([]int64, nd)
	rem := off / it
	skip := off % it
	for d := nd - 1; d >= 0; d-- {
		g[d] = rem % a.gshape[d]
		rem /= a.gshape[d]
	}
	done := int64(0)
	runs := make([]run, 0, 64)
	for done < int64(len(p)) {
		runs = runs[:0]
		for done < int64(len(p)) && len(runs) < maxRuns {
			var ci, at int64
			for d := range nd {
				c := g[d] / a.gchunk[d]
				ci = ci*a.nchunksD[d] + c
				at = at*a.gchunk[d] + (g[d] - c*a.gchunk[d])
			}
			l := nd - 1
			n := min(a.gshape[l]-g[l], a.gchunk[l]-g[l]%a.gchunk[l])
			b := min(n*it-skip, int64(len(p))-done)
			r := run{ci, at*it + skip, done, b}
			if k := len(runs) - 1; k >= 0 && runs[k].ci == ci && runs[k].at+runs[k].n == r.at && runs[k].to+runs[k].n == r.to {
				runs[k].n += b
			} else {
				runs = append(runs, r)
			}
			done += b
			skip = 0
			g[l] += n
			for d := l; d > 0 && g[d] >= a.gshape[d]; d-- {
				g[d] = 0
				g[d-1]++
			}
		}
		if err := a.serveRuns(p, runs); err != nil {
			return err
		}
	}
	return nil
}

// serveRuns serves runs grouped by chunk, several chunks in parallel.
func (a *Array) serveRuns(p []byte, runs []run) error {
	slices.SortStableFunc(runs, func(x, y run) int {
		switch {
		case x.ci < y.ci:
			return -1
		case x.ci > y.ci:
			return 1
		}
		return 0
	})
	var groups [][]run
	for i := 0; i < len(runs); {
		j := i + 1
		for j < len(runs) && runs[j].ci == runs[i].ci {
			j++
		}
		groups = append(groups, runs[i:j])
		i = j
	}
	if len(groups) == 1 {
		return a.serve(p, groups[0][0].ci, groups[0])
	}
	errs := make([]error, len(groups))
	sem := make(chan struct{}, max(runtime.GOMAXPROCS(0), 1))
	var wg sync.WaitGroup
	for k, g := range groups {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = a.serve(p, g[0].ci, g)
			<-sem
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// coords returns the grid coordinates of chunk ci.
func (a *Array) coords(ci int64) []int64 {
	c := make([]int64, len(a.nchunksD))
	for d := len(c) - 1; d >= 0; d-- {
		c[d] = ci % a.nchunksD[d]
		ci /= a.nchunksD[d]
	}
	return c
}

// fillRuns writes the fill value into the runs.
func (a *Array) fillRuns(p []byte, runs []run) {
	it := int64(len(a.fill))
	for _, r := range runs {
		dst := p[r.to : r.to+r.n]
		phase := r.at % it
		k := copy(dst, a.fill[phase:])
		for k < len(dst) {
			k += copy(dst[k:], a.fill)
		}
	}
}

// errMissing tells a loader's caller that the chunk is not stored.
var errMissing = errors.New("missing chunk")

// serve copies the runs of chunk ci.
func (a *Array) serve(p []byte, ci int64, runs []run) error {
	if a.direct {
		if r, ok := a.cache.TryAcquire(pack.BlockKey{Container: a.id, Chunk: ci, Block: -1}); ok {
			copyRuns(p, runs, r.Bytes())
			r.Release()
			return nil
		}
		err := a.serveBlocks(p, ci, runs)
		if !errors.Is(err, errNotBlockwise) {
			return err
		}
	}
	ref, err := a.cache.Acquire(pack.BlockKey{Container: a.id, Chunk: ci, Block: -1}, func() ([]byte, error) {
		return a.loadChunk(ci)
	})
	if errors.Is(err, errMissing) {
		a.fillRuns(p, runs)
		return nil
	}
	if err != nil {
		return err
	}
	copyRuns(p, runs, ref.Bytes())
	ref.Release()
	return nil
}

func copyRuns(p []byte, runs []run, chunk []byte) {
	for _, r := range runs {
		copy(p[r.to:r.to+r.n], chunk[r.at:])
	}
}

var errNotBlockwise = errors.New("chunk is not decodable block by block")

// blocksOf returns the parsed Blosc chunk ci (nil: missing).
func (a *Array) blocksOf(ci int64) (*blosc.Chunk, error) {
	a.mu.Lock()
	c, ok := a.parsed.Get(ci)
	a.mu.Unlock()
	if ok {
		return c, nil
	}
	key := a.chunkKey(a.coords(ci))
	raw, err := a.store.Get(key)
	if errors.Is(err, ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c, err = blosc.NewChunkBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", key, ErrCorrupt, err)
	}
	if int64(c.Nbytes) != a.chunkBytes {
		return nil, fmt.Errorf("%s: %w: blosc chunk holds %d bytes, want %d", key, ErrCorrupt, c.Nbytes, a.chunkBytes)
	}
	if c.NeedsBlock0() {
		return nil, errNotBlockwise
	}
	a.mu.Lock()
	a.parsed.Add(ci, c)
	a.mu.Unlock()
	return c, nil
}

// serveBlocks serves runs of a Blosc chunk by decoding only the blocks
// they touch, each through the block cache.
func (a *Array) serveBlocks(p []byte, ci int64, runs []run) error {
	c, err := a.blocksOf(ci)
	if err != nil {
		return err
	}
	if c == nil {
		a.fillRuns(p, runs)
		return nil
	}
	// Decode the blocks the runs touch that the cache lacks, in parallel.
	var todo []int
	for _, r := range runs {
		for b := c.BlockAt(r.at); b < c.NumBlocks() && c.BlockOffset(b) < r.at+r.n; b++ {
			if !a.cache.Contains(pack.BlockKey{Container: a.id, Chunk: ci, Block: int32(b)}) &&
				(len(todo) == 0 || todo[len(todo)-1] != b) {
				todo = append(todo, b)
			}
		}
	}
	slices.Sort(todo)
	todo = slices.Compact(todo)
	refs := make([]*bcache.Ref, len(todo))
	defer func() {
		for _, r := range refs {
			if r != nil {
				r.Release()
			}
		}
	}()
	if len(todo) > 1 {
		errs := make([]error, len(todo))
		sem := make(chan struct{}, max(runtime.GOMAXPROCS(0), 1))
		var wg sync.WaitGroup
		for k, b := range todo {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				refs[k], errs[k] = a.block(c, ci, b)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	for _, r := range runs {
		for at, to, n := r.at, r.to, r.n; n > 0; {
			b := c.BlockAt(at)
			bo := c.BlockOffset(b)
			var ref *bcache.Ref
			own := false
			if i, ok := slices.BinarySearch(todo, b); ok && refs[i] != nil {
				ref = refs[i]
			} else if ref, err = a.block(c, ci, b); err != nil {
				return err
			} else {
				own = true
			}
			k := int64(copy(p[to:to+n], ref.Bytes()[at-bo:]))
			if own {
				ref.Release()
			}
			at, to, n = at+k, to+k, n-k
		}
	}
	return nil
}

// block returns block b of Blosc chunk ci, decoded through the cache.
func (a *Array) block(c *blosc.Chunk, ci int64, b int) (*bcache.Ref, error) {
	return a.cache.Acquire(pack.BlockKey{Container: a.id, Chunk: ci, Block: int32(b)}, func() ([]byte, error) {
		dst := a.cache.Alloc(c.BlockLen(b))[:c.BlockLen(b)]
		if err := c.DecodeBlock(dst, b); err != nil {
			return nil, fmt.Errorf("%s: %w: %w", a.chunkKey(a.coords(ci)), ErrCorrupt, err)
		}
		return dst, nil
	})
}

// loadChunk reads and decodes chunk ci whole (errMissing: not stored).
func (a *Array) loadChunk(ci int64) ([]byte, error) {
	c := a.coords(ci)
	if a.v3 != nil && a.v3.shard != nil {
		return a.loadInner(c)
	}
	key := a.chunkKey(c)
	raw, err := a.store.Get(key)
	if errors.Is(err, ErrNotExist) {
		return nil, errMissing
	}
	if err != nil {
		return nil, err
	}
	var out []byte
	if a.v3 != nil {
		out, err = a.v3.decode(raw)
	} else {
		out, err = a.decodeV2(raw)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return out, nil
}

// decodeV2 runs the v2 pipeline: the compressor, then the filters in
// reverse order.
func (a *Array) decodeV2(raw []byte) ([]byte, error) {
	b := raw
	var err error
	if a.comp != nil {
		if b, err = a.comp.decompress(raw, a.encSizes[0]); err != nil {
			return nil, err
		}
	} else {
		b = slices.Clone(raw)
	}
	if int64(len(b)) != a.encSizes[0] {
		return nil, fmt.Errorf("%w: chunk decodes to %d bytes, want %d", ErrCorrupt, len(b), a.encSizes[0])
	}
	for i := len(a.filters) - 1; i >= 0; i-- {
		out := make([]byte, a.encSizes[i+1])
		if err := a.filters[i].decode(out, b); err != nil {
			return nil, fmt.Errorf("filter %s: %w", a.filters[i].name(), err)
		}
		b = out
	}
	return b, nil
}

// loadInner reads one inner chunk of a shard: the shard's index (cached),
// then a ranged read of the inner chunk.
func (a *Array) loadInner(c []int64) ([]byte, error) {
	s := a.v3.shard
	sc := make([]int64, len(c))
	var sci, inner int64
	for d := range c {
		sc[d] = c[d] / s.per[d]
		sci = sci*((a.nchunksD[d]+s.per[d]-1)/s.per[d]) + sc[d]
		inner = inner*s.per[d] + (c[d] - sc[d]*s.per[d])
	}
	key := JoinKey(a.Path, a.key(sc))
	idx, err := a.shardIndex(sci, key)
	if err != nil {
		return nil, err
	}
	if idx == nil {
		return nil, errMissing
	}
	off, n := idx[2*inner], idx[2*inner+1]
	if off == 1<<64-1 && n == 1<<64-1 {
		return nil, errMissing
	}
	raw, err := a.store.GetRange(key, int64(off), int64(n))
	if err != nil {
		if errors.Is(err, ErrNotExist) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%s: %w: inner chunk %d at [%d,+%d) past the shard's end: %w", key, ErrCorrupt, inner, off, n, err)
		}
		return nil, err
	}
	out, err := s.chain.decode(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: inner chunk %d: %w", key, inner, err)
	}
	return out, nil
}

// shardIndex returns the decoded index of shard sci (nil: no shard).
// Concurrent readers of one shard wait for one read of its index.
func (a *Array) shardIndex(sci int64, key string) (shardIndex, error) {
	for {
		a.mu.Lock()
		idx, ok := a.indexes.Get(sci)
		if ok {
			a.mu.Unlock()
			return idx, nil
		}
		wait, busy := a.indexing[sci]
		if !busy {
			if a.indexing == nil {
				a.indexing = map[int64]chan struct{}{}
			}
			done := make(chan struct{})
			a.indexing[sci] = done
			a.mu.Unlock()
			idx, err := a.readShardIndex(sci, key)
			a.mu.Lock()
			delete(a.indexing, sci)
			a.mu.Unlock()
			close(done)
			return idx, err
		}
		a.mu.Unlock()
		<-wait
	}
}

// readShardIndex reads, checks and caches the index of shard sci.
func (a *Array) readShardIndex(sci int64, key string) (shardIndex, error) {
	s := a.v3.shard
	n := s.indexSize()
	off := -1 * int64(1)
	if s.atStart {
		off = 0
	}
	b, err := a.store.GetRange(key, off, n)
	if errors.Is(err, ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%s: %w: shard shorter than its %d-byte index", key, ErrCorrupt, n)
		}
		return nil, err
	}
	idx, err := s.parseIndex(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	a.mu.Lock()
	a.indexes.Add(sci, idx)
	a.mu.Unlock()
	return idx, nil
}

// Describe returns what the array's user.bloscfs.* attributes show
// beyond pack.Info: format, codecs, shape, chunk shape, chunk count.
func (a *Array) Describe() map[string]string {
	dims := func(v []int64) string {
		s := make([]string, len(v))
		for i, d := range v {
			s[i] = strconv.FormatInt(d, 10)
		}
		return strings.Join(s, ",")
	}
	m := map[string]string{
		"format":     a.Format,
		"codecs":     strings.Join(a.Codecs, ","),
		"shape":      dims(a.Shape),
		"chunkshape": dims(a.Chunks),
		"chunks":     strconv.FormatInt(a.nchunks, 10),
		"dtype":      a.dt.descr,
	}
	if a.v3 != nil && a.v3.shard != nil {
		m["innerchunkshape"] = dims(a.v3.shard.inner)
	}
	return m
}
