// Package mounttest mounts bloscfs, and other FUSE servers to compare it
// with, for the integration tests, and sees that no mount outlives its
// test: every mount's cleanup is registered before it is made, unmounts
// whatever state the test left (a busy mount is detached, a process that
// does not exit is killed) and fails the test when a mount or its process
// remains. RunTests, in a TestMain, detaches what a panicking or timed-out
// test left behind.
package mounttest

import (
	"bytes"
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
)

// Setup is what the TestMain of tests that mount decided: the bloscfs
// binary they run, or why they skip or fail.
type Setup struct {
	Dir  string // a temp dir of the tests, which Close removes
	Bin  string // the bloscfs binary, built into Dir
	Skip string // why every test skips (not root, outside CI)
	Fail string // why every test fails (a broken set-up)
}

// Prepare checks that the tests can mount (testkit.MountPrereqs; what
// names them) and builds bloscfs into a fresh temp dir.
func Prepare(what string) *Setup {
	s := &Setup{}
	if s.Skip, s.Fail = testkit.MountPrereqs(what); s.Skip != "" || s.Fail != "" {
		return s
	}
	dir, err := os.MkdirTemp("", "bloscfs-"+strings.ReplaceAll(what, " ", "-")+"-")
	if err != nil {
		s.Fail = err.Error()
		return s
	}
	s.Dir, s.Bin = dir, filepath.Join(dir, "bloscfs")
	if err := testkit.BuildBloscfs(s.Bin); err != nil {
		s.Fail = err.Error()
	}
	return s
}

// OK reports whether the tests can run.
func (s *Setup) OK() bool { return s.Skip == "" && s.Fail == "" }

// Require skips or fails tb as the set-up decided.
func (s *Setup) Require(tb testing.TB) {
	tb.Helper()
	if s.Skip != "" {
		tb.Skip(s.Skip)
	}
	if s.Fail != "" {
		tb.Fatal(s.Fail)
	}
}

// Close removes Dir.
func (s *Setup) Close() {
	if s.Dir != "" {
		os.RemoveAll(s.Dir)
	}
}

// Mount is one mount made by a test.
type Mount struct {
	// Bin is the bloscfs binary, which unmounts it too; "" when another
	// program serves the mount (umount(8) unmounts it then).
	Bin string
	Src string // the source: a directory or an s3:// URL
	Dir string // the mountpoint
	Log string // the --log file ("" when not known)
	// Out holds the stdout and stderr of a process that Start or
	// Foreground started ("" when the caller took them).
	Out string
	// PID is the serving process (0 while not known): the daemon of a
	// background mount, the process Start or Foreground started.
	PID int
	// Cmd is the process Start or Foreground started, nil for a daemon.
	// The kit waits for it: Exited is closed once it has exited, and
	// ExitErr is what its Wait returned.
	Cmd     *exec.Cmd
	Exited  chan struct{}
	ExitErr error

	tb testing.TB
}

// cmdTimeout bounds each mount and unmount command.
const cmdTimeout = time.Minute

var (
	liveMu sync.Mutex
	live   = map[*Mount]bool{} // mounts whose cleanup has not run
)

// register records m until its cleanup, which it schedules; callers
// register before mounting, so that a mount that fails half-way is
// cleaned up too.
func (m *Mount) register() {
	liveMu.Lock()
	live[m] = true
	liveMu.Unlock()
	m.tb.Cleanup(m.cleanup)
}

