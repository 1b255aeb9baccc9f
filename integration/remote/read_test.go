package remote_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bfs "github.com/bloscfs/bloscfs/fs"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fakes3"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"golang.org/x/sys/unix"
)

func loadFixtures(t *testing.T) []fixtures.Fixture {
	t.Helper()
	fxs, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	return fxs
}

// viewPath returns where a fixture shows in a mount of the bucket: its
// stem view, or its full name when the stem collides (or it is raw).
func viewPath(t *testing.T, m *mount, fx fixtures.Fixture) string {
	t.Helper()
	name := strings.TrimSuffix(fx.Name, "/")
	if st, err := os.Lstat(m.Path(name)); err == nil && !st.IsDir() {
		return m.Path(name)
	}
	stem, ok := all.PlainName(name)
	if !ok {
		return m.Path(name)
	}
	return m.Path(stem)
}

// plain returns the local fixture's view bytes.
func plain(t *testing.T, fx fixtures.Fixture) []byte {
	t.Helper()
	v, err := all.OpenView(fx.Path, pack.NoCache{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	b := make([]byte, v.Size)
	if _, err := v.ReadAt(b, 0); err != nil && v.Size > 0 {
		t.Fatal(err)
	}
	return b
}

// readable returns the valid fixtures (sparse frames included: a prefix
// in the bucket).
func readable(fxs []fixtures.Fixture) []fixtures.Fixture {
	var out []fixtures.Fixture
	for _, fx := range fxs {
		if fx.ValidPlain {
			out = append(out, fx)
		}
	}
	return out
}

// TestSha256sum: sha256sum of every valid fixture through the remote
// mount matches the manifest (.b2nd: the .npy view's array data, checked
// in TestNumpy).
func TestSha256sum(t *testing.T) {
	m := mountRemote(t, "s3://"+bucket)
	fxs := readable(loadFixtures(t))
	var paths []string
	want := map[string]string{}
	for _, fx := range fxs {
		if fx.Kind == "b2nd" {
			continue
		}
		p := viewPath(t, m, fx)
		paths = append(paths, p)
		want[p] = fx.PlainSHA
	}
	out := run(t, "sha256sum", paths...)
	got := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		sum, p, _ := strings.Cut(line, "  ")
		if want[p] != sum {
			t.Errorf("%s: sha256 %s, want %s", p, sum, want[p])
		}
		got++
	}
	if got != len(paths) || got < 100 {
		t.Errorf("%d sums for %d files", got, len(paths))
	}
	if strings.Contains(m.LogText(), os.Getenv("AWS_SECRET_ACCESS_KEY")) {
		t.Error("the log holds the secret key")
	}
}

// TestDdOddOffsets reads odd ranges with dd and compares them with the
// local decode.
func TestDdOddOffsets(t *testing.T) {
	m := mountRemote(t, "s3://"+bucket)
	rng := rand.New(rand.NewPCG(1, 2))
	n := 0
	for _, fx := range readable(loadFixtures(t)) {
		if fx.PlainSize < 100000 || fx.Kind == "b2nd" {
			continue
		}
		want := plain(t, fx)
		for range 3 {
			bs := 1 + rng.IntN(9000)
			skip := rng.Int64N(int64(len(want)))
			out := run(t, "dd", "if="+viewPath(t, m, fx), "bs="+itoa(bs), "skip="+fmt.Sprint(skip), "count=2", "iflag=skip_bytes", "status=none")
			end := min(int64(len(want)), skip+2*int64(bs))
			if !bytes.Equal([]byte(out), want[skip:end]) {
				t.Errorf("%s: dd bs=%d skip=%d: %d bytes differ from the local decode", fx.Name, bs, skip, len(out))
			}
			n++
		}
	}
	if n < 30 {
		t.Errorf("only %d dd reads", n)
	}
}

func itoa(i int) string { return fmt.Sprint(i) }

// TestNumpy: np.fromfile and np.memmap of a float64 file, and
// np.load(mmap_mode='r') of every .b2nd's .npy view.
func TestNumpy(t *testing.T) {
	// With an on-disk range cache, read twice: the second mount reads
	// from it.
	cacheDir := t.TempDir()
	m0 := mountRemote(t, "s3://"+bucket, "--cache-dir", cacheDir)
	testNumpy(t, m0)
	m0.MustUnmount(t)
	m := mountRemote(t, "s3://"+bucket, "--cache-dir", cacheDir)
	testNumpy(t, m)
}

func testNumpy(t *testing.T, m *mount) {
	py := testkit.Python(t, "numpy")
	// One Python process checks every file (a numpy import costs more
	// than the reads); it prints one line per file: path, then sha256.
	var npy, flat []string
	want := map[string]string{}
	for _, fx := range readable(loadFixtures(t)) {
		p := viewPath(t, m, fx)
		switch {
		case fx.Kind == "b2nd":
			npy = append(npy, p)
			want[p] = fx.COrderSHA
		case fx.PlainSize >= 8000 && fx.PlainSize%8 == 0 && len(flat) < 40-len(npy):
			flat = append(flat, p)
			want[p] = fx.PlainSHA
		}
	}
	if len(npy)+len(flat) < 10 {
		t.Fatalf("only %d files to check with numpy", len(npy)+len(flat))
	}
	out := run(t, py, append([]string{"-c", `import sys, hashlib, numpy as np
n = int(sys.argv[1])
for i, p in enumerate(sys.argv[2:]):
    if i < n:
        a = np.load(p, mmap_mode="r")
        print(p, hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest())
        continue
    a = np.fromfile(p, dtype="<f8")
    b = np.memmap(p, dtype="<f8", mode="r")
    c = np.fromfile(p, dtype="<f8", count=100, offset=8*7)
    assert (a.view("u8") == b.view("u8")).all() and (c.view("u8") == a[7:107].view("u8")).all(), p
    print(p, hashlib.sha256(b.tobytes()).hexdigest())
    del b`, strconv.Itoa(len(npy))}, append(npy, flat...)...)...)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if p, sum, ok := strings.Cut(line, " "); ok {
			got[p] = sum
		}
	}
	for p, sum := range want {
		if got[p] != sum {
			t.Errorf("%s: numpy's sha256 %q, want %s", p, got[p], sum)
		}
	}
}

