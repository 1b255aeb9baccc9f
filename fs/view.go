package fs

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/zarr"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// A backend is the tree a mount shows, as far as naming and reading its
// compressed files go: the local source directory (localBackend, in
// dir.go) or a bucket (bucketBackend, in remote.go). What is written once
// over it: the name mapping of a directory (viewEntries) and the lookup
// of one view name (lookupEntry). Also written once, in this file: the
// probe record (probeOf), the user.bloscfs.* attributes it gives (xattrs,
// getXattr, listXattrs), and the read path of a compressed file
// (viewHandle, over a viewContent).
//
// A directory is named by a string that only its backend reads: an
// absolute path on disk, or a key prefix ending in "/".
type backend interface {
	// list returns the entries of directory dir named in names, or all
	// of them when names is nil. A name that is not there is left out.
	// Its error is an errno to give the caller, or one that stands for
	// EIO (and has been logged).
	list(dir string, names []string) ([]backendEntry, error)
	// probe tells whether the entry of dir holds a readable container,
	// and what it holds. A failure that says nothing about the entry
	// (out of descriptors, interrupted) is returned and not recorded:
	// the caller then fails rather than show the entry raw.
	probe(dir string, e backendEntry) (*probe, error)
}

// backendEntry is one entry of a backend's directory.
type backendEntry struct {
	name string
	dir  bool // a directory (or prefix): plain, or a sparse frame
	meta any  // the backend's own record: *syscall.Stat_t, remote.ObjectInfo
}

// viewEntries returns the view of directory dir of b, made of the disk
// entries named in names, or of all of them when names is nil.
func viewEntries(b backend, dir string, names []string) ([]entry, syscall.Errno) {
	bes, err := b.list(dir, names)
	if err != nil {
		return nil, errnoOf(err)
	}
	var transient error
	ents := make([]diskEntry, len(bes))
	for i, be := range bes {
		ents[i] = diskEntry{name: be.name, dir: be.dir, meta: be.meta, container: func() bool {
			p, err := b.probe(dir, be)
			if err != nil && transient == nil {
				transient = err
			}
			return p.ok
		}}
		if be.dir {
			ents[i].zarrArray = func() bool {
				p, err := b.probe(dir, be)
				if err != nil && transient == nil {
					transient = err
				}
				return p.ok && strings.HasPrefix(p.info.Format, "zarr")
			}
		}
	}
	mapped := mapNames(ents)
	if transient != nil {
		return nil, errnoOf(transient)
	}
	return mapped, 0
}

// lookupEntry finds the view entry called name in directory dir of b,
// looking only at the disk entries that could be it (a lookup probes its
// candidates, not the directory).
func lookupEntry(b backend, dir, name string) (*entry, syscall.Errno) {
	ents, errno := viewEntries(b, dir, diskCandidates(name))
	if errno != 0 {
		return nil, errno
	}
	for _, e := range ents {
		if e.view == name {
			return &e, 0
		}
	}
	return nil, syscall.ENOENT
}

// probe is what opening a candidate container found.
type probe struct {
	ok   bool
	size int64 // size of the view
	info pack.Info
	npy  bool
	// zarr: a Zarr array's own user.bloscfs.* attributes, and its user
	// attributes (user.zarr.attrs).
	zarr      map[string]string
	zarrAttrs []byte
	// head: made from the header alone (a remote object's first bytes,
	// pack.OpenHead): size, npy and info.Format hold, the rest of info
	// is unknown until the object is opened.
	head bool
}

// probeOf records what the view v of a readable container holds: only
// what is needed to show the file (no metadata, which may be large).
func probeOf(v *all.View) *probe {
	p := &probe{ok: true, size: v.Size, info: v.Container.Info(), npy: v.NPY}
	p.info.Meta = nil
	z, ok := v.Container.(*zarr.Array)
	if d, isDir := v.Container.(*zarr.DirArray); isDir {
		z, ok = d.Array, true
	}
	if ok {
		p.zarr = z.Describe()
		if len(z.Attrs) <= maxZarrAttrs {
			p.zarrAttrs = z.Attrs
		}
	}
	return p
}

// xattrPrefix names bloscfs's own extended attributes.
const xattrPrefix = "user.bloscfs."

// zarrAttrsXattr holds a Zarr array's user attributes (JSON).
const zarrAttrsXattr = "user.zarr.attrs"

// maxZarrAttrs bounds the attributes kept with a probe (the largest
// value an extended attribute can have).
const maxZarrAttrs = 64 << 10

