package localwrite

import (
	"bytes"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRawOnTmpfs: a file on tmpfs (/dev/shm, where the test's temp dir may
// lie on a file system that takes the ordinary path) is written with raw
// writes, whose bytes, past maxRaw included, are the file's.
func TestRawOnTmpfs(t *testing.T) {
	var s unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &s); err != nil || int64(s.Type) != unix.TMPFS_MAGIC {
		t.Skip("no tmpfs at /dev/shm")
	}
	f, err := os.CreateTemp("/dev/shm", "localwrite-test-")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { f.Close(); os.Remove(f.Name()) })
	w := New(f)
	if !w.Raw() {
		t.Fatalf("%s on tmpfs: not written raw", f.Name())
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), (maxRaw+4096)/16)
	if n, err := w.Write(want); n != len(want) || err != nil {
		t.Fatalf("Write(%d bytes) = %d, %v", len(want), n, err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("file holds %d bytes, not the %d written", len(got), len(want))
	}
}