// TestConcurrentReaders: 16 readers pread random ranges of the larger
// fixtures at once, each compared with the local decode.
func TestConcurrentReaders(t *testing.T) {
	m := mountRemote(t, "s3://"+bucket)
	type file struct {
		path string
		want []byte
	}
	var files []file
	for _, fx := range readable(loadFixtures(t)) {
		if fx.PlainSize >= 200000 && fx.Kind != "b2nd" {
			files = append(files, file{viewPath(t, m, fx), plain(t, fx)})
		}
	}
	if len(files) < 3 {
		t.Fatalf("only %d large fixtures", len(files))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for r := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for range 60 {
				f := files[rng.IntN(len(files))]
				fd, err := os.Open(f.path)
				if err != nil {
					errs <- err
					return
				}
				off := rng.Int64N(int64(len(f.want)))
				b := make([]byte, 1+rng.IntN(300000))
				n, err := fd.ReadAt(b, off)
				fd.Close()
				if err != nil && n != len(f.want)-int(off) {
					errs <- fmt.Errorf("%s at %d: %v", f.path, off, err)
					return
				}
				if !bytes.Equal(b[:n], f.want[off:off+int64(n)]) {
					errs <- fmt.Errorf("%s: wrong bytes at %d+%d", f.path, off, n)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.Log(m.LogText())
	}
}

// TestInvalid: every invalid fixture either gives EIO when read or, when
// it does not even open, is shown raw with the object's bytes.
func TestInvalid(t *testing.T) {
	m := mountRemote(t, "s3://"+bucket)
	n := 0
	for _, fx := range loadFixtures(t) {
		if !fx.IsInvalid || fx.IsDir {
			continue
		}
		p := viewPath(t, m, fx)
		got, err := os.ReadFile(p)
		raw, _ := os.ReadFile(fx.Path)
		switch {
		case errors.Is(err, syscall.EIO):
		case err == nil && filepath.Base(p) == fx.Name && bytes.Equal(got, raw):
			// shown raw
		default:
			t.Errorf("%s: read %d bytes, err %v: want EIO or the raw object", fx.Name, len(got), err)
		}
		n++
	}
	if n < 10 {
		t.Errorf("only %d invalid fixtures", n)
	}
}

// TestAttributes: names, sizes, mtimes from LastModified, xattrs with
// the ETag, and EROFS on writes.
func TestAttributes(t *testing.T) {
	m := mountRemote(t, "s3://"+bucket)
	fx := fixtures.Fixture{}
	for _, f := range readable(loadFixtures(t)) {
		if f.Name == "codec_lz4_l5.b2frame" {
			fx = f
		}
	}
	if fx.Name == "" {
		t.Fatal("fixture codec_lz4_l5.b2frame missing")
	}
	p := m.Path("codec_lz4_l5")
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != fx.PlainSize {
		t.Errorf("size %d, want %d", st.Size(), fx.PlainSize)
	}
	if d := time.Since(st.ModTime()); d < 0 || d > time.Hour {
		t.Errorf("mtime %v: not the upload's LastModified", st.ModTime())
	}
	buf := make([]byte, 256)
	for _, a := range []string{"user.bloscfs.etag", "user.bloscfs.codec", "user.bloscfs.format"} {
		n, err := syscall.Getxattr(p, a, buf)
		if err != nil || n == 0 {
			t.Errorf("getxattr %s: %v", a, err)
		}
	}
	if n, _ := syscall.Getxattr(p, "user.bloscfs.codec", buf); string(buf[:n]) != "lz4" {
		t.Errorf("codec %q", buf[:n])
	}
	n, _ := syscall.Listxattr(p, buf)
	if strings.Contains(string(buf[:n]), os.Getenv("AWS_ACCESS_KEY_ID")) {
		t.Error("xattrs show the access key")
	}
	if _, err := os.OpenFile(p, os.O_WRONLY, 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("open for writing: %v, want EROFS", err)
	}
	if err := os.WriteFile(m.Path("new"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("create: %v, want EROFS", err)
	}
	if err := os.Mkdir(m.Path("d"), 0o755); !errors.Is(err, syscall.EROFS) {
		t.Errorf("mkdir: %v, want EROFS", err)
	}
	// A sub-prefix mount and a directory listing.
	names, err := os.ReadDir(m.Dir)
	if err != nil || len(names) < 100 {
		t.Errorf("readdir: %d entries, %v", len(names), err)
	}
}

// TestMountFlags: the mount flags of -o reach an s3:// mount, as they
// reach a local one: noatime, nodiratime and noexec show in /proc/mounts,
// beside ro, nosuid and nodev.
func TestMountFlags(t *testing.T) {
	m := mountRemote(t, "s3://"+bucket, "-o", "noatime,nodiratime,noexec")
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var opts []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 3 && bfs.UnescapeMount(f[1]) == m.Dir {
			opts = strings.Split(f[3], ",")
		}
	}
	for _, want := range []string{"ro", "noatime", "nodiratime", "noexec", "nosuid", "nodev"} {
		if !slices.Contains(opts, want) {
			t.Errorf("/proc/mounts shows the mount with %v: no %s", opts, want)
		}
	}
}

// TestMountRefuses: a missing bucket, refused credentials and an
// unreachable endpoint stop the mount with one line.
func TestMountRefuses(t *testing.T) {
	setup.Require(t)
	mnt := t.TempDir()
	secret := os.Getenv("AWS_SECRET_ACCESS_KEY")
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no bucket", nil, []string{"s3://no-such-bucket"}, "no such bucket"},
		{"bad key", []string{"AWS_SECRET_ACCESS_KEY=wrong" + secret[:4]}, []string{"s3://" + bucket}, "credentials were refused"},
		{"unreachable", []string{"AWS_ENDPOINT_URL=http://127.0.0.1:9"}, []string{"--request-timeout", "3s", "s3://" + bucket}, "cannot reach"},
	}
	for _, c := range cases {
		args := append(append([]string{"mount"}, c.args...), mnt)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), c.env...)
		out, err := cmd.CombinedOutput()
		cancel()
		text := strings.TrimSpace(string(out))
		if err == nil {
			t.Errorf("%s: mount succeeded", c.name)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
			continue
		}
		if !strings.Contains(text, c.want) || strings.Count(text, "\n") > 0 {
			t.Errorf("%s: %q, want one line with %q", c.name, text, c.want)
		}
		if strings.Contains(text, secret) {
			t.Errorf("%s: the message holds the secret", c.name)
		}
	}
}