// NewMountpoint returns a fresh empty directory for a mount, outside
// every source.
func NewMountpoint(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// Daemon mounts src at dir with the daemonizing `bin mount --log LOG
// FLAGS SRC DIR` and finds the daemon.
func Daemon(tb testing.TB, bin, src, dir string, flags ...string) *Mount {
	tb.Helper()
	m := &Mount{Bin: bin, Src: src, Dir: dir, Log: filepath.Join(tb.TempDir(), "bloscfs.log"), tb: tb}
	m.register()
	args := append(append([]string{"mount", "--log", m.Log}, flags...), src, dir)
	if r := testkit.Run(cmdTimeout, bin, args...); r.Err != nil {
		tb.Fatalf("bloscfs %s: %v\nlog:\n%s", strings.Join(args, " "), r, tail(m.LogText()))
	}
	if !IsMounted(dir) {
		tb.Fatalf("bloscfs mount returned 0 but %s is not in /proc/self/mountinfo", dir)
	}
	if m.PID = FindDaemon(dir); m.PID == 0 {
		tb.Fatalf("no bloscfs process serves %s", dir)
	}
	return m
}

// Foreground runs `bin mount -f --log LOG FLAGS SRC DIR` as a child
// process and waits until it has mounted.
func Foreground(tb testing.TB, bin, src, dir string, flags ...string) *Mount {
	tb.Helper()
	m := &Mount{Bin: bin, Src: src, Dir: dir, Log: filepath.Join(tb.TempDir(), "bloscfs.log"), tb: tb}
	args := append(append([]string{"mount", "-f", "--log", m.Log}, flags...), src, dir)
	m.start(exec.Command(bin, args...))
	return m
}

// Start starts cmd, a program that mounts at dir and serves the mount
// until it is unmounted (rclone mount, go-fuse's loopback, bloscfs under
// strace), and waits until it has mounted. Its stdout and stderr go to
// Out unless cmd has them already; it runs in a process group of its own
// unless cmd says otherwise, so that an interrupt of the tests reaches
// the tests, which unmount, rather than the server.
func Start(tb testing.TB, cmd *exec.Cmd, dir string) *Mount {
	tb.Helper()
	m := &Mount{Dir: dir, tb: tb}
	m.start(cmd)
	return m
}

func (m *Mount) start(cmd *exec.Cmd) {
	tb := m.tb
	tb.Helper()
	m.Cmd, m.Exited = cmd, make(chan struct{})
	if cmd.Stdout == nil && cmd.Stderr == nil {
		m.Out = filepath.Join(tb.TempDir(), "out")
		out, err := os.Create(m.Out)
		if err != nil {
			tb.Fatal(err)
		}
		defer out.Close()
		cmd.Stdout, cmd.Stderr = out, out
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	m.register()
	if err := cmd.Start(); err != nil {
		close(m.Exited)
		tb.Fatal(err)
	}
	m.PID = cmd.Process.Pid
	go func() {
		m.ExitErr = cmd.Wait()
		close(m.Exited)
	}()
	testkit.Eventually(tb, 30*time.Second, func() bool { return IsMounted(m.Dir) || m.exited() })
	switch {
	case IsMounted(m.Dir):
	case m.exited():
		tb.Fatalf("%s exited before mounting %s: %v\n%s", strings.Join(cmd.Args, " "), m.Dir, m.ExitErr, tail(m.outText()+m.LogText()))
	default:
		tb.Fatalf("%s: %s not mounted after 30s\n%s", strings.Join(cmd.Args, " "), m.Dir, tail(m.outText()+m.LogText()))
	}
}

// Expect registers the cleanup of a mount of src at dir that the test
// makes by other means (mount(8), mount.fuse3, `bloscfs SRC DIR`); it
// finds the daemon when the test has not set PID.
func Expect(tb testing.TB, bin, src, dir string) *Mount {
	m := &Mount{Bin: bin, Src: src, Dir: dir, tb: tb}
	m.register()
	return m
}

// Path returns the path of name in the mount.
func (m *Mount) Path(name string) string { return filepath.Join(m.Dir, name) }

// LogText returns the content of the --log file.
func (m *Mount) LogText() string {
	if m.Log == "" {
		return ""
	}
	b, _ := os.ReadFile(m.Log)
	return string(b)
}

func (m *Mount) outText() string {
	if m.Out == "" {
		return ""
	}
	b, _ := os.ReadFile(m.Out)
	return string(b)
}

// exited reports whether Cmd has exited.
func (m *Mount) exited() bool {
	if m.Exited == nil {
		return false
	}
	select {
	case <-m.Exited:
		return true
	default:
		return false
	}
}

// Alive reports whether the serving process still runs.
func (m *Mount) Alive() bool {
	if m.Cmd != nil {
		return !m.exited()
	}
	return m.PID > 0 && ServesMount(m.PID, m.Dir)
}

// WaitExit waits up to d for the serving process to exit and reports
// whether it did (an unknown process counts as gone).
func (m *Mount) WaitExit(d time.Duration) bool {
	if m.Cmd != nil {
		select {
		case <-m.Exited:
			return true
		case <-time.After(d):
			return false
		}
	}
	return testkit.Eventually(m.tb, d, func() bool { return !m.Alive() })
}

// Unmount runs `bloscfs unmount` (umount(8) for another server) once and
// returns its outcome.
func (m *Mount) Unmount() testkit.Result {
	if m.Bin == "" {
		return testkit.Run(cmdTimeout, "umount", m.Dir)
	}
	return testkit.Run(cmdTimeout, m.Bin, "unmount", m.Dir)
}

// MustUnmount unmounts, trying again for 5 s while the mount is busy
// (the kernel releases the files closed last after close returns), and
// waits for the serving process to exit; a failure fails the test.
func (m *Mount) MustUnmount(tb testing.TB) {
	tb.Helper()
	var r testkit.Result
	testkit.Eventually(tb, 5*time.Second, func() bool { r = m.Unmount(); return r.Err == nil })
	if r.Err != nil {
		tb.Fatalf("unmount %s: %v", m.Dir, r)
	}
	if !m.WaitExit(30 * time.Second) {
		tb.Fatalf("the process serving %s (pid %d) still runs 30s after the unmount", m.Dir, m.PID)
	}
	if IsMounted(m.Dir) {
		tb.Fatalf("%s is still in /proc/self/mountinfo after the unmount", m.Dir)
	}
}

// Kill SIGKILLs the process Foreground or Start started, waits for it
// and detaches the dead mount.
func (m *Mount) Kill(tb testing.TB) {
	tb.Helper()
	if m.Cmd == nil {
		tb.Fatal("Kill: the kit did not start the process serving " + m.Dir)
	}
	m.Cmd.Process.Signal(syscall.SIGKILL)
	if !m.WaitExit(30 * time.Second) {
		tb.Fatalf("the process serving %s survived SIGKILL for 30s", m.Dir)
	}
	if r := testkit.Run(cmdTimeout, "umount", "-l", m.Dir); r.Err != nil && IsMounted(m.Dir) {
		tb.Fatalf("umount -l %s: %v", m.Dir, r)
	}
	if IsMounted(m.Dir) {
		tb.Fatalf("%s is still mounted after umount -l", m.Dir)
	}
}

// kill SIGKILLs the serving process: the process group of one the kit
// started in its own group, a daemon only while it still serves Dir.
func (m *Mount) kill() {
	switch {
	case m.Cmd != nil && m.Cmd.Process != nil:
		if a := m.Cmd.SysProcAttr; a != nil && a.Setpgid {
			syscall.Kill(-m.Cmd.Process.Pid, syscall.SIGKILL)
		}
		m.Cmd.Process.Signal(syscall.SIGKILL)
	case m.PID > 0 && ServesMount(m.PID, m.Dir):
		syscall.Kill(m.PID, syscall.SIGKILL)
	}
}

// cleanup undoes the mount whatever state the test left it in: unmount
// (trying for 2 s while busy), else detach it; wait for the process to
// exit, else kill it. A process that outlives a clean unmount by 15 s, or
// a mount that outlives all this, fails the test.
func (m *Mount) cleanup() {
	tb := m.tb
	if m.PID == 0 && m.Cmd == nil {
		m.PID = FindDaemon(m.Dir)
	}
	busy := false
	if IsMounted(m.Dir) && !testkit.Eventually(tb, 2*time.Second, func() bool { return m.Unmount().Err == nil || !IsMounted(m.Dir) }) {
		tb.Logf("cleanup: %s is busy; detaching it", m.Dir)
		busy = true
		syscall.Unmount(m.Dir, syscall.MNT_DETACH)
	}
	if !m.WaitExit(15 * time.Second) {
		if busy {
			tb.Logf("cleanup: killing the process serving %s (pid %d)", m.Dir, m.PID)
		} else {
			tb.Errorf("cleanup: the process serving %s (pid %d) still runs 15s after the unmount; killing it", m.Dir, m.PID)
		}
		m.kill()
		if !m.WaitExit(15 * time.Second) {
			tb.Errorf("cleanup: the process serving %s survived SIGKILL for 15s; its threads:\n%s", m.Dir, testkit.ThreadStates(m.PID))
		}
	}
	if IsMounted(m.Dir) {
		syscall.Unmount(m.Dir, syscall.MNT_DETACH)
		tb.Errorf("cleanup: %s was still mounted after the unmount and the kill", m.Dir)
	}
	liveMu.Lock()
	delete(live, m)
	liveMu.Unlock()
	if tb.Failed() {
		if log := m.LogText() + m.outText(); log != "" {
			tb.Logf("log of the mount at %s:\n%s", m.Dir, tail(log))
		}
	}
}

// tail returns the last 8000 bytes of a log.
func tail(s string) string {
	if len(s) > 8000 {
		return "…" + s[len(s)-8000:]
	}
	return s
}

// EmergencyUnmount detaches every mount whose cleanup has not run (its
// test panicked or timed out), kills its process, and returns the
// mountpoints it found mounted.
func EmergencyUnmount() []string {
	liveMu.Lock()
	defer liveMu.Unlock()
	var left []string
	for m := range live {
		if IsMounted(m.Dir) {
			left = append(left, m.Dir)
			syscall.Unmount(m.Dir, syscall.MNT_DETACH)
		}
		if m.Alive() {
			m.kill()
		}
		delete(live, m)
	}
	sort.Strings(left)
	return left
}

// RunTests runs the tests of m, for a TestMain. A test that times out
// panics, and cleanups do not run: shortly before -test.timeout, and
// after the tests, it detaches every mount still registered; mounts left
// behind make it return 1.
func RunTests(m *testing.M) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok && d > 30*time.Second {
			timer := time.AfterFunc(d-15*time.Second, func() {
				if left := EmergencyUnmount(); len(left) > 0 {
					fmt.Fprintf(os.Stderr, "mounttest: the tests near their timeout: detached %v\n", left)
				}
			})
			defer timer.Stop()
		}
	}
	code := m.Run()
	if left := EmergencyUnmount(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "mounttest: mounts left behind after the tests, now detached: %v\n", left)
		code = 1
	}
	return code
}

