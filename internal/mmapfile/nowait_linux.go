package mmapfile

import (
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Pread is an *os.File whose ReadAt reads from the page cache without
// the scheduler's attention when it can (readCached): the reader of a
// file that is not mapped.
type Pread struct{ *os.File }

// ReadAt reads len(p) bytes at off, as os.File's does.
func (f Pread) ReadAt(p []byte, off int64) (int, error) {
	n := readCached(f.File, p, off)
	if n == len(p) {
		return n, nil
	}
	k, err := f.File.ReadAt(p[n:], off+int64(n))
	return n + k, err
}

// noWait is cleared once the kernel or a file system refuses RWF_NOWAIT:
// every read then takes the ordinary path.
var noWait atomic.Bool

func init() { noWait.Store(true) }

// readCached reads p at off with preadv2(RWF_NOWAIT) as a raw system
// call, one that the Go scheduler does not see: it copies from the page
// cache and never waits for the disk (the kernel returns EAGAIN instead,
// or a short count). An ordinary read of a few hundred kilobytes lasts
// longer than the scheduler's 20 µs tick, and a read that long lets the
// scheduler hand the goroutine's processor to another thread (a wake-up
// and two context switches, which cost more than the copy on a virtual
// machine) and keeps its monitor thread waking every 20 µs; with one core
// (GOMAXPROCS=1) it does so on nearly every read. n is what was read; the
// caller reads the rest, if any, the ordinary way.
func readCached(f *os.File, p []byte, off int64) (n int) {
	if len(p) == 0 || off < 0 || !noWait.Load() {
		return 0
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	rc.Read(func(fd uintptr) bool {
		iov := unix.Iovec{Base: &p[0]}
		iov.SetLen(len(p))
		r, _, e := syscall.RawSyscall6(unix.SYS_PREADV2, fd, uintptr(unsafe.Pointer(&iov)), 1, uintptr(off), 0, unix.RWF_NOWAIT)
		switch {
		case e == 0:
			n = int(r)
		case e == unix.EOPNOTSUPP || e == unix.EINVAL || e == unix.ENOSYS:
			noWait.Store(false)
		}
		return true
	})
	return n
}
