// Package zarr reads Zarr v2 and v3 arrays and shows each as the bytes of
// the .npy file np.save writes for zarr.open(path)[:]: an NPY header
// followed by the array (C order; Fortran order for a v2 array stored in
// order F, as zarr returns it). It knows nothing of FUSE: objects come
// through a Store (a local directory, or an object store).
//
// An Array is an io.ReaderAt safe for concurrent use. A read decodes only
// the chunks it touches; a missing chunk is the fill value. Where a chunk
// is a Blosc chunk holding the array bytes as they are, the chunks are
// read through a pack.ChunkReader, as the chunks of a .b2frame are: only
// the Blosc blocks under the bytes asked for are decoded, through a
// pack.BlockCache, several in parallel, and a sequential reader
// (ReadAtOnce) decodes whole blocks straight into its buffer and drops
// the blocks it has read from the cache. A read of an array chunked in
// more than one dimension takes rows of many chunks: it is one gather of
// them (pack.ChunkReader.ReadRuns), each block pinned once per read and
// decoded once for all the reads that take its rows. A sharded v3 array
// reads each shard's index once (cached) and then only the inner chunks
// a read touches, with ranged reads.
package zarr

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/npy"
	"github.com/bloscfs/bloscfs/pack"
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

	// cr reads the chunks of a direct array, laid end to end in grid
	// order (chunk i at i*chunkBytes: the "chunk space"); nil for other
	// arrays. contig reports that the chunk space is the view's data
	// itself: each chunk is one run of the view (chunks split the
	// slowest dimension only), so a read of the view is one read of cr.
	cr       *pack.ChunkReader
	contig   bool
	maxBlock int // blocks larger than this make a chunk decode whole (errWholeChunk)

	rawMax int64  // the largest encoded chunk (of a chunk not sharded)
	meta   uint64 // a hash of the metadata document: names the array in failures
}

// metaSeed seeds the hashes of metadata documents.
var metaSeed = maphash.MakeSeed()

// Open opens the array at path (a key prefix; "" for the store's root)
// from its zarr.json, or its .zarray and .zattrs. cache may be nil.
func Open(s Store, path string, cache pack.BlockCache) (*Array, error) {
	key := JoinKey(path, "zarr.json")
	b, err := GetMeta(s, key)
	if err == nil {
		return OpenV3Meta(s, path, b, cache)
	}
	if !errors.Is(err, ErrNotExist) {
		return nil, err
	}
	key = JoinKey(path, ".zarray")
	if b, err = GetMeta(s, key); err != nil {
		return nil, err
	}
	attrs, err := GetMeta(s, JoinKey(path, ".zattrs"))
	if err != nil && !errors.Is(err, ErrNotExist) {
		return nil, err
	}
	return OpenV2Meta(s, path, b, attrs, cache)
}

// GetMeta reads a metadata document (.zarray, .zattrs, .zgroup,
// .zmetadata, zarr.json) of at most MaxMetaSize bytes: a larger one is
// ErrFormat, and is not read.
func GetMeta(s Store, key string) ([]byte, error) {
	b, err := s.Get(key, MaxMetaSize)
	if errors.Is(err, ErrTooLarge) {
		return nil, fmt.Errorf("%w: metadata document: %w", ErrFormat, err)
	}
	return b, err
}

