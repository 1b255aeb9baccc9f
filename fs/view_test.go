package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"slices"
	"sync"
	"syscall"
	"testing"
)

// fakeBackend is a backend of one directory: entries by name, and what
// probing each gives.
type fakeBackend struct {
	ents    []backendEntry
	valid   map[string]bool  // a readable container (absent: not one)
	failed  map[string]error // probing fails with this
	listErr error
}

func (b *fakeBackend) list(dir string, names []string) ([]backendEntry, error) {
	if b.listErr != nil {
		return nil, b.listErr
	}
	if names == nil {
		return b.ents, nil
	}
	var out []backendEntry
	for _, n := range names {
		for _, e := range b.ents {
			if e.name == n {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func (b *fakeBackend) probe(dir string, e backendEntry) (*probe, error) {
	if err := b.failed[e.name]; err != nil {
		return &probe{}, err
	}
	return &probe{ok: b.valid[e.name]}, nil
}

func TestViewEntries(t *testing.T) {
	fe := func(name string, dir bool) backendEntry {
		return backendEntry{name: name, dir: dir, meta: "rec:" + name}
	}
	b := &fakeBackend{
		ents:  []backendEntry{fe("a.blp", false), fe("b.b2nd", false), fe("bad.blp", false), fe("c.b2frame", false), fe("c", false), fe("s.b2frame", true), fe("plain", true)},
		valid: map[string]bool{"a.blp": true, "b.b2nd": true, "c.b2frame": true, "s.b2frame": true},
	}
	for _, tc := range []struct {
		only  string
		want  string // rendered view
		errno syscall.Errno
	}{
		{"", "a<a.blp* b.npy<b.b2nd* bad.blp c c.b2frame* plain s<s.b2frame*", 0},
		{"a", "a<a.blp*", 0},
		{"b.npy", "b.npy<b.b2nd*", 0},
		{"c", "c c.b2frame*", 0},
		{"bad.blp", "bad.blp", 0},
		{"missing", "", 0},
	} {
		var names []string
		if tc.only != "" {
			names = diskCandidates(tc.only)
		}
		ents, errno := viewEntries(b, "d", names)
		if errno != tc.errno || render(ents) != tc.want {
			t.Errorf("viewEntries(%q) = %q, %v; want %q, %v", tc.only, render(ents), errno, tc.want, tc.errno)
		}
		for _, e := range ents {
			if e.meta != "rec:"+e.disk {
				t.Errorf("viewEntries(%q): %s carries %v, want the record of %s", tc.only, e.view, e.meta, e.disk)
			}
		}
	}
	if e, errno := lookupEntry(b, "d", "s"); errno != 0 || e.disk != "s.b2frame" || !e.dir || !e.compressed {
		t.Errorf("lookupEntry(s) = %+v, %v; want the sparse frame s.b2frame", e, errno)
	}
	if _, errno := lookupEntry(b, "d", "a.blp"); errno != syscall.ENOENT {
		t.Errorf("lookupEntry(a.blp) = %v; want ENOENT (shown as a)", errno)
	}
}

func TestViewEntriesErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		b     *fakeBackend
		errno syscall.Errno
	}{
		{"list errno", &fakeBackend{listErr: syscall.EACCES}, syscall.EACCES},
		{"list other", &fakeBackend{listErr: errors.New("listing failed")}, syscall.EIO},
		{"transient probe", &fakeBackend{
			ents:   []backendEntry{{name: "x.blp"}, {name: "y.blp"}},
			valid:  map[string]bool{"y.blp": true},
			failed: map[string]error{"x.blp": syscall.EMFILE},
		}, syscall.EMFILE},
	} {
		if ents, errno := viewEntries(tc.b, "d", nil); errno != tc.errno {
			t.Errorf("%s: viewEntries = %q, %v; want %v", tc.name, render(ents), errno, tc.errno)
		}
	}
}

// fakeContent is a viewContent of size bytes (byte i is i%251) that
// records its reads and prefetches.
type fakeContent struct {
	n      int64
	fail   error
	mu     sync.Mutex
	onces  []bool
	ranges [][2]int64 // prefetched
}

func (c *fakeContent) readAt(p []byte, off int64, once bool) (int, error) {
	c.mu.Lock()
	c.onces = append(c.onces, once)
	c.mu.Unlock()
	if c.fail != nil {
		return 0, c.fail
	}
	if off >= c.n {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), c.n-off))
	for i := range n {
		p[i] = byte((off + int64(i)) % 251)
	}
	return n, nil
}

func (c *fakeContent) prefetch(off, size int64, reader func() int64) {
	c.mu.Lock()
	c.ranges = append(c.ranges, [2]int64{off, off + size})
	c.mu.Unlock()
}

func (c *fakeContent) size() int64 { return c.n }

