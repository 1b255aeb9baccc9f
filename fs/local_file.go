package fs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/zarr"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// A compressed file of the source directory (blobNode): its identity and
// attributes, its opens and the shared view its handles read, and the
// handles (blobHandle), whose writes local_write.go serves.

// fillAttr sets attributes for a compressed file: times, owner and
// permissions of the source, its plain size, type regular file.
func fillAttr(a *fuse.Attr, st *syscall.Stat_t, p *probe) {
	a.FromStat(st)
	perm := st.Mode & 07777
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		perm &^= 0111 // a sparse frame directory is shown as a file
		a.Nlink = 1
	}
	a.Mode = syscall.S_IFREG | perm
	a.Size = uint64(p.size)
	// The preferred I/O size: a FUSE request each way carries up to
	// 1 MiB, and programs that follow st_blksize (cp, dd without bs,
	// stdio) then send fewer, larger ones.
	a.Blksize = preferredIO
}

// blobNode is a compressed file shown decompressed.
type blobNode struct {
	gofs.Inode
	fs *FS

	mu      sync.Mutex // guards disk, sparse and dir
	disk    string     // name in the parent directory on disk
	sparse  bool       // a sparse frame directory
	dir     *dirNode   // the directory that made the node, until go-fuse links it
	gone    bool       // unlinked (or replaced) while open: nothing to commit
	ino     uint64     // inode number of the disk file it shows
	created bool       // made through this mount (its first commit uses the mount's parameters)

	// smu guards the content: reads share it, writes and commits take it.
	smu     sync.RWMutex
	view    *all.View // the committed content, while handles are open
	refs    int       // open handles
	stage   *stage    // uncommitted writes, while the file is open for writing
	writers int       // open writable handles
	format  NewFormat // for a file created through the mount
	// file is the disk file behind view (O_PATH), while handles are
	// open: its attributes once its name is gone (unlinked while open).
	file *os.File
	// The times of uncommitted changes (zero: none): mtime and ctime of
	// the last write or truncation, or the times set meanwhile; the
	// commit gives mtime and atime to the new file.
	mtime, ctime, atime time.Time
}

var (
	_ = (gofs.NodeGetattrer)((*blobNode)(nil))
	_ = (gofs.NodeOpener)((*blobNode)(nil))
	_ = (gofs.NodeSetattrer)((*blobNode)(nil))
	_ = (gofs.NodeGetxattrer)((*blobNode)(nil))
	_ = (gofs.NodeListxattrer)((*blobNode)(nil))
	_ = (gofs.NodeStatfser)((*blobNode)(nil))
)

// shows reports whether the node, not gone, shows the disk file of inode
// number ino.
func (n *blobNode) shows(ino uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.gone && n.ino == ino
}

// setGone records that the node's file was unlinked or replaced.
func (n *blobNode) setGone() {
	n.mu.Lock()
	n.gone = true
	n.mu.Unlock()
}

func (n *blobNode) isGone() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.gone
}

// diskPath returns the source path of the container, "" if the node has
// left the tree or its name no longer shows a compressed file. The disk
// name is resolved from the node's view name each time: the source may
// have been renamed behind the mount, and a node found again by its
// identity keeps its old fields.
func (n *blobNode) diskPath() (string, bool) {
	name, parent := n.Parent()
	n.mu.Lock()
	gone, disk, sparse, dir := n.gone, n.disk, n.sparse, n.dir
	n.mu.Unlock()
	if gone {
		return "", false
	}
	if parent == nil {
		if dir == nil {
			// It has left the tree (its name now shows another node):
			// it is no longer any name's file.
			n.setGone()
			return "", false
		}
		// Not linked into the tree yet (within Create).
		return filepath.Join(dir.path(), disk), sparse
	}
	if dir != nil {
		// Linked now: without a parent later, it has left the tree.
		n.mu.Lock()
		n.dir = nil
		n.mu.Unlock()
	}
	dn, ok := parent.Operations().(*dirNode)
	if !ok {
		return "", false
	}
	e, _, errno := dn.resolveKept(name)
	if errno != 0 || !e.compressed {
		return "", false
	}
	return filepath.Join(dn.path(), e.disk), e.dir
}