// OpenV2Meta opens a v2 array from its .zarray and .zattrs documents
// (attrs may be nil), as consolidated metadata holds them.
func OpenV2Meta(s Store, path string, zarray, attrs []byte, cache pack.BlockCache) (*Array, error) {
	key := JoinKey(path, ".zarray")
	a, err := parseV2(zarray, key)
	if err != nil {
		return nil, err
	}
	a.meta = maphash.Bytes(metaSeed, zarray)
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
	a.meta = maphash.Bytes(metaSeed, zarrJSON)
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
		a.rawMax = a.v3.raw
	default:
		a.direct = a.comp != nil && a.comp.bloscChunk() && len(a.filters) == 0
		a.rawMax = a.encSizes[0]
		if a.comp != nil {
			a.rawMax = a.comp.maxEncoded(a.encSizes[0])
		}
	}
	if a.direct && a.chunkBytes <= maxBloscChunk && a.nchunks <= math.MaxInt64/a.chunkBytes {
		name := path
		if name == "" {
			name = "array"
		}
		a.cr = pack.NewChunkReader(name, chunkSpace{a}, cache)
		a.maxBlock = a.cr.MaxBlock()
		a.contig = true
		for d := 1; d < nd; d++ {
			a.contig = a.contig && a.gchunk[d] == a.gshape[d]
		}
	}
	a.hdr = npy.HeaderOrder(a.dt.descr, a.Shape, a.fortranHeader())
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
	return npy.ReadAt(a.Path, a.hdr, a.Size(), p, off, func(q []byte, at int64) error {
		return a.readData(q, at, false)
	})
}

// ReadAtOnce is ReadAt for a sequential reader that keeps what it reads
// (the kernel's page cache behind a mount), as pack.ChunkReader's: the
// Blosc blocks such reads have read all of leave the cache, and a whole
// block a read covers is decoded straight into it.
func (a *Array) ReadAtOnce(p []byte, off int64) (int, error) {
	return npy.ReadAt(a.Path, a.hdr, a.Size(), p, off, func(q []byte, at int64) error {
		return a.readData(q, at, true)
	})
}

// Prefetch decodes the Blosc blocks behind [off, off+n) of the view
// into the cache, several in parallel, so that the reads that follow
// find them (see pack.Streamer; reader returns where the reader being
// served has got to in the view). An N-D array's blocks go into the
// cache as the gathers of its view's sequential reader keep them
// (warmRuns); an array without a ChunkReader has the range read into
// scratch memory to the same end.
func (a *Array) Prefetch(off, n int64, reader func() int64) error {
	if a.cr != nil && !a.contig && len(a.gshape) > 0 {
		if _, none := a.cache.(pack.NoCache); none {
			return nil // nothing to keep what it would decode
		}
		return a.warmRuns(off, n, reader)
	}
	if a.cr == nil || !a.contig {
		bp := scratch.Get().(*[]byte)
		defer scratch.Put(bp)
		for end := min(off+n, a.Size()); off < end; off += int64(len(*bp)) {
			if _, err := a.ReadAt((*bp)[:min(int64(len(*bp)), end-off)], off); err != nil && err != io.EOF {
				return err
			}
		}
		return nil
	}
	h := int64(len(a.hdr))
	if off < h {
		n -= h - off
		off = h
	}
	n = min(n, a.dataSize-(off-h))
	if n <= 0 {
		return nil
	}
	var at func() int64
	if reader != nil {
		at = func() int64 { return reader() - h }
	}
	return a.cr.Prefetch(off-h, n, at)
}

// warmRuns decodes the blocks behind [off, off+n) of an N-D view into
// the cache, as the gathers of a sequential reader of that range would
// keep them (byte planes for long rows), a mebibyte at a time.
func (a *Array) warmRuns(off, n int64, reader func() int64) error {
	h := int64(len(a.hdr))
	if off < h {
		n -= h - off
		off = h
	}
	off -= h
	n = min(n, a.dataSize-off)
	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	t := tables.Get().(*runTable)
	defer t.put()
	for n > 0 {
		if reader != nil {
			// The blocks before where the reader has got to are its own
			// (read whole, they have left the cache): start there.
			if r := reader() - h; r > off {
				if r >= off+n {
					return nil
				}
				off, n = r, n-(r-off)
			}
		}
		k := min(n, int64(len(*bp)))
		w := a.walkFrom(off, t)
		for w.done < k {
			a.nextRuns(t, &w, k)
			t.group()
			err := a.cr.WarmRuns((*bp)[:k], t.pack(a.chunkBytes))
			if errors.Is(err, errWholeChunk) {
				// Chunks of blocks larger than the reader decodes: read
				// the step as a read does, its chunks decoded whole into
				// the cache.
				if _, err := a.ReadAt((*bp)[:k], off+h); err != nil && err != io.EOF {
					return err
				}
				break
			}
			if err != nil {
				return err
			}
		}
		off, n = off+k, n-k
	}
	return nil
}

