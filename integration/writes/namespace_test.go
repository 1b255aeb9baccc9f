package writes

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNamespace checks that namespace and metadata operations made
// through the mount reach the source as on the source filesystem, with
// compressed files keeping their container suffix on disk, and that
// bloscfs's temp and staging files never show in the view.
func TestNamespace(t *testing.T) {
	setup.Require(t)
	requireTool(t, "ls", "touch", "mv")
	_, src, mnt := newDirs(t)
	copyFile(t, fixture(t, "typesize8.blp"), filepath.Join(src, "a.blp"))
	copyFile(t, fixture(t, "codec_lz4_l5.b2frame"), filepath.Join(src, "b.b2frame"))
	copyFile(t, fixture(t, "codec_zstd_l5.b2frame"), filepath.Join(src, "c.b2frame"))
	copyFile(t, fixture(t, "checksum_crc32.blp"), filepath.Join(src, "d.blp"))
	copyFile(t, fixture(t, "checksum_crc32.blp"), filepath.Join(src, "f.blp"))
	if err := os.WriteFile(filepath.Join(src, "plain.txt"), []byte("plain text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	content := map[string][]byte{} // original plain content by original view name
	for _, n := range []string{"a.blp", "b.b2frame", "c.b2frame", "d.blp", "f.blp"} {
		content[strings.TrimSuffix(n, filepath.Ext(n))] = unpack(t, filepath.Join(src, n))
	}
	m := mountBG(t, src, mnt)

	exists := func(t *testing.T, p string) {
		t.Helper()
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s should exist: %v", p, err)
		}
	}
	missing := func(t *testing.T, p string) {
		t.Helper()
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s should not exist (%v)", p, err)
		}
	}
	viewIs := func(t *testing.T, name string, want []byte) {
		t.Helper()
		got, err := os.ReadFile(m.Path(name))
		if err != nil {
			t.Errorf("reading %s through the mount: %v", name, err)
		} else if !bytes.Equal(got, want) {
			t.Errorf("%s through the mount: %s", name, firstDiff(got, want))
		}
	}

	t.Run("mkdir and rmdir", func(t *testing.T) {
		if err := os.Mkdir(m.Path("newdir"), 0o750); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(filepath.Join(src, "newdir"))
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o750 {
			t.Errorf("source newdir after mkdir: %v, %v (want a directory, mode 750)", st, err)
		}
		if err := os.Mkdir(m.Path("a"), 0o755); !errors.Is(err, fs.ErrExist) {
			t.Errorf("mkdir over the compressed file a: %v, want EEXIST", err)
		}
		if err := os.Remove(m.Path("newdir")); err != nil {
			t.Fatal(err)
		}
		missing(t, filepath.Join(src, "newdir"))
	})

	t.Run("rename keeps the container suffix", func(t *testing.T) {
		mustRun(t, "mv", m.Path("a"), m.Path("y"))
		exists(t, filepath.Join(src, "y.blp"))
		missing(t, filepath.Join(src, "a.blp"))
		missing(t, m.Path("a"))
		viewIs(t, "y", content["a"])

		if err := os.Rename(m.Path("y"), m.Path("sub/z")); err != nil {
			t.Fatal(err)
		}
		exists(t, filepath.Join(src, "sub/z.blp"))
		missing(t, filepath.Join(src, "y.blp"))
		viewIs(t, "sub/z", content["a"])

		// Over another compressed file of the same format.
		if err := os.Rename(m.Path("b"), m.Path("c")); err != nil {
			t.Fatal(err)
		}
		exists(t, filepath.Join(src, "c.b2frame"))
		missing(t, filepath.Join(src, "b.b2frame"))
		viewIs(t, "c", content["b"])
		if got := unpack(t, filepath.Join(src, "c.b2frame")); !bytes.Equal(got, content["b"]) {
			t.Errorf("c.b2frame after rename b → c: %s", firstDiff(got, content["b"]))
		}

		// Over a compressed file of another format: the name shown
		// before is replaced, so no collision appears.
		if err := os.Rename(m.Path("sub/z"), m.Path("c")); err != nil {
			t.Fatal(err)
		}
		exists(t, filepath.Join(src, "c.blp"))
		missing(t, filepath.Join(src, "c.b2frame"))
		missing(t, filepath.Join(src, "sub/z.blp"))
		viewIs(t, "c", content["a"])

		if err := os.Rename(m.Path("plain.txt"), m.Path("plain2.txt")); err != nil {
			t.Fatal(err)
		}
		exists(t, filepath.Join(src, "plain2.txt"))
		missing(t, filepath.Join(src, "plain.txt"))
	})

	t.Run("unlink", func(t *testing.T) {
		if err := os.Remove(m.Path("c")); err != nil {
			t.Fatal(err)
		}
		missing(t, filepath.Join(src, "c.blp"))
		missing(t, m.Path("c"))
	})

	t.Run("symlink", func(t *testing.T) {
		if err := os.Symlink("plain2.txt", m.Path("link")); err != nil {
			t.Fatal(err)
		}
		if got, err := os.Readlink(filepath.Join(src, "link")); err != nil || got != "plain2.txt" {
			t.Errorf("source link: %q, %v; want a symlink to plain2.txt", got, err)
		}
		if got, err := os.Readlink(m.Path("link")); err != nil || got != "plain2.txt" {
			t.Errorf("readlink through the mount: %q, %v", got, err)
		}
		// A link to a compressed file's view name reads its plain bytes.
		if err := os.Symlink("d", m.Path("dlink")); err != nil {
			t.Fatal(err)
		}
		viewIs(t, "dlink", content["d"])
		if err := os.Symlink("x", m.Path("d")); !errors.Is(err, fs.ErrExist) {
			t.Errorf("symlink over the compressed file d: %v, want EEXIST", err)
		}
	})

	t.Run("chmod chown utimens", func(t *testing.T) {
		for _, c := range []struct{ view, disk string }{{"d", "d.blp"}, {"plain2.txt", "plain2.txt"}} {
			if err := os.Chmod(m.Path(c.view), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(m.Path(c.view), 4321, 8765); err != nil {
				t.Fatal(err)
			}
			mustRun(t, "touch", "-m", "-d", "2001-02-03 04:05:06.123456789 UTC", m.Path(c.view))
			mustRun(t, "touch", "-a", "-d", "2002-03-04 05:06:07 UTC", m.Path(c.view))
			var s, v syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(src, c.disk), &s); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Lstat(m.Path(c.view), &v); err != nil {
				t.Fatal(err)
			}
			wantM := time.Date(2001, 2, 3, 4, 5, 6, 123456789, time.UTC)
			wantA := time.Date(2002, 3, 4, 5, 6, 7, 0, time.UTC)
			for who, st := range map[string]*syscall.Stat_t{"source " + c.disk: &s, "view " + c.view: &v} {
				if st.Mode&0o7777 != 0o600 || st.Uid != 4321 || st.Gid != 8765 {
					t.Errorf("%s: mode %o uid %d gid %d; want 600 4321 8765", who, st.Mode&0o7777, st.Uid, st.Gid)
				}
				if got := time.Unix(st.Mtim.Unix()); !got.Equal(wantM) {
					t.Errorf("%s: mtime %v, want %v", who, got.UTC(), wantM)
				}
				if got := time.Unix(st.Atim.Unix()); !got.Equal(wantA) {
					t.Errorf("%s: atime %v, want %v", who, got.UTC(), wantA)
				}
			}
		}
	})

	t.Run("user xattrs", func(t *testing.T) {
		for _, c := range []struct{ view, disk string }{{"plain2.txt", "plain2.txt"}, {"d", "d.blp"}} {
			if err := unix.Setxattr(m.Path(c.view), "user.origin", []byte("namespace test"), 0); err != nil {
				t.Errorf("setxattr user.origin on %s through the mount: %v", c.view, err)
				continue
			}
			buf := make([]byte, 128)
			n, err := unix.Getxattr(filepath.Join(src, c.disk), "user.origin", buf)
			if err != nil || string(buf[:n]) != "namespace test" {
				t.Errorf("user.origin of source %s: %q, %v", c.disk, buf[:max(n, 0)], err)
			}
			n, err = unix.Getxattr(m.Path(c.view), "user.origin", buf)
			if err != nil || string(buf[:n]) != "namespace test" {
				t.Errorf("user.origin of %s through the mount: %q, %v", c.view, buf[:max(n, 0)], err)
			}
			sz, _ := unix.Listxattr(m.Path(c.view), nil)
			list := make([]byte, max(sz, 1))
			n, err = unix.Listxattr(m.Path(c.view), list)
			if err != nil || !slices.Contains(strings.Split(string(list[:max(n, 0)]), "\x00"), "user.origin") {
				t.Errorf("listxattr of %s through the mount: %q, %v", c.view, list[:max(n, 0)], err)
			}
			if err := unix.Removexattr(m.Path(c.view), "user.origin"); err != nil {
				t.Errorf("removexattr on %s through the mount: %v", c.view, err)
			} else if _, err := unix.Getxattr(filepath.Join(src, c.disk), "user.origin", buf); err != unix.ENODATA {
				t.Errorf("user.origin of source %s after removexattr: %v, want ENODATA", c.disk, err)
			}
		}
	})

	t.Run("hard links", func(t *testing.T) {
		for _, c := range []struct{ view, disk, link, linkDisk string }{
			{"d", "d.blp", "dh", "dh.blp"}, {"plain2.txt", "plain2.txt", "ph.txt", "ph.txt"},
		} {
			if err := os.Link(m.Path(c.view), m.Path(c.link)); err != nil {
				t.Errorf("link %s → %s: %v", c.link, c.view, err)
				continue
			}
			var a, b, v syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(src, c.disk), &a); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Lstat(filepath.Join(src, c.linkDisk), &b); err != nil {
				t.Fatalf("the hard link %s is not in the source: %v", c.linkDisk, err)
			}
			if a.Ino != b.Ino || a.Nlink != 2 {
				t.Errorf("source %s and %s: inodes %d and %d, nlink %d; want one inode, nlink 2", c.disk, c.linkDisk, a.Ino, b.Ino, a.Nlink)
			}
			if err := syscall.Lstat(m.Path(c.link), &v); err != nil || v.Nlink != 2 {
				t.Errorf("stat %s through the mount: nlink %d, %v; want 2", c.link, v.Nlink, err)
			}
			want := readFile(t, m.Path(c.view))
			viewIs(t, c.link, want)
			if err := os.Remove(m.Path(c.link)); err != nil {
				t.Fatal(err)
			}
			missing(t, filepath.Join(src, c.linkDisk))
			if err := syscall.Lstat(filepath.Join(src, c.disk), &a); err != nil || a.Nlink != 1 {
				t.Errorf("source %s after unlinking its link: nlink %d, %v", c.disk, a.Nlink, err)
			}
			// The other name still works through the mount.
			if err := syscall.Lstat(m.Path(c.view), &v); err != nil {
				t.Errorf("after ln %s %s; rm %s (all through the mount), stat %s: %v (the source still has %s)", c.view, c.link, c.link, c.view, err, c.disk)
			}
			viewIs(t, c.view, want)
		}
	})

	t.Run("an open file follows a rename", func(t *testing.T) {
		f, err := os.OpenFile(m.Path("f"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		p := []byte("written before the rename")
		if _, err := f.WriteAt(p, 1000); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(m.Path("f"), m.Path("e")); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Errorf("close after the rename: %v", err)
		}
		missing(t, filepath.Join(src, "f.blp"))
		want := patch(content["f"], 1000, p)
		if got := unpack(t, filepath.Join(src, "e.blp")); !bytes.Equal(got, want) {
			t.Errorf("e.blp after writing f, renaming it to e and closing: %s", firstDiff(got, want))
		}
		viewIs(t, "e", want)
	})

	t.Run("a file unlinked while open is not brought back", func(t *testing.T) {
		f, err := os.OpenFile(m.Path("e"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("doomed"), 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(m.Path("e")); err != nil {
			t.Fatal(err)
		}
		f.Close()
		missing(t, filepath.Join(src, "e.blp"))
		missing(t, m.Path("e"))
		if left := waitNoHidden(t, src, 5*time.Second); len(left) > 0 {
			t.Errorf("staging files left after closing an unlinked file: %v", left)
		}
	})

	t.Run("temp files never show in the view", func(t *testing.T) {
		if err := os.WriteFile(m.Path(".bloscfs-tmp-mine"), []byte("x"), 0o644); err == nil {
			t.Errorf("creating .bloscfs-tmp-mine through the mount succeeded: such names are hidden from the view")
		}
		size := int64(64 << 20)
		done := make(chan error, 1)
		go func() { done <- longWrite(m.Path("big"), size, 8<<20) }()
		var sightings, tmpSightings, checks int
		var mu sync.Mutex
		var bad []string
		check := func(names []string, how string) {
			for _, n := range names {
				if strings.HasPrefix(n, ".bloscfs-") {
					mu.Lock()
					bad = append(bad, how+": "+n)
					mu.Unlock()
				}
			}
		}
	loop:
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("writing big through the mount: %v", err)
				}
				break loop
			default:
			}
			hidden := hiddenIn(src)
			if len(hidden) > 0 {
				sightings++
			}
			if hasTmp(src) {
				tmpSightings++
			}
			ents, err := os.ReadDir(mnt)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			check(names, "readdir")
			if checks%5 == 0 {
				check(strings.Fields(string(mustRun(t, "ls", "-a", mnt))), "ls -a")
			}
			for _, h := range hidden {
				if _, err := os.Lstat(m.Path(h)); !errors.Is(err, fs.ErrNotExist) {
					bad = append(bad, "lookup "+h+" did not give ENOENT")
				}
			}
			checks++
			time.Sleep(10 * time.Millisecond)
		}
		if len(bad) > 0 {
			t.Errorf("bloscfs temp files seen through the mount: %v", bad)
		}
		if sightings == 0 {
			t.Errorf("no temp or staging file was ever seen in the source in %d checks: the check proved nothing", checks)
		}
		t.Logf("%d listings of the mount, %d of them while temp or staging files existed in the source (%d during a recompression)", checks, sightings, tmpSightings)
		want := make([]byte, size)
		series(want, 0, 2)
		if got, err := unpackSHA(filepath.Join(src, "big.b2frame")); err != nil || got != sha(want) {
			t.Errorf("big.b2frame: sha256 %s, %v; want %s", got, err, sha(want))
		}
		if left := waitNoHidden(t, src, 5*time.Second); len(left) > 0 {
			t.Errorf("temp files left after the write: %v", left)
		}
	})

	got := strings.Fields(string(mustRun(t, "ls", "-A", mnt)))
	want := []string{"big", "d", "dlink", "link", "plain2.txt", "sub"}
	if !slices.Equal(got, want) {
		t.Errorf("ls -A of the mount at the end: %v, want %v", got, want)
	}
	m.MustUnmount(t)
}

// longWrite writes size bytes of series(seed 2) to path in 1 MiB writes,
// with an fsync every syncEvery bytes, and closes it.
func longWrite(path string, size, syncEvery int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), size-off)]
		series(b, off/8, 2)
		if _, err := f.Write(b); err != nil {
			f.Close()
			return err
		}
		if (off+int64(len(b)))%syncEvery == 0 {
			if err := f.Sync(); err != nil {
				f.Close()
				return err
			}
		}
	}
	return f.Close()
}