// TestCLI: info, verify (an object and a prefix), unpack of s3://
// locations, and pack into the bucket (then read back).
func TestCLI(t *testing.T) {
	setup.Require(t)
	out := run(t, bin, "info", "s3://"+bucket+"/codec_zstd_l5.b2frame")
	if !strings.Contains(out, "zstd") {
		t.Errorf("info: %s", out)
	}
	out = run(t, bin, "verify", "s3://"+bucket+"/codec_lz4_l5.b2frame")
	if !strings.HasPrefix(out, "OK") {
		t.Errorf("verify: %s", out)
	}
	r := testkit.Run(5*time.Minute, bin, "verify", "s3://"+bucket+"/")
	if r.Code != 1 || !strings.Contains(string(r.Stdout), "FAIL s3://"+bucket+"/invalid_bad_magic.b2frame") || strings.Contains(string(r.Stdout), "FAIL s3://"+bucket+"/codec_") {
		t.Errorf("verify of the bucket: %v\n%s", r, r.Stdout)
	}
	dir := t.TempDir()
	fxs := loadFixtures(t)
	for _, name := range []string{"codec_zstd_l5.b2frame", "nd_f64_2d_bitshuffle.b2nd", "codec_lz4.blp"} {
		var fx fixtures.Fixture
		for _, f := range fxs {
			if f.Name == name {
				fx = f
			}
		}
		outPath := filepath.Join(dir, name+".out")
		run(t, bin, "unpack", "s3://"+bucket+"/"+name, outPath)
		got, _ := os.ReadFile(outPath)
		if !bytes.Equal(got, plain(t, fx)) {
			t.Errorf("unpack %s: differs from the local decode", name)
		}
	}
	// pack into the bucket, big enough for a multipart upload.
	src := filepath.Join(dir, "series")
	data := make([]byte, 40<<20)
	for i := range data {
		data[i] = byte(i>>12) ^ byte(i%7)
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, bin, "pack", "--codec", "lz4", "--clevel", "1", src, "s3://"+bucket+"/packed/series.b2frame")
	back := filepath.Join(dir, "series.back")
	run(t, bin, "unpack", "s3://"+bucket+"/packed/series.b2frame", back)
	got, _ := os.ReadFile(back)
	if sha(got) != sha(data) {
		t.Error("pack to s3:// then unpack: the bytes differ")
	}
	// A failed pack leaves no object behind.
	r = testkit.Run(time.Minute, bin, "pack", filepath.Join(dir, "missing"), "s3://"+bucket+"/packed/missing.b2frame")
	if r.Err == nil {
		t.Error("pack of a missing file succeeded")
	}
	if r := testkit.Run(time.Minute, bin, "info", "s3://"+bucket+"/packed/missing.b2frame"); r.Err == nil {
		t.Error("a failed pack left an object")
	}
}

