package fs

import (
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// A backend is the tree a mount shows, as far as naming and reading its
// compressed files go: the local source directory (localBackend, in
// local_probe.go) or a bucket (bucketBackend, in remote_dir.go). What is
// written once over it, in this file: the name mapping of a directory
// (viewEntries) and the lookup of one view name (lookupEntry), and the
// read path of a compressed file (viewHandle, over a viewContent). Also
// written once: the probe record (probe.go) and the user.bloscfs.*
// attributes it gives (xattr.go).
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
		if _, named := pack.TreeFormatFor(be.name, be.dir); named {
			ents[i].tree = func() (string, bool, string, bool) {
				p, err := b.probe(dir, be)
				if err != nil && transient == nil {
					transient = err
				}
				if !p.ok || p.tree == nil {
					return "", false, "", false
				}
				return p.tree.root.Name, p.tree.root.Dir, p.tree.key, true
			}
		}
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
