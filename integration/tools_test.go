package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	bfs "github.com/bloscfs/bloscfs/fs"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
	"golang.org/x/sys/unix"
)

// The tests of this file check that bloscfs behaves as the mount tools
// people already use: mount.fuse3 and fstab, helper errors, logs,
// mountpoint checks, statistics.

// smallSource makes a source directory with a plain file and a 4 MiB
// frame ("data", zstd, 1 MiB chunks), and returns it and the frame's
// plain bytes.
func smallSource(t *testing.T) (string, []byte) {
	t.Helper()
	setup.Require(t)
	src := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	for i := 0; plain.Len() < 4<<20; i++ {
		fmt.Fprintf(&plain, "%08d,%f\n", i, float64(i)*0.37)
	}
	in := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(in, plain.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, bin, "pack", "--codec", "zstd", in, filepath.Join(src, "data.b2frame"))
	if err := os.WriteFile(filepath.Join(src, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return src, plain.Bytes()
}

// runEnv runs a program with extra environment variables and a timeout.
func runEnv(timeout time.Duration, env []string, name string, args ...string) testkit.Result {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	return testkit.RunCmd(timeout, cmd)
}

// findTool returns the path of an administration program, which may be
// in an sbin directory missing from PATH.
func findTool(t *testing.T, name string) string {
	t.Helper()
	setup.Require(t)
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		if p := filepath.Join(d, name); fileExists(p) {
			return p
		}
	}
	t.Fatalf("%s is not installed: run `make deps` (apt-get install -y fuse3)", name)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestMountFuse3 mounts through a real mount.fuse3, which runs
// `bloscfs SOURCE MOUNTPOINT -o ro,noatime,...,dev,suid` found on PATH:
// the helper form and mount(8)'s options work.
func TestMountFuse3(t *testing.T) {
	mf := findTool(t, "mount.fuse3")
	src, plain := smallSource(t)
	dir := mounttest.NewMountpoint(t)
	m := mounttest.Expect(t, bin, src, dir)
	log := filepath.Join(t.TempDir(), "log")
	r := runEnv(cmdTimeout, []string{"PATH=" + binDir + ":" + os.Getenv("PATH")}, mf, src, dir, "-t", "fuse.bloscfs",
		"-o", "ro,noatime,nofail,_netdev,x-systemd.requires=foo,cache_size=64M,read_ahead=1M,log="+log)
	if r.Err != nil {
		t.Fatalf("mount.fuse3: %v", r)
	}
	if !mounttest.IsMounted(dir) {
		t.Fatalf("mount.fuse3 returned 0 but %s is not mounted", dir)
	}
	if opts := mounttest.Options(dir); !slices.Contains(opts, "ro") || !slices.Contains(opts, "noatime") {
		t.Errorf("mount options %v, want ro and noatime", opts)
	}
	if b, err := os.ReadFile(m.Path("data")); err != nil || !bytes.Equal(b, plain) {
		t.Errorf("data through the mount: %d bytes, %v", len(b), err)
	}
	if err := os.WriteFile(m.Path("new"), nil, 0o644); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("creating a file in the ro mount: %v, want EROFS", err)
	}
}

// TestFstab mounts from an fstab line with `mount -a -T FSTAB`, and with
// `mount -t fuse.bloscfs`, through real mount(8) and mount.fuse3. mount(8)
// runs helpers without PATH, so that the shell's default PATH finds
// bloscfs in /usr/local/bin, where `make install` puts it: the test runs
// in a private mount namespace in which the freshly built binary is
// bind-mounted over /usr/local/bin; the mounts live and die there.
func TestFstab(t *testing.T) {
	findTool(t, "mount.fuse3")
	unshare := findTool(t, "unshare")
	src, plain := smallSource(t)
	tmp := t.TempDir()
	dir1, dir2 := filepath.Join(tmp, "m1"), filepath.Join(tmp, "m2")
	for _, d := range []string{dir1, dir2} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fstab := filepath.Join(tmp, "fstab")
	line := fmt.Sprintf("%s %s fuse.bloscfs ro,noatime,nofail,_netdev,x-systemd.automount,cache_size=64M,log=%s 0 0\n", src, dir1, filepath.Join(tmp, "log"))
	if err := os.WriteFile(fstab, []byte("# a test fstab\n"+line), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`set -e
mount --bind %[1]q /usr/local/bin
trap 'set +e; umount %[2]q 2>/dev/null; umount %[3]q 2>/dev/null' EXIT
mount -a -T %[4]q
grep -F ' %[2]s ' /proc/self/mounts
sha256sum %[2]q/data
mount -t fuse.bloscfs %[5]q %[3]q -o ro,log=%[6]q
grep -F ' %[3]s ' /proc/self/mounts
sha256sum %[3]q/data
bloscfs unmount %[2]q
umount %[3]q
echo done
`, binDir, dir1, dir2, fstab, src, filepath.Join(tmp, "log2"))
	r := testkit.Run(cmdTimeout, unshare, "--mount", "--propagation", "private", "sh", "-c", script)
	out := string(r.Stdout)
	t.Logf("in the private namespace:\n%s%s", out, r.Stderr)
	if r.Err != nil {
		t.Fatalf("fstab script: %v", r)
	}
	want := sha(plain)
	for _, d := range []string{dir1, dir2} {
		if !strings.Contains(out, src+" "+d+" fuse.bloscfs ro,") {
			t.Errorf("no ro fuse.bloscfs line for %s in the namespace's mounts", d)
		}
		if !strings.Contains(out, want+"  "+d+"/data") {
			t.Errorf("%s/data does not read back (sha256 %s)", d, want)
		}
	}
	if !strings.HasSuffix(out, "done\n") {
		t.Errorf("the script did not finish")
	}
	if mounttest.IsMounted(dir1) || mounttest.IsMounted(dir2) {
		t.Errorf("a mount of the private namespace is visible outside it")
	}
}

// TestHelperStderr: fusermount3's own message reaches the user's stderr
// in the foreground and in the background (go-fuse falls back to
// fusermount3 when mount(2) refuses an option; fusermount3 refuses
// uid=1000 too).
func TestHelperStderr(t *testing.T) {
	findTool(t, "fusermount3")
	src, _ := smallSource(t)
	for _, fg := range []bool{false, true} {
		dir := mounttest.NewMountpoint(t)
		mounttest.Expect(t, bin, src, dir)
		args := []string{"mount", "--log", filepath.Join(t.TempDir(), "log"), "-o", "uid=1000", src, dir}
		if fg {
			args = append(args, "-f")
		}
		r := testkit.Run(30*time.Second, bin, args...)
		if r.Code != 1 || !strings.Contains(string(r.Stderr), "fusermount3: ") || !strings.Contains(string(r.Stderr), "uid=1000") {
			t.Errorf("foreground %v: %v; want exit 1 and fusermount3's message", fg, r)
		}
	}
}

// TestLogFallback: in the background without --log, logs go to syslog
// when its socket exists, else to $XDG_STATE_HOME/bloscfs/bloscfs.log, and
// mount says which.
func TestLogFallback(t *testing.T) {
	src, _ := smallSource(t)
	dir := mounttest.NewMountpoint(t)
	mounttest.Expect(t, bin, src, dir)
	state := t.TempDir()
	r := runEnv(30*time.Second, []string{"XDG_STATE_HOME=" + state}, bin, "mount", src, dir)
	if r.Err != nil {
		t.Fatalf("mount: %v", r)
	}
	logFile := filepath.Join(state, "bloscfs", "bloscfs.log")
	want := "log: " + logFile
	if fileExists("/dev/log") {
		want = "log: syslog"
	}
	if !strings.Contains(string(r.Stderr), want) {
		t.Fatalf("mount said %q, want %q", r.Stderr, want)
	}
	if want == "log: syslog" {
		return
	}
	if b, err := os.ReadFile(logFile); err != nil || !strings.Contains(string(b), "serving "+src) {
		t.Errorf("%s: %q, %v; want the serving line", logFile, b, err)
	}
}

// TestMountpointChecks: a non-empty mountpoint is refused unless
// -o nonempty, and mounting a source mounted already warns.
func TestMountpointChecks(t *testing.T) {
	src, plain := smallSource(t)
	dir := mounttest.NewMountpoint(t)
	if err := os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := mounttest.Expect(t, bin, src, dir)
	log := filepath.Join(t.TempDir(), "log")
	r := testkit.Run(30*time.Second, bin, "mount", "--log", log, src, dir)
	if r.Code != 1 || !strings.Contains(string(r.Stderr), "not empty") || mounttest.IsMounted(dir) {
		t.Fatalf("non-empty mountpoint: %v, mounted %v; want a refusal", r, mounttest.IsMounted(dir))
	}
	r = testkit.Run(30*time.Second, bin, "mount", "--log", log, "-o", "nonempty", src, dir)
	if r.Err != nil || !mounttest.IsMounted(dir) {
		t.Fatalf("-o nonempty: %v", r)
	}
	if b, err := os.ReadFile(m.Path("data")); err != nil || !bytes.Equal(b, plain) {
		t.Errorf("data through the mount: %d bytes, %v", len(b), err)
	}
	if strings.Contains(string(r.Stderr), "warning") {
		t.Errorf("first mount of %s warned: %s", src, r.Stderr)
	}
	dir2 := mounttest.NewMountpoint(t)
	mounttest.Expect(t, bin, src, dir2)
	r = testkit.Run(30*time.Second, bin, "mount", "--log", log, src, dir2)
	if r.Err != nil || !strings.Contains(string(r.Stderr), "warning: "+src+" is already mounted at "+dir) {
		t.Errorf("second mount of %s: %v; want a warning naming %s", src, r, dir)
	}
}

// TestStats: after known reads, `bloscfs stats --json` shows the
// expected cache hits and misses, decodes under the file's codec, and
// the open file. The reads use O_DIRECT, so that the page cache and the
// kernel's read-ahead add no READs, at an offset other than 0, so that
// the first is a random read, which keeps its block.
func TestStats(t *testing.T) {
	src, plain := smallSource(t)
	m := mountDaemon(t, src, "-o", "read_ahead=0") // the second read is near the first: no read-ahead
	stats := func() bfs.Stats {
		t.Helper()
		r := testkit.Run(cmdTimeout, bin, "stats", "--json", m.Dir)
		var s bfs.Stats
		if err := json.Unmarshal(r.Stdout, &s); r.Err != nil || err != nil {
			t.Fatalf("stats --json: %v (%v)", r, err)
		}
		return s
	}
	before := stats()
	if before.Cache.Hits != 0 || before.Cache.Misses != 0 || before.OpenFiles != 0 || before.Source != src {
		t.Fatalf("fresh mount: %+v", before)
	}
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	const off = 1<<20 + 8192
	fd, err := unix.Open(m.Path("data"), unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		n, err := unix.Pread(fd, buf, off)
		if err != nil || n != len(buf) || !bytes.Equal(buf, plain[off:off+4096]) {
			unix.Close(fd)
			t.Fatalf("pread %d: %d bytes, %v", i, n, err)
		}
	}
	if s := stats(); s.OpenFiles != 1 {
		t.Errorf("open_files %d with one file open", s.OpenFiles)
	}
	unix.Close(fd)
	s := stats()
	if s.Cache.Misses != 1 || s.Cache.Loads != 1 || s.Cache.Hits != 1 {
		t.Errorf("after two reads of one block: hits %d, misses %d, loads %d; want 1, 1, 1", s.Cache.Hits, s.Cache.Misses, s.Cache.Loads)
	}
	z := s.Codecs["zstd"]
	if z.Blocks != 1 || z.DecodedBytes <= 4096 || z.DecodeSeconds <= 0 || s.Cache.Bytes < z.DecodedBytes {
		t.Errorf("codec stats %+v (cache holds %d)", s.Codecs, s.Cache.Bytes)
	}
	// The text form says the same.
	text := string(mustRun(t, bin, "stats", m.Dir))
	if !strings.Contains(text, "1 hit, 1 miss ") || !strings.Contains(text, "decode zstd:") {
		t.Errorf("stats:\n%s", text)
	}
	// Open files are counted until their release, which the kernel
	// sends after close returns.
	if !testkit.Eventually(t, 10*time.Second, func() bool { return stats().OpenFiles == 0 }) {
		t.Errorf("open_files %d 10s after closing", stats().OpenFiles)
	}
	// A directory that is no mount is named as such.
	if r := testkit.Run(cmdTimeout, bin, "stats", src); r.Code != 1 || !strings.Contains(string(r.Stderr), "not a mountpoint") {
		t.Errorf("stats of the source: %v", r)
	}
}

// TestVerifyMountpoint: info and verify run on a mount say that it is a
// bloscfs mount and name its source, instead of printing nothing or
// "0 verified"; run on a file in the mount, they name the source file
// it shows, instead of "not a Blosc container". Two mounts share one
// log file, as every root mount shares /var/log/bloscfs/bloscfs.log, and
// each line of it names the mountpoint it is about.
func TestVerifyMountpoint(t *testing.T) {
	src, _ := smallSource(t)
	log := filepath.Join(t.TempDir(), "shared.log")
	m := mountDaemon(t, src, "--log", log)
	for _, cmd := range []string{"info", "verify"} {
		r := testkit.Run(cmdTimeout, bin, cmd, m.Dir)
		if want := "a bloscfs mount of " + src; r.Code != 1 || !strings.Contains(string(r.Stderr), want) || !strings.Contains(string(r.Stderr), "bloscfs "+cmd+" "+src) {
			t.Errorf("%s MOUNTPOINT: %v; want exit 1 and %q", cmd, r, want)
		}
		r = testkit.Run(cmdTimeout, bin, cmd, m.Path("data"))
		if want := "the decompressed view of " + filepath.Join(src, "data.b2frame"); r.Code != 1 || !strings.Contains(string(r.Stderr), want) || strings.Contains(string(r.Stderr), "not a Blosc container") {
			t.Errorf("%s MOUNTPOINT/data: %v; want exit 1 and %q", cmd, r, want)
		}
	}
	src2, _ := smallSource(t)
	m2 := mountDaemon(t, src2, "--log", log)
	for _, mm := range []*mount{m, m2} {
		if r := mm.Unmount(); r.Err != nil {
			t.Fatalf("unmount %s: %v", mm.Dir, r)
		}
		mm.WaitExit(10 * time.Second)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d bloscfs\[(\d+)\]: (/\S+): `)
	serving := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		g := line.FindStringSubmatch(l)
		if g == nil || (g[2] != m.Dir && g[2] != m2.Dir) || g[1] != fmt.Sprint(map[string]int{m.Dir: m.PID, m2.Dir: m2.PID}[g[2]]) {
			t.Errorf("shared log: %q does not start with the time, bloscfs[PID] and its mountpoint (%s or %s)", l, m.Dir, m2.Dir)
			continue
		}
		if strings.Contains(l, "serving ") {
			serving[g[2]] = true
		}
	}
	if !serving[m.Dir] || !serving[m2.Dir] {
		t.Errorf("shared log: a serving line of each mount? %v\n%s", serving, b)
	}
}

// TestNonRootMount mounts as a user other than root (nobody), through
// the setuid fusermount3. Where fusermount3 may mount (/dev/fuse open to
// users), the mount reads and that user unmounts it; where it may not
// (as in containers, where /dev/fuse is root's), fusermount3's own
// message reaches the user, in the background and in the foreground.
func TestNonRootMount(t *testing.T) {
	findTool(t, "fusermount3")
	setpriv := findTool(t, "setpriv")
	base, err := os.MkdirTemp("", "bloscfs-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	src, mnt, exe := filepath.Join(base, "src"), filepath.Join(base, "mnt"), filepath.Join(base, "bloscfs")
	tmp := filepath.Join(base, "tmp") // the user's TMPDIR, where its logs go
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		os.Chmod(base, 0o755), os.WriteFile(exe, b, 0o755), os.Mkdir(src, 0o755), os.Mkdir(mnt, 0o755),
		os.WriteFile(filepath.Join(src, "hello.txt"), []byte("hello\n"), 0o644),
		os.Mkdir(tmp, 0o755), os.Chown(src, 65534, 65534), os.Chown(mnt, 65534, 65534), os.Chown(tmp, 65534, 65534),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	mounttest.Expect(t, bin, src, mnt)
	asNobody := func(args ...string) testkit.Result {
		args = append([]string{"--reuid=65534", "--regid=65534", "--clear-groups"}, args...)
		return runEnv(30*time.Second, []string{"HOME=/nonexistent", "TMPDIR=" + tmp}, setpriv, args...)
	}
	for _, fg := range []bool{false, true} {
		args := []string{exe, "mount", src, mnt}
		if fg {
			args = append(args, "-f")
		}
		r := asNobody(args...)
		if r.Code != 0 {
			if !strings.Contains(string(r.Stderr), "fusermount3: ") {
				t.Errorf("non-root mount (foreground %v): %v; want fusermount3's message", fg, r)
			}
			continue
		}
		if fg {
			t.Fatalf("mount -f returned 0 while mounted: %v", r)
		}
		if !mounttest.IsMounted(mnt) {
			t.Fatalf("non-root mount returned 0 but %s is not mounted", mnt)
		}
		if c := asNobody("cat", filepath.Join(mnt, "hello.txt")); c.Err != nil || string(c.Stdout) != "hello\n" {
			t.Errorf("cat as the mount's user: %v", c)
		}
		if u := asNobody(exe, "unmount", mnt); u.Err != nil || mounttest.IsMounted(mnt) {
			t.Errorf("non-root unmount: %v", u)
		}
		break
	}
}

// TestStatsReadAheadAndSIGUSR1: a sequential reader (dd with O_DIRECT:
// 1 MiB READs one after the other) starts read-ahead, and its later READs
// fall in what the read-ahead was asked to decode; SIGUSR1 writes the
// same counters to the log.
func TestStatsReadAheadAndSIGUSR1(t *testing.T) {
	requireTool(t, "dd")
	src, _ := smallSource(t)
	m := mountDaemon(t, src, "--read-ahead", "4MiB")
	mustRun(t, "dd", "if="+m.Path("data"), "of=/dev/null", "bs=1M", "iflag=direct")
	var s bfs.Stats
	if err := json.Unmarshal(mustRun(t, bin, "stats", "--json", m.Dir), &s); err != nil {
		t.Fatal(err)
	}
	if s.ReadAhead.Runs < 1 || s.ReadAhead.Bytes < 2<<20 || s.ReadAhead.Hits < 1 {
		t.Errorf("after a sequential read of 4 MiB: read-ahead %+v; want at least a run of 2 MiB and a hit", s.ReadAhead)
	}
	if s.Codecs["zstd"].DecodedBytes < 4<<20 {
		t.Errorf("decoded %+v, want the whole file", s.Codecs)
	}
	if err := syscall.Kill(m.PID, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if !testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(m.LogText(), `stats: {"source":"`+src+`"`) }) {
		t.Fatalf("no stats line in the log 10s after SIGUSR1:\n%s", m.LogText())
	}
}

// TestOptionsReachDaemon: options given with -o reach the daemon as
// given: a relative log=FILE is the caller's (the daemon runs in /), and
// cache_size= is the cache's size.
func TestOptionsReachDaemon(t *testing.T) {
	src, _ := smallSource(t)
	dir := mounttest.NewMountpoint(t)
	m := mounttest.Expect(t, bin, src, dir)
	cwd := t.TempDir()
	cmd := exec.Command(bin, src, dir, "-o", "ro,log=rel.log,cache_size=64M")
	cmd.Dir = cwd
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	m.Log = filepath.Join(cwd, "rel.log")
	if !strings.Contains(m.LogText(), "serving "+src) {
		t.Errorf("%s: %q; want the serving line", m.Log, m.LogText())
	}
	var s bfs.Stats
	if err := json.Unmarshal(mustRun(t, bin, "stats", "--json", dir), &s); err != nil || s.Cache.MaxBytes != 64<<20 {
		t.Errorf("cache size %d (%v), want 64 MiB", s.Cache.MaxBytes, err)
	}
	if opts := mounttest.Options(dir); !slices.Contains(opts, "ro") {
		t.Errorf("mount options %v, want ro", opts)
	}
}

// TestLsattr: lsattr shows a compressed file the flags of its source (a
// container file, or a sparse frame directory), as it shows a plain
// file's, rather than "Operation not supported".
func TestLsattr(t *testing.T) {
	lsattr := requireTool(t, "lsattr")
	chattr := requireTool(t, "chattr")
	src := copyFixtures(t)
	files := map[string]string{"codec_zstd_l5": "codec_zstd_l5.b2frame", "sparse_frame": "sparse_frame.b2frame", "MANIFEST.tsv": "MANIFEST.tsv"}
	for _, disk := range files {
		mustRun(t, chattr, "+d", filepath.Join(src, disk)) // no dump: a flag of its own
	}
	m := mountDaemon(t, src)
	flags := func(path string) string {
		f := strings.Fields(string(mustRun(t, lsattr, "-d", path)))
		if len(f) < 2 {
			t.Fatalf("lsattr -d %s: %q", path, f)
		}
		return f[0]
	}
	for view, disk := range files {
		want := flags(filepath.Join(src, disk))
		if got := flags(m.Path(view)); got != want || !strings.Contains(got, "d") {
			t.Errorf("lsattr of %s through the mount: %s; want its source's %s", view, got, want)
		}
	}
}
