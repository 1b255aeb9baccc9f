package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bfs "github.com/bloscfs/bloscfs/fs"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
	"golang.org/x/sys/unix"
)

// The tests of this file are about the daemon's death: a daemon never
// calls into its own mount (a SIGKILL during such a call leaves it
// unkillable), -o auto_unmount clears the mount of a killed daemon, and
// `bloscfs unmount` clears a dead mount, or one whose daemon is stuck
// dying.

// straceLine is one line of `strace -f -o`: the thread and the call.
var straceLine = regexp.MustCompile(`^(\d+) +(.*)$`)

// TestNoCallsThroughOwnMount runs a mount's whole life under strace -f
// (start, listing, reads, xattrs, statfs, writes and commits, renames,
// SIGTERM) and checks that once the mount is in place no system call of
// the daemon names a path in its own mountpoint, but umount2 (which asks
// the daemon nothing). Calls before mount(2) look at the empty directory.
// It is traced with and without auto_unmount (whose watcher is a process
// of its own, which looks at the mount only once the daemon is gone).
func TestNoCallsThroughOwnMount(t *testing.T) {
	strace := requireTool(t, "strace")
	src, plain := smallSource(t)
	for _, auto := range []bool{false, true} {
		t.Run(fmt.Sprintf("auto_unmount=%v", auto), func(t *testing.T) {
			dir := mounttest.NewMountpoint(t)
			tmp := t.TempDir()
			out, log := filepath.Join(tmp, "strace"), filepath.Join(tmp, "log")
			args := []string{"-f", "-qq", "-s", "4096", "-o", out, "-e", "trace=%file,%desc,mount,umount2",
				bin, "mount", "-f", "--log", log}
			if auto {
				args = append(args, "-o", "auto_unmount")
			}
			args = append(args, src, dir)
			m := mounttest.Start(t, exec.Command(strace, args...), dir)
			m.Bin = bin // the cleanup unmounts with bloscfs unmount
			pid := mounttest.FindDaemon(dir)
			workload(t, dir, plain)
			if pid == 0 {
				t.Fatal("no daemon found")
			}
			syscall.Kill(pid, syscall.SIGTERM)
			select {
			case <-m.Exited:
				if m.ExitErr != nil {
					t.Errorf("strace bloscfs mount -f: %v", m.ExitErr)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("the daemon under strace did not exit within 60s of SIGTERM")
			}
			if mounttest.IsMounted(dir) {
				t.Errorf("still mounted after SIGTERM")
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			bad, mounted, calls := ownMountCalls(b, dir)
			if !mounted {
				t.Fatalf("the trace shows no mount of %s (%d lines):\n%s", dir, calls, tail(b, 3000))
			}
			if len(bad) > 0 {
				t.Errorf("the daemon called into its own mount %d times; the first ones:\n%s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n"))
			}
			t.Logf("%d traced calls of the daemon, none through its own mount after it was mounted", calls)
		})
	}
}

// workload uses every kind of request on the mount at dir, whose "data"
// reads as plain.
func workload(t *testing.T, dir string, plain []byte) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		t.Fatalf("listing the mount: %v, %d entries", err, len(ents))
	}
	for _, e := range ents {
		if _, err := os.Lstat(filepath.Join(dir, e.Name())); err != nil {
			t.Error(err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "data")); err != nil || !bytes.Equal(b, plain) {
		t.Errorf("data through the mount: %d bytes, %v", len(b), err)
	}
	buf := make([]byte, 64)
	if _, err := unix.Getxattr(filepath.Join(dir, "data"), "user.bloscfs.codec", buf); err != nil {
		t.Errorf("getxattr: %v", err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		t.Errorf("statfs: %v", err)
	}
	nw := filepath.Join(dir, "new")
	f, err := os.Create(nw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(plain[:2<<20]); err != nil {
		t.Error(err)
	}
	if err := f.Sync(); err != nil {
		t.Error(err)
	}
	f.Close()
	if err := os.Rename(nw, nw+"2"); err != nil {
		t.Error(err)
	}
	if err := os.Truncate(nw+"2", 1000); err != nil {
		t.Error(err)
	}
	if err := os.Remove(nw + "2"); err != nil {
		t.Error(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Error(err)
	}
	if err := os.Remove(filepath.Join(dir, "d")); err != nil {
		t.Error(err)
	}
}

// ownMountCalls reads a trace of `strace -f` of `bloscfs mount -f … dir`
// and returns the daemon's calls that name a path in dir after the mount
// was made, whether the mount was seen, and how many calls of the daemon
// were traced. Processes that the daemon starts (they exec a program) are
// not the daemon.
func ownMountCalls(trace []byte, dir string) (bad []string, mounted bool, calls int) {
	others := map[string]bool{}
	pending := map[string]string{} // thread → the first part of its unfinished call
	quoted := `"` + dir
	sc := bufio.NewScanner(bytes.NewReader(trace))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	first := true
	for sc.Scan() {
		m := straceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		tid, call := m[1], m[2]
		// A call that another thread interrupts is split in two lines,
		// "mount(... <unfinished ...>" and "<... mount resumed>) = 0":
		// join them, or a loaded machine hides the mount's result.
		if c, ok := strings.CutSuffix(call, " <unfinished ...>"); ok {
			pending[tid] = c
			continue
		}
		if strings.HasPrefix(call, "<... ") {
			if _, rest, ok := strings.Cut(call, " resumed>"); ok {
				call = pending[tid] + rest
				delete(pending, tid)
			}
		}
		if strings.HasPrefix(call, "execve(") {
			if !first {
				others[tid] = true // a child: the auto_unmount watcher, fusermount3
			}
			first = false
			continue
		}
		if others[tid] {
			continue
		}
		calls++
		if strings.HasPrefix(call, "mount(") && strings.Contains(call, quoted+`"`) && strings.Contains(call, "= 0") {
			mounted = true
			continue
		}
		if !mounted || strings.HasPrefix(call, "umount2(") {
			continue
		}
		if strings.Contains(call, quoted+`"`) || strings.Contains(call, quoted+`/`) {
			bad = append(bad, sc.Text())
		}
	}
	return bad, mounted, calls
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) string {
	if len(b) > n {
		return "…" + string(b[len(b)-n:])
	}
	return string(b)
}

// openDevFuse lets every user open /dev/fuse for the rest of the test, as
// Debian's udev rule does on a host (containers often leave it root's):
// fusermount3 opens it as the user who mounts.
func openDevFuse(t *testing.T) {
	t.Helper()
	st, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o006 == 0o006 {
		return
	}
	if err := os.Chmod("/dev/fuse", 0o666); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod("/dev/fuse", st.Mode().Perm()) })
}

// userSetup copies the binary and a small source where the user nobody
// can use them, and returns the binary, the source, a mountpoint owned by
// nobody and a log file that nobody may write.
func userSetup(t *testing.T) (exe, src, mnt, log string) {
	t.Helper()
	base, err := os.MkdirTemp("", "bloscfs-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	exe, src, mnt = filepath.Join(base, "bloscfs"), filepath.Join(base, "src"), filepath.Join(base, "mnt")
	state := filepath.Join(base, "state")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		os.Chmod(base, 0o755), os.WriteFile(exe, b, 0o755), os.Mkdir(src, 0o755), os.Mkdir(mnt, 0o755),
		os.Mkdir(state, 0o755), os.WriteFile(filepath.Join(src, "hello.txt"), []byte("hello\n"), 0o644),
		os.Chown(src, 65534, 65534), os.Chown(mnt, 65534, 65534), os.Chown(state, 65534, 65534),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return exe, src, mnt, filepath.Join(state, "log")
}

// asUser returns a command that runs args as the user nobody.
func asUser(t *testing.T, args ...string) *exec.Cmd {
	setpriv := findTool(t, "setpriv")
	cmd := exec.Command(setpriv, append([]string{"--reuid=65534", "--regid=65534", "--clear-groups"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME=/nonexistent")
	return cmd
}

// checkUsableEmpty checks that dir is an empty directory again, that
// can be listed and mounted on.
func checkUsableEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 0 {
		t.Errorf("%s after the dead mount went: %d entries, %v; want an empty directory", dir, len(ents), err)
	}
}

// TestAutoUnmount kills the daemon of a mount made with -o auto_unmount
// with SIGKILL: within a second the mountpoint is an empty directory
// again. Root's mounts and a user's (through fusermount3), daemonized and
// in the foreground.
func TestAutoUnmount(t *testing.T) {
	findTool(t, "fusermount3")
	for _, c := range []struct {
		name     string
		user, fg bool
	}{{"root", false, false}, {"root-f", false, true}, {"user", true, false}, {"user-f", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			exe, src, dir, log := bin, "", "", filepath.Join(t.TempDir(), "log")
			if c.user {
				openDevFuse(t)
				exe, src, dir, log = userSetup(t)
			} else {
				src, _ = smallSource(t)
				dir = mounttest.NewMountpoint(t)
				os.WriteFile(filepath.Join(src, "hello.txt"), []byte("hello\n"), 0o644)
			}
			m := mounttest.Expect(t, bin, src, dir)
			m.Log = log
			args := []string{exe, "mount", "--log", log, "-o", "auto_unmount"}
			if c.fg {
				args = append(args, "-f")
			}
			args = append(args, src, dir)
			var cmd *exec.Cmd
			if c.user {
				cmd = asUser(t, args...)
			} else {
				cmd = exec.Command(args[0], args[1:]...)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if c.fg {
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				go cmd.Wait()
				if !testkit.Eventually(t, 30*time.Second, func() bool { return mounttest.IsMounted(dir) }) {
					t.Fatalf("not mounted after 30s: %s", stderr.String())
				}
			} else if err := cmd.Run(); err != nil {
				t.Fatalf("%v: %v: %s", args, err, stderr.String())
			}
			if !mounttest.IsMounted(dir) {
				t.Fatalf("%v returned but %s is not mounted", args, dir)
			}
			readHello(t, c.user, dir)
			m.PID = mounttest.FindDaemon(dir)
			if m.PID == 0 {
				t.Fatal("no daemon serves the mount")
			}
			syscall.Kill(m.PID, syscall.SIGKILL)
			killed := time.Now()
			if !testkit.Eventually(t, time.Second, func() bool { return !mounttest.IsMounted(dir) }) {
				t.Fatalf("%s is still mounted %v after its daemon was killed\nlog:\n%s", dir, time.Since(killed), m.LogText())
			}
			t.Logf("the dead mount went %v after the SIGKILL", time.Since(killed).Round(time.Millisecond))
			checkUsableEmpty(t, dir)
			// Usable: mount it again.
			again := exec.Command(exe, "mount", "--log", log, src, dir)
			if c.user {
				again = asUser(t, again.Args...)
			}
			if out, err := again.CombinedOutput(); err != nil {
				t.Fatalf("mounting again on %s: %v: %s", dir, err, out)
			}
			m.PID = mounttest.FindDaemon(dir)
			readHello(t, c.user, dir)
			un := exec.Command(exe, "unmount", dir)
			if c.user {
				un = asUser(t, un.Args...)
			}
			if out, err := un.CombinedOutput(); err != nil {
				t.Errorf("unmount: %v: %s", err, out)
			}
		})
	}
}

// TestAutoUnmountDiedEarly: a daemon killed between mount(2) and telling
// its auto_unmount watcher the mount's device still has its dead mount
// cleared. "said-nothing" runs the watcher as the daemon starts it (this
// program, with its pipe and what was mounted at the mountpoint before)
// beside a daemon of its own, kills that daemon once it serves, and
// closes the pipe without a word: the window made as wide as it can be.
// "killed-at-once" kills a real auto_unmount daemon the moment its mount
// appears in the mount table, a few times, which lands in that window
// or just after it.
func TestAutoUnmountDiedEarly(t *testing.T) {
	findTool(t, "fusermount3")
	src, _ := smallSource(t)
	os.WriteFile(filepath.Join(src, "hello.txt"), []byte("hello\n"), 0o644)
	gone := func(t *testing.T, dir string, killed time.Time, m *mounttest.Mount) {
		t.Helper()
		if !testkit.Eventually(t, time.Second, func() bool { return !mounttest.IsMounted(dir) }) {
			t.Fatalf("%s is still mounted %v after its daemon was killed\nlog:\n%s", dir, time.Since(killed), m.LogText())
		}
		checkUsableEmpty(t, dir)
	}
	t.Run("said-nothing", func(t *testing.T) {
		dir := mounttest.NewMountpoint(t)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		// The watcher's interface (cmd/bloscfs, startWatcher): nothing was
		// mounted at dir before.
		watcher := exec.Command(bin)
		watcher.Env = append(os.Environ(), "BLOSCFS_AUTO_UNMOUNT_WATCH="+dir, "BLOSCFS_AUTO_UNMOUNT_BELOW="+bfs.NothingBelow)
		watcher.ExtraFiles = []*os.File{r}
		if err := watcher.Start(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		var waitErr error
		waited := make(chan struct{})
		go func() { waitErr = watcher.Wait(); close(waited) }()
		t.Cleanup(func() {
			w.Close()
			select {
			case <-waited:
			case <-time.After(10 * time.Second):
				watcher.Process.Kill()
			}
		})
		m := deadMount(t, src, dir)
		killed := time.Now()
		w.Close()
		gone(t, dir, killed, m)
		<-waited
		if waitErr != nil {
			t.Errorf("the watcher: %v", waitErr)
		}
	})
	t.Run("killed-at-once", func(t *testing.T) {
		for i := range 3 {
			dir := mounttest.NewMountpoint(t)
			m := mounttest.Expect(t, bin, src, dir)
			m.Log = filepath.Join(t.TempDir(), "log")
			cmd := exec.Command(bin, "mount", "-f", "--log", m.Log, "-o", "auto_unmount", src, dir)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			start := time.Now()
			for !mounttest.IsMounted(dir) {
				select {
				case <-exited:
					t.Fatalf("run %d: the daemon exited before mounting:\n%s", i, m.LogText())
				default:
				}
				if time.Since(start) > 30*time.Second {
					cmd.Process.Kill()
					t.Fatalf("run %d: not mounted after 30s", i)
				}
			}
			cmd.Process.Kill()
			killed := time.Now()
			<-exited
			gone(t, dir, killed, m)
		}
	})
}

// TestAutoUnmountFailedMount: a daemon that fails to mount tells its
// watcher so (an empty line), and the watcher then leaves alone a dead
// mount that another daemon made at the mountpoint after the watcher
// started: it is not this daemon's. The daemon mounts a bucket whose
// endpoint holds its first request until the other mount is in place
// and dead, then refuses it.
func TestAutoUnmountFailedMount(t *testing.T) {
	findTool(t, "fusermount3")
	src, _ := smallSource(t)
	os.WriteFile(filepath.Join(src, "hello.txt"), []byte("hello\n"), 0o644)
	asked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(asked) })
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	dir := mounttest.NewMountpoint(t)
	log := filepath.Join(t.TempDir(), "log")
	cmd := exec.Command(bin, "mount", "-f", "--log", log, "-o", "auto_unmount", "--endpoint", srv.URL, "s3://bucket", dir)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s", "AWS_REGION=us-east-1",
		"AWS_PROFILE=", "AWS_SESSION_TOKEN=", "AWS_EC2_METADATA_DISABLED=true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	select {
	case <-asked: // the watcher is running, its look at dir taken
	case <-exited:
		t.Fatalf("the daemon exited before asking the endpoint: %v: %s", waitErr, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the daemon did not ask the endpoint in 30s: %s", stderr.String())
	}
	watcher := 0
	testkit.Eventually(t, 10*time.Second, func() bool { watcher = findWatcher(dir); return watcher != 0 })
	if watcher == 0 {
		t.Fatal("no auto_unmount watcher for", dir)
	}
	// Another daemon's mount, dead, at the mountpoint.
	deadMount(t, src, dir)
	close(release)
	released = true
	select {
	case <-exited:
		if waitErr == nil {
			t.Fatalf("the mount of a refused bucket succeeded: %s", stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the daemon did not give up in 60s after its endpoint refused it: %s", stderr.String())
	}
	if !testkit.Eventually(t, 10*time.Second, func() bool { return syscall.Kill(watcher, 0) != nil }) {
		t.Fatalf("the watcher (pid %d) still runs 10s after its daemon exited", watcher)
	}
	if !mounttest.IsMounted(dir) {
		t.Errorf("the watcher of a daemon that failed to mount unmounted another daemon's dead mount at %s", dir)
	}
}

// deadMount mounts src at dir in the foreground without auto_unmount,
// reads it once, and kills its daemon: a dead mount, which the kit
// clears when the test ends.
func deadMount(t *testing.T, src, dir string) *mounttest.Mount {
	t.Helper()
	m := mounttest.Foreground(t, bin, src, dir)
	readHello(t, false, dir)
	syscall.Kill(m.PID, syscall.SIGKILL)
	<-m.Exited
	if st := bfs.ProbeMount(dir, 5*time.Second); st != bfs.MountDead {
		t.Fatalf("the killed daemon's mount is %v, not dead", st)
	}
	return m
}

// findWatcher returns the pid of the auto_unmount watcher of the mount at
// dir (0 if there is none).
func findWatcher(dir string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00BLOSCFS_AUTO_UNMOUNT_WATCH="+dir+"\x00")) {
			return pid
		}
	}
	return 0
}

// readHello reads hello.txt in the mount at dir, as the user nobody for
// a user's mount (which no other user may enter, root included).
func readHello(t *testing.T, user bool, dir string) {
	t.Helper()
	p := filepath.Join(dir, "hello.txt")
	var b []byte
	var err error
	if user {
		b, err = asUser(t, "cat", p).Output()
	} else {
		b, err = os.ReadFile(p)
	}
	if err != nil || string(b) != "hello\n" {
		t.Errorf("hello.txt through the mount: %q, %v", b, err)
	}
}

// TestFstabAutoUnmount mounts from an fstab line with auto_unmount through
// real mount(8) and mount.fuse3 (in a private mount namespace, as
// TestFstab), kills the daemon with SIGKILL and checks that the mount is
// gone within a second and the mountpoint is empty.
func TestFstabAutoUnmount(t *testing.T) {
	findTool(t, "mount.fuse3")
	findTool(t, "fusermount3")
	unshare := findTool(t, "unshare")
	src, plain := smallSource(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "m")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fstab := filepath.Join(tmp, "fstab")
	line := fmt.Sprintf("%s %s fuse.bloscfs ro,auto_unmount,nofail,log=%s 0 0\n", src, dir, filepath.Join(tmp, "log"))
	if err := os.WriteFile(fstab, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`set -e
mount --bind %[1]q /usr/local/bin
trap 'set +e; umount %[2]q 2>/dev/null' EXIT
mount -a -T %[3]q
grep -F ' %[2]s ' /proc/self/mounts
sha256sum %[2]q/data
pid=
for p in /proc/[0-9]*; do
  if { tr '\0' ' ' < $p/cmdline; } 2>/dev/null | grep -qF -- ' %[4]s %[2]s '; then pid=${p#/proc/}; fi
done
test -n "$pid"
kill -9 $pid
i=0
while grep -qF ' %[2]s ' /proc/self/mounts; do
  i=$((i+1)); test $i -le 100; sleep 0.01
done
echo "gone after $i polls"
echo "entries: $(ls -A %[2]q | wc -l)"
echo done
`, binDir, dir, fstab, src)
	r := testkit.Run(cmdTimeout, unshare, "--mount", "--propagation", "private", "sh", "-c", script)
	out := string(r.Stdout)
	t.Logf("in the private namespace:\n%s%s", out, r.Stderr)
	if r.Err != nil {
		t.Fatalf("fstab script (the mount must go within 100 polls of 10ms): %v", r)
	}
	if !strings.Contains(out, sha(plain)+"  "+dir+"/data") {
		t.Errorf("data did not read back through the fstab mount")
	}
	if !strings.Contains(out, "entries: 0\n") || !strings.HasSuffix(out, "done\n") {
		t.Errorf("the mountpoint is not empty after the dead mount went")
	}
}

// TestDeadMount: after kill -9 of a daemon mounted without auto_unmount,
// mounting onto the dead mount says how to clear it, and `bloscfs
// unmount` clears it, says so and exits 0: at once when no file is open
// there, lazily when one is.
func TestDeadMount(t *testing.T) {
	src, _ := smallSource(t)
	for _, holdFile := range []bool{false, true} {
		t.Run(fmt.Sprintf("file-open=%v", holdFile), func(t *testing.T) {
			m := mountForeground(t, bin, src)
			var held *os.File
			if holdFile {
				f, err := os.Open(m.Path("hello.txt"))
				if err != nil {
					t.Fatal(err)
				}
				held = f
				defer held.Close()
			}
			m.Cmd.Process.Signal(syscall.SIGKILL)
			if !m.WaitExit(time.Second) {
				t.Fatalf("the daemon survived SIGKILL for 1s")
			}
			if !mounttest.IsMounted(m.Dir) {
				t.Fatalf("%s is not mounted after the kill (without auto_unmount it stays, dead)", m.Dir)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(m.Dir, &st); err != syscall.ENOTCONN {
				t.Fatalf("stat of the dead mount: %v, want ENOTCONN", err)
			}
			r := testkit.Run(30*time.Second, bin, "mount", src, m.Dir)
			if r.Code == 0 || !strings.Contains(string(r.Stderr), "dead FUSE mount") || !strings.Contains(string(r.Stderr), "bloscfs unmount "+m.Dir) {
				t.Errorf("mount onto the dead mount: %v; want a failure that says it is dead and how to clear it", r)
			}
			r = m.Unmount()
			if r.Err != nil {
				t.Fatalf("bloscfs unmount of the dead mount: %v", r)
			}
			want := "unmounted the dead mount"
			if holdFile {
				want = "detached"
			}
			if !strings.Contains(string(r.Stdout), want) {
				t.Errorf("bloscfs unmount said %q; want it to say %q", r.Stdout, want)
			}
			if mounttest.IsMounted(m.Dir) {
				t.Errorf("%s is still mounted after bloscfs unmount", m.Dir)
			}
			checkUsableEmpty(t, m.Dir)
		})
	}
}

// TestUnmountAbortsStuckDaemon makes the old mistake on purpose: a FUSE
// daemon (internal/stuckd, built under the name bloscfs) that stats its
// own mountpoint from several threads is killed until one kill leaves it
// stuck (alive, in state D, with SIGKILL pending). `bloscfs unmount` must
// then abort its FUSE connection, say so, and leave no mount and no
// process behind.
func TestUnmountAbortsStuckDaemon(t *testing.T) {
	setup.Require(t)
	stuck := filepath.Join(t.TempDir(), "bloscfs")
	if err := testkit.BuildCommand(stuck, "./integration/internal/stuckd"); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	for try := 1; try <= 40; try++ {
		dir := mounttest.NewMountpoint(t)
		m := mounttest.Start(t, exec.Command(stuck, "mount", "-f", src, dir), dir)
		m.Bin = bin // the cleanup unmounts with bloscfs unmount
		time.Sleep(20 * time.Millisecond)
		m.Cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-m.Exited:
			testkit.Run(30*time.Second, "umount", "-l", dir) // not stuck this time
			continue
		case <-time.After(time.Second):
		}
		t.Logf("try %d: the killed daemon (pid %d) is stuck", try, m.PID)
		r := testkit.Run(30*time.Second, bin, "unmount", dir)
		if r.Err != nil || !strings.Contains(string(r.Stdout), "aborted FUSE connection") {
			t.Errorf("bloscfs unmount of the stuck daemon's mount: %v; want exit 0 and a word on the aborted connection", r)
		}
		select {
		case <-m.Exited:
		case <-time.After(5 * time.Second):
			t.Fatalf("the stuck daemon still runs 5s after bloscfs unmount")
		}
		if mounttest.IsMounted(dir) {
			t.Errorf("%s is still mounted", dir)
		}
		return
	}
	t.Fatalf("no kill out of 40 left stuckd stuck: the test cannot show that unmount clears a stuck daemon")
}

// TestOwnMountCallsParse: the strace parser sees a mount(2) that another
// thread split in two lines, and a call into the mount in either form.
func TestOwnMountCallsParse(t *testing.T) {
	const dir = "/tmp/m"
	for _, tc := range []struct {
		trace   string
		mounted bool
		bad     int
	}{
		{"1 mount(\"src\", \"/tmp/m\", \"fuse.bloscfs\", 0, \"fd=3\") = 0\n1 newfstatat(AT_FDCWD, \"/tmp/m\", {}, 0) = 0\n", true, 1},
		{"1 mount(\"src\", \"/tmp/m\", \"fuse.bloscfs\", 0, \"fd=3\" <unfinished ...>\n2 read(5, \"\", 10) = 0\n1 <... mount resumed>) = 0\n2 openat(AT_FDCWD, \"/tmp/m/x\", O_RDONLY) = 7\n", true, 1},
		{"1 mount(\"src\", \"/tmp/m\", \"fuse.bloscfs\", 0, \"fd=3\" <unfinished ...>\n1 <... mount resumed>) = -1 EPERM (Operation not permitted)\n", false, 0},
		{"1 newfstatat(AT_FDCWD, \"/tmp/m\", {}, 0) = 0\n1 mount(\"src\", \"/tmp/m\", \"fuse.bloscfs\", 0, \"fd=3\") = 0\n1 umount2(\"/tmp/m\", 0) = 0\n", true, 0},
	} {
		bad, mounted, _ := ownMountCalls([]byte(tc.trace), dir)
		if mounted != tc.mounted || len(bad) != tc.bad {
			t.Errorf("mounted %v, %d bad calls; want %v, %d, in\n%s", mounted, len(bad), tc.mounted, tc.bad, tc.trace)
		}
	}
}