var _ pack.Streamer = (*Array)(nil)

// scratch holds the buffers Prefetch reads into where it cannot decode
// into the cache alone.
var scratch = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// maxBloscChunk is the largest plain size of a Blosc chunk.
const maxBloscChunk = 1<<31 - 1 - blosc.ExtHeaderLen

// chunkSpace is the pack.ChunkSource of a direct array's chunk space:
// its chunks end to end in grid order, each chunkBytes long.
type chunkSpace struct{ a *Array }

// NumChunks returns the number of chunks of the grid.
func (s chunkSpace) NumChunks() int { return int(s.a.nchunks) }

// ChunkOffset returns where chunk i starts in the chunk space.
func (s chunkSpace) ChunkOffset(i int) int64 { return int64(i) * s.a.chunkBytes }

// OpenChunk parses chunk i: its header and block starts, read through
// the store's ObjectReader when it has one (the blocks' streams are read
// when decoded), else from the whole object. A chunk that is not stored
// is a special chunk of the fill value.
func (s chunkSpace) OpenChunk(i int) (*blosc.Chunk, error) {
	a := s.a
	key := a.chunkKey(a.coords(int64(i)))
	var c *blosc.Chunk
	var err error
	if rs, ok := a.store.(ReaderAtStore); ok {
		var r io.ReaderAt
		var size int64
		if r, size, err = rs.ObjectReader(key); err == nil {
			c, err = blosc.NewChunk(r, size)
		}
	} else {
		var raw []byte
		if raw, err = a.store.Get(key, a.rawMax); err == nil {
			c, err = blosc.NewChunkBytes(raw)
		}
	}
	if errors.Is(err, ErrNotExist) {
		return a.fillChunk()
	}
	if err != nil {
		if errors.Is(err, blosc.ErrCorrupt) || errors.Is(err, blosc.ErrUnsupported) || errors.Is(err, ErrTooLarge) {
			return nil, fmt.Errorf("%s: %w: %w", key, ErrCorrupt, err)
		}
		return nil, err
	}
	if int64(c.Nbytes) != a.chunkBytes {
		return nil, fmt.Errorf("%s: %w: blosc chunk holds %d bytes, want %d", key, ErrCorrupt, c.Nbytes, a.chunkBytes)
	}
	for b := range c.NumBlocks() {
		if c.BlockLen(b) > a.maxBlock {
			return nil, errWholeChunk
		}
	}
	return c, nil
}

// errWholeChunk tells the reader of a direct array that a chunk's
// blocks are larger than the ChunkReader decodes: the chunk is decoded
// whole, as the chunks of other arrays are.
var errWholeChunk = errors.New("chunk decoded whole")

// fillChunk returns a special Blosc chunk of chunkBytes of the fill
// value, for a chunk that is not stored.
func (a *Array) fillChunk() (*blosc.Chunk, error) {
	kind := blosc.SpecialZero
	for _, b := range a.fill {
		if b != 0 {
			kind = blosc.SpecialValue
			break
		}
	}
	b := make([]byte, blosc.ExtHeaderLen, blosc.ExtHeaderLen+len(a.fill))
	ts := a.dt.size
	if ts > 255 || ts < 1 {
		ts = 1
	}
	bs := min(a.chunkBytes, 256<<10)
	b[0], b[1], b[2], b[3] = blosc.VersionStable, 1, 0x05, byte(ts)
	binary.LittleEndian.PutUint32(b[4:], uint32(a.chunkBytes))
	binary.LittleEndian.PutUint32(b[8:], uint32(bs))
	if kind == blosc.SpecialValue {
		b = append(b, a.fill...)
	}
	binary.LittleEndian.PutUint32(b[12:], uint32(len(b)))
	b[31] = byte(kind) << 4
	c, err := blosc.NewChunkBytes(b)
	if err != nil {
		return nil, fmt.Errorf("%s: fill value chunk: %w", a.Path, err)
	}
	return c, nil
}

