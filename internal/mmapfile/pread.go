package mmapfile

import (
	"os"
	"runtime"
	"sync/atomic"
)

// Pread is a file read with pread: its ReadAt first copies what the page
// cache holds with readCached (Linux), then reads the rest the ordinary
// way. Readers run concurrently (no lock is taken); Close waits for the
// readCached calls in flight, so that the descriptor they use is never
// closed, and perhaps reused, under them.
type Pread struct {
	*os.File
	fd     uintptr
	users  atomic.Int64 // readCached calls in flight
	closed atomic.Bool
}

// NewPread returns a Pread reading f, which it owns and closes in Close.
func NewPread(f *os.File) *Pread {
	return &Pread{File: f, fd: f.Fd()}
}

// ReadAt reads len(p) bytes at off, as os.File's ReadAt does.
func (f *Pread) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	f.users.Add(1)
	if !f.closed.Load() {
		n = readCached(f.fd, p, off)
	}
	f.users.Add(-1)
	if n == len(p) {
		return n, nil
	}
	k, err := f.File.ReadAt(p[n:], off+int64(n))
	return n + k, err
}

// Close closes the file once no readCached call uses its descriptor.
func (f *Pread) Close() error {
	f.closed.Store(true)
	for f.users.Load() != 0 {
		runtime.Gosched() // a readCached call never waits for the disk
	}
	return f.File.Close()
}

// ReadCached reads len(p) bytes at off of the open descriptor fd, as
// much of them as the page cache holds, without the Go scheduler seeing
// a system call (see readCached: a handoff of the processor costs more
// than the copy on a virtual machine), and returns how many it read; the
// caller reads the rest the ordinary way. The caller keeps fd open
// meanwhile. It reads nothing where the system has no such read.
func ReadCached(fd int, p []byte, off int64) int {
	if fd < 0 {
		return 0
	}
	return readCached(uintptr(fd), p, off)
}
