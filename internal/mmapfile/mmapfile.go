// Package mmapfile reads a regular file through a read-only memory
// mapping, so that a decoder can read compressed bytes where they lie in
// the page cache instead of having pread copy them out first. Copying
// with pread cost about a third of the CPU time of `bloscfs unpack`.
//
// A mapping has two hazards, and File handles both:
//   - The file may shrink under it (another program truncates it): reading
//     a page past the new end raises SIGBUS. Every read of mapped bytes runs
//     with runtime/debug.SetPanicOnFault, and the fault becomes an error
//     naming the file. The rest of the page that holds the new end reads
//     as zeros without a fault, so every read also checks, after it, that
//     the file still holds the bytes it read.
//   - Unmapping while a reader still uses the bytes would let a later
//     mapping reuse the addresses and the reader see foreign bytes. A File
//     counts its readers and unmaps only when it is closed and none is left.
//
// The pages read count in the process's resident size (RssFile) until they
// leave its page tables: every 16 MiB read, a File drops them
// (MADV_DONTNEED; they stay in the page cache), so that streaming a large
// file does not look like a memory leak.
//
// Whether to read through a mapping at all is the caller's choice
// (Enabled): on a virtual machine whose hypervisor shadows the guest's
// page tables, the first touch of every freshly mapped page costs far more
// than copying it with pread (3x the CPU of `bloscfs unpack` on LZ4, 1.5-2x
// on zstd, measured on a PVM guest), while on bare metal the mapping saves
// the copy (12-25 % of `unpack` on LZ4). pread is the default; BLOSCFS_MMAP=1
// in the environment turns the mapping on.
//
// The file is mapped on first use, not at open: opening a container to
// list or probe it reads its header with pread and maps nothing. The
// number of files mapped at once is bounded (MaxMapped); past it, reads
// fall back to pread.
package mmapfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxMapped bounds how many files are mapped at once in the process: each
// mapping is one of the kernel's vm.max_map_count areas (65530 by
// default), which the Go runtime needs too.
const MaxMapped = 1024

// maxMapped is the bound in force (tests lower it).
var maxMapped int64 = MaxMapped

// minInPlace is the smallest ReadAt served from the mapping: below it a
// pread costs about the same, and the header reads of probing never map.
const minInPlace = 64 << 10

// trimEvery is how many bytes are read in place between two trims of the
// mapping (MADV_DONTNEED: the pages leave the process's page tables and
// stay in the page cache), so that the process's resident size does not
// grow with the files it streams.
const trimEvery = 16 << 20

// maxSize bounds the size of a file that is mapped: far above any real
// file, far below the 128 TiB address space.
const maxSize = 1 << 44

// ErrFault is wrapped by the error of a read that faulted on the mapping:
// the file shrank while it was being read, or its storage failed to read
// a page (which pread would have reported as EIO).
var ErrFault = errors.New("fault reading the file's memory mapping (the file shrank, or its storage failed)")

var mapped atomic.Int64 // files mapped now, in the whole process

var enabled atomic.Bool // whether containers should be read through a mapping

func init() { enabled.Store(os.Getenv("BLOSCFS_MMAP") == "1") }

// Enabled reports whether files should be read through a memory mapping:
// false unless the environment sets BLOSCFS_MMAP=1 (see the package
// comment for why pread is the default).
func Enabled() bool { return enabled.Load() }

// SetEnabled sets what Enabled reports and returns the previous setting
// (for tests and benchmarks).
func SetEnabled(on bool) bool { return enabled.Swap(on) }

// File is an io.ReaderAt and io.Closer over an open file of fixed size,
// reading through a memory mapping where it can and with pread where it
// cannot. It is safe for concurrent use, and its readers share no lock:
// they count themselves with an atomic add, and only mapping, unmapping
// and Close take the mutex.
type File struct {
	f    *os.File
	pr   *Pread // reads f when the mapping does not
	size int64

	mu     sync.Mutex             // held to map, unmap and close
	data   atomic.Pointer[[]byte] // the mapping; nil before the first in-place read, after failure and after unmapping
	users  atomic.Int64           // readers that may be using data
	closed atomic.Bool
	failed bool // mapping refused: pread only (under mu)
	done   bool // unmapped and the file closed, after Close and the last reader (under mu)

	sinceTrim atomic.Int64 // bytes read in place since the last trim
}

// New returns a File reading f, which holds size bytes. The File owns f
// and closes it in Close.
func New(f *os.File, size int64) *File {
	return &File{f: f, pr: NewPread(f), size: size}
}

// Name returns the name of the file.
func (m *File) Name() string { return m.f.Name() }

// acquire returns the mapping, mapping the file first if need be, and
// counts a reader; ok is false when the file cannot be read in place (then
// nothing is counted). A reader counts itself before it looks at closed,
// and Close sets closed before it looks at the count: so either Close
// sees the reader and leaves the mapping to the last release, or the
// reader sees closed and does not touch the mapping.
func (m *File) acquire() ([]byte, bool) {
	m.users.Add(1)
	if !m.closed.Load() {
		if d := m.data.Load(); d != nil {
			return *d, true
		}
		if d, ok := m.mapFile(); ok {
			return d, true
		}
	}
	m.release()
	return nil, false
}