func TestViewHandleSequential(t *testing.T) {
	f := &FS{opts: Options{Logger: log.New(io.Discard, "", 0)}}
	c := &fakeContent{n: 64 << 20}
	// A zero handle, as the local and remote trees make them: its first
	// READ, at 0, starts a stream.
	h := &viewHandle{c: c, f: f, readAhead: 4 << 20}
	buf := make([]byte, 1<<20)
	for _, off := range []int64{0, 1 << 20, 2 << 20, 40 << 20} {
		res, errno := h.Read(context.Background(), buf, off)
		if errno != 0 {
			t.Fatalf("Read at %d: %v", off, errno)
		}
		b, _ := res.Bytes(nil)
		if len(b) != len(buf) || b[0] != byte(off%251) {
			t.Fatalf("Read at %d: %d bytes starting %d", off, len(b), b[0])
		}
	}
	// Let the read-ahead run before stopping: stop ends it at its next
	// step, and a loaded machine may not have run its first one yet.
	h.aheadWG.Wait()
	if !h.stop() || h.stop() {
		t.Errorf("stop: want true once, then false")
	}
	// Reads at 0, 1 and 2 MiB are sequential; the jump to 40 MiB is not.
	if want := []bool{true, true, true, false}; len(c.onces) != 4 || c.onces[0] != want[0] || c.onces[1] != want[1] || c.onces[2] != want[2] || c.onces[3] != want[3] {
		t.Errorf("sequential reads: %v, want %v", c.onces, want)
	}
	// The second read started a read-ahead from its end (2 MiB) to 4 MiB
	// past it, in 1 MiB steps.
	if len(c.ranges) == 0 || c.ranges[0] != [2]int64{2 << 20, 3 << 20} {
		t.Errorf("read-ahead prefetched %v, want [2 MiB, 3 MiB) first", c.ranges)
	}
	for _, r := range c.ranges {
		if r[0] < 2<<20 || r[1] > 7<<20 {
			t.Errorf("read-ahead prefetched %v, outside [2 MiB, 7 MiB)", r)
		}
	}
}

// TestViewHandleRandomNeighbours: random READs that land near the one
// before now and then are not a stream: they start no read-ahead and
// keep their blocks cached, until two READs in a row follow on.
func TestViewHandleRandomNeighbours(t *testing.T) {
	f := &FS{opts: Options{Logger: log.New(io.Discard, "", 0)}}
	c := &fakeContent{n: 256 << 20}
	h := &viewHandle{c: c, f: f, readAhead: 4 << 20}
	buf := make([]byte, 4096)
	offs := []int64{100 << 20, 37 << 20, 38 << 20, 200 << 20, 199 << 20, 10 << 20}
	// Then a stream: each READ follows on from the one before; the
	// second one that does is sequential.
	offs = append(offs, 10<<20+4096, 10<<20+8192, 10<<20+12288)
	for i, off := range offs {
		if _, errno := h.Read(context.Background(), buf, off); errno != 0 {
			t.Fatalf("Read at %d: %v", off, errno)
		}
		if i == 5 {
			c.mu.Lock()
			if len(c.ranges) != 0 {
				t.Errorf("random reads started read-ahead: %v", c.ranges)
			}
			c.mu.Unlock()
		}
	}
	h.aheadWG.Wait() // the read-ahead runs its steps before stop
	h.stop()
	want := []bool{false, false, false, false, false, false, false, true, true}
	if fmt.Sprint(c.onces) != fmt.Sprint(want) {
		t.Errorf("sequential: %v, want %v", c.onces, want)
	}
	if len(c.ranges) == 0 || c.ranges[0][0] != 10<<20+12288 {
		t.Errorf("the stream's read-ahead: %v, want one from 10 MiB + 12 KiB", c.ranges)
	}
}

func TestViewHandleErrors(t *testing.T) {
	f := &FS{opts: Options{Logger: log.New(io.Discard, "", 0)}}
	c := &fakeContent{n: 10, fail: errors.New("corrupt chunk")}
	logged := false
	h := &viewHandle{c: c, f: f, noSeq: true, logged: func() bool { logged = true; return true }}
	if _, errno := h.Read(context.Background(), make([]byte, 4), 0); errno != syscall.EIO {
		t.Errorf("Read of corrupt content: %v, want EIO", errno)
	}
	if !logged || c.onces[0] {
		t.Errorf("logged asked %v, once %v: want asked, and no sequential read on a noSeq handle", logged, c.onces[0])
	}
	c.fail = nil
	res, errno := h.Read(context.Background(), make([]byte, 4), 8)
	if b, _ := res.Bytes(nil); errno != 0 || len(b) != 2 {
		t.Errorf("Read across the end: %d bytes, %v; want 2", len(b), errno)
	}
}

// TestViewHandleOutOfOrder: the kernel sends a stream's read-ahead READs
// several at a time, and the daemon's threads take them up in any order,
// some MiB apart: they are all sequential. (Against the end of the last
// READ done, or of the last to arrive, a READ 3 MiB ahead of it was not,
// and its blocks went into the cache and stayed there.)
func TestViewHandleOutOfOrder(t *testing.T) {
	f := &FS{opts: Options{Logger: log.New(io.Discard, "", 0)}}
	c := &fakeContent{n: 64 << 20}
	h := &viewHandle{c: c, f: f}
	buf := make([]byte, 1<<20)
	// Arrival order of a cat seen through the daemon: offsets in MiB.
	for _, mib := range []int64{1, 0, 2, 3, 6, 4, 5, 7, 9, 10, 8, 11, 14, 12, 13, 15} {
		if _, errno := h.Read(context.Background(), buf, mib<<20); errno != 0 {
			t.Fatalf("Read at %d MiB: %v", mib, errno)
		}
	}
	for i, once := range c.onces {
		if !once {
			t.Errorf("READ %d (of %d) was not taken as sequential", i, len(c.onces))
		}
	}
	// A jump far away is not sequential; a stream begins there again
	// with the second READ that follows on.
	c.onces = nil
	for _, mib := range []int64{40, 41, 42, 20} {
		h.Read(context.Background(), buf, mib<<20)
	}
	if want := []bool{false, false, true, false}; !slices.Equal(c.onces, want) {
		t.Errorf("after a jump: sequential %v, want %v", c.onces, want)
	}
}
