package localwrite

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// TestWriter: writes of every size, raw ones up to and past maxRaw
// included, and a seek back to overwrite the start leave the file with
// the bytes written, as os.File's would.
func TestWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := New(f)
	if runtime.GOOS == "linux" {
		t.Logf("raw writes on the test's temp dir: %v", w.Raw())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var want []byte
	for _, n := range []int{0, 1, 7, 4096, 100000, maxRaw - 1, maxRaw, maxRaw + 12345, 3} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		k, err := w.Write(p)
		if k != n || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v", n, k, err)
		}
		want = append(want, p...)
	}
	if _, err := w.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("head")); err != nil {
		t.Fatal(err)
	}
	copy(want, "head")
	if pos, err := w.Seek(0, io.SeekEnd); err != nil || pos != int64(len(want)) {
		t.Fatalf("Seek to the end = %d, %v; want %d", pos, err, len(want))
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("file holds %d bytes, not the %d written", len(got), len(want))
	}
}

// TestWriterNotRegular: a device is written the ordinary way.
func TestWriterNotRegular(t *testing.T) {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	w := New(f)
	if w.Raw() {
		t.Fatalf("%s: raw writes to a device", os.DevNull)
	}
	if n, err := w.Write(make([]byte, 1000)); n != 1000 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
}

// TestWriterError: a failed raw write is an *os.PathError naming the file
// and wrapping the system's error.
func TestWriterError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path) // read-only
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := New(f)
	if !w.Raw() {
		t.Skip("no raw writes here")
	}
	n, err := w.Write([]byte("x"))
	var pe *os.PathError
	if n != 0 || !errors.As(err, &pe) || pe.Path != path || !errors.Is(err, syscall.EBADF) {
		t.Fatalf("Write to a read-only file = %d, %v; want 0 and a PathError for %s wrapping EBADF", n, err, path)
	}
}
