package fs

// An object of the bucket as a file (remoteFile): each open reads its
// current version (openState), whose handles read it through the shared
// read path (viewHandle).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/remote"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// remoteFile is an object: a container shown decompressed (pr.ok), or
// its bytes as they are.
type remoteFile struct {
	gofs.Inode
	r *RemoteFS

	sparse string // a sparse frame: its prefix ("" for an object)
	zarr   string // a Zarr array: its prefix; info is its metadata object

	mu   sync.Mutex
	info remote.ObjectInfo // the object, or a sparse frame's index
	pr   *probe            // nil or !ok: shown raw
	cur  *openState        // the version handles open, shared
}

// openState is one opened version of an object: the content its
// handles read.
type openState struct {
	obj   *remote.Object
	view  io.ReaderAt // an *all.View, or the object itself (shown raw)
	plain int64       // the size shown

	// replaced is set when a newer version of the object is opened on
	// the node. The kernel keeps one page cache per file, which the
	// handles of both versions read: from then on this version's reads
	// fail rather than put its bytes there (see Open).
	replaced atomic.Bool
}

// errReplaced is the error of a read of a version replaced since.
func (st *openState) errReplaced() error {
	return fmt.Errorf("%s: replaced since this handle opened it (a new open reads the new version): %w", st.obj.Name(), remote.ErrChanged)
}

var _ = (viewContent)((*openState)(nil))

// readAt reads the version opened, within its size.
func (st *openState) readAt(p []byte, off int64, once bool) (int, error) {
	if st.replaced.Load() {
		return 0, st.errReplaced()
	}
	if off >= st.plain {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), st.plain-off)]
	if v, ok := st.view.(*all.View); ok && once {
		// A sequential reader: the object's read-ahead need not wait
		// until it has seen enough bytes in sequence itself.
		st.obj.Streaming()
		return v.ReadAtOnce(p, off) // the kernel keeps these pages
	}
	return st.view.ReadAt(p, off)
}

// prefetch decodes blocks of a container ahead (their compressed bytes
// come from the object's own read-ahead GETs).
func (st *openState) prefetch(off, size int64, reader func() int64) {
	if v, ok := st.view.(*all.View); ok && !st.replaced.Load() {
		v.Prefetch(off, size, reader)
	}
}

func (st *openState) size() int64 { return st.plain }

// newHandle returns a handle that reads the version st. A failed read
// the object store has logged already is not logged again.
func (n *remoteFile) newHandle(st *openState) *remoteHandle {
	var ra int64
	if _, ok := st.view.(*all.View); ok {
		ra = n.r.f.opts.ReadAhead
	}
	n.r.f.stats.openFiles.Add(1)
	return &remoteHandle{viewHandle{c: st, f: n.r.f, readAhead: ra, logged: st.obj.Failed}}
}

var (
	_ = (gofs.NodeGetattrer)((*remoteFile)(nil))
	_ = (gofs.NodeOpener)((*remoteFile)(nil))
	_ = (gofs.NodeGetxattrer)((*remoteFile)(nil))
	_ = (gofs.NodeListxattrer)((*remoteFile)(nil))
	_ = (gofs.NodeSetattrer)((*remoteFile)(nil))
)

func (n *remoteFile) compressed() bool { return n.pr != nil && n.pr.ok }

func (n *remoteFile) fill(a *fuse.Attr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	a.Mode = syscall.S_IFREG | 0o444
	a.Nlink = 1
	a.Uid, a.Gid = n.r.uid, n.r.gid
	a.Size = uint64(n.info.Size)
	if n.compressed() {
		a.Size = uint64(n.pr.size)
	}
	a.Blocks = (uint64(n.info.Size) + 511) / 512
	t := n.info.LastModified
	a.SetTimes(&t, &t, &t)
	a.Blksize = preferredIO
}

// Getattr reports the object's attributes: its plain size, LastModified.
func (n *remoteFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fill(&out.Attr)
	return 0
}