func (n *blobNode) stat() (string, *syscall.Stat_t, *probe, syscall.Errno) {
	p, _ := n.diskPath()
	if p == "" {
		return "", nil, nil, syscall.ENOENT
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return "", nil, nil, gofs.ToErrno(err)
	}
	pr, err := n.fs.probe(p, &st)
	if err != nil {
		return "", nil, nil, errnoOf(err)
	}
	return p, &st, pr, 0
}

// Getattr reports the source's metadata with the plain size. A file
// whose name is gone (unlinked while open) reports the attributes of its
// open disk file, as long as a handle holds it.
func (n *blobNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	_, st, pr, errno := n.stat()
	n.smu.RLock()
	defer n.smu.RUnlock()
	if errno != 0 {
		var fst syscall.Stat_t
		if n.file == nil || syscall.Fstat(int(n.file.Fd()), &fst) != nil {
			return errno
		}
		st, pr = &fst, &probe{ok: true}
	}
	if !pr.ok {
		// The file no longer parses (replaced under the mount): show its
		// raw size until the kernel looks it up again.
		out.FromStat(st)
		return 0
	}
	fillAttr(&out.Attr, st, pr)
	out.Ino = n.StableAttr().Ino
	if n.stage != nil {
		out.Size = uint64(n.stage.size)
	} else if n.view != nil {
		out.Size = uint64(n.view.Size)
	}
	n.stagedTimes(&out.Attr)
	out.SetTimeout(n.fs.attrTimeout(st))
	return 0
}

// attrTimeout is how long the kernel may cache the attributes of a
// compressed file: long, since it changes only through the mount, but not
// at all while it has other hard links, whose names are other nodes (a
// chmod, link or unlink through one name changes what the others show).
func (f *FS) attrTimeout(st *syscall.Stat_t) time.Duration {
	if st.Nlink > 1 && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		return 0
	}
	return f.opts.CompressedTimeout
}

// stagedTimes shows the times of uncommitted changes (n.smu held).
func (n *blobNode) stagedTimes(a *fuse.Attr) {
	set := func(t time.Time, sec *uint64, nsec *uint32) {
		if !t.IsZero() {
			*sec, *nsec = uint64(t.Unix()), uint32(t.Nanosecond())
		}
	}
	set(n.mtime, &a.Mtime, &a.Mtimensec)
	set(n.ctime, &a.Ctime, &a.Ctimensec)
	set(n.atime, &a.Atime, &a.Atimensec)
}

// clearTimes forgets the times of uncommitted changes (n.smu held).
func (n *blobNode) clearTimes() {
	n.mtime, n.ctime, n.atime = time.Time{}, time.Time{}, time.Time{}
}

// commitTimes gives the new file of a commit the times of the changes
// it holds: the last write's (or the set) mtime, and a set atime.
func (n *blobNode) commitTimes(path string) error {
	if n.mtime.IsZero() && n.atime.IsZero() {
		return nil
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	if !n.atime.IsZero() {
		ts[0] = unix.NsecToTimespec(n.atime.UnixNano())
	}
	if !n.mtime.IsZero() {
		ts[1] = unix.NsecToTimespec(n.mtime.UnixNano())
	}
	return unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, 0)
}