// run is a piece of a read: n bytes at offset at of chunk ci go to
// dst[to:]. A run of rows > 1 is that many rows of n bytes: row r the n
// bytes at at+r*atStride to dst[to+r*toStride:] (a chunk's rows of a
// read that takes whole rows of the view: atStride is the chunk's row
// length in bytes, toStride the view's).
type run struct {
	ci                 int64
	at, to             int64
	n                  int64
	rows               int64
	atStride, toStride int64
}

// each calls f for each row of r: its offset in the chunk, where it
// goes, and its length.
func (r run) each(f func(at, to, n int64)) {
	for k := range max(r.rows, 1) {
		f(r.at+k*r.atStride, r.to+k*r.toStride, r.n)
	}
}

// maxRuns bounds the run table of one pass of readData: a read whose
// runs are shorter than len/maxRuns bytes (chunks a few items wide) is
// served in several passes.
const maxRuns = 1 << 14

// readData reads the array bytes [off, off+len(p)); once marks a
// sequential reader (see ReadAtOnce).
func (a *Array) readData(p []byte, off int64, once bool) error {
	if a.cr != nil && a.contig {
		// The chunk space is the view's data: one read of the
		// ChunkReader, which decodes the missing blocks of all the
		// chunks it touches in parallel.
		err := a.readSpace(p, off, once)
		if !errors.Is(err, errWholeChunk) {
			return err
		}
	}
	if len(a.gshape) == 0 {
		return a.serve(p, 0, []run{{at: off, n: int64(len(p))}}, once)
	}
	t := tables.Get().(*runTable)
	defer t.put()
	w := a.walkFrom(off, t)
	for w.done < int64(len(p)) {
		a.nextRuns(t, &w, int64(len(p)))
		t.group()
		if err := a.serveTable(p, t, once); err != nil {
			return err
		}
	}
	return nil
}

// runWalk is where the making of a read's runs has got to: the view
// coordinates of the next item (g, in t.g), the bytes of it already
// served (skip), and the bytes of the read done.
type runWalk struct {
	g          []int64
	skip, done int64
}

// walkFrom starts a walk of the view's data at byte off.
func (a *Array) walkFrom(off int64, t *runTable) runWalk {
	it := int64(a.dt.size)
	nd := len(a.gshape)
	t.g = slices.Grow(t.g[:0], nd)[:nd]
	rem := off / it
	for d := nd - 1; d >= 0; d-- {
		t.g[d] = rem % a.gshape[d]
		rem /= a.gshape[d]
	}
	return runWalk{g: t.g, skip: off % it}
}

