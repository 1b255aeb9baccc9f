package mmapfile

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// writeRandom writes n random bytes to a new file and returns them and
// the file opened for reading.
func writeRandom(t *testing.T, n int) ([]byte, *os.File) {
	t.Helper()
	data := make([]byte, n)
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return data, f
}

func TestReadAt(t *testing.T) {
	const size = 3<<20 + 123
	data, f := writeRandom(t, size)
	m := New(f, size)
	defer m.Close()
	for _, tc := range []struct {
		off int64
		n   int
	}{
		{0, 10}, {0, 64 << 10}, {1, 1 << 20}, {size - (64 << 10), 64 << 10},
		{size - 100, 200 << 10}, {size, 64 << 10}, {size + 5, 70 << 10}, {12345, 2 << 20},
	} {
		p := make([]byte, tc.n)
		n, err := m.ReadAt(p, tc.off)
		want := 0
		if tc.off < size {
			want = min(tc.n, int(size-tc.off))
		}
		if n != want {
			t.Errorf("ReadAt(%d bytes at %d) = %d, want %d", tc.n, tc.off, n, want)
		}
		if (n < tc.n) != (err == io.EOF) {
			t.Errorf("ReadAt(%d bytes at %d): %d bytes, err %v", tc.n, tc.off, n, err)
		}
		if !bytes.Equal(p[:n], data[min(tc.off, size):min(tc.off, size)+int64(n)]) {
			t.Errorf("ReadAt(%d bytes at %d): wrong bytes", tc.n, tc.off)
		}
	}
	if mapped.Load() == 0 {
		t.Error("large reads did not map the file")
	}
}

func TestReadInPlace(t *testing.T) {
	const size = 1 << 20
	data, f := writeRandom(t, size)
	m := New(f, size)
	var got []byte
	ok, err := m.ReadInPlace(100, 5000, func(b []byte) error { got = bytes.Clone(b); return nil })
	if !ok || err != nil || !bytes.Equal(got, data[100:5100]) {
		t.Fatalf("ReadInPlace = %v, %v, equal %v", ok, err, bytes.Equal(got, data[100:5100]))
	}
	if ok, _ := m.ReadInPlace(size-10, 11, func([]byte) error { t.Error("called past the end"); return nil }); ok {
		t.Error("a range past the end was lent")
	}
	want := errors.New("mine")
	if _, err := m.ReadInPlace(0, 1, func([]byte) error { return want }); err != want {
		t.Errorf("fn's error: got %v", err)
	}
	m.Close()
	if ok, _ := m.ReadInPlace(0, 1, func([]byte) error { t.Error("called after Close"); return nil }); ok {
		t.Error("lent after Close")
	}
	if _, err := m.ReadAt(make([]byte, 1<<20), 0); err == nil {
		t.Error("ReadAt after Close succeeded")
	}
}

var sink byte

// TestShrunk truncates the file under its mapping: reading the lost pages
// is an error wrapping ErrFault, not a crash.
func TestShrunk(t *testing.T) {
	const size = 4 << 20
	_, f := writeRandom(t, size)
	m := New(f, size)
	defer m.Close()
	p := make([]byte, 1<<20)
	if _, err := m.ReadAt(p, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(f.Name(), 1<<20); err != nil {
		t.Fatal(err)
	}
	_, err := m.ReadAt(p, 2<<20)
	if !errors.Is(err, ErrFault) {
		t.Fatalf("reading truncated pages: %v, want ErrFault", err)
	}
	ok, err := m.ReadInPlace(3<<20, 4096, func(b []byte) error {
		for _, c := range b {
			sink += c
		}
		return nil
	})
	if !ok || !errors.Is(err, ErrFault) {
		t.Fatalf("ReadInPlace over truncated pages: %v, %v", ok, err)
	}
	// A cut inside the last page lent: its tail reads as zeros, with no
	// fault, and the read must still fail.
	if err := os.Truncate(f.Name(), 1<<20-100); err != nil {
		t.Fatal(err)
	}
	ok, err = m.ReadInPlace(1<<20-4096, 4096, func(b []byte) error { sink += b[4095]; return nil })
	if !ok || !errors.Is(err, ErrFault) {
		t.Fatalf("ReadInPlace over the zero tail of the last page: %v, %v", ok, err)
	}
	// The same when fn finds the zeros invalid (a decoder): the cause is
	// the cut, not corrupt bytes.
	ok, err = m.ReadInPlace(1<<20-4096, 4096, func(b []byte) error { return errors.New("corrupt stream") })
	if !ok || !errors.Is(err, ErrFault) {
		t.Fatalf("ReadInPlace over the zero tail, fn failing: %v, %v", ok, err)
	}
	// While the file holds the bytes, fn's own error is the answer.
	if _, err := m.ReadInPlace(0, 4096, func(b []byte) error { return errors.New("corrupt stream") }); err == nil || errors.Is(err, ErrFault) {
		t.Fatalf("ReadInPlace of bytes the file holds, fn failing: %v, want fn's error", err)
	}
	// Another panic is not swallowed.
	defer func() {
		if r := recover(); r == nil {
			t.Error("a panic inside fn was swallowed")
		}
	}()
	m.ReadInPlace(0, 10, func(b []byte) error {
		var np *int
		return errors.New(string(rune(*np))) // a nil dereference, outside the mapping
	})
}

// TestCloseWhileReading closes the file while readers hold its bytes: the
// mapping stays until the last one is done.
func TestCloseWhileReading(t *testing.T) {
	const size = 1 << 20
	data, f := writeRandom(t, size)
	m := New(f, size)
	inside := make(chan struct{})
	closed := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.ReadInPlace(0, size, func(b []byte) error {
			close(inside)
			<-closed
			if !bytes.Equal(b, data) { // faults if unmapped
				t.Error("bytes changed under a reader")
			}
			return nil
		})
	}()
	<-inside
	m.Close()
	close(closed)
	wg.Wait()
	if m.data.Load() != nil {
		t.Error("still mapped after the last reader")
	}
}