// readFile returns the bytes of a local file.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// TestFaults mounts the bucket through a proxy that drops connections,
// delays, answers 500 and 503 SlowDown and cuts bodies short, and
// replaces objects while they are read: every read is bit-exact or EIO,
// and the daemon keeps serving.
func TestFaults(t *testing.T) {
	setup.Require(t)
	faults := fakes3.NewFaults(endpoint, 0.25, 42)
	defer faults.Close()
	faults.Delay.Store(int64(20 * time.Millisecond))
	m := mountRemote(t, "s3://"+bucket, "--endpoint", faults.URL, "--cache-size", "4MiB", "--remote-cache-size", "1MiB", "--dir-cache", "0s")
	ok, eio, raw := 0, 0, 0
	for _, fx := range readable(loadFixtures(t)) {
		if fx.Kind == "b2nd" {
			continue
		}
		p := viewPath(t, m, fx)
		got, err := os.ReadFile(p)
		switch {
		case errors.Is(err, syscall.EIO):
			eio++
		case err != nil:
			t.Errorf("%s: %v", fx.Name, err)
		case sha(got) != fx.PlainSHA && p == m.Path(strings.TrimSuffix(fx.Name, "/")) && bytes.Equal(got, readFile(t, fx.Path)):
			// Its probe failed every try (one in 3,000 at this
			// rate): shown raw under its own name this time, and
			// read bit-exact as such.
			raw++
		case sha(got) != fx.PlainSHA:
			t.Errorf("%s: wrong bytes through the faulty proxy", fx.Name)
		default:
			ok++
		}
	}
	t.Logf("%d read bit-exact, %d EIO, %d shown raw (a probe out of tries); faults: drop %d, 500 %d, 503 %d, delay %d, truncate %d", ok, eio, raw,
		faults.Count("drop"), faults.Count("500"), faults.Count("503"), faults.Count("delay"), faults.Count("truncate"))
	if raw > 3 {
		t.Errorf("%d fixtures shown raw: their probes failed every try", raw)
	}
	if ok < 50 {
		t.Errorf("only %d fixtures read through the faulty proxy", ok)
	}

	// An object replaced while it is open: the open handle reads the
	// old bytes or gets EIO; a new open sees the new object.
	s := newStore(t, bucket)
	key := "replaced/series.bin"
	old := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	if err := s.Upload(context.Background(), key, bytes.NewReader(old)); err != nil {
		t.Fatal(err)
	}
	faults.Rate.Store(0.0)
	f, err := os.Open(m.Path(key))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 4096)
	if _, err := f.ReadAt(b, 0); err != nil || !bytes.Equal(b, old[:4096]) {
		t.Fatalf("first read: %v", err)
	}
	repl := bytes.Repeat([]byte("ZYXWVUTSRQPONMLK"), 1<<18)
	if err := s.Upload(context.Background(), key, bytes.NewReader(repl)); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{1 << 20, 3 << 20} {
		_, err := f.ReadAt(b, off)
		if err == nil && !bytes.Equal(b, old[off:off+4096]) {
			t.Fatalf("read at %d after the replace: neither the old bytes nor EIO", off)
		}
		if err != nil && !errors.Is(err, syscall.EIO) {
			t.Fatalf("read at %d after the replace: %v", off, err)
		}
	}
	if !strings.Contains(m.LogText(), "changed since it was opened") {
		t.Errorf("no log line for the replaced object:\n%s", m.LogText())
	}
	// A new open sees the new object (its open of the old version's node
	// is answered ESTALE, and the kernel looks the name up again).
	g, err := os.ReadFile(m.Path(key))
	if err != nil || !bytes.Equal(g, repl) {
		t.Errorf("reopened after the replace: %v, new bytes %v", err, bytes.Equal(g, repl))
	}
	// The daemon still serves.
	if _, err := os.ReadDir(m.Dir); err != nil {
		t.Errorf("after the faults: %v", err)
	}
}

