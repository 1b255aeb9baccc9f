package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bfs "github.com/bloscfs/bloscfs/fs"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
)

var (
	// binDir holds the binaries built by TestMain.
	binDir string
	// bin is the bloscfs binary under test.
	bin string
	// skipReason, when set, makes every test skip (not root, CI unset).
	skipReason string
	// setupErr, when set, makes every test fail (a broken CI set-up).
	setupErr string

	raceOnce sync.Once
	raceBin  string
	raceErr  error
)

// cmdTimeout bounds every program the tests run, so that a hung mount
// fails the test instead of hanging it.
const cmdTimeout = 2 * time.Minute

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	flag.Parse()
	// A test that times out panics, and cleanups do not run: shortly
	// before -test.timeout, detach every mount still registered.
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok && d > 30*time.Second {
			time.AfterFunc(d-15*time.Second, emergencyUnmount)
		}
	}
	defer emergencyUnmount()
	if skipReason, setupErr = testkit.MountPrereqs("integration tests"); skipReason != "" || setupErr != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "bloscfs-integration-")
	if err != nil {
		setupErr = err.Error()
		return m.Run()
	}
	defer os.RemoveAll(dir)
	binDir = dir
	bin = filepath.Join(dir, "bloscfs")
	if err := goBuild(bin); err != nil {
		setupErr = err.Error()
	}
	return m.Run()
}

// goBuild builds ./cmd/bloscfs into out with extra build flags.
func goBuild(out string, flags ...string) error { return testkit.BuildBloscfs(out, flags...) }

// raceBinary returns a bloscfs binary built with -race (built once).
func raceBinary(t *testing.T) string {
	t.Helper()
	raceOnce.Do(func() {
		raceBin = filepath.Join(binDir, "bloscfs-race")
		raceErr = goBuild(raceBin, "-race")
	})
	if raceErr != nil {
		t.Fatalf("building the -race daemon: %v", raceErr)
	}
	return raceBin
}

// requireRoot skips or fails as TestMain decided.
func requireRoot(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if setupErr != "" {
		t.Fatal(setupErr)
	}
}

// requireTool fails when a program the test runs is missing: `make test`
// installs them, so a missing one is a broken set-up, not a reason to skip.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	requireRoot(t)
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: run `make deps` (apt-get install -y fuse3 python3-numpy python3-blosc fio rsync)", name)
	}
	return p
}

// result is what a finished program left behind.
type result = testkit.Result

// runProg runs a program with a timeout.
func runProg(timeout time.Duration, name string, args ...string) result {
	return testkit.Run(timeout, name, args...)
}

// mustRun runs a program and fails the test unless it exits 0.
func mustRun(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	r := runProg(cmdTimeout, name, args...)
	if r.Err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), r)
	}
	return r.Stdout
}

// pythonNumpy returns Debian's python3 that imports numpy.
func pythonNumpy(t *testing.T) string {
	t.Helper()
	return testkit.Python(t, "numpy")
}

// runWithJSON runs `py -c script` with input as JSON on stdin and returns
// what it printed; a non-zero exit fails the test.
func runWithJSON(t *testing.T, py, script string, input any) string {
	t.Helper()
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	return string(out)
}

// --- fixtures and reference data ---

// loadFixtures reads the manifest.
func loadFixtures(t testing.TB) []fixtures.Fixture {
	t.Helper()
	fxs, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	return fxs
}

// diskName is a fixture's name in its directory (no trailing slash).
func diskName(fx fixtures.Fixture) string { return strings.TrimSuffix(fx.Name, "/") }

// fixtureByName finds one fixture of the manifest.
func fixtureByName(t testing.TB, fxs []fixtures.Fixture, name string) fixtures.Fixture {
	t.Helper()
	for _, fx := range fxs {
		if diskName(fx) == name {
			return fx
		}
	}
	t.Fatalf("fixture %s is not in the manifest", name)
	return fixtures.Fixture{}
}

