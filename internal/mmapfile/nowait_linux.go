package mmapfile

import (
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

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
// caller reads the rest, if any, the ordinary way. The caller keeps fd
// open meanwhile (Pread counts its readers).
func readCached(fd uintptr, p []byte, off int64) int {
	if len(p) == 0 || off < 0 || !noWait.Load() {
		return 0
	}
	iov := unix.Iovec{Base: &p[0]}
	iov.SetLen(len(p))
	r, _, e := syscall.RawSyscall6(unix.SYS_PREADV2, fd, uintptr(unsafe.Pointer(&iov)), 1, uintptr(off), 0, unix.RWF_NOWAIT)
	switch {
	case e == 0:
		return int(r)
	case e == unix.EOPNOTSUPP || e == unix.EINVAL || e == unix.ENOSYS:
		noWait.Store(false)
	}
	return 0
}
