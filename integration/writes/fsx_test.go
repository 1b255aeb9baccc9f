package writes

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fsx runs random operations on one file of a mount and checks every
// result against a plain in-memory model of the file.
type fsx struct {
	t       *testing.T
	seed    uint64
	rng     *rand.Rand
	path    string // the file in the mount
	f       *os.File
	model   []byte
	maxSize int
	n       int      // operations done
	log     []string // the last operations, a ring
	logNext int      // where the next entry goes in log
	counts  map[string]int
	spent   map[string]time.Duration
	// fdOnly keeps to operations on the open descriptor (no path
	// lookups, no other handles): BLOSCFS_FSX_FDONLY=1, to tell bugs of
	// the lookup path from others.
	fdOnly bool
	// newFiles adds an operation that makes the file anew (unlink and
	// create, or O_TRUNC) and writes it from its start in order: the
	// writes a new file streams.
	newFiles bool
}

const fsxLogLen = 50

// note records an operation in the log ring.
func (x *fsx) note(format string, a ...any) {
	s := fmt.Sprintf("%6d ", x.n) + fmt.Sprintf(format, a...)
	if len(x.log) < fsxLogLen {
		x.log = append(x.log, s)
	} else {
		x.log[x.logNext] = s
	}
	x.logNext = (x.logNext + 1) % fsxLogLen
}

// fail stops the run, printing the seed and the last operations.
func (x *fsx) fail(format string, a ...any) {
	x.t.Helper()
	var b strings.Builder
	start := 0
	if len(x.log) == fsxLogLen {
		start = x.logNext
	}
	for i := range x.log {
		b.WriteString(x.log[(start+i)%len(x.log)])
		b.WriteByte('\n')
	}
	x.t.Fatalf("operation %d: %s\nseed %d (replay: BLOSCFS_FSX_SEED=%d go test -run '%s' ./integration/writes/)\nthe last %d operations:\n%s",
		x.n, fmt.Sprintf(format, a...), x.seed, x.seed, x.t.Name(), len(x.log), b.String())
}

func (x *fsx) randBytes(n int) []byte {
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], x.rng.Uint64())
	}
	return b[:n]
}

// ioLen returns a small I/O size, mostly under a few KiB.
func (x *fsx) ioLen() int {
	caps := []int{16, 512, 4096, 65536}
	return 1 + x.rng.IntN(caps[x.rng.IntN(len(caps))])
}

func (x *fsx) open() {
	f, err := os.OpenFile(x.path, os.O_RDWR, 0)
	if err != nil {
		x.fail("open: %v", err)
	}
	x.f = f
}

// recreate makes the file anew, by unlink and create or by O_TRUNC, and
// writes up to about 12 chunks into it from its start, in order, in
// pieces of random size.
func (x *fsx) recreate() {
	unlink := x.rng.IntN(2) == 0
	x.note("new file (unlink first: %v)", unlink)
	if err := x.f.Close(); err != nil {
		x.fail("close: %v", err)
	}
	if unlink {
		if err := os.Remove(x.path); err != nil {
			x.fail("unlink: %v", err)
		}
	}
	f, err := os.OpenFile(x.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		x.fail("create: %v", err)
	}
	x.f = f
	x.model = x.model[:0]
	total := x.rng.IntN(12 << 16)
	for len(x.model) < total {
		p := x.randBytes(1 + x.rng.IntN(100<<10))
		x.note("write %d+%d in order", len(x.model), len(p))
		if n, err := x.f.WriteAt(p, int64(len(x.model))); err != nil || n != len(p) {
			x.fail("write %d+%d: %d, %v", len(x.model), len(p), n, err)
		}
		x.modelWrite(len(x.model), p)
	}
}

// setModelSize cuts or zero-extends the model.
func (x *fsx) setModelSize(n int) {
	if n <= len(x.model) {
		x.model = x.model[:n]
		return
	}
	x.model = append(x.model, make([]byte, n-len(x.model))...)
}

func (x *fsx) modelWrite(off int, p []byte) {
	if end := off + len(p); end > len(x.model) {
		x.setModelSize(end)
	}
	copy(x.model[off:], p)
}

