package writes

import (
	"bytes"
	crand "crypto/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
)

// TestOutOfSpace fills a small tmpfs holding the source so that the
// recompression of a patched file cannot fit: the writer must get ENOSPC
// (or EIO) from fsync or close, the original must still decode to its
// old content, and no temp file may stay behind.
func TestOutOfSpace(t *testing.T) {
	setup.Require(t)
	requireTool(t, "mount", "umount", "cp")
	root := t.TempDir()
	src, mnt := filepath.Join(root, "tmpfs"), filepath.Join(root, "mnt")
	for _, d := range []string{src, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, "mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", src)
	t.Cleanup(func() {
		if r := testkit.Run(time.Minute, "umount", src); r.Err != nil {
			testkit.Run(time.Minute, "umount", "-l", src)
		}
		if mounttest.IsMounted(src) {
			t.Errorf("the tmpfs at %s is still mounted", src)
		}
	})

	// An incompressible 11 MiB file stored as an LZ4 frame: about 11 MiB
	// on disk, leaving 9 MiB free.
	old := make([]byte, 11<<20)
	crand.Read(old)
	plain := filepath.Join(root, "old.dat")
	if err := os.WriteFile(plain, old, 0o644); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(src, "big.b2frame")
	mustRun(t, bin, "pack", "--format", "b2frame", "--codec", "lz4", "--chunk-size", "1MiB", plain, disk)
	copyFile(t, fixture(t, "codec_lz4_l5.b2frame"), filepath.Join(src, "small.b2frame"))
	smallWant := unpack(t, filepath.Join(src, "small.b2frame"))
	oldSHA := sha(old)
	var sfs syscall.Statfs_t
	syscall.Statfs(src, &sfs)
	t.Logf("tmpfs: %d KiB free of %d KiB with the 11 MiB container", sfs.Bavail*uint64(sfs.Bsize)>>10, sfs.Blocks*uint64(sfs.Bsize)>>10)

	m := mountFG(t, src, mnt)

	intact := func(t *testing.T, when string) {
		t.Helper()
		if got, err := unpackSHA(disk); err != nil || got != oldSHA {
			t.Errorf("%s: the original decodes to sha256 %s (%v), want the old content %s", when, got, err, oldSHA)
		}
		if left := waitNoHidden(t, src, 5*time.Second); len(left) > 0 {
			t.Errorf("%s: temp files left in the source: %v", when, left)
		}
		if got := unpack(t, filepath.Join(src, "small.b2frame")); !bytes.Equal(got, smallWant) {
			t.Errorf("%s: another file of the source changed", when)
		}
	}
	okErr := func(err error) bool {
		e := errnoOf(err)
		return e == syscall.ENOSPC || e == syscall.EIO
	}

	// A 6 MiB patch fits the stage, but the new container (≈ 11 MiB)
	// does not fit beside the old one.
	newData := make([]byte, 6<<20)
	crand.Read(newData)

	t.Run("fsync reports ENOSPC", func(t *testing.T) {
		f, err := os.OpenFile(m.Path("big"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(newData, 0); err != nil {
			f.Close()
			t.Fatalf("staging a 6 MiB patch with 9 MiB free: %v", err)
		}
		serr := f.Sync()
		cerr := f.Close()
		t.Logf("fsync: %v; close: %v", serr, cerr)
		if !okErr(serr) {
			t.Errorf("fsync of a commit that cannot fit: %v, want ENOSPC or EIO", serr)
		}
		if cerr != nil && !okErr(cerr) {
			t.Errorf("close after the failed fsync: %v, want success, ENOSPC or EIO", cerr)
		}
		intact(t, "after the failed fsync and close")
	})

	t.Run("close reports ENOSPC", func(t *testing.T) {
		f, err := os.OpenFile(m.Path("big"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(newData, 1<<20); err != nil {
			f.Close()
			t.Fatalf("staging a 6 MiB patch with 9 MiB free: %v", err)
		}
		if err := f.Close(); !okErr(err) {
			t.Errorf("close of a file whose commit cannot fit: %v, want ENOSPC or EIO", err)
		}
		intact(t, "after the failed close")
	})

	t.Run("cp of a new file larger than the free space fails", func(t *testing.T) {
		big := make([]byte, 15<<20)
		crand.Read(big)
		in := filepath.Join(root, "new.dat")
		if err := os.WriteFile(in, big, 0o644); err != nil {
			t.Fatal(err)
		}
		r := testkit.Run(time.Minute, "cp", in, m.Path("new"))
		if r.Err == nil {
			t.Errorf("cp of 15 MiB of random bytes into 9 MiB of free space succeeded")
		} else {
			t.Logf("cp: %v", r)
		}
		intact(t, "after the failed cp")
		// What is left under the new name is a complete container.
		if _, err := os.Stat(filepath.Join(src, "new.b2frame")); err == nil {
			if r := testkit.Run(time.Minute, bin, "unpack", filepath.Join(src, "new.b2frame"), "-"); r.Err != nil {
				t.Errorf("new.b2frame left by the failed cp does not decode: %v", r)
			}
		}
	})

	t.Run("the view shows the committed content after a failed commit", func(t *testing.T) {
		got, err := os.ReadFile(m.Path("big"))
		if err != nil {
			t.Fatalf("reading big through the mount: %v", err)
		}
		if sha(got) == oldSHA {
			return
		}
		// Diagnose: drop the kernel's cached pages of the file and read
		// again from the daemon.
		f, err := os.Open(m.Path("big"))
		if err != nil {
			t.Fatal(err)
		}
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		again, _ := os.ReadFile(m.Path("big"))
		t.Errorf("big through the mount after the failed commits shows the discarded writes: %s; "+
			"after posix_fadvise(DONTNEED) of the kernel's cache the daemon serves the old content: %v",
			firstDiff(got, old), bytes.Equal(again, old))
	})
	m.MustUnmount(t)
	intact(t, "after the unmount")
}
