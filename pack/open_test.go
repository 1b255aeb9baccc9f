package pack_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/pack"
	_ "github.com/bloscfs/bloscfs/pack/all"
)

// noHang runs f, and if it has not returned after a generous while (it
// blocks on a FIFO), opens the FIFOs for writing, which releases it, and
// fails the test. The timeout only guards against a hang; nothing is
// timed.
func noHang(t *testing.T, what string, fifos []string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Errorf("%s blocks on a FIFO", what)
		for _, p := range fifos {
			if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		return <-done
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOpenPathFIFO is finding 7 of issue 11: a FIFO where a container
// file, a sparse frame's index or one of its chunks is expected is
// refused at once, never opened for reading in a way that blocks.
func TestOpenPathFIFO(t *testing.T) {
	dir := t.TempDir()
	fx := filepath.Join(fixtures.Dir(), "sparse_frame.b2frame")

	// A FIFO named as a container file.
	fifo := filepath.Join(dir, "x.blp")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// A sparse frame whose index is a FIFO.
	idxDir := filepath.Join(dir, "y.b2frame")
	os.Mkdir(idxDir, 0o755)
	idxFifo := filepath.Join(idxDir, "chunks.b2frame")
	if err := syscall.Mkfifo(idxFifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// A sparse frame whose chunk 1 is a FIFO.
	chDir := filepath.Join(dir, "z.b2frame")
	os.Mkdir(chDir, 0o755)
	for _, n := range []string{"chunks.b2frame", "00000000.chunk", "00000002.chunk", "00000003.chunk"} {
		copyFile(t, filepath.Join(fx, n), filepath.Join(chDir, n))
	}
	chFifo := filepath.Join(chDir, "00000001.chunk")
	if err := syscall.Mkfifo(chFifo, 0o644); err != nil {
		t.Fatal(err)
	}
	fifos := []string{fifo, idxFifo, chFifo}

	err := noHang(t, "OpenPath of a FIFO", fifos, func() error {
		_, _, err := pack.OpenPath(fifo, pack.NoCache{})
		return err
	})
	if !errors.Is(err, pack.ErrNotRegular) {
		t.Errorf("OpenPath of a FIFO: %v, want ErrNotRegular", err)
	}
	noHang(t, "SniffDir of a sparse frame whose index is a FIFO", fifos, func() error {
		if pack.SniffDir(idxDir) != nil {
			t.Errorf("a directory whose index is a FIFO is taken for a sparse frame")
		}
		return nil
	})
	noHang(t, "OpenPath of a sparse frame whose index is a FIFO", fifos, func() error {
		_, _, err := pack.OpenPath(idxDir, pack.NoCache{})
		if err == nil {
			t.Errorf("OpenPath of a sparse frame whose index is a FIFO succeeded")
		}
		return nil
	})
	err = noHang(t, "reading a sparse frame's FIFO chunk", fifos, func() error {
		c, closer, err := pack.OpenPath(chDir, pack.NoCache{})
		if err != nil {
			return err
		}
		defer closer.Close()
		_, err = c.ReadAt(make([]byte, 10), 65536+5)
		return err
	})
	if !errors.Is(err, pack.ErrNotRegular) {
		t.Errorf("reading a FIFO chunk: %v, want ErrNotRegular", err)
	}
}

// TestOpenPathSymlink checks that a container reached through a symlink
// is not opened (the daemon must not follow links with root's rights).
func TestOpenPathSymlink(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "x.b2frame")
	if err := os.Symlink(filepath.Join(fixtures.Dir(), "data_zeros.b2frame"), link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pack.OpenPath(link, pack.NoCache{}); !errors.Is(err, pack.ErrNotRegular) {
		t.Fatalf("OpenPath of a symlink: %v, want ErrNotRegular", err)
	}
}

// TestTransient checks which errors say nothing about a file.
func TestTransient(t *testing.T) {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EINTR, syscall.EAGAIN} {
		if !pack.Transient(&os.PathError{Op: "open", Path: "x", Err: e}) {
			t.Errorf("%v is not transient", e)
		}
	}
	for _, err := range []error{pack.ErrFormat, pack.ErrNotRegular, os.ErrNotExist, syscall.ENOENT} {
		if pack.Transient(err) {
			t.Errorf("%v is transient", err)
		}
	}
}