// TestReplacedWhileOpen: an object is replaced while a handle has it
// open, and a new open sees the new version. The old handle reads the old
// bytes (from the daemon's caches) or gets EIO; the new one reads the new
// bytes, all of them. Both used to share the file's one page cache in the
// kernel: the old handle's reads put old bytes there, and the new handle
// read them at those offsets.
func TestReplacedWhileOpen(t *testing.T) {
	s := newStore(t, bucket)
	key := "replaced-open/series.bin"
	old := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	if err := s.Upload(context.Background(), key, bytes.NewReader(old)); err != nil {
		t.Fatal(err)
	}
	m := mountRemote(t, "s3://"+bucket)
	f1, err := os.Open(m.Path(key))
	if err != nil {
		t.Fatal(err)
	}
	defer f1.Close()
	// The whole old version, now in the daemon's range cache and the
	// kernel's page cache.
	if got, err := io.ReadAll(f1); err != nil || !bytes.Equal(got, old) {
		t.Fatalf("reading the old version: %v", err)
	}
	repl := bytes.Repeat([]byte("ZYXWVUTSRQPONMLK"), 1<<18)
	if err := s.Upload(context.Background(), key, bytes.NewReader(repl)); err != nil {
		t.Fatal(err)
	}
	// No wait: the open of the old version's node, which the kernel
	// still has under the name, is answered ESTALE, and the kernel looks
	// the name up again and opens a node of the new version.
	f2, err := os.Open(m.Path(key))
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	b := make([]byte, 4096)
	for _, off := range []int64{1 << 20, 3<<20 + 12345} {
		// Dropped from the old handle's page cache, so that its read
		// comes to the daemon.
		unix.Fadvise(int(f1.Fd()), 0, 0, unix.FADV_DONTNEED)
		if _, err := f1.ReadAt(b, off); err != nil && !errors.Is(err, syscall.EIO) {
			t.Errorf("old handle, read at %d: %v, want the old bytes or EIO", off, err)
		} else if err == nil && !bytes.Equal(b, old[off:off+4096]) {
			t.Errorf("old handle, read at %d: neither the old bytes nor EIO (new bytes %v)", off, bytes.Equal(b, repl[off:off+4096]))
		}
		if _, err := f2.ReadAt(b, off); err != nil || !bytes.Equal(b, repl[off:off+4096]) {
			t.Errorf("new handle, read at %d: %v, new bytes %v, old bytes %v", off, err, bytes.Equal(b, repl[off:off+4096]), bytes.Equal(b, old[off:off+4096]))
		}
	}
	if got, err := io.ReadAll(f2); err != nil || !bytes.Equal(got, repl) {
		t.Errorf("new handle, whole file: %v, new bytes %v", err, bytes.Equal(got, repl))
	}
	// The old handle, read whole again: the old bytes, or EIO.
	f1.Seek(0, io.SeekStart)
	if got, err := io.ReadAll(f1); err == nil && !bytes.Equal(got, old) {
		t.Errorf("old handle, whole file again: neither the old bytes nor EIO")
	} else if err != nil && !errors.Is(err, syscall.EIO) {
		t.Errorf("old handle, whole file again: %v", err)
	}
}