// nextRuns fills t.runs with the runs of the read (of n bytes) from
// where w is, in the order of the view, up to maxRuns of them: each is
// one row's bytes in one chunk, or several rows' where they follow on in
// both; where the read takes whole rows of the view that lie in one band
// of chunks (the same chunk in every dimension but the last), each
// chunk's part of those rows is one run of rows.
func (a *Array) nextRuns(t *runTable, w *runWalk, n int64) {
	it := int64(a.dt.size)
	nd := len(a.gshape)
	l := nd - 1
	g := w.g
	runs := t.runs[:0]
	add := func(r run) {
		if j := len(runs) - 1; j >= 0 && r.rows <= 1 && runs[j].rows <= 1 && runs[j].ci == r.ci && runs[j].at+runs[j].n == r.at && runs[j].to+runs[j].n == r.to {
			runs[j].n += r.n
		} else {
			runs = append(runs, r)
		}
	}
	rowBytes := a.gshape[l] * it
	for w.done < n && len(runs) < maxRuns {
		// The row's chunk and offset in it, but for the last dimension.
		var ciRow, atRow int64
		for d := range l {
			c := g[d] / a.gchunk[d]
			ciRow = ciRow*a.nchunksD[d] + c
			atRow = atRow*a.gchunk[d] + (g[d] - c*a.gchunk[d])
		}
		ciRow *= a.nchunksD[l]
		atRow *= a.gchunk[l]
		x, cw := g[l], a.gchunk[l]
		if l > 0 && x == 0 && w.skip == 0 && len(runs)+int(a.nchunksD[l]) <= maxRuns {
			// Whole rows: as many as the read takes that stay in this
			// band of chunks.
			y := g[l-1]
			k := min((n-w.done)/rowBytes, a.gchunk[l-1]-y%a.gchunk[l-1], a.gshape[l-1]-y)
			if k > 1 {
				for c := range a.nchunksD[l] {
					kc := min(a.gshape[l], (c+1)*cw) - c*cw
					r := run{ci: ciRow + c, at: atRow * it, to: w.done + c*cw*it, n: kc * it, rows: k, atStride: cw * it, toStride: rowBytes}
					if r.atStride == r.n && r.toStride == r.n {
						r.n, r.rows = k*r.n, 1 // the rows follow on in both
					}
					add(r)
				}
				w.done += k * rowBytes
				g[l-1] += k - 1
				x = a.gshape[l] // the last row done: move on below
			}
		}
		c := x / cw
		for ; x < a.gshape[l] && w.done < n && len(runs) < maxRuns; c++ {
			k := min(a.gshape[l], (c+1)*cw) - x
			b := min(k*it-w.skip, n-w.done)
			add(run{ci: ciRow + c, at: (atRow+x-c*cw)*it + w.skip, to: w.done, n: b})
			w.done += b
			if b < k*it-w.skip {
				// The read ends inside this item range.
				w.skip += b
				x += w.skip / it
				w.skip %= it
				break
			}
			w.skip = 0
			x += k
		}
		g[l] = x
		if x == a.gshape[l] {
			g[l] = 0
			for d := l - 1; d >= 0; d-- {
				if g[d]++; g[d] < a.gshape[d] || d == 0 {
					break
				}
				g[d] = 0
			}
		}
	}
	t.runs = runs
}

// runTable is the scratch of one read of an N-D view: its runs in the
// view's order, and grouped by chunk (for each chunk, its runs in the
// order of their offsets in it, which is the view's).
type runTable struct {
	g      []int64 // the walk's coordinates
	runs   []run   // in the view's order
	grp    []int32 // the group (chunk) of each run
	sorted []run   // by chunk: group k is sorted[start[k]:start[k+1]]
	start  []int32
	gci    []int64 // the chunk of each group
	packed []pack.Run

	// An open-addressing table of chunk → group, valid where stamp is
	// the current stamp (no clearing between passes).
	keys  []int64
	vals  []int32
	stamp []uint32
	cur   uint32
}

var tables = sync.Pool{New: func() any { return new(runTable) }}

// put pools t, unless a read of many short runs grew it past what the
// reads of most arrays need.
func (t *runTable) put() {
	if cap(t.runs) <= 4096 && len(t.keys) <= 8192 {
		tables.Put(t)
	}
}

// group sorts t.runs by chunk into t.sorted, keeping each chunk's runs
// in their order.
func (t *runTable) group() {
	n := len(t.runs)
	if len(t.keys) < 64 {
		t.resize(64)
	}
	t.cur++
	if t.cur == 0 { // wrapped: every stamp is stale anyway, but clear
		clear(t.stamp)
		t.cur = 1
	}
	t.gci = t.gci[:0]
	t.grp = slices.Grow(t.grp[:0], n)[:n]
	for k, r := range t.runs {
		t.grp[k] = t.lookup(r.ci)
	}
	ng := len(t.gci)
	t.start = slices.Grow(t.start[:0], ng+1)[:ng+1]
	clear(t.start)
	for _, g := range t.grp {
		t.start[g+1]++
	}
	for k := 1; k <= ng; k++ {
		t.start[k] += t.start[k-1]
	}
	t.sorted = slices.Grow(t.sorted[:0], n)[:n]
	// start[g] is used as the next free place of group g, which leaves
	// it at the start of group g+1; shifted back below.
	for k, r := range t.runs {
		g := t.grp[k]
		t.sorted[t.start[g]] = r
		t.start[g]++
	}
	copy(t.start[1:], t.start[:ng])
	t.start[0] = 0
}