// IsMounted reports whether dir is a mountpoint in /proc/self/mountinfo.
func IsMounted(dir string) bool {
	ok, _ := bfs.IsMountpoint(dir)
	return ok
}

// Options returns the options of dir's line in /proc/mounts.
func Options(dir string) []string {
	b, _ := os.ReadFile("/proc/mounts")
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 3 && bfs.UnescapeMount(fields[1]) == dir {
			return strings.Split(fields[3], ",")
		}
	}
	return nil
}

// Cmdline returns the arguments of process pid (nil when it is gone or a
// zombie).
func Cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// servesArgs reports whether args are those of a `bloscfs mount -f`
// serving dir (the daemon of a background mount is one: it runs itself
// again so, with absolute paths).
func servesArgs(args []string, dir string) bool {
	if len(args) < 4 || args[len(args)-1] != dir || !strings.Contains(filepath.Base(args[0]), "bloscfs") {
		return false
	}
	var isMount, fg bool
	for _, a := range args[1:] {
		isMount = isMount || a == "mount"
		fg = fg || a == "-f" || a == "-f=true"
	}
	return isMount && fg
}

// ServesMount reports whether process pid is a live bloscfs process
// serving dir.
func ServesMount(pid int, dir string) bool {
	if !servesArgs(Cmdline(pid), dir) {
		return false
	}
	// A zombie may keep its cmdline until it is reaped; its state tells.
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(st, ')')
	return i > 0 && i+2 < len(st) && st[i+2] != 'Z'
}

// FindDaemon returns the pid of the bloscfs process serving dir (the
// newest when there are several), 0 when none does.
func FindDaemon(dir string) int {
	ents, _ := os.ReadDir("/proc")
	found := 0
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > found && ServesMount(pid, dir) {
			found = pid
		}
	}
	return found
}