// Setattr refuses: the remote view is read-only.
func (n *remoteFile) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

// Open opens the object's current version: one HEAD tells whether it
// changed since it was listed or last opened; a changed object is opened
// anew (new size, new index) and the kernel's cached pages dropped.
func (n *remoteFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if writable(flags) {
		return nil, 0, syscall.EROFS
	}
	n.mu.Lock()
	key, cur := n.info.Key, n.cur
	n.mu.Unlock()
	info, err := n.r.store.Stat(context.Background(), key) // interrupts (SIGURG in Go readers) would cancel it
	if err != nil {
		n.r.f.opts.Logger.Printf("open: %v", err)
		if errors.Is(err, remote.ErrNotFound) {
			return nil, 0, syscall.ENOENT
		}
		return nil, 0, syscall.EIO
	}
	if cur != nil && cur.obj.ETag == info.ETag && !cur.obj.Changed() {
		return n.newHandle(cur), fuse.FOPEN_KEEP_CACHE, 0
	}
	if cur != nil && cur.obj.ETag != info.ETag {
		// The object was replaced since this node's version was opened.
		// The kernel keeps one page cache per node, which the handles of
		// both versions would read: the new version gets a node of its
		// own. ESTALE makes the kernel look the name up again (once,
		// with LOOKUP_REVAL); the listing, dropped here, then gives the
		// new ETag and Lookup a node of the new generation, while the
		// handles open on this one keep reading the old version (or get
		// EIO once a GET meets the change). An open that comes to this
		// node after such a lookup all the same (see answerStale) opens
		// the new version on it below, and the old one's handles fail
		// from then on.
		if n.r.answerStale(n.StableAttr()) {
			n.r.store.Invalidate(n.r.prefixOf(key))
			return nil, 0, syscall.ESTALE
		}
	}
	var opened *probe // the probe of the version opened, when it is a container
	st := &openState{obj: n.r.store.OpenInfo(info), plain: info.Size}
	st.view = st.obj
	n.mu.Lock()
	wasCompressed := n.compressed()
	n.mu.Unlock()
	if n.sparse != "" {
		if cur != nil && cur.obj.ETag != info.ETag {
			n.r.store.Invalidate(n.sparse) // the chunks changed too
		}
		c := n.r.f.blockCache()
		v, idx, err := n.r.openSparse(n.sparse, c)
		if err != nil {
			n.r.f.warnOnce("%v", err)
			return nil, 0, syscall.EIO
		}
		c.setCodec(v.Container.Info().Codec)
		st.obj, st.view, st.plain = idx, v, v.Size
		info = idx.ObjectInfo
	} else if n.zarr != "" {
		c := n.r.f.blockCache()
		v, err := n.r.openZarr(n.zarr, c)
		if err != nil {
			n.r.f.warnOnce("%v", err)
			return nil, 0, syscall.EIO
		}
		c.setCodec(v.Container.Info().Codec)
		st.view, st.plain = v, v.Size
	} else if wasCompressed {
		c := n.r.f.blockCache()
		v, err := all.OpenViewReader(st.obj, info.Size, st.obj.Name(), c)
		if err != nil {
			n.r.f.warnOnce("%v", err)
			if !st.obj.Failed() {
				// Its header parsed (a listing's probe reads no more),
				// the rest does not: shown raw from the next lookup on.
				n.r.probes.Add(info.Key+"\x00"+info.ETag, &probe{})
			}
			return nil, 0, syscall.EIO
		}
		c.setCodec(v.Container.Info().Codec)
		st.view, st.plain = v, v.Size
		opened = probeOf(v)
		n.r.probes.Add(info.Key+"\x00"+info.ETag, opened)
	}
	st.obj.Opened()
	n.mu.Lock()
	// The kernel's cached pages are those of the version last opened
	// (cur), whatever a listing has learned since: compare with that.
	stale := cur != nil && cur.obj.ETag != info.ETag
	changed := n.info.ETag != info.ETag || stale
	if stale {
		// The handles of the old version fail from now on: a read of
		// theirs arriving after this would fill the kernel's page cache,
		// which this open is about to drop, with old bytes for the new
		// handle to find. Reads of theirs already under way hold their
		// pages locked, and the kernel drops those pages once they are
		// done.
		cur.replaced.Store(true)
	}
	n.info, n.cur = info, st
	if n.sparse != "" {
		n.pr = n.r.probeSparse(n.sparse)
	} else if n.zarr != "" {
		if changed {
			n.r.zprobes.Remove(n.zarr)
		}
		if zp := n.r.probeZarr(n.zarr); zp.p.ok {
			n.pr = zp.p
		}
	} else if opened != nil {
		n.pr = opened
	}
	n.mu.Unlock()
	fl := uint32(fuse.FOPEN_KEEP_CACHE)
	if changed {
		n.r.store.Invalidate(n.r.prefixOf(key))
		go n.NotifyContent(0, 0)
	}
	if stale {
		// Without KEEP_CACHE the kernel drops the file's cached pages at
		// this open, before any read: the asynchronous notification above
		// alone may come after the reads it should have preceded.
		fl = 0
	}
	return n.newHandle(st), fl, 0
}

