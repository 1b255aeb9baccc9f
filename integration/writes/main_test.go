package writes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bfs "github.com/bloscfs/bloscfs/fs"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
)

var (
	// bin is the bloscfs binary built by TestMain.
	bin string
	// skipReason makes every test skip (not root and CI unset).
	skipReason string
	// setupErr makes every test fail (a broken set-up).
	setupErr string
)

// cmdTimeout bounds every program a test runs, so that a hung mount
// fails the test instead of hanging the package.
const cmdTimeout = 3 * time.Minute

// helperEnv, when set, turns the test binary into one of the helper
// processes of the tests (see runHelper).
const helperEnv = "BLOSCFS_WRITES_HELPER"

// longRun reports whether BLOSCFS_LONG asks for the long variants.
func longRun() bool {
	v := os.Getenv("BLOSCFS_LONG")
	return v != "" && v != "0"
}

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h))
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if skipReason, setupErr = testkit.MountPrereqs("write-path tests"); skipReason != "" || setupErr != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "bloscfs-writes-")
	if err != nil {
		setupErr = err.Error()
		return m.Run()
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "bloscfs")
	if err := goBuild(bin); err != nil {
		setupErr = err.Error()
	}
	code := m.Run()
	if left := emergencyUnmount(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "writes: mounts left behind after the tests, now detached: %v\n", left)
		code = 1
	}
	return code
}

// goBuild builds ./cmd/bloscfs into out.
func goBuild(out string) error { return testkit.BuildBloscfs(out) }

// requireRoot skips or fails as TestMain decided.
func requireRoot(tb testing.TB) {
	tb.Helper()
	if skipReason != "" {
		tb.Skip(skipReason)
	}
	if setupErr != "" {
		tb.Fatal(setupErr)
	}
}

// requireTool fails when a program is missing: `make test` installs what
// the tests need, so a missing one is a broken set-up, not a reason to
// skip.
func requireTool(tb testing.TB, names ...string) {
	tb.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			tb.Fatalf("%s is not installed: run `make deps` (apt-get install -y fuse3 python3-numpy python3-blosc coreutils util-linux)", name)
		}
	}
}

// --- running programs ---

// result is what a finished program left behind.
type result = testkit.Result

// runProg runs a program with a timeout.
func runProg(timeout time.Duration, name string, args ...string) result {
	return testkit.Run(timeout, name, args...)
}

// mustRun runs a program and fails the test unless it exits 0.
func mustRun(tb testing.TB, name string, args ...string) []byte {
	tb.Helper()
	r := runProg(cmdTimeout, name, args...)
	if r.Err != nil {
		tb.Fatalf("%s %s: %v", name, strings.Join(args, " "), r)
	}
	return r.Stdout
}

// python returns Debian's interpreter that imports modules (failing the
// test, not skipping, when none does).
func python(tb testing.TB, modules ...string) string {
	tb.Helper()
	if len(modules) == 0 {
		modules = []string{"os"}
	}
	return testkit.Python(tb, modules...)
}

// runPy runs a Python script with arguments and returns its stdout; a
// non-zero exit fails the test.
func runPy(tb testing.TB, py, script string, args ...string) string {
	tb.Helper()
	r := runProg(cmdTimeout, py, append([]string{"-c", script}, args...)...)
	if r.Err != nil {
		tb.Fatalf("python %v: %v\nstdout: %s\nscript:\n%s", args, r, r.Stdout, script)
	}
	return string(r.Stdout)
}

// --- the source side: unpack and info ---

// unpack returns `bloscfs unpack PATH -`.
func unpack(tb testing.TB, path string) []byte {
	tb.Helper()
	return mustRun(tb, bin, "unpack", path, "-")
}

