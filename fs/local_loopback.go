package fs

// What passes through to the source directory: the loopback base of the
// local directory and plain-file nodes, and plain files, opened without
// blocking and handed to the kernel's FUSE passthrough where it allows.

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// loopbackNode is go-fuse's loopback node of a directory, plain file or
// symlink of a local mount, with the source's extended attributes but
// those the mount does not carry. (dirNode.Getxattr, in stats.go, also
// answers the root's StatsXattr.)
type loopbackNode struct{ gofs.LoopbackNode }

// Getxattr returns the source's attribute.
func (n *loopbackNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if notCarried(attr) {
		return 0, syscall.EOPNOTSUPP
	}
	return n.LoopbackNode.Getxattr(ctx, attr, dest)
}

// Setxattr sets the source's attribute.
func (n *loopbackNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if notCarried(attr) {
		return syscall.EOPNOTSUPP
	}
	return n.LoopbackNode.Setxattr(ctx, attr, data, flags)
}

// Removexattr removes the source's attribute.
func (n *loopbackNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if notCarried(attr) {
		return syscall.EOPNOTSUPP
	}
	return n.LoopbackNode.Removexattr(ctx, attr)
}

// Listxattr lists the source's attributes.
func (n *loopbackNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listCarried(func(b []byte) (uint32, syscall.Errno) { return n.LoopbackNode.Listxattr(ctx, b) }, dest)
}

// plainNode is a file, symlink or special file that passes through.
type plainNode struct {
	loopbackNode
	fs *FS
}

var _ = (gofs.NodeOpener)((*plainNode)(nil))

// Open opens a passed-through file as the loopback does, but never
// blocks on what is not a regular file: the kernel sends OPEN only for
// what it saw as a regular file, and the entry may have been replaced by
// a FIFO since. The file is opened with O_NONBLOCK|O_NOFOLLOW, checked
// with fstat, and O_NONBLOCK is then cleared unless the caller asked
// for it.
func (n *plainNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags|syscall.O_NONBLOCK|syscall.O_NOFOLLOW)
	if errno != 0 {
		return nil, 0, errno
	}
	lf, ok := fh.(*gofs.LoopbackFile)
	if !ok {
		return fh, fl, 0
	}
	fd, _ := lf.PassthroughFd()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		lf.Release(ctx)
		if err != nil {
			return nil, 0, gofs.ToErrno(err)
		}
		return nil, 0, syscall.EIO
	}
	if flags&syscall.O_NONBLOCK == 0 {
		if cur, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
			unix.FcntlInt(uintptr(fd), unix.F_SETFL, cur&^unix.O_NONBLOCK)
		}
	}
	return &plainFile{LoopbackFile: lf, stats: &n.fs.stats, name: n.Path(nil)}, fl, 0
}

// plainFile is an open passed-through file. go-fuse hands its descriptor
// to the kernel as the backing file (FUSE passthrough) where the kernel
// and our privileges allow, and falls back silently to serving its reads
// and writes here: the file counts as passed through from the kernel's
// request for its descriptor until a READ or WRITE of it reaches the
// daemon (`bloscfs stats`).
type plainFile struct {
	*gofs.LoopbackFile
	stats *counters
	name  string
}

// PassthroughFd gives the kernel the source file's descriptor.
func (f *plainFile) PassthroughFd() (int, bool) {
	fd, ok := f.LoopbackFile.PassthroughFd()
	if ok {
		f.stats.setPassed(f, f.name, true)
	}
	return fd, ok
}

// Read serves a READ that the kernel did not serve itself.
func (f *plainFile) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.stats.setPassed(f, "", false)
	return f.LoopbackFile.Read(ctx, buf, off)
}

// Write serves a WRITE that the kernel did not serve itself.
func (f *plainFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f.stats.setPassed(f, "", false)
	return f.LoopbackFile.Write(ctx, data, off)
}

// Release closes the file.
func (f *plainFile) Release(ctx context.Context) syscall.Errno {
	f.stats.setPassed(f, "", false)
	return f.LoopbackFile.Release(ctx)
}