// compare checks what a read returned against the model.
func (x *fsx) compare(what string, off int, got []byte) {
	want := []byte{}
	if off < len(x.model) {
		want = x.model[off:min(len(x.model), off+len(got))]
	}
	if !bytes.Equal(got, want) {
		x.fail("%s at %d: %s", what, off, firstDiff(got, want))
	}
}

func (x *fsx) step() {
	size := len(x.model)
	start := time.Now()
	before := maps.Clone(x.counts)
	defer func() {
		for k, v := range x.counts {
			if before[k] != v {
				x.spent[k] += time.Since(start)
			}
		}
	}()
	if x.newFiles && !x.fdOnly && x.rng.IntN(150) == 0 {
		x.recreate()
		x.counts["new file, written in order"]++
		return
	}
	r := x.rng.IntN(1000)
	switch {
	case r < 300: // write, sometimes past the end (a hole)
		off := x.rng.IntN(size + 1 + 65536)
		p := x.randBytes(x.ioLen())
		if off+len(p) > x.maxSize {
			off = max(0, x.maxSize-len(p)-x.rng.IntN(4096))
		}
		x.note("write %d+%d (size %d)", off, len(p), size)
		if n, err := x.f.WriteAt(p, int64(off)); err != nil || n != len(p) {
			x.fail("write %d+%d: %d, %v", off, len(p), n, err)
		}
		x.modelWrite(off, p)
		x.counts["write"]++
	case r < 600: // read, sometimes across or past the end
		off := x.rng.IntN(size + 1 + 4096)
		p := make([]byte, x.ioLen())
		x.note("read %d+%d (size %d)", off, len(p), size)
		n, err := x.f.ReadAt(p, int64(off))
		if err != nil && err != io.EOF {
			x.fail("read %d+%d: %v", off, len(p), err)
		}
		if want := max(0, min(len(p), size-off)); n != want {
			x.fail("read %d+%d returned %d bytes, want %d (size %d)", off, len(p), n, want, size)
		}
		x.compare("read", off, p[:n])
		x.counts["read"]++
	case r < 640: // truncate: near the size, anywhere, or to zero
		var n int
		switch k := x.rng.IntN(10); {
		case k < 5:
			n = max(0, min(x.maxSize, size+x.rng.IntN(131072)-65536))
		case k < 9:
			n = x.rng.IntN(x.maxSize + 1)
		default:
			n = 0
		}
		byPath := x.rng.IntN(4) == 0 && !x.fdOnly
		x.note("truncate %d → %d (by path: %v)", size, n, byPath)
		var err error
		if byPath {
			err = os.Truncate(x.path, int64(n))
		} else {
			err = x.f.Truncate(int64(n))
		}
		if err != nil {
			x.fail("truncate to %d: %v", n, err)
		}
		x.setModelSize(n)
		x.counts["truncate"]++
	case r < 680: // mmap read
		if size == 0 {
			return
		}
		off := x.rng.IntN(size)
		n := min(x.ioLen(), size-off)
		x.note("mmap read %d+%d (size %d)", off, n, size)
		x.mmap(off, n, func(b []byte) { x.compare("mmap read", off, b) }, 0)
		x.counts["mmap read"]++
	case r < 720: // mmap write, msync, munmap
		if size == 0 {
			return
		}
		off := x.rng.IntN(size)
		p := x.randBytes(min(x.ioLen(), size-off))
		// MS_SYNC writes the pages back and fsyncs (a commit);
		// MS_ASYNC leaves them dirty for a later writeback.
		flag, name := unix.MS_ASYNC, "MS_ASYNC"
		if x.rng.IntN(3) == 0 {
			flag, name = unix.MS_SYNC, "MS_SYNC"
		}
		x.note("mmap write %d+%d, msync %s (size %d)", off, len(p), name, size)
		x.mmap(off, len(p), func(b []byte) { copy(b, p) }, flag)
		x.modelWrite(off, p)
		x.counts["mmap write"]++
	case r < 735:
		x.note("fsync (size %d)", size)
		if err := x.f.Sync(); err != nil {
			x.fail("fsync: %v", err)
		}
		x.counts["fsync"]++
	case r < 745:
		if x.fdOnly {
			return
		}
		x.note("close and reopen (size %d)", size)
		if err := x.f.Close(); err != nil {
			x.fail("close: %v", err)
		}
		x.open()
		x.counts["reopen"]++
	case r < 800:
		x.note("fstat and stat (size %d)", size)
		st, err := x.f.Stat()
		if err != nil || st.Size() != int64(size) {
			x.fail("fstat: size %v, %v; want %d", st.Size(), err, size)
		}
		if x.fdOnly {
			return
		}
		st, err = os.Stat(x.path)
		if err != nil || st.Size() != int64(size) {
			x.fail("stat: size %v, %v; want %d", st.Size(), err, size)
		}
		x.counts["stat"]++
	case r < 860: // a read through another handle
		if x.fdOnly {
			return
		}
		off := x.rng.IntN(size + 1)
		p := make([]byte, x.ioLen())
		x.note("read %d+%d through a new read-only handle (size %d)", off, len(p), size)
		g, err := os.Open(x.path)
		if err != nil {
			x.fail("open read-only: %v", err)
		}
		n, err := g.ReadAt(p, int64(off))
		g.Close()
		if err != nil && err != io.EOF {
			x.fail("read: %v", err)
		}
		if want := max(0, min(len(p), size-off)); n != want {
			x.fail("read %d+%d returned %d bytes, want %d", off, len(p), n, want)
		}
		x.compare("read through a new handle", off, p[:n])
		x.counts["read new handle"]++
	case r < 920: // append through an O_APPEND handle
		p := x.randBytes(x.ioLen())
		if size+len(p) > x.maxSize || x.fdOnly {
			return
		}
		x.note("append %d through O_APPEND (size %d)", len(p), size)
		g, err := os.OpenFile(x.path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			x.fail("open O_APPEND: %v", err)
		}
		if _, err := g.Write(p); err != nil {
			x.fail("append: %v", err)
		}
		if err := g.Close(); err != nil {
			x.fail("close of the O_APPEND handle: %v", err)
		}
		x.modelWrite(size, p)
		x.counts["append"]++
	case r < 930: // read everything
		x.note("read all (size %d)", size)
		var got []byte
		var err error
		if x.fdOnly {
			got = make([]byte, size+1)
			var n int
			n, err = x.f.ReadAt(got, 0)
			got = got[:n]
			if err == io.EOF {
				err = nil
			}
		} else {
			got, err = os.ReadFile(x.path)
		}
		if err != nil {
			x.fail("read all: %v", err)
		}
		if len(got) != size {
			x.fail("read all: %d bytes, want %d", len(got), size)
		}
		x.compare("read all", 0, got)
		x.counts["read all"]++
	default: // a write across a chunk boundary (chunks are 64 KiB)
		b := 65536 * (1 + x.rng.IntN(max(1, size/65536+1)))
		p := x.randBytes(1 + x.rng.IntN(300))
		off := max(0, b-x.rng.IntN(len(p)+1))
		if off+len(p) > x.maxSize {
			return
		}
		x.note("write %d+%d across a chunk boundary (size %d)", off, len(p), size)
		if n, err := x.f.WriteAt(p, int64(off)); err != nil || n != len(p) {
			x.fail("write %d+%d: %d, %v", off, len(p), n, err)
		}
		x.modelWrite(off, p)
		x.counts["write at a boundary"]++
	}
}