// lookup returns the group of chunk ci, adding one.
func (t *runTable) lookup(ci int64) int32 {
	mask := len(t.keys) - 1
	h := int((uint64(ci)*0x9E3779B97F4A7C15)>>40) & mask
	for {
		switch {
		case t.stamp[h] != t.cur:
			g := int32(len(t.gci))
			t.gci = append(t.gci, ci)
			t.keys[h], t.vals[h], t.stamp[h] = ci, g, t.cur
			if 2*len(t.gci) > len(t.keys) {
				t.resize(2 * len(t.keys))
			}
			return g
		case t.keys[h] == ci:
			return t.vals[h]
		}
		h = (h + 1) & mask
	}
}

// pack returns the runs of t, grouped, as runs of the chunk space (whose
// chunks are chunkBytes long), in t.packed.
func (t *runTable) pack(chunkBytes int64) []pack.Run {
	t.packed = slices.Grow(t.packed[:0], len(t.sorted))[:len(t.sorted)]
	for k, r := range t.sorted {
		t.packed[k] = r.pack(chunkBytes)
	}
	return t.packed
}

// resize makes the table n slots (a power of two) and puts the current
// pass's groups back in it.
func (t *runTable) resize(n int) {
	t.keys, t.vals, t.stamp = make([]int64, n), make([]int32, n), make([]uint32, n)
	if t.cur == 0 {
		t.cur = 1
	}
	mask := n - 1
	for g, ci := range t.gci {
		h := int((uint64(ci)*0x9E3779B97F4A7C15)>>40) & mask
		for t.stamp[h] == t.cur {
			h = (h + 1) & mask
		}
		t.keys[h], t.vals[h], t.stamp[h] = ci, int32(g), t.cur
	}
}

// serveTable serves the runs of t, grouped. The chunks of a direct
// array are one gather of the ChunkReader (its blocks pinned once per
// read, decoded once into the cache for all the reads that take their
// rows, the missing ones in parallel); where that fails, the chunks are
// served one by one, so that the error names the chunks that fail (a
// block that failed to decode is not decoded again: the reader
// remembers it), and chunks decoded whole go their way.
func (a *Array) serveTable(p []byte, t *runTable, once bool) error {
	if a.cr != nil {
		err := a.cr.ReadRuns(p, t.pack(a.chunkBytes), once)
		if err == nil || errors.Is(err, pack.ErrStale) {
			// A chunk file replaced under the array fails the read, as
			// a read of one chunk does (its next read parses it anew).
			return err
		}
	}
	ng := len(t.gci)
	if ng == 1 {
		return a.serve(p, t.gci[0], t.sorted, once)
	}
	errs := make([]error, ng)
	sem := make(chan struct{}, max(runtime.GOMAXPROCS(0), 1))
	var wg sync.WaitGroup
	for k := range ng {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = a.serve(p, t.gci[k], t.sorted[t.start[k]:t.start[k+1]], once)
			<-sem
		}()
	}
	wg.Wait()
	return joinErrors(errs)
}

// joinErrors joins the errors of the chunks of one read: the first few,
// and how many more (a read of many corrupt chunks fails with one
// line, not one per chunk).
func joinErrors(errs []error) error {
	var keep []error
	more := 0
	for _, err := range errs {
		switch {
		case err == nil:
		case len(keep) < 4:
			keep = append(keep, err)
		default:
			more++
		}
	}
	if more > 0 {
		keep = append(keep, fmt.Errorf("and %d more chunks", more))
	}
	return errors.Join(keep...)
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
		r.each(func(at, to, n int64) {
			dst := p[to : to+n]
			k := copy(dst, a.fill[at%it:])
			for k < len(dst) {
				k += copy(dst[k:], a.fill)
			}
		})
	}
}