// xattrs returns the user.bloscfs.* attributes that describe how a file
// is stored.
func xattrs(p *probe) map[string]string {
	in := p.info
	m := map[string]string{
		"format":          in.Format,
		"codec":           in.Codec,
		"typesize":        strconv.Itoa(in.Typesize),
		"chunksize":       strconv.FormatInt(in.ChunkSize, 10),
		"blocksize":       strconv.Itoa(in.Blocksize),
		"chunks":          strconv.Itoa(in.Chunks),
		"compressed_size": strconv.FormatInt(in.StoredSize, 10),
		"size":            strconv.FormatInt(in.Size, 10),
		"filters":         blosc.FilterString(in.Filters, in.FiltersMeta),
	}
	if in.Clevel >= 0 {
		m["clevel"] = strconv.Itoa(in.Clevel)
	}
	if in.StoredSize > 0 {
		m["ratio"] = strconv.FormatFloat(float64(in.Size)/float64(in.StoredSize), 'f', 3, 64)
	}
	if in.Checksum != "" {
		m["checksum"] = in.Checksum
	}
	for k, v := range p.zarr {
		m[k] = v
	}
	if p.zarr != nil {
		delete(m, "blocksize")
		delete(m, "filters")
		delete(m, "compressed_size")
	}
	return m
}

// zarrXattr answers the attributes of a Zarr array that its probe does
// not hold: user.zarr.attrs, and user.bloscfs.compressed_size and ratio,
// computed only when asked, by stored (a walk of the array's directory,
// or a LIST of its prefix: too dear for every lookup or listing). ours is
// false for any other attribute, or a file that is not a Zarr array.
func zarrXattr(pr *probe, attr string, dest []byte, stored func() (int64, error)) (sz uint32, errno syscall.Errno, ours bool) {
	if pr == nil || !pr.ok || pr.zarr == nil {
		return 0, 0, false
	}
	var v []byte
	switch attr {
	case zarrAttrsXattr:
		if pr.zarrAttrs == nil {
			return 0, 0, false
		}
		v = pr.zarrAttrs
	case xattrPrefix + "compressed_size", xattrPrefix + "ratio":
		n, err := stored()
		if err != nil {
			return 0, syscall.EIO, true
		}
		v = strconv.AppendInt(nil, n, 10)
		if attr == xattrPrefix+"ratio" {
			if n == 0 {
				return 0, syscall.ENODATA, true
			}
			v = strconv.AppendFloat(nil, float64(pr.info.Size)/float64(n), 'f', 3, 64)
		}
	default:
		return 0, 0, false
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE, true
	}
	return uint32(copy(dest, v)), 0, true
}

// zarrXattrNames returns the names zarrXattr answers for the file p
// describes, each NUL-terminated (none when it is not a Zarr array).
func zarrXattrNames(pr *probe) []byte {
	if pr == nil || !pr.ok || pr.zarr == nil {
		return nil
	}
	var b []byte
	if pr.zarrAttrs != nil {
		b = append(append(b, zarrAttrsXattr...), 0)
	}
	b = append(append(b, xattrPrefix+"compressed_size"...), 0)
	return append(append(b, xattrPrefix+"ratio"...), 0)
}

// ownXattrs returns the user.bloscfs.* attributes of a file that p
// describes: none unless it is shown decompressed.
func ownXattrs(p *probe) map[string]string {
	if !p.ok {
		return nil
	}
	return xattrs(p)
}

// getXattr answers a GETXATTR of attr from own, the file's user.bloscfs.*
// attributes (named without the prefix). ours is false when attr is not
// a user.bloscfs.* name: the caller asks the source, if it has any.
func getXattr(own map[string]string, attr string, dest []byte) (sz uint32, errno syscall.Errno, ours bool) {
	name, ok := strings.CutPrefix(attr, xattrPrefix)
	if !ok {
		return 0, 0, false
	}
	v, ok := own[name]
	if !ok {
		return 0, syscall.ENODATA, true
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE, true
	}
	return uint32(copy(dest, v)), 0, true
}

// listXattrs answers a LISTXATTR: the names of own, then more (the
// source's own list, NUL-terminated names).
func listXattrs(own map[string]string, more, dest []byte) (uint32, syscall.Errno) {
	var buf []byte
	for name := range own {
		buf = append(append(buf, xattrPrefix+name...), 0)
	}
	buf = append(buf, more...)
	if len(dest) < len(buf) {
		return uint32(len(buf)), syscall.ERANGE
	}
	return uint32(copy(dest, buf)), 0
}

// viewContent is what the handles of a compressed file read: a local
// node (its committed view, or its stage while it is written) or one
// opened version of an object.
type viewContent interface {
	// readAt reads the plain bytes at off. once marks a sequential
	// reader whose bytes the kernel keeps: the blocks it has read whole
	// may leave the block cache.
	readAt(p []byte, off int64, once bool) (int, error)
	// prefetch decodes [off, off+size) into the block cache; reader
	// tells where the reader is, so that blocks it has passed are
	// skipped.
	prefetch(off, size int64, reader func() int64)
	// size returns the plain size.
	size() int64
}

