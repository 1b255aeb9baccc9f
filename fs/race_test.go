package fs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestCommitRacesNamespace renames or unlinks, through the mount, a file
// whose commit is under way (issue 14, point 11: "recompressing: no such
// file or directory" under fsstress). The commit took the disk name at
// its start: the rename made it fail at close (and, for a new file being
// streamed, lost the data), or its new file landed under the old name.
// Now the commit finds the name when it renames, with renames and
// unlinks held off meanwhile: the data end up under the new name, and an
// unlinked file stays unlinked.
func TestCommitRacesNamespace(t *testing.T) {
	opts := DefaultOptions()
	var during atomic.Value // func(), run once by the next commit
	opts.failCommit = func() error {
		if f, ok := during.Swap(func() {}).(func()); ok {
			f()
		}
		return nil
	}
	src, mnt, logs := mountFixtures(t, opts)
	for disk, fx := range map[string]string{"a.blp": "checksum_crc32.blp", "c.blp": "checksum_sha1.blp"} {
		b, err := os.ReadFile(filepath.Join(src, fx))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, disk), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// write writes data at 0 of name (creating it when new), and closes
	// it while op runs during the commit.
	write := func(name string, create bool, data []byte, op func() error) {
		t.Helper()
		flags := os.O_RDWR
		if create {
			flags |= os.O_CREATE | os.O_EXCL
		}
		f, err := os.OpenFile(filepath.Join(mnt, name), flags, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
		var opErr error
		done := make(chan struct{})
		during.Store(func() {
			go func() { opErr = op(); close(done) }()
			// Let the operation run now, unless the commit holds it
			// off (it then runs after the commit).
			select {
			case <-done:
			case <-time.After(2 * time.Second):
			}
		})
		if err := f.Close(); err != nil {
			t.Errorf("close of %s: %v", name, err)
		}
		<-done
		if opErr != nil {
			t.Fatalf("the operation during the commit of %s: %v", name, opErr)
		}
	}
	stored := func(disk string) []byte {
		t.Helper()
		if _, err := os.Lstat(filepath.Join(src, disk)); err != nil {
			t.Errorf("%s: %v", disk, err)
			return nil
		}
		return decodeSource(t, filepath.Join(src, disk))
	}
	absent := func(disk string) {
		t.Helper()
		if _, err := os.Lstat(filepath.Join(src, disk)); err == nil {
			t.Errorf("%s exists", disk)
		}
	}

	want := decodeSource(t, filepath.Join(src, "a.blp"))
	copy(want, "a patch")
	write("a", false, []byte("a patch"), func() error { return syscall.Rename(filepath.Join(mnt, "a"), filepath.Join(mnt, "z")) })
	if got := stored("z.blp"); !bytes.Equal(got, want) {
		t.Errorf("z.blp (a renamed during its commit): %d bytes, not the written content", len(got))
	}
	absent("a.blp")

	data := bytes.Repeat([]byte("streamed "), 100000)
	write("new", true, data, func() error { return syscall.Rename(filepath.Join(mnt, "new"), filepath.Join(mnt, "new2")) })
	if got := stored("new2.b2frame"); !bytes.Equal(got, data) {
		t.Errorf("new2.b2frame (a new file renamed during its commit): %d bytes, want the %d written", len(got), len(data))
	}
	absent("new.b2frame")

	write("c", false, []byte("a patch"), func() error { return os.Remove(filepath.Join(mnt, "c")) })
	absent("c.blp")

	if strings.Contains(logs.String(), "no such file") {
		t.Errorf("log: %s", logs.String())
	}
}