// errMissing tells a loader's caller that the chunk is not stored.
var errMissing = errors.New("missing chunk")

// readSpace reads [off, off+len(p)) of the chunk space.
func (a *Array) readSpace(p []byte, off int64, once bool) error {
	var err error
	if once {
		_, err = a.cr.ReadAtOnce(p, off)
	} else {
		_, err = a.cr.ReadAt(p, off)
	}
	switch {
	case err == io.EOF:
		err = nil // the chunk space ends with the data (a short last chunk is stored whole)
	case err != nil:
		err = a.chunkError(err, off, off+int64(len(p))-1)
	}
	return err
}

// chunkError names the chunks of the chunk space bytes [first, last) in
// an error of a block that does not decode, as the errors of opening a
// chunk do.
func (a *Array) chunkError(err error, first, last int64) error {
	if err == nil || errors.Is(err, ErrCorrupt) ||
		!(errors.Is(err, blosc.ErrCorrupt) || errors.Is(err, blosc.ErrUnsupported) || errors.Is(err, pack.ErrFormat)) {
		return err
	}
	first, last = first/a.chunkBytes, last/a.chunkBytes
	where := a.chunkKey(a.coords(first))
	if last != first {
		where += " to " + a.chunkKey(a.coords(last))
	}
	return fmt.Errorf("%s: %w: %w", where, ErrCorrupt, err)
}