var (
	refMu    sync.Mutex
	refCache = map[string][]byte{}
)

// unpacked returns `bloscfs unpack PATH -` of a source file, cached by
// path (the pristine fixtures are read, never written).
func unpacked(t testing.TB, path string) []byte {
	t.Helper()
	refMu.Lock()
	b, ok := refCache[path]
	refMu.Unlock()
	if ok {
		return b
	}
	b = mustRun(t, bin, "unpack", path, "-")
	if strings.HasPrefix(path, fixtures.Dir()) {
		refMu.Lock()
		refCache[path] = b
		refMu.Unlock()
	}
	return b
}

// copyTree copies a directory tree of regular files and directories,
// keeping permissions and modification times.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		} else {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, b, info.Mode().Perm()); err != nil {
				return err
			}
		}
		if err := os.Chmod(target, info.Mode().Perm()); err != nil {
			return err
		}
		return os.Chtimes(target, info.ModTime(), info.ModTime())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// copyFixtures copies testdata/fixtures into a fresh source directory.
func copyFixtures(t *testing.T) string {
	t.Helper()
	requireRoot(t)
	src := filepath.Join(t.TempDir(), "src")
	copyTree(t, fixtures.Dir(), src)
	return src
}

// containerSuffixes are the disk suffixes of containers, with the suffix
// of their view name (DESIGN.md, "The view").
var containerSuffixes = []struct{ disk, view string }{
	{".b2frame", ""}, {".b2f", ""}, {".b2", ""}, {".blp", ""}, {".blosc", ""}, {".b2nd", ".npy"},
}

// viewEntry is where a disk entry of the source appears in the mount.
type viewEntry struct {
	view       string
	compressed bool // shown decompressed
}

// isContainer reports whether pack can open path (independently of the
// mount).
func isContainer(path string) bool {
	v, err := all.OpenView(path, pack.NoCache{})
	if err != nil {
		return false
	}
	v.Close()
	return true
}

// viewNames applies the naming rules of the view to the entries of dir:
// a readable container is shown under its stem (x.b2nd as x.npy) unless
// the stem collides with another entry or another container's stem, then
// every container involved keeps its full name; everything else keeps its
// name.
func viewNames(t testing.TB, dir string) map[string]viewEntry {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for _, e := range ents {
		exists[e.Name()] = true
	}
	out := map[string]viewEntry{}
	byStem := map[string][]string{}
	for _, e := range ents {
		name := e.Name()
		stem := ""
		for _, s := range containerSuffixes {
			if strings.HasSuffix(name, s.disk) && len(name) > len(s.disk) {
				stem = strings.TrimSuffix(name, s.disk) + s.view
				break
			}
		}
		if stem != "" && e.Type()&os.ModeSymlink == 0 && isContainer(filepath.Join(dir, name)) {
			byStem[stem] = append(byStem[stem], name)
			continue
		}
		out[name] = viewEntry{view: name}
	}
	for stem, names := range byStem {
		if len(names) == 1 && !exists[stem] {
			out[names[0]] = viewEntry{view: stem, compressed: true}
			continue
		}
		for _, n := range names {
			out[n] = viewEntry{view: n, compressed: true}
		}
	}
	return out
}

// --- mounts ---

var (
	liveMu sync.Mutex
	live   = map[string]int{} // mountpoint → pid of the serving process
)

// emergencyUnmount detaches the mounts whose cleanup did not run and
// kills their processes.
func emergencyUnmount() {
	liveMu.Lock()
	defer liveMu.Unlock()
	for dir, pid := range live {
		fmt.Fprintf(os.Stderr, "integration: emergency unmount of %s (pid %d)\n", dir, pid)
		exec.Command("umount", "-l", dir).Run()
		if pid > 0 && processAlive(pid, dir) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		delete(live, dir)
	}
}

// register records a mount for emergencyUnmount.
func register(dir string, pid int) {
	liveMu.Lock()
	live[dir] = pid
	liveMu.Unlock()
}