// unpackSHA streams `bloscfs unpack PATH -` into sha256.
func unpackSHA(path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "unpack", path, "-")
	var se bytes.Buffer
	cmd.Stderr = &se
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	h := sha256.New()
	_, cerr := io.Copy(h, out)
	if err := cmd.Wait(); err != nil {
		return "", fmt.Errorf("bloscfs unpack %s: %v: %s", path, err, strings.TrimSpace(se.String()))
	}
	if cerr != nil {
		return "", cerr
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// info is the part of `bloscfs info --json` that a rewrite must keep.
type info struct {
	Format    string            `json:"format"`
	Size      int64             `json:"size"`
	Chunks    int               `json:"chunks"`
	ChunkSize int64             `json:"chunk_size"`
	Codec     string            `json:"codec"`
	Clevel    int               `json:"clevel"`
	Typesize  int               `json:"typesize"`
	Filters   string            `json:"filters"`
	Checksum  string            `json:"checksum"`
	Meta      map[string]string `json:"meta"`
}

// params is what must not change when a file is rewritten.
func (i info) params() string {
	return fmt.Sprintf("format=%s codec=%s clevel=%d typesize=%d filters=%s checksum=%q chunk_size=%d meta=%v",
		i.Format, i.Codec, i.Clevel, i.Typesize, i.Filters, i.Checksum, i.ChunkSize, i.Meta)
}

// infoOf runs `bloscfs info --json PATH`.
func infoOf(tb testing.TB, path string) info {
	tb.Helper()
	out := mustRun(tb, bin, "info", "--json", path)
	var recs []info
	if err := json.Unmarshal(out, &recs); err != nil || len(recs) != 1 {
		tb.Fatalf("bloscfs info --json %s: %v\n%s", path, err, out)
	}
	return recs[0]
}

// --- files and data ---

// fixture returns the path of a fixture of testdata/fixtures.
func fixture(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(fixtures.Dir(), name)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("fixture %s: %v", name, err)
	}
	return p
}

// copyFile copies a file or, recursively, a directory.
func copyFile(tb testing.TB, src, dst string) {
	tb.Helper()
	st, err := os.Stat(src)
	if err != nil {
		tb.Fatal(err)
	}
	if st.IsDir() {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			tb.Fatal(err)
		}
		ents, err := os.ReadDir(src)
		if err != nil {
			tb.Fatal(err)
		}
		for _, e := range ents {
			copyFile(tb, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
		}
		return
	}
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// series fills b with a compressible little-endian float64 series that
// starts at element index first; seed shifts the values.
func series(b []byte, first int64, seed float64) {
	for i := 0; i+8 <= len(b); i += 8 {
		k := first + int64(i/8)
		// Quantized to 1/64: the low mantissa bits are zero, as in
		// measured data, so that shuffle + a codec compress it.
		v := math.Round((math.Sin(float64(k)*1e-3)*1000+float64(k%4096)*0.25+seed)*64) / 64
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(first + int64(i))
	}
}

// seriesBytes returns n bytes of series.
func seriesBytes(n int, seed float64) []byte {
	b := make([]byte, n)
	series(b, 0, seed)
	return b
}

// writeSeriesFile writes size bytes of series to path, in pieces.
func writeSeriesFile(tb testing.TB, path string, size int64, seed float64) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 8<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), size-off)]
		series(b, off/8, seed)
		if _, err := f.Write(b); err != nil {
			tb.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// hiddenIn lists the bloscfs temp and staging files in dir.
func hiddenIn(dir string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, ".bloscfs-") {
			out = append(out, n)
		}
	}
	return out
}

