// Package localwrite writes a file on a local disk's file system with
// write(2) as a raw system call, one that the Go scheduler does not see.
//
// An ordinary write of a compressed chunk (a megabyte into the page cache,
// about 100 µs) lasts longer than the scheduler's 20 µs monitor tick, so
// the monitor takes the goroutine's processor away during the call and
// hands it to another thread, which the write's return must win back: a
// wake-up and a few context switches per write, and a monitor that keeps
// waking every 20 µs. On one core (GOMAXPROCS=1) that happens on nearly
// every write, and on a virtual machine it cost `bloscfs pack` a sixth of
// its CPU time: more than c-blosc2 spends on the same I/O.
//
// A raw write holds its processor until it returns, so it is used only
// where a buffered write does not wait for anything but the local disk and
// memory (ext4, XFS, btrfs, tmpfs; the kernel's dirty-page throttling
// pauses a writer for at most 200 ms at a time): a write to a network or
// FUSE file system, which can wait on a server indefinitely, takes the
// ordinary path, as does any other file system and any file that is not a
// regular file. Meanwhile, on one core, other goroutines (a signal's
// handling, a garbage collection's stop) wait for the write to return.
package localwrite

import (
	"io"
	"os"
)

// maxRaw bounds the bytes of one raw write, and so how long it holds its
// processor.
const maxRaw = 4 << 20

// Writer writes to and seeks in a file, with raw writes where the file
// lies on a local disk (see the package comment) and ordinary ones
// elsewhere. It is not safe for concurrent use.
type Writer struct {
	f   *os.File
	fd  uintptr
	raw bool
}

// New returns a Writer for f, which must stay open while the Writer is
// used; closing f stays the caller's.
func New(f *os.File) *Writer {
	w := &Writer{f: f}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		w.fd = f.Fd()
		w.raw = local(w.fd)
	}
	return w
}

// Raw reports whether w writes with raw system calls.
func (w *Writer) Raw() bool { return w.raw }

// Write writes p at the file's offset, as os.File's Write does.
func (w *Writer) Write(p []byte) (int, error) {
	if !w.raw {
		return w.f.Write(p)
	}
	n := 0
	for n < len(p) {
		k, err := rawWrite(w.fd, p[n:min(len(p), n+maxRaw)])
		if err != nil {
			return n, &os.PathError{Op: "write", Path: w.f.Name(), Err: err}
		}
		if k == 0 {
			return n, io.ErrShortWrite
		}
		n += k
	}
	return n, nil
}

// Seek sets the file's offset, as os.File's Seek does.
func (w *Writer) Seek(offset int64, whence int) (int64, error) {
	return w.f.Seek(offset, whence)
}