// TestBound: past maxMapped files, reads use pread and still succeed.
func TestBound(t *testing.T) {
	old := maxMapped
	maxMapped = mapped.Load() + 2
	defer func() { maxMapped = old }()
	var files []*File
	for i := range 4 {
		data, f := writeRandom(t, 128<<10+i)
		m := New(f, int64(len(data)))
		defer m.Close()
		files = append(files, m)
		p := make([]byte, len(data))
		if n, err := m.ReadAt(p, 0); n != len(p) || err != nil || !bytes.Equal(p, data) {
			t.Fatalf("file %d: %d, %v", i, n, err)
		}
	}
	mappedNow := 0
	for _, m := range files {
		if m.data.Load() != nil {
			mappedNow++
		}
	}
	if mappedNow != 2 {
		t.Errorf("%d files mapped, want 2", mappedNow)
	}
	files[0].Close()
	if ok, _ := files[3].ReadInPlace(0, 10, func([]byte) error { return nil }); !ok {
		t.Error("a freed slot was not reused")
	}
}

// rssFile returns the process's resident file-backed memory.
func rssFile(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb << 10
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestResidentBounded streams a 96 MiB file through the mapping: the
// process's resident file pages stay near trimEvery, not the file size.
func TestResidentBounded(t *testing.T) {
	const size = 96 << 20
	_, f := writeRandom(t, size)
	m := New(f, size)
	defer m.Close()
	before := rssFile(t)
	var peak int64
	for off := int64(0); off < size; off += 1 << 20 {
		if ok, err := m.ReadInPlace(off, 1<<20, func(b []byte) error {
			for i := 0; i < len(b); i += 4096 {
				sink += b[i]
			}
			return nil
		}); !ok || err != nil {
			t.Fatal(ok, err)
		}
		peak = max(peak, rssFile(t)-before)
	}
	t.Logf("resident file pages grew by at most %d MiB streaming %d MiB", peak>>20, size>>20)
	if bound := int64(min(2*trimEvery, size/2)); peak > bound {
		t.Errorf("resident file pages grew by %d MiB streaming %d MiB, want at most %d", peak>>20, size>>20, bound>>20)
	}
}

// TestConcurrentClose closes the file while readers on every core lend
// its bytes in a loop: each lent range is whole and right, none is lent
// after Close has returned and its readers have finished, and the mapping
// goes once the last of them is done.
func TestConcurrentClose(t *testing.T) {
	const size = 4 << 20
	data, f := writeRandom(t, size)
	before := mapped.Load()
	m := New(f, size)
	var wg sync.WaitGroup
	var reading atomic.Int32 // readers that have lent a range
	start := make(chan struct{})
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := 0; ; i++ {
				off := int64((g*7919 + i*104729) % (size - 65536))
				ok, err := m.ReadInPlace(off, 65536, func(b []byte) error {
					if !bytes.Equal(b, data[off:off+65536]) {
						return errors.New("wrong bytes")
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return // closed
				}
				if i == 0 {
					reading.Add(1)
				}
			}
		}()
	}
	close(start)
	// Close while every reader is in its loop.
	if !testkit.Eventually(t, 10*time.Second, func() bool { return reading.Load() == 8 }) {
		t.Fatalf("%d of 8 readers lent a range in 10 s", reading.Load())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if m.data.Load() != nil || m.users.Load() != 0 {
		t.Errorf("after Close and the last reader: mapped %v, %d readers", m.data.Load() != nil, m.users.Load())
	}
	if got := mapped.Load(); got != before {
		t.Errorf("%d files mapped, want %d", got, before)
	}
}