// serve copies the runs of chunk ci.
func (a *Array) serve(p []byte, ci int64, runs []run, once bool) error {
	if a.cr != nil {
		base := ci * a.chunkBytes
		prs := make([]pack.Run, len(runs))
		for k, r := range runs {
			prs[k] = r.pack(a.chunkBytes)
		}
		err := a.cr.ReadRuns(p, prs, once)
		if !errors.Is(err, errWholeChunk) {
			return a.chunkError(err, base, base)
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
		r.each(func(at, to, n int64) { copy(p[to:to+n], chunk[at:]) })
	}
}

// pack returns r as a run of the chunk space, whose chunks are
// chunkBytes long.
func (r run) pack(chunkBytes int64) pack.Run {
	return pack.Run{At: r.ci*chunkBytes + r.at, To: r.to, N: r.n, Rows: r.rows, AtStride: r.atStride, ToStride: r.toStride}
}

// loadChunk reads and decodes chunk ci whole (errMissing: not stored).
// A chunk whose version failed to decode before fails again without
// being read (see failures).
func (a *Array) loadChunk(ci int64) ([]byte, error) {
	c := a.coords(ci)
	if a.v3 != nil && a.v3.shard != nil {
		return a.loadInner(ci, c)
	}
	key := a.chunkKey(c)
	fk := failKey{a.meta, ci}
	ver := a.version(key)
	if err := failed(fk, ver); err != nil {
		return nil, err
	}
	raw, err := a.store.Get(key, a.rawMax)
	if errors.Is(err, ErrNotExist) {
		return nil, errMissing
	}
	if errors.Is(err, ErrTooLarge) {
		err = fmt.Errorf("%w: %w (the largest encoding of a %d-byte chunk)", ErrCorrupt, err, a.chunkBytes)
		a.remember(fk, key, ver, err)
		return nil, err
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
		err = fmt.Errorf("%s: %w", key, err)
		a.remember(fk, key, ver, err)
		return nil, err
	}
	return out, nil
}

// version returns the version of the object key, or the zero Version
// where the store tells none.
func (a *Array) version(key string) Version {
	if vs, ok := a.store.(Versioner); ok {
		if v, err := vs.Version(key); err == nil {
			return v
		}
	}
	return Version{}
}

// remember remembers the failure of chunk fk, read as version ver, if
// the object still has that version (it was not replaced during the
// read, so that what failed was that version).
func (a *Array) remember(fk failKey, key string, ver Version, err error) {
	if !ver.IsZero() && a.version(key) == ver {
		rememberFailure(fk, ver, err)
	}
}

// decodeV2 runs the v2 pipeline: the compressor, then the filters in
// reverse order.
func (a *Array) decodeV2(raw []byte) ([]byte, error) {
	b := raw
	var err error
	if a.comp != nil {
		if b, err = a.comp.decompress(raw, a.encSizes[0], true); err != nil {
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

// loadInner reads inner chunk ci (grid coordinates c) of its shard: the
// shard's index (see indexCache), then a ranged read of the inner chunk.
func (a *Array) loadInner(ci int64, c []int64) ([]byte, error) {
	s := a.v3.shard
	sc := make([]int64, len(c))
	var sci, inner int64
	for d := range c {
		sc[d] = c[d] / s.per[d]
		sci = sci*((a.nchunksD[d]+s.per[d]-1)/s.per[d]) + sc[d]
		inner = inner*s.per[d] + (c[d] - sc[d]*s.per[d])
	}
	key := JoinKey(a.Path, a.key(sc))
	ver := a.version(key)
	fk := failKey{a.meta, ci}
	if err := failed(fk, ver); err != nil {
		return nil, err
	}
	idx, err := a.shardIndex(sci, key, ver)
	if err != nil {
		return nil, err
	}
	if idx == nil {
		return nil, errMissing
	}
	off, n := idx.entry(inner)
	if off == 1<<64-1 && n == 1<<64-1 {
		return nil, errMissing
	}
	if n > uint64(s.chain.raw) { // checked by parseIndex; kept for the reader's sake
		return nil, fmt.Errorf("%s: %w: inner chunk %d of %d bytes", key, ErrCorrupt, inner, n)
	}
	raw, err := a.store.GetRange(key, int64(off), int64(n))
	if err != nil {
		if errors.Is(err, ErrNotExist) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%s: %w: inner chunk %d at [%d,+%d) past the shard's end: %w", key, ErrCorrupt, inner, off, n, err)
			a.remember(fk, key, ver, err)
		}
		return nil, err
	}
	out, err := s.chain.decode(raw)
	if err != nil {
		err = fmt.Errorf("%s: inner chunk %d: %w", key, inner, err)
		a.remember(fk, key, ver, err)
		return nil, err
	}
	return out, nil
}

// shardIndex returns the checked index of shard sci, whose object key
// has version ver (nil: no shard), from the cache of indexes.
func (a *Array) shardIndex(sci int64, key string, ver Version) (*shardIndex, error) {
	s := a.v3.shard
	k := indexKey{ver: ver, size: s.indexSize(), inner: s.chain.raw}
	if ver.IsZero() {
		k.owner, k.shard = a.id, sci
	}
	if s.atStart {
		k.layout |= 1
	}
	if s.idxBig {
		k.layout |= 2
	}
	if s.idxCRC {
		k.layout |= 4
	}
	idx, err := indexes.get(k, func() (*shardIndex, error) { return a.readShardIndex(key) })
	if err == nil && ver.IsZero() {
		if v := a.version(key); !v.IsZero() {
			old := k
			k.ver, k.owner, k.shard = v, 0, 0
			indexes.rekey(old, k)
		}
	}
	return idx, err
}

// readShardIndex reads and checks a shard's index.
func (a *Array) readShardIndex(key string) (*shardIndex, error) {
	s := a.v3.shard
	n := s.indexSize()
	off := -1 * int64(1)
	if s.atStart {
		off = 0
	}
	var b []byte
	var err error
	if cr, ok := a.store.(checkedRanger); ok && s.idxCRC {
		// The index's crc32c tells whether it was read where it is.
		b, err = cr.GetRangeChecked(key, off, n, func(b []byte) bool {
			_, err := s.parseIndex(b)
			return err == nil
		})
	} else {
		b, err = a.store.GetRange(key, off, n)
	}
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