// xattrsOf returns the user.bloscfs.* attributes of the node. A node
// probed from its header alone is probed in full first (its index and
// first chunk tell the codec, chunks and filters): a GETXATTR of one of
// those costs what an open does, once per object version.
func (n *remoteFile) xattrsOf() (map[string]string, error) {
	n.mu.Lock()
	pr, info := n.pr, n.info
	n.mu.Unlock()
	if pr != nil && pr.head {
		full, err := n.r.fullProbe(info, pr)
		if err != nil {
			return nil, err
		}
		n.mu.Lock()
		if n.pr == pr {
			n.pr = full
		}
		n.mu.Unlock()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	m := map[string]string{}
	if n.compressed() {
		m = xattrs(n.pr)
	}
	m["etag"] = n.info.ETag
	return m, nil
}

// Getxattr returns a user.bloscfs.* attribute (plus user.bloscfs.etag).
func (n *remoteFile) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	n.mu.Lock()
	pr, prefix := n.pr, n.zarr
	n.mu.Unlock()
	if sz, errno, ours := zarrXattr(pr, attr, dest, func() (int64, error) {
		_, size, err := n.r.store.Du(context.Background(), prefix)
		if err != nil {
			n.r.f.warnOnce("%v", err)
		}
		return size, err
	}); ours {
		return sz, errno
	}
	if notCarried(attr) {
		return 0, syscall.EOPNOTSUPP
	}
	if !strings.HasPrefix(attr, xattrPrefix) {
		return 0, syscall.ENODATA
	}
	var own map[string]string
	if attr == xattrPrefix+"etag" {
		n.mu.Lock()
		own = map[string]string{"etag": n.info.ETag}
		n.mu.Unlock()
	} else {
		var err error
		if own, err = n.xattrsOf(); err != nil {
			return 0, syscall.EIO
		}
	}
	sz, errno, _ := getXattr(own, attr, dest)
	return sz, errno
}

// Listxattr lists the user.bloscfs.* attributes.
func (n *remoteFile) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	n.mu.Lock()
	pr := n.pr
	n.mu.Unlock()
	own, err := n.xattrsOf()
	if err != nil {
		return 0, syscall.EIO
	}
	return listXattrs(own, zarrXattrNames(pr), dest)
}

// remoteHandle is an open object version: the shared read path
// (viewHandle), whose read-ahead decodes the blocks of containers.
type remoteHandle struct {
	viewHandle
}

var (
	_ = (gofs.FileReader)((*remoteHandle)(nil))
	_ = (gofs.FileReleaser)((*remoteHandle)(nil))
)

// Release waits for the handle's read-ahead.
func (h *remoteHandle) Release(ctx context.Context) syscall.Errno {
	if h.stop() {
		h.f.stats.openFiles.Add(-1)
	}
	return 0
}