// viewHandle is the read side of an open compressed file, local or
// remote: READs with sequential detection and block read-ahead.
type viewHandle struct {
	c         viewContent
	f         *FS   // log, statistics
	noSeq     bool  // never sequential (a writable handle)
	readAhead int64 // bytes decoded ahead of a sequential reader (0: none)
	// logged reports that a read failure has been logged already (by
	// the object store); nil: never.
	logged func() bool
	// seq is what a READ needs to know whether it continues a stream.
	seq      seqState
	ahead    atomic.Bool  // a read-ahead is running
	aheadEnd atomic.Int64 // where the last read-ahead of this stream ended
	aheadWG  sync.WaitGroup
	closed   atomic.Bool
}

// seqState follows where a handle's READs arrive, to tell a stream from
// random reads. Its zero value is a handle that has had no READ.
type seqState struct {
	mu sync.Mutex
	// ends holds where the last READs to arrive end, newest first (n of
	// them), set as they arrive rather than when they are done: the
	// kernel sends several read-ahead READs at once, and the daemon's
	// threads take them up in any order. Against the end of the last
	// READ that was done, 65 of the 1,024 READs of a cat lay more than
	// seqWindow away, and against the last to arrive still 30, each
	// then decoding its blocks into the cache and leaving them there.
	ends [4]int64
	n    int
	// inRun reports that the last READ was near one before it too: one
	// READ near another is not yet a stream (random readers land near
	// each other now and then), two in a row are.
	inRun bool
}

// arrive records a READ of n bytes at off, and reports whether it
// continues a stream: a first READ near the start of the file (the
// kernel's first READs may come in any order), or a READ within
// seqWindow of one of the last READs when the READ before it was so too.
func (s *seqState) arrive(off, n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	near := s.n == 0 && off < seqWindow
	for _, e := range s.ends[:s.n] {
		if off >= e-seqWindow && off <= e+seqWindow {
			near = true
			break
		}
	}
	seq := near && (s.n == 0 || s.inRun)
	s.inRun = near
	copy(s.ends[1:], s.ends[:len(s.ends)-1])
	s.ends[0] = off + n
	s.n = min(s.n+1, len(s.ends))
	return seq
}

// reader returns how far the READs have got: the farthest end of the
// last ones, or -1 before the first.
func (s *seqState) reader() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := int64(-1)
	for _, e := range s.ends[:s.n] {
		r = max(r, e)
	}
	return r
}

// seqWindow is how far a READ may start from where one of the last READs
// ends and still count as sequential: the kernel sends read-ahead READs
// of up to 1 MiB concurrently, and they may arrive out of order.
const seqWindow = 2 << 20

// Read serves a READ from the decoded content. Corrupt data (or, remote,
// an object that changed or a store that failed every try) gives EIO and
// one log line naming the file and chunk or range. A READ that continues
// a stream (seqState) is sequential: the kernel keeps its pages
// (KEEP_CACHE), so the blocks it has read whole leave the block cache, and
// it starts read-ahead of the blocks after it.
func (h *viewHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	seq := !h.noSeq && h.seq.arrive(off, int64(len(dest)))
	n, err := h.c.readAt(dest, off, seq)
	if err != nil && err != io.EOF {
		if h.logged == nil || !h.logged() {
			h.f.warnOnce("read error: %v", err)
		}
		return nil, syscall.EIO
	}
	end := off + int64(n)
	if seq && n > 0 && end <= h.aheadEnd.Load() {
		h.f.stats.aheadHits.Add(1)
	}
	if !seq {
		h.aheadEnd.Store(0)
	} else if off > 0 {
		h.readAheadFrom(end)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// aheadStep is the unit of read-ahead: the blocks of one step decode in
// parallel.
const aheadStep = 1 << 20

// readAheadFrom decodes the blocks up to readAhead bytes after a
// sequential read into the cache in the background, so that the next
// READs find them there (remote, their compressed bytes come from the
// object's own read-ahead GETs). It starts after what an earlier
// read-ahead of the same stream did: the reads drop the blocks they
// consume. One read-ahead runs at a time per handle.
func (h *viewHandle) readAheadFrom(off int64) {
	if h.readAhead <= 0 {
		return
	}
	to := min(off+h.readAhead, h.c.size())
	off = max(off, h.aheadEnd.Load())
	if off >= to || !h.ahead.CompareAndSwap(false, true) {
		return
	}
	h.aheadEnd.Store(to)
	h.f.stats.aheadRuns.Add(1)
	h.f.stats.aheadBytes.Add(to - off)
	h.aheadWG.Add(1)
	go func() {
		defer h.aheadWG.Done()
		defer h.ahead.Store(false)
		// In steps of 1 MiB, each taking the content anew (locally under
		// its own read lock, so that a write or commit does not wait for
		// the whole read-ahead). Errors surface on the real read.
		for pos := off; pos < to && !h.closed.Load(); pos += aheadStep {
			h.c.prefetch(pos, min(aheadStep, to-pos), h.seq.reader)
		}
	}()
}

// stop ends the handle's reading: it waits for a running read-ahead. It
// reports false if the handle was stopped already.
func (h *viewHandle) stop() bool {
	if h.closed.Swap(true) {
		return false
	}
	h.aheadWG.Wait()
	return true
}