// waitNoHidden polls until dir holds no bloscfs temp or staging file
// (staging files go at RELEASE, which the kernel sends after close
// returns; stale files of earlier mounts go in a background goroutine).
func waitNoHidden(dir string, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		left := hiddenIn(dir)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// firstDiff describes where two byte slices first differ.
func firstDiff(got, want []byte) string {
	n := min(len(got), len(want))
	for i := 0; i < n; i++ {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at byte %d: got %#02x, want %#02x (sizes %d, %d)", i, got[i], want[i], len(got), len(want))
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("sizes differ: got %d bytes, want %d (equal up to %d)", len(got), len(want), n)
	}
	return "equal"
}

// --- mounts ---

var (
	liveMu sync.Mutex
	live   = map[string]*mount{} // mountpoint → mount, while possibly mounted
)

// emergencyUnmount detaches every mount the tests left (a test that
// panicked before its cleanup ran) and kills its daemon; it returns the
// mountpoints it found still mounted.
func emergencyUnmount() []string {
	liveMu.Lock()
	defer liveMu.Unlock()
	var left []string
	for dir, m := range live {
		if isMounted(dir) {
			left = append(left, dir)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		if pid := m.daemonPID(); pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return left
}

// mount is one bloscfs mount made by a test.
type mount struct {
	src, dir string // source and mountpoint (absolute)
	logPath  string
	flags    []string

	// A foreground daemon is our child; a background one was started by
	// `bloscfs mount` and is found in /proc.
	cmd    *exec.Cmd
	exited chan struct{}
	bgPID  int
}

// path returns the path of name inside the mount.
func (m *mount) path(name string) string { return filepath.Join(m.dir, name) }

// daemonPID returns the pid of the serving process (0 when unknown).
func (m *mount) daemonPID() int {
	if m.cmd != nil && m.cmd.Process != nil {
		return m.cmd.Process.Pid
	}
	return m.bgPID
}

// alive reports whether the serving process still runs.
func (m *mount) alive() bool {
	if m.cmd != nil {
		select {
		case <-m.exited:
			return false
		default:
			return true
		}
	}
	return m.bgPID > 0 && servesMount(m.bgPID, m.dir)
}

// logText returns the daemon's log.
func (m *mount) logText() string {
	b, _ := os.ReadFile(m.logPath)
	return string(b)
}

// newDirs makes a source and a mountpoint side by side (the mountpoint
// is never inside the source) under a fresh temp dir.
func newDirs(tb testing.TB) (root, src, mnt string) {
	tb.Helper()
	root = tb.TempDir()
	src, mnt = filepath.Join(root, "src"), filepath.Join(root, "mnt")
	for _, d := range []string{src, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return root, src, mnt
}

var logSeq struct {
	sync.Mutex
	n int
}

// logFile returns a fresh log path for a mount of dir.
func logFile(dir string) string {
	logSeq.Lock()
	defer logSeq.Unlock()
	logSeq.n++
	return filepath.Join(filepath.Dir(dir), fmt.Sprintf("bloscfs-%d.log", logSeq.n))
}

// mountBG mounts src at dir with `bloscfs mount` (the daemonizing form)
// and registers the unmount in tb.Cleanup.
func mountBG(tb testing.TB, src, dir string, flags ...string) *mount {
	tb.Helper()
	m := &mount{src: src, dir: dir, logPath: logFile(dir), flags: flags}
	args := append(append([]string{"mount", "--log", m.logPath}, flags...), src, dir)
	r := runProg(time.Minute, bin, args...)
	m.register(tb)
	if r.Err != nil {
		tb.Fatalf("bloscfs %s: %v\nlog:\n%s", strings.Join(args, " "), r, m.logText())
	}
	if !isMounted(dir) {
		tb.Fatalf("bloscfs mount returned 0 but %s is not in /proc/self/mountinfo", dir)
	}
	if m.bgPID = findDaemon(dir); m.bgPID == 0 {
		tb.Fatalf("no bloscfs process serves %s", dir)
	}
	return m
}

// mountFG runs `bloscfs mount -f` as a child process and waits until the
// mount is ready; the unmount is registered in tb.Cleanup.
func mountFG(tb testing.TB, src, dir string, flags ...string) *mount {
	tb.Helper()
	m := &mount{src: src, dir: dir, logPath: logFile(dir), flags: flags, exited: make(chan struct{})}
	args := append(append([]string{"mount", "-f", "--log", m.logPath}, flags...), src, dir)
	m.cmd = exec.Command(bin, args...)
	out, err := os.OpenFile(m.logPath+".out", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	defer out.Close()
	m.cmd.Stdout, m.cmd.Stderr = out, out
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a ^C of go test reaches us, not it
	if err := m.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { m.cmd.Wait(); close(m.exited) }()
	m.register(tb)
	deadline := time.Now().Add(30 * time.Second)
	for !isMounted(dir) {
		select {
		case <-m.exited:
			b, _ := os.ReadFile(m.logPath + ".out")
			tb.Fatalf("bloscfs mount -f exited before mounting: %v\n%s\nlog:\n%s", m.cmd.ProcessState, b, m.logText())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("bloscfs mount -f: %s not mounted after 30s\nlog:\n%s", dir, m.logText())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return m
}

// register records the mount and schedules its cleanup.
func (m *mount) register(tb testing.TB) {
	liveMu.Lock()
	live[m.dir] = m
	liveMu.Unlock()
	tb.Cleanup(func() { m.cleanup(tb) })
}

// waitExit waits up to d for the daemon to exit.
func (m *mount) waitExit(d time.Duration) bool {
	if m.cmd != nil {
		select {
		case <-m.exited:
			return true
		case <-time.After(d):
			return false
		}
	}
	deadline := time.Now().Add(d)
	for m.alive() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// unmount unmounts with `bloscfs unmount` (retrying while the kernel
// still releases files) and waits for the daemon to exit; a failure
// fails the test.
func (m *mount) unmount(tb testing.TB) {
	tb.Helper()
	var r result
	for i := 0; i < 50; i++ {
		if r = runProg(time.Minute, bin, "unmount", m.dir); r.Err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r.Err != nil {
		tb.Fatalf("bloscfs unmount %s: %v", m.dir, r)
	}
	if !m.waitExit(30 * time.Second) {
		tb.Fatalf("the daemon of %s still runs 30s after the unmount", m.dir)
	}
	if isMounted(m.dir) {
		tb.Fatalf("%s is still in /proc/self/mountinfo after bloscfs unmount", m.dir)
	}
}

// kill SIGKILLs the daemon (it must be our foreground child), waits for
// it, and detaches the dead mount lazily.
func (m *mount) kill(tb testing.TB) {
	tb.Helper()
	if m.cmd == nil {
		tb.Fatal("kill: not a foreground mount")
	}
	m.cmd.Process.Signal(syscall.SIGKILL)
	if !m.waitExit(30 * time.Second) {
		tb.Fatalf("the daemon of %s survived SIGKILL for 30s", m.dir)
	}
	if r := runProg(time.Minute, "umount", "-l", m.dir); r.Err != nil && isMounted(m.dir) {
		tb.Fatalf("umount -l %s: %v", m.dir, r)
	}
	if isMounted(m.dir) {
		tb.Fatalf("%s is still mounted after umount -l", m.dir)
	}
}

// cleanup undoes the mount whatever state the test left it in: unmount,
// lazy unmount, then kill the daemon. It fails the test when a mount
// outlives it.
func (m *mount) cleanup(tb testing.TB) {
	if isMounted(m.dir) {
		for i := 0; i < 20 && isMounted(m.dir); i++ {
			if runProg(time.Minute, bin, "unmount", m.dir).Err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if isMounted(m.dir) {
			tb.Logf("cleanup: %s busy, detaching it with umount -l", m.dir)
			runProg(time.Minute, "umount", "-l", m.dir)
		}
	}
	if !m.waitExit(15 * time.Second) {
		tb.Logf("cleanup: killing the daemon of %s (pid %d)", m.dir, m.daemonPID())
		if m.cmd != nil {
			m.cmd.Process.Signal(syscall.SIGKILL)
		} else if pid := m.bgPID; pid > 0 && servesMount(pid, m.dir) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if !m.waitExit(15 * time.Second) {
			tb.Errorf("cleanup: the daemon of %s survived SIGKILL for 15s; its threads:\n%s", m.dir, testkit.ThreadStates(m.daemonPID()))
		}
	}
	if isMounted(m.dir) {
		syscall.Unmount(m.dir, syscall.MNT_DETACH)
		tb.Errorf("cleanup: %s was still mounted after unmount and kill", m.dir)
	}
	liveMu.Lock()
	delete(live, m.dir)
	liveMu.Unlock()
	if tb.Failed() {
		out, _ := os.ReadFile(m.logPath + ".out")
		log := m.logText() + string(out)
		if len(log) > 8000 {
			log = "…" + log[len(log)-8000:]
		}
		tb.Logf("daemon log of %s:\n%s", m.dir, log)
	}
}

// isMounted reports whether dir is a mountpoint in /proc/self/mountinfo.
func isMounted(dir string) bool {
	ok, _ := bfs.IsMountpoint(dir)
	return ok
}

// servesMount reports whether process pid is our bloscfs binary serving
// mountpoint dir.
func servesMount(pid int, dir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return false
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if len(args) < 3 || args[0] != bin || args[1] != "mount" || args[len(args)-1] != dir {
		return false
	}
	// A zombie keeps its cmdline only while it is not reaped; its state
	// tells.
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
		return false
	}
	return true
}

// findDaemon returns the pid of the process serving dir, 0 if none.
func findDaemon(dir string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && servesMount(pid, dir) {
			return pid
		}
	}
	return 0
}

// vmHWM returns the peak resident set of a process, in bytes.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, errors.New("no VmHWM in /proc/PID/status")
}

// errnoOf extracts the errno of an error (0 if none).
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}