// Setattr changes mode, owner and times on the source, and the size
// through the stage (committed at once when no writable handle is open).
func (n *blobNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if n.fs.opts.ReadOnly {
		return syscall.EROFS
	}
	p, _ := n.diskPath()
	follow := 0
	if p == "" {
		// Unlinked while open: change the open file.
		n.smu.RLock()
		if n.file != nil {
			p, follow = fmt.Sprintf("/proc/self/fd/%d", n.file.Fd()), 1
		}
		n.smu.RUnlock()
		if p == "" {
			return syscall.ENOENT
		}
	}
	if size, ok := in.GetSize(); ok {
		n.smu.Lock()
		errno := n.acquireLocked()
		if errno == 0 {
			errno = n.truncateStaged(int64(size))
			n.releaseLocked()
		}
		n.smu.Unlock()
		if errno != 0 {
			return errno
		}
	}
	if m, ok := in.GetMode(); ok {
		if err := syscall.Chmod(p, m&07777); err != nil {
			return gofs.ToErrno(err)
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		u, g := -1, -1
		if uok {
			u = int(uid)
		}
		if gok {
			g = int(gid)
		}
		chown := syscall.Lchown
		if follow != 0 {
			chown = syscall.Chown
		}
		if err := chown(p, u, g); err != nil {
			return gofs.ToErrno(err)
		}
	}
	atime, aok := in.GetATime()
	mtime, mok := in.GetMTime()
	if aok || mok {
		// A change still staged keeps the times set now for its commit.
		n.smu.Lock()
		if n.stage != nil {
			if aok {
				n.atime = atime
			}
			if mok {
				n.mtime = mtime
			}
			n.ctime = time.Now()
		}
		n.smu.Unlock()
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if aok {
			ts[0] = unix.NsecToTimespec(atime.UnixNano())
		}
		if mok {
			ts[1] = unix.NsecToTimespec(mtime.UnixNano())
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW*(1-follow)); err != nil {
			return gofs.ToErrno(err)
		}
	}
	if err := n.Getattr(ctx, fh, out); err != 0 {
		return err
	}
	if out.Nlink > 1 {
		// The other names of the disk file show these attributes too.
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil {
			n.fs.linksChanged(st.Ino)
		}
	}
	return 0
}

var _ = (gofs.NodeOnForgetter)((*blobNode)(nil))

// OnForget drops the node from the hard-link records.
func (n *blobNode) OnForget() { n.fs.dropLink(n) }

// Statfs reports the source filesystem.
func (n *blobNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var s syscall.Statfs_t
	if err := syscall.Statfs(n.fs.source, &s); err != nil {
		return gofs.ToErrno(err)
	}
	out.FromStatfsT(&s)
	return 0
}

// Open returns a handle. Opening for writing stages the file: writes go
// to the stage, and the file is recompressed on fsync and when the last
// writable handle closes.
func (n *blobNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	w := writable(flags)
	if w && n.fs.opts.ReadOnly {
		return nil, 0, syscall.EROFS
	}
	n.smu.Lock()
	defer n.smu.Unlock()
	if errno := n.acquireLocked(); errno != 0 {
		return nil, 0, errno
	}
	if w {
		if errno := n.startStage(); errno != 0 {
			n.releaseLocked()
			return nil, 0, errno
		}
		if flags&syscall.O_TRUNC != 0 {
			if n.view.NPY && n.view.Size > 0 {
				p, _ := n.diskPath()
				n.fs.opts.Logger.Printf("%s: refused: truncating the .npy view of a .b2nd array", p)
				n.dropStageIfIdle()
				n.releaseLocked()
				return nil, 0, syscall.EPERM
			}
			if err := n.stage.truncate(0); err != nil {
				n.releaseLocked()
				return nil, 0, gofs.ToErrno(err)
			}
			n.touch()
		}
		n.writers++
	}
	h := &blobHandle{viewHandle: viewHandle{c: n, f: n.fs, noSeq: w, readAhead: n.fs.opts.ReadAhead}, n: n, writable: w}
	n.fs.stats.openFiles.Add(1)
	return h, fuse.FOPEN_KEEP_CACHE, 0
}

// acquireLocked opens the committed view for a handle, shared among
// handles (n.smu held).
func (n *blobNode) acquireLocked() syscall.Errno {
	if n.view == nil {
		p, _ := n.diskPath()
		if p == "" {
			return syscall.ENOENT
		}
		c := n.fs.blockCache()
		v, err := all.OpenView(p, c)
		if err != nil {
			n.fs.warnOnce("%s: %v", p, err)
			return syscall.EIO
		}
		c.setCodec(v.Container.Info().Codec)
		n.setView(v, p)
		if n.fs.recheckZarr(p, v) {
			// The size the kernel holds came from out-of-date
			// consolidated metadata: it asks again (no request is
			// sent back to the mount meanwhile).
			n.NotifyContent(-1, 0)
		}
	}
	n.refs++
	return 0
}

// setView serves the view v of the disk file at p, which replaces the
// current one (n.smu held).
func (n *blobNode) setView(v *all.View, p string) {
	if n.view != nil {
		n.view.Close()
	}
	if n.file != nil {
		n.file.Close()
	}
	n.view = v
	n.file, _ = os.OpenFile(p, unix.O_PATH|unix.O_NOFOLLOW, 0) // nil if p is gone already
}

// releaseLocked drops a handle's share of the view (n.smu held).
func (n *blobNode) releaseLocked() {
	if n.refs--; n.refs == 0 && n.view != nil {
		n.view.Close()
		n.view = nil
		if n.file != nil {
			n.file.Close()
			n.file = nil
		}
	}
}

// readAt reads the file's current content: the stage while it is being
// written, else the committed view. once marks a sequential reader whose
// bytes the kernel keeps: the view may drop the blocks it has read whole.
func (n *blobNode) readAt(p []byte, off int64, once bool) (int, error) {
	n.smu.RLock()
	for n.stage != nil && n.stage.stream != nil {
		// A read ends a stream: its content moves to the stage file.
		n.smu.RUnlock()
		n.smu.Lock()
		var err error
		if n.stage != nil && n.stage.stream != nil {
			err = n.stage.demote()
		}
		n.smu.Unlock()
		if err != nil {
			return 0, err
		}
		n.smu.RLock()
	}
	defer n.smu.RUnlock()
	if n.stage != nil {
		return n.stage.ReadAt(p, off)
	}
	if n.view == nil {
		return 0, syscall.EBADF
	}
	if once {
		return n.view.ReadAtOnce(p, off)
	}
	return n.view.ReadAt(p, off)
}

// prefetch decodes [off, off+size) of the committed view into the block
// cache.
func (n *blobNode) prefetch(off, size int64, reader func() int64) {
	n.smu.RLock()
	defer n.smu.RUnlock()
	if n.stage == nil && n.view != nil {
		n.view.Prefetch(off, size, reader) // errors surface on the real read
	}
}

// stagedSize returns the size of the file being written, if it is.
func (n *blobNode) stagedSize() (int64, bool) {
	n.smu.RLock()
	defer n.smu.RUnlock()
	if n.stage == nil {
		return 0, false
	}
	return n.stage.size, true
}

// size returns the current plain size.
func (n *blobNode) size() int64 {
	n.smu.RLock()
	defer n.smu.RUnlock()
	if n.stage != nil {
		return n.stage.size
	}
	if n.view == nil {
		return 0
	}
	return n.view.Size
}

// Getxattr returns a user.bloscfs.* attribute, or the source's.
func (n *blobNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if notCarried(attr) {
		return 0, syscall.EOPNOTSUPP
	}
	if !strings.HasPrefix(attr, xattrPrefix) && attr != zarrAttrsXattr {
		// The source's own: no need to stat or probe.
		if p, _ := n.diskPath(); p != "" {
			sz, err := unix.Lgetxattr(p, attr, dest)
			return uint32(sz), gofs.ToErrno(err)
		}
	}
	p, _, pr, errno := n.stat()
	if errno != 0 {
		return 0, errno
	}
	if sz, errno, ours := zarrXattr(pr, attr, dest, func() (int64, error) { return zarr.StoredSize(p) }); ours {
		return sz, errno
	}
	if sz, errno, ours := getXattr(ownXattrs(pr), attr, dest); ours {
		return sz, errno
	}
	sz, err := unix.Lgetxattr(p, attr, dest)
	return uint32(sz), gofs.ToErrno(err)
}

// Setxattr sets an attribute on the source. user.bloscfs.* describe the
// storage and cannot be set: setting one is accepted and ignored, so that
// `cp -a` and `rsync -X` between views do not fail.
func (n *blobNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if n.fs.opts.ReadOnly {
		return syscall.EROFS
	}
	if strings.HasPrefix(attr, xattrPrefix) {
		return 0
	}
	if notCarried(attr) {
		return syscall.EOPNOTSUPP
	}
	p, _ := n.diskPath()
	if p == "" {
		return syscall.ENOENT
	}
	return gofs.ToErrno(unix.Lsetxattr(p, attr, data, int(flags)))
}

// Removexattr removes an attribute of the source.
func (n *blobNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if n.fs.opts.ReadOnly {
		return syscall.EROFS
	}
	if strings.HasPrefix(attr, xattrPrefix) {
		return syscall.EPERM
	}
	if notCarried(attr) {
		return syscall.EOPNOTSUPP
	}
	p, _ := n.diskPath()
	if p == "" {
		return syscall.ENOENT
	}
	return gofs.ToErrno(unix.Lremovexattr(p, attr))
}

// Listxattr lists the user.bloscfs.* attributes and the source's.
func (n *blobNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	p, _, pr, errno := n.stat()
	if errno != 0 {
		return 0, errno
	}
	var own []byte
	if sz, err := unix.Llistxattr(p, nil); err == nil && sz > 0 {
		own = make([]byte, sz)
		if sz, err = unix.Llistxattr(p, own); err == nil {
			own = carriedOnly(own[:sz])
		} else {
			own = nil
		}
	}
	return listXattrs(ownXattrs(pr), append(own, zarrXattrNames(pr)...), dest)
}

// blobHandle is an open compressed file. It reads through its node
// (viewHandle over the node as viewContent), so that after a commit it
// sees the new file; local_write.go adds the writes.
type blobHandle struct {
	viewHandle
	n        *blobNode
	writable bool
}

var (
	_ = (gofs.FileReader)((*blobHandle)(nil))
	_ = (gofs.FileReleaser)((*blobHandle)(nil))
	_ = (gofs.FileGetattrer)((*blobHandle)(nil))
	_ = (gofs.FileIoctler)((*blobHandle)(nil))
	_ = (viewContent)((*blobNode)(nil))
)

// Getattr reports the node's attributes.
func (h *blobHandle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.n.Getattr(ctx, nil, out)
}

// Release drops the handle's share of the open view. The last writable
// handle commits what a failed or skipped flush left, and frees the stage.
func (h *blobHandle) Release(ctx context.Context) syscall.Errno {
	if !h.stop() { // waits for a running read-ahead, which still reads
		return 0
	}
	h.n.fs.stats.openFiles.Add(-1)
	n := h.n
	n.smu.Lock()
	defer n.smu.Unlock()
	if h.writable {
		if n.writers--; n.writers == 0 {
			if n.commitErrno() != 0 {
				// The writes are dropped: the kernel's cached pages
				// hold them and must go (outside this request).
				go n.NotifyContent(0, 0)
			}
			n.dropStage()
		}
	}
	n.releaseLocked()
	return 0
}

// fsIocFSGetXattr is FS_IOC_FSGETXATTR, _IOR('X', 31, struct fsxattr).
const fsIocFSGetXattr = 0x801c581f

// Ioctl answers the ioctls that read a file's attributes, FS_IOC_GETFLAGS
// (lsattr; the kernel sends it for its fileattr_get) and
// FS_IOC_FSGETXATTR (lsattr -p), with those of the source file, or
// directory, that the compressed file shows, as a plain file passes them
// through. Any other ioctl is refused (ENOTTY): it would act on the
// container, not on the bytes the file shows.
func (h *blobHandle) Ioctl(ctx context.Context, cmd uint32, arg uint64, input, output []byte) (int32, syscall.Errno) {
	if cmd != unix.FS_IOC_GETFLAGS && cmd != fsIocFSGetXattr {
		return 0, syscall.ENOTTY
	}
	p, _ := h.n.diskPath()
	if p == "" {
		return 0, syscall.ENOENT // unlinked since it was opened
	}
	f, _, err := pack.OpenSource(p, true)
	if err != nil {
		return 0, gofs.ToErrno(unwrapErrno(err))
	}
	defer f.Close()
	// struct fsxattr is 28 bytes; FS_IOC_GETFLAGS fills an int, whatever
	// size its number says.
	var buf [28]byte
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(cmd), uintptr(unsafe.Pointer(&buf[0]))); errno != 0 {
		return 0, errno
	}
	copy(output, buf[:])
	return 0, 0
}