// TestProfile: credentials from AWS_PROFILE and the shared files, none in
// the environment.
func TestProfile(t *testing.T) {
	setup.Require(t)
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	conf := filepath.Join(dir, "config")
	body := fmt.Sprintf("[archive]\naws_access_key_id = %s\naws_secret_access_key = %s\n", os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"))
	if err := os.WriteFile(creds, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("[profile archive]\nregion = us-east-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID=") && !strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") && !strings.HasPrefix(kv, "AWS_REGION=") {
			env = append(env, kv)
		}
	}
	run := func(extra ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "info", "s3://"+bucket+"/codec_lz4.blp")
		cmd.Env = append(append([]string(nil), env...), extra...)
		return cmd.CombinedOutput()
	}
	if out, err := run("AWS_PROFILE=archive", "AWS_SHARED_CREDENTIALS_FILE="+creds, "AWS_CONFIG_FILE="+conf); err != nil || !strings.Contains(string(out), "lz4") {
		t.Errorf("with AWS_PROFILE: %v: %s", err, out)
	}
	// (No instance metadata lookup: the tests stay on loopback.)
	if out, err := run("AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "none"), "AWS_CONFIG_FILE="+filepath.Join(dir, "none"), "AWS_EC2_METADATA_DISABLED=true"); err == nil {
		t.Errorf("without credentials: succeeded: %s", out)
	}
}

// TestStats: `bloscfs stats` of a remote mount reports the requests it
// sent and the bytes its GETs fetched, as the proxy between the mount and
// the server counted them, with the decoding counters of a local mount.
func TestStats(t *testing.T) {
	setup.Require(t)
	counter := fakes3.NewFaults(endpoint, 0, 1)
	defer counter.Close()
	m := mountRemote(t, "s3://"+bucket, "--endpoint", counter.URL)
	stats := func() bfs.Stats {
		t.Helper()
		var s bfs.Stats
		if err := json.Unmarshal([]byte(run(t, bin, "stats", "--json", m.Dir)), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	var fx fixtures.Fixture
	for _, f := range loadFixtures(t) {
		if f.Name == "codec_lz4_l5.b2frame" {
			fx = f
		}
	}
	got, err := os.ReadFile(viewPath(t, m, fx))
	if err != nil || sha(got) != fx.PlainSHA {
		t.Fatalf("read %s: %v (or wrong bytes)", fx.Name, err)
	}
	s := stats()
	if s.Remote == nil {
		t.Fatalf("no remote counters: %+v", s)
	}
	if r := s.Remote; r.Requests != counter.Requests.Load() || r.FetchedBytes == 0 || r.FetchedBytes > counter.Bytes.Load() {
		t.Errorf("mount counted %d requests and %d bytes fetched; the proxy saw %d requests and %d response bytes",
			r.Requests, r.FetchedBytes, counter.Requests.Load(), counter.Bytes.Load())
	}
	if c := s.Codecs["lz4"]; c.Blocks == 0 || c.DecodedBytes < int64(len(got)) {
		t.Errorf("decode counters %+v after reading %d bytes", s.Codecs, len(got))
	}
	if s.Source != "s3://"+bucket+"/" && s.Source != "s3://"+bucket {
		t.Errorf("source %q", s.Source)
	}
	text := run(t, bin, "stats", m.Dir)
	if !strings.Contains(text, "remote:") || !strings.Contains(text, "requests") {
		t.Errorf("stats:\n%s", text)
	}
}
