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
//
// Each call copies at most maxNoWait bytes: the Go scheduler cannot stop
// a thread in a raw system call, so a stop-the-world (a GC) waits for the
// copy to end, and a copy of a 2 GiB read would hold every goroutine of
// the process for a second. Between the calls the goroutine can be
// preempted.
func readCached(fd uintptr, p []byte, off int64) int {
	if len(p) == 0 || off < 0 || !noWait.Load() {
		return 0
	}
	n := 0
	for n < len(p) {
		k := min(len(p)-n, maxNoWait)
		r, e := preadNoWait(fd, p[n:n+k], off+int64(n))
		if e != 0 {
			if e == unix.EOPNOTSUPP || e == unix.EINVAL || e == unix.ENOSYS {
				noWait.Store(false)
			}
			break
		}
		n += r
		if r < k {
			break
		}
	}
	return n
}

// maxNoWait bounds the bytes of one raw preadv2: a copy from the page
// cache of 1 MiB takes well under a millisecond.
const maxNoWait = 1 << 20

// preadNoWait is one raw preadv2(RWF_NOWAIT) of p at off (a variable, so
// that the tests can see each call).
var preadNoWait = func(fd uintptr, p []byte, off int64) (int, syscall.Errno) {
	iov := unix.Iovec{Base: &p[0]}
	iov.SetLen(len(p))
	r, _, e := syscall.RawSyscall6(unix.SYS_PREADV2, fd, uintptr(unsafe.Pointer(&iov)), 1, uintptr(off), 0, unix.RWF_NOWAIT)
	return int(r), e
}