// mapFile maps the file, once.
func (m *File) mapFile() ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Load() || m.failed {
		return nil, false
	}
	if d := m.data.Load(); d != nil {
		return *d, true
	}
	if m.size <= 0 || m.size > maxSize {
		m.failed = true
		return nil, false
	}
	if mapped.Add(1) > maxMapped {
		mapped.Add(-1)
		return nil, false // not failed: a slot may free up
	}
	data, err := unix.Mmap(int(m.f.Fd()), 0, int(m.size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		mapped.Add(-1)
		m.failed = true
		return nil, false
	}
	m.data.Store(&data)
	return data, true
}

// release ends a reader's use of the mapping; the last reader of a closed
// File unmaps it and closes the file.
func (m *File) release() {
	if m.users.Add(-1) == 0 && m.closed.Load() {
		m.mu.Lock()
		if m.users.Load() == 0 {
			m.finishLocked()
		}
		m.mu.Unlock()
	}
}

// finishLocked unmaps the file and closes it, once: the file stays open
// as long as readers of the mapping may need to check its size.
func (m *File) finishLocked() error {
	if m.done {
		return nil
	}
	m.done = true
	if d := m.data.Swap(nil); d != nil {
		unix.Munmap(*d)
		mapped.Add(-1)
	}
	return m.pr.Close()
}

// ReadInPlace calls fn with the n bytes at off as they lie in the mapping,
// and returns fn's error. fn must not write them, nor keep them after it
// returns. A fault while fn reads them ends fn and becomes an error
// wrapping ErrFault. ok is false, and fn is not called, when the bytes
// cannot be read in place (the range is outside the file, or the file is
// not mapped): read them with ReadAt instead.
func (m *File) ReadInPlace(off, n int64, fn func([]byte) error) (ok bool, err error) {
	if off < 0 || n < 0 || off+n > m.size {
		return false, nil
	}
	data, ok := m.acquire()
	if !ok {
		return false, nil
	}
	defer m.release()
	err = m.guard(data, off, func() error { return fn(data[off : off+n : off+n]) })
	if !errors.Is(err, ErrFault) && !m.holds(off+n) {
		// The file shrank while fn read: past its new end the page that
		// holds that end reads as zeros without a fault, and a decoder
		// can take zeros for valid data (a stream of zeros), so only the
		// size after the read says whether the bytes were the file's.
		// The same when fn failed: a decoder that found the zeros
		// invalid would otherwise report a corrupt file, not a shrunk one.
		err = m.faultErr(off)
	}
	if m.sinceTrim.Add(n) >= trimEvery {
		// Still a reader: the mapping cannot go meanwhile. Readers of it
		// now fault its pages back in from the page cache.
		m.sinceTrim.Store(0)
		unix.Madvise(data, unix.MADV_DONTNEED)
	}
	return true, err
}

// holds reports whether the file still has at least end bytes. A read
// that cannot tell (the file was closed meanwhile) does not trust its
// bytes, as a pread then would have failed too.
func (m *File) holds(end int64) bool {
	fi, err := m.f.Stat()
	return err == nil && fi.Size() >= end
}

// guard runs fn with memory faults on data turned into an error naming the
// file and the offset read. Any other panic, a fault elsewhere included,
// goes on.
func (m *File) guard(data []byte, off int64, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			f, ok := r.(interface{ Addr() uintptr })
			if !ok || !inside(data, f.Addr()) {
				panic(r)
			}
			err = m.faultErr(off)
		}
	}()
	return fn()
}

// faultErr is the error of a read at off whose bytes were not the file's.
func (m *File) faultErr(off int64) error {
	return fmt.Errorf("%s: reading at %d: %w", m.f.Name(), off, ErrFault)
}

// inside reports whether addr lies in data.
func inside(data []byte, addr uintptr) bool {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	return addr >= start && addr-start < uintptr(len(data))
}

// ReadAt reads len(p) bytes at off: large reads are copied from the
// mapping, small ones read with pread.
func (m *File) ReadAt(p []byte, off int64) (int, error) {
	if m.closed.Load() {
		return 0, &os.PathError{Op: "read", Path: m.f.Name(), Err: os.ErrClosed}
	}
	if len(p) >= minInPlace && off >= 0 && off < m.size {
		n := min(int64(len(p)), m.size-off)
		var got int
		if ok, err := m.ReadInPlace(off, n, func(b []byte) error { got = copy(p, b); return nil }); ok {
			if err != nil {
				return 0, err
			}
			if got < len(p) {
				return got, io.EOF
			}
			return got, nil
		}
	}
	return m.pr.ReadAt(p, off)
}

// Close closes the file to new reads. The mapping and the descriptor go
// when the last reader of the mapping is done.
func (m *File) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Swap(true) {
		return nil
	}
	if m.users.Load() == 0 {
		return m.finishLocked()
	}
	return nil
}