// mmap maps [off, off+n) of the file shared, lets fn use the bytes,
// and, for a write (msync flags ≠ 0), msyncs before unmapping.
func (x *fsx) mmap(off, n int, fn func([]byte), msync int) {
	page := os.Getpagesize()
	start := off &^ (page - 1)
	prot := unix.PROT_READ
	if msync != 0 {
		prot |= unix.PROT_WRITE
	}
	b, err := unix.Mmap(int(x.f.Fd()), int64(start), off+n-start, prot, unix.MAP_SHARED)
	if err != nil {
		x.fail("mmap %d+%d: %v", start, off+n-start, err)
	}
	fn(b[off-start:])
	if msync != 0 {
		if err := unix.Msync(b, msync); err != nil {
			x.fail("msync: %v", err)
		}
	}
	if err := unix.Munmap(b); err != nil {
		x.fail("munmap: %v", err)
	}
}

// TestRandomOps runs seeded random operations (fsx-style) on a Blosc2
// frame and on a Bloscpack file through the mount against an in-memory
// model, then checks the source with bloscfs unpack after the unmount.
// BLOSCFS_FSX_OPS sets the number of operations per file (10000, or
// 200000 with BLOSCFS_LONG=1); BLOSCFS_FSX_SEED replays a seed;
// BLOSCFS_FSX_FDONLY=1 keeps to operations on one open descriptor.
func TestRandomOps(t *testing.T) {
	setup.Require(t)
	ops := 10000
	if longRun() {
		ops = 200000
	}
	if s := os.Getenv("BLOSCFS_FSX_OPS"); s != "" {
		ops, _ = strconv.Atoi(s)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BLOSCFS_FSX_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	// "new" starts from a file created through the mount and makes it
	// anew now and then: new files written in order are streamed.
	for i, format := range []string{"b2frame", "blp", "new"} {
		t.Run(format, func(t *testing.T) {
			opSeed := seed + uint64(i)
			root, src, mnt := newDirs(t)
			plain := filepath.Join(root, "start.dat")
			if err := os.WriteFile(plain, seriesBytes(3<<20+777, 4), 0o644); err != nil {
				t.Fatal(err)
			}
			disk := filepath.Join(src, "f."+format)
			var m *mount
			if format == "new" {
				disk = filepath.Join(src, "f.b2frame")
				m = mountFG(t, src, mnt, "--codec", "lz4", "--chunk-size", "64KiB")
				copyFile(t, plain, m.Path("f"))
			} else {
				mustRun(t, bin, "pack", "--format", format, "--codec", "lz4", "--chunk-size", "64KiB", plain, disk)
			}
			before := infoOf(t, disk)
			if m == nil {
				m = mountFG(t, src, mnt)
			}
			x := &fsx{t: t, seed: seed, rng: rand.New(rand.NewPCG(opSeed, opSeed^0xdeadbeef)), path: m.Path("f"),
				model: readFile(t, plain), maxSize: 6 << 20, counts: map[string]int{}, spent: map[string]time.Duration{},
				fdOnly: os.Getenv("BLOSCFS_FSX_FDONLY") == "1", newFiles: format == "new"}
			t.Logf("seed %d, %d operations on %s (%d chunks of 64 KiB)", seed, ops, filepath.Base(disk), before.Chunks)
			start := time.Now()
			x.open()
			t.Cleanup(func() { x.f.Close() }) // before the unmount, also after a failure
			for x.n = 0; x.n < ops; x.n++ {
				x.step()
			}
			x.note("final close")
			if err := x.f.Close(); err != nil {
				x.fail("final close: %v", err)
			}
			got, err := os.ReadFile(x.path)
			if err != nil || !bytes.Equal(got, x.model) {
				x.fail("the whole file after the final close: %v, %s", err, firstDiff(got, x.model))
			}
			var summary []string
			for k, v := range x.counts {
				summary = append(summary, fmt.Sprintf("%s %d (%v)", k, v, x.spent[k].Round(time.Millisecond)))
			}
			sort.Strings(summary)
			t.Logf("%d operations in %v: %s", ops, time.Since(start).Round(time.Millisecond), strings.Join(summary, ", "))
			m.MustUnmount(t)
			if got := unpack(t, disk); !bytes.Equal(got, x.model) {
				x.fail("bloscfs unpack of the source after the unmount: %s", firstDiff(got, x.model))
			}
			if after := infoOf(t, disk); after.params() != before.params() {
				t.Errorf("stored parameters changed:\n got %s\nwant %s", after.params(), before.params())
			}
			if left := hiddenIn(src); len(left) > 0 {
				t.Errorf("temp files left after the unmount: %v", left)
			}
		})
	}
}
