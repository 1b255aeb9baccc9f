package writes

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// TestPOSIX checks, with plain system calls, the POSIX semantics that
// pjdfstest and fsstress found broken through the mount (issue 14). Each
// subtest names the point it checks. Compressed files are made through
// a default mount (stored as .b2frame); the same calls on ext4 behave as
// the tests expect.
func TestPOSIX(t *testing.T) {
	setup.Require(t)
	_, src, mnt := newDirs(t)
	m := mountBG(t, src, mnt, "-o", "allow_other")
	top := t // a remount belongs to the whole test, not to a subtest
	rnd := rand.New(rand.NewPCG(14, 14))
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		return b
	}
	// mk writes a new compressed file through the mount.
	mk := func(t *testing.T, name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(m.Path(name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(src, name+".b2frame")); err != nil {
			t.Fatalf("%s is not stored compressed: %v", name, err)
		}
	}
	wantErrno := func(t *testing.T, what string, err error, want syscall.Errno) {
		t.Helper()
		if errnoOf(err) != want {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	// viewIsStored checks that a name shows what its disk file stores.
	viewIsStored := func(t *testing.T, name string) {
		t.Helper()
		got, err := os.ReadFile(m.Path(name))
		if err != nil {
			t.Errorf("reading %s: %v", name, err)
			return
		}
		if want := unpack(t, filepath.Join(src, name+".b2frame")); !bytes.Equal(got, want) {
			t.Errorf("%s shows other bytes than it stores: %s", name, firstDiff(got, want))
		}
	}

	t.Run("1 truncate far", func(t *testing.T) {
		f, err := os.Create(m.Path("huge"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		wantErrno(t, "ftruncate to 999999999999999", f.Truncate(999999999999999), syscall.EFBIG)
		wantErrno(t, "pwrite at 999999999999999", func() error { _, err := f.WriteAt([]byte("x"), 999999999999999); return err }(), syscall.EFBIG)
		const tib = 1 << 40
		if err := f.Truncate(tib); err != nil {
			t.Fatalf("ftruncate to 1 TiB: %v", err)
		}
		if _, err := f.WriteAt([]byte("end"), tib-3); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("close after ftruncate to 1 TiB: %v", err)
		}
		// Through truncate(1), as the issue did.
		if r := testkit.Run(cmdTimeout, "truncate", "-s", "1T", m.Path("huge2")); r.Err != nil {
			t.Fatalf("truncate -s 1T: %v", r)
		}
		if r := testkit.Run(cmdTimeout, "truncate", "-s", "999999999999999", m.Path("huge2")); r.Err == nil || !strings.Contains(string(r.Stderr), "too large") {
			t.Errorf("truncate -s 999999999999999: %v, want File too large", r)
		}
		for _, name := range []string{"huge", "huge2"} {
			st, err := os.Stat(m.Path(name))
			if err != nil || st.Size() != tib {
				t.Fatalf("stat %s: %v, %v; want %d bytes", name, st, err, int64(tib))
			}
			disk, err := os.Stat(filepath.Join(src, name+".b2frame"))
			if err != nil || disk.Size() > 16<<20 {
				t.Errorf("%s.b2frame: %v, %v; want a small file of zero chunks", name, disk, err)
			}
		}
		g, err := os.Open(m.Path("huge"))
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		b := make([]byte, 8192)
		if n, err := g.ReadAt(b, tib-8192); n != len(b) || err != nil {
			t.Fatalf("read at the end: %d, %v", n, err)
		}
		want := make([]byte, 8192)
		copy(want[8189:], "end")
		if !bytes.Equal(b, want) {
			t.Errorf("the end of the 1 TiB file: %s", firstDiff(b, want))
		}
		if hwm, err := testkit.ProcValue(m.PID, "status", "VmHWM"); err != nil || hwm > 1<<30 {
			t.Errorf("daemon peak RSS %d MiB (%v), want far less than 1 GiB", hwm>>20, err)
		}
		os.Remove(m.Path("huge"))
		os.Remove(m.Path("huge2"))
	})

	t.Run("2 modes are the source's", func(t *testing.T) {
		mk(t, "secret", []byte("root only\n"))
		if err := os.Chmod(m.Path("secret"), 0); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, "plainsecret.txt"), []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(src, "plainsecret.txt"), 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(m.Path("closed"), 0); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]os.FileMode{"secret": 0, "plainsecret.txt": 0, "closed": os.ModeDir} {
			st, err := os.Stat(m.Path(name))
			if err != nil || st.Mode() != want {
				t.Errorf("stat %s: %v, %v; want mode %v", name, st.Mode(), err, want)
			}
		}
		// uid 65534 must not read them, as on the source.
		for _, d := range []string{filepath.Dir(mnt), filepath.Dir(filepath.Dir(mnt))} {
			os.Chmod(d, 0o755)
		}
		for _, name := range []string{"secret", "plainsecret.txt", "closed/x"} {
			cmd := exec.Command("cat", m.Path(name))
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "Permission denied") {
				t.Errorf("uid 65534 reading %s through an allow_other mount: %v %q, want Permission denied", name, err, out)
			}
		}
	})

	t.Run("3 rename a directory onto an empty one", func(t *testing.T) {
		for _, d := range []string{"da", "db", "dc", "dc/sub"} {
			if err := os.Mkdir(m.Path(d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		// syscall.Rename: os.Rename refuses a directory target itself.
		if err := syscall.Rename(m.Path("da"), m.Path("db")); err != nil {
			t.Errorf("rename da onto the empty db: %v", err)
		}
		wantErrno(t, "rename db onto the non-empty dc", syscall.Rename(m.Path("db"), m.Path("dc")), syscall.ENOTEMPTY)
	})

	t.Run("4 fsync of a directory", func(t *testing.T) {
		d, err := os.Open(m.Dir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := d.Sync(); err != nil {
			t.Errorf("fsync of the mount's root: %v", err)
		}
	})

	t.Run("5 renameat2 flags", func(t *testing.T) {
		mk(t, "xa", []byte("content of xa"))
		mk(t, "xb", []byte("content of xb, longer"))
		if err := os.WriteFile(filepath.Join(src, "plain.txt"), []byte("plain"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, "plain2.txt"), []byte("plain 2"), 0o644); err != nil {
			t.Fatal(err)
		}
		ren := func(a, b string, flags uint) error {
			return unix.Renameat2(unix.AT_FDCWD, m.Path(a), unix.AT_FDCWD, m.Path(b), flags)
		}
		wantErrno(t, "RENAME_WHITEOUT of a compressed file", ren("xa", "xw", unix.RENAME_WHITEOUT), syscall.EINVAL)
		wantErrno(t, "RENAME_WHITEOUT of a plain file", ren("plain.txt", "pw", unix.RENAME_WHITEOUT), syscall.EINVAL)
		for _, n := range []string{"xw", "pw"} {
			if _, err := os.Lstat(m.Path(n)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s exists after a refused rename: %v", n, err)
			}
		}
		if err := ren("xa", "xb", unix.RENAME_EXCHANGE); err != nil {
			t.Errorf("RENAME_EXCHANGE of two compressed files: %v", err)
		}
		for name, want := range map[string]string{"xa": "content of xb, longer", "xb": "content of xa"} {
			if got, err := os.ReadFile(m.Path(name)); err != nil || string(got) != want {
				t.Errorf("%s after the exchange: %q, %v; want %q", name, got, err, want)
			}
			viewIsStored(t, name)
		}
		if err := ren("plain.txt", "plain2.txt", unix.RENAME_EXCHANGE); err != nil {
			t.Errorf("RENAME_EXCHANGE of two plain files: %v", err)
		}
		wantErrno(t, "RENAME_EXCHANGE of a plain and a compressed file", ren("plain.txt", "xa", unix.RENAME_EXCHANGE), syscall.EINVAL)
		wantErrno(t, "RENAME_NOREPLACE onto a compressed file", ren("plain.txt", "xa", unix.RENAME_NOREPLACE), syscall.EEXIST)
	})

	t.Run("6 long names", func(t *testing.T) {
		_, err := os.Stat(m.Path(strings.Repeat("n", 256)))
		wantErrno(t, "stat of a 256-byte name", err, syscall.ENAMETOOLONG)
		_, err = os.Create(m.Path(strings.Repeat("n", 256)))
		wantErrno(t, "create of a 256-byte name", err, syscall.ENAMETOOLONG)
		// 250 bytes cannot take .b2frame: stored plain.
		long := strings.Repeat("l", 250)
		if err := os.WriteFile(m.Path(long), []byte("long name"), 0o644); err != nil {
			t.Fatalf("create of a 250-byte name: %v", err)
		}
		if got, err := os.ReadFile(filepath.Join(src, long)); err != nil || string(got) != "long name" {
			t.Errorf("the 250-byte name on disk: %q, %v", got, err)
		}
	})

	t.Run("7 unlinked while open", func(t *testing.T) {
		data := randBytes(100000)
		mk(t, "gone", data)
		r, err := os.Open(m.Path("gone"))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		w, err := os.OpenFile(m.Path("gone"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := os.Remove(m.Path("gone")); err != nil {
			t.Fatal(err)
		}
		st, err := r.Stat()
		if err != nil || st.Size() != int64(len(data)) {
			t.Fatalf("fstat after unlink: %v, %v", st, err)
		}
		if nl := st.Sys().(*syscall.Stat_t).Nlink; nl != 0 {
			t.Errorf("nlink after unlink: %d, want 0", nl)
		}
		got := make([]byte, len(data))
		if n, err := r.ReadAt(got, 0); n != len(data) || !bytes.Equal(got, data) {
			t.Fatalf("pread after unlink: %d, %v, %s", n, err, firstDiff(got, data))
		}
		if _, err := w.WriteAt([]byte("patch"), 10); err != nil {
			t.Fatalf("write after unlink: %v", err)
		}
		if err := w.Sync(); err != nil {
			t.Errorf("fsync after unlink: %v", err)
		}
		copy(data[10:], "patch")
		if n, err := w.ReadAt(got, 0); n != len(data) || !bytes.Equal(got, data) {
			t.Errorf("pread of the written, unlinked file: %d, %v, %s", n, err, firstDiff(got, data))
		}
		if _, err := os.Stat(m.Path("gone")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the unlinked name is back: %v", err)
		}
	})

	t.Run("8 hard links", func(t *testing.T) {
		mk(t, "ha", randBytes(100000))
		// Each name is a node of its own: what changes through one must
		// show through the other at once (pjdfstest link/00.t), also when
		// the kernel has cached the other's attributes.
		os.Stat(m.Path("ha"))
		if err := os.Link(m.Path("ha"), m.Path("hb")); err != nil {
			t.Fatal(err)
		}
		var lst syscall.Stat_t
		if err := syscall.Stat(m.Path("ha"), &lst); err != nil || lst.Nlink != 2 {
			t.Errorf("stat ha after ln ha hb: nlink %d, %v; want 2", lst.Nlink, err)
		}
		os.Stat(m.Path("hb"))
		if err := os.Chmod(m.Path("hb"), 0o640); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"ha", "hb"} {
			var st syscall.Stat_t
			if err := syscall.Stat(m.Path(n), &st); err != nil || st.Nlink != 2 || st.Mode&0o7777 != 0o640 {
				t.Errorf("stat %s after ln ha hb and chmod hb 640: nlink %d, mode %o, %v; want 2, 640", n, st.Nlink, st.Mode&0o7777, err)
			}
		}
		patch := func(name, s string) {
			f, err := os.OpenFile(m.Path(name), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte(s), 1000); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
		patch("hb", "written into hb")
		patch("ha", "written into ha")
		viewIsStored(t, "ha")
		viewIsStored(t, "hb")
		if err := os.Remove(m.Path("ha")); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(m.Path("hb"))
		if err != nil || st.Sys().(*syscall.Stat_t).Nlink == 0 {
			t.Fatalf("stat hb after rm ha: %v, %v", st, err)
		}
		viewIsStored(t, "hb")
		got, err := os.ReadFile(m.Path("hb"))
		if err != nil || string(got[1000:1015]) != "written into hb" {
			t.Errorf("hb after rm ha: %v, %q", err, got[1000:1015])
		}

		// Written through one name, read through both, then remounted.
		mk(t, "hc", randBytes(50000))
		if err := os.Link(m.Path("hc"), m.Path("hd")); err != nil {
			t.Fatal(err)
		}
		patch("hd", "written into hd")
		before := map[string][]byte{}
		for _, n := range []string{"hc", "hd"} {
			viewIsStored(t, n)
			before[n], _ = os.ReadFile(m.Path(n))
		}
		m.MustUnmount(t)
		m = mountBG(top, src, mnt, "-o", "allow_other")
		for _, n := range []string{"hc", "hd"} {
			if got, err := os.ReadFile(m.Path(n)); err != nil || !bytes.Equal(got, before[n]) {
				t.Errorf("%s changed across a remount: %v, %s", n, err, firstDiff(got, before[n]))
			}
		}
	})

	t.Run("9 atime from utimensat", func(t *testing.T) {
		mk(t, "times", []byte("some bytes"))
		at, mt := time.Unix(1000000000, 123456789), time.Unix(1100000000, 987654321)
		if err := os.Chtimes(m.Path("times"), at, mt); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{m.Path("times"), filepath.Join(src, "times.b2frame")} {
			var st syscall.Stat_t
			if err := syscall.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			if got := time.Unix(st.Atim.Unix()); !got.Equal(at) {
				t.Errorf("%s: atime %v, want %v", p, got, at)
			}
			if got := time.Unix(st.Mtim.Unix()); !got.Equal(mt) {
				t.Errorf("%s: mtime %v, want %v", p, got, mt)
			}
		}
	})

	t.Run("10 times after truncation", func(t *testing.T) {
		old := time.Unix(1000000000, 0)
		var ctimeBefore time.Time
		// mtime must be the truncation's, not the old one set before;
		// ctime must not go back (it cannot be set to the past).
		check := func(what string, stat func() (*syscall.Stat_t, error)) {
			t.Helper()
			st, err := stat()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got := time.Unix(st.Mtim.Unix()); got.Before(old.Add(time.Hour)) {
				t.Errorf("%s: mtime is %v, the time before the truncation", what, got)
			}
			if got := time.Unix(st.Ctim.Unix()); got.Before(ctimeBefore) {
				t.Errorf("%s: ctime %v is before the ctime before the truncation, %v", what, got, ctimeBefore)
			}
		}
		statPath := func() (*syscall.Stat_t, error) {
			var st syscall.Stat_t
			return &st, syscall.Stat(m.Path("tt"), &st)
		}
		reset := func() {
			mk(t, "tt", randBytes(70000))
			if err := os.Chtimes(m.Path("tt"), old, old); err != nil {
				t.Fatal(err)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(m.Path("tt"), &st); err != nil {
				t.Fatal(err)
			}
			ctimeBefore = time.Unix(st.Ctim.Unix())
		}
		reset()
		if err := os.Truncate(m.Path("tt"), 100); err != nil {
			t.Fatal(err)
		}
		check("stat after truncate", statPath)

		reset()
		f, err := os.OpenFile(m.Path("tt"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(50); err != nil {
			t.Fatal(err)
		}
		fstat := func() (*syscall.Stat_t, error) {
			var st syscall.Stat_t
			return &st, syscall.Fstat(int(f.Fd()), &st)
		}
		check("fstat after ftruncate", fstat)
		check("stat after ftruncate", statPath)
		f.Close()
		check("stat after ftruncate and close", statPath)

		reset()
		f, err = os.OpenFile(m.Path("tt"), os.O_RDWR|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		check("fstat after O_TRUNC", fstat)
		check("stat after O_TRUNC", statPath)
		f.Close()
	})

	t.Run("fallocate", func(t *testing.T) {
		data := randBytes(1000)
		mk(t, "falloc", data)
		f, err := os.OpenFile(m.Path("falloc"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fd := int(f.Fd())
		if err := unix.Fallocate(fd, 0, 0, 5000); err != nil {
			t.Errorf("fallocate mode 0: %v", err)
		}
		if err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 10000); err != nil {
			t.Errorf("fallocate FALLOC_FL_KEEP_SIZE: %v", err)
		}
		wantErrno(t, "fallocate FALLOC_FL_PUNCH_HOLE", unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 100), syscall.EOPNOTSUPP)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		want := append(data, make([]byte, 4000)...)
		if got, err := os.ReadFile(m.Path("falloc")); err != nil || !bytes.Equal(got, want) {
			t.Errorf("after fallocate to 5000 bytes: %v, %s", err, firstDiff(got, want))
		}
		viewIsStored(t, "falloc")
	})
}