// mount is one bloscfs mount made by a test.
type mount struct {
	t      *testing.T
	src    string // source directory
	dir    string // mountpoint
	log    string // --log file
	pid    int    // the serving process
	stderr string // foreground mounts: the process's stdout+stderr

	// foreground mounts only
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	exitErr error         // cmd.Wait's result, valid once exited is closed
}

// newMountpoint returns a fresh empty directory outside every source.
func newMountpoint(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// mountDaemon mounts src with the daemonizing `bloscfs mount` and
// registers the unmount. flags go before SOURCE MOUNTPOINT.
func mountDaemon(t *testing.T, src string, flags ...string) *mount {
	t.Helper()
	requireRoot(t)
	m := &mount{t: t, src: src, dir: newMountpoint(t)}
	m.log = filepath.Join(t.TempDir(), "bloscfs.log")
	args := append([]string{"mount", "--log", m.log}, flags...)
	args = append(args, src, m.dir)
	t.Cleanup(m.cleanup) // registered first: it also runs if mounting fails half-way
	register(m.dir, 0)
	r := runProg(30*time.Second, bin, args...)
	if r.Err != nil {
		t.Fatalf("bloscfs %s: %v", strings.Join(args, " "), r)
	}
	if !isMounted(m.dir) {
		t.Fatalf("bloscfs mount returned 0 but %s is not in /proc/self/mountinfo", m.dir)
	}
	m.pid = findDaemon(m.dir)
	register(m.dir, m.pid)
	if m.pid == 0 {
		t.Fatalf("no bloscfs process serves %s", m.dir)
	}
	return m
}

// mountForeground runs `binary mount -f` in a child process whose output
// goes to a file, waits until the mount is ready and registers the
// unmount.
func mountForeground(t *testing.T, binary, src string, flags ...string) *mount {
	t.Helper()
	requireRoot(t)
	m := &mount{t: t, src: src, dir: newMountpoint(t), exited: make(chan struct{})}
	tmp := t.TempDir()
	m.log = filepath.Join(tmp, "bloscfs.log")
	m.stderr = filepath.Join(tmp, "stderr")
	out, err := os.Create(m.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	args := append([]string{"mount", "-f", "--log", m.log}, flags...)
	args = append(args, src, m.dir)
	m.cmd = exec.Command(binary, args...)
	m.cmd.Stdout, m.cmd.Stderr = out, out
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m.pid = m.cmd.Process.Pid
	register(m.dir, m.pid)
	go func() {
		m.exitErr = m.cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(m.cleanup)
	deadline := time.Now().Add(30 * time.Second)
	for !isMounted(m.dir) {
		select {
		case <-m.exited:
			b, _ := os.ReadFile(m.stderr)
			t.Fatalf("bloscfs %s exited before mounting: %v\n%s", strings.Join(args, " "), m.cmd.ProcessState, b)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("bloscfs %s: not mounted after 30s", strings.Join(args, " "))
		}
	}
	return m
}

// path returns a path in the mount.
func (m *mount) path(name string) string { return filepath.Join(m.dir, name) }

// logText returns the log file's content.
func (m *mount) logText() string {
	b, _ := os.ReadFile(m.log)
	return string(b)
}

// waitExit waits up to d for the serving process to exit.
func (m *mount) waitExit(d time.Duration) bool {
	if m.pid == 0 {
		return true
	}
	if m.cmd != nil {
		select {
		case <-m.exited:
			return true
		case <-time.After(d):
			return false
		}
	}
	deadline := time.Now().Add(d)
	for processAlive(m.pid, m.dir) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// unmount runs `bloscfs unmount` and returns its outcome.
func (m *mount) unmount() result {
	return runProg(30*time.Second, bin, "unmount", m.dir)
}

// cleanup unmounts, whatever state the test left: `bloscfs unmount`, then
// `umount -l`, then it kills the serving process. It fails the test when
// the mount or the process outlives it.
func (m *mount) cleanup() {
	t := m.t
	if isMounted(m.dir) {
		if r := m.unmount(); r.Err != nil {
			t.Errorf("cleanup: bloscfs unmount %s: %v", m.dir, r)
			if r := runProg(30*time.Second, "umount", "-l", m.dir); r.Err != nil {
				t.Errorf("cleanup: umount -l %s: %v", m.dir, r)
			}
		}
	}
	if !m.waitExit(10 * time.Second) {
		t.Errorf("cleanup: bloscfs (pid %d) still runs 10s after %s was unmounted; killing it", m.pid, m.dir)
		syscall.Kill(m.pid, syscall.SIGKILL)
		m.waitExit(10 * time.Second)
	}
	if isMounted(m.dir) {
		runProg(30*time.Second, "umount", "-l", m.dir)
	}
	if isMounted(m.dir) {
		t.Errorf("cleanup: %s is still mounted", m.dir)
		return // emergencyUnmount tries again at the end
	}
	liveMu.Lock()
	delete(live, m.dir)
	liveMu.Unlock()
}

// isMounted reports whether dir is a mountpoint in /proc/self/mountinfo.
func isMounted(dir string) bool {
	ok, _ := bfs.IsMountpoint(dir)
	return ok
}

// mountOptions returns the options of dir's line in /proc/mounts.
func mountOptions(dir string) []string {
	b, _ := os.ReadFile("/proc/mounts")
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 3 && bfs.UnescapeMount(fields[1]) == dir {
			return strings.Split(fields[3], ",")
		}
	}
	return nil
}

// cmdline returns the arguments of a process ("" entries when gone or a
// zombie).
func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// servesMount reports whether args are those of a `bloscfs mount -f`
// process serving mnt (the daemon is such a process: the parent re-runs
// itself with -f and absolute paths).
func servesMount(args []string, mnt string) bool {
	if len(args) < 4 || args[len(args)-1] != mnt {
		return false
	}
	var isMount, fg bool
	for _, a := range args[1:] {
		isMount = isMount || a == "mount"
		fg = fg || a == "-f" || a == "-f=true"
	}
	return isMount && fg && strings.Contains(filepath.Base(args[0]), "bloscfs")
}

// findDaemon returns the pid of the process serving mnt, 0 if none.
func findDaemon(mnt string) int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if servesMount(cmdline(pid), mnt) {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	if len(pids) == 0 {
		return 0
	}
	return pids[len(pids)-1]
}

// processAlive reports whether pid still is the process serving mnt (a
// zombie, with its empty cmdline, counts as gone).
func processAlive(pid int, mnt string) bool {
	return servesMount(cmdline(pid), mnt)
}

// procStatus returns a field of /proc/PID/status in bytes (for the kB
// fields such as VmRSS and VmHWM).
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New(field + " not in /proc/PID/status")
}

// --- content helpers ---

// npyData splits an .npy file into its header length and data.
func npyData(b []byte) (int, []byte, error) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return 0, nil, errors.New("no NPY magic")
	}
	var hl, start int
	switch b[6] {
	case 1:
		hl, start = int(b[8])|int(b[9])<<8, 10
	case 2, 3:
		if len(b) < 12 {
			return 0, nil, errors.New("short NPY header")
		}
		hl, start = int(b[8])|int(b[9])<<8|int(b[10])<<16|int(b[11])<<24, 12
	default:
		return 0, nil, fmt.Errorf("NPY version %d", b[6])
	}
	if start+hl > len(b) {
		return 0, nil, fmt.Errorf("NPY header length %d past the end", hl)
	}
	return start + hl, b[start+hl:], nil
}

// firstDiff describes where two byte slices differ.
func firstDiff(got, want []byte) string {
	n := min(len(got), len(want))
	for i := 0; i < n; i++ {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at byte %d (got %#02x, want %#02x; lengths %d, %d)", i, got[i], want[i], len(got), len(want))
		}
	}
	return fmt.Sprintf("lengths differ: got %d, want %d", len(got), len(want))
}
