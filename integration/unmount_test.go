package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
)

// startStuckd starts stuckd (built as stuck, named bloscfs) in mode at a
// new mountpoint and waits for its mount. Its cleanup unmounts with
// bloscfs unmount, which aborts the connection of a daemon stuck in its
// exit.
func startStuckd(t *testing.T, stuck, mode string) *mount {
	t.Helper()
	dir := mounttest.NewMountpoint(t)
	cmd := exec.Command(stuck, "mount", "-f", t.TempDir(), dir)
	cmd.Env = append(os.Environ(), "STUCKD_MODE="+mode)
	m := mounttest.Start(t, cmd, dir)
	m.Bin = bin
	return m
}

// TestUnmountOnlyItsMount: two mounts whose daemons look alike to the
// old fallback. A's daemon was killed while its exit closes a file of
// its own mount: it is stuck in its exit, without a command line. B's is
// alive and busy (a stat of its root takes 3 s, a file is open there).
// `bloscfs unmount B` must not abort B: it says B is busy and leaves it
// serving (before, it took A's stuck daemon for B's and aborted B's
// connection). `bloscfs unmount A` aborts A's connection, and the stuck
// process exits (issue 33, point 11).
func TestUnmountOnlyItsMount(t *testing.T) {
	setup.Require(t)
	stuck := filepath.Join(t.TempDir(), "bloscfs")
	if err := testkit.BuildCommand(stuck, "./integration/internal/stuckd"); err != nil {
		t.Fatal(err)
	}
	a, b := startStuckd(t, stuck, "exit"), startStuckd(t, stuck, "slow")
	dirA, cmdA, exitedA := a.Dir, a.Cmd, a.Exited
	dirB, exitedB := b.Dir, b.Exited
	f, err := os.Open(filepath.Join(dirB, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	cmdA.Process.Signal(syscall.SIGKILL)
	select {
	case <-exitedA:
		t.Fatal("stuckd in mode exit exited at SIGKILL: it should be stuck in its exit")
	case <-time.After(time.Second):
	}
	if c := mounttest.Cmdline(cmdA.Process.Pid); len(c) != 0 {
		t.Fatalf("the killed daemon still has its command line %q: not stuck in its exit", c)
	}

	r := testkit.Run(60*time.Second, bin, "unmount", dirB)
	t.Logf("bloscfs unmount of the busy mount: %v", r)
	if strings.Contains(string(r.Stdout), "aborted") || r.Err == nil || !strings.Contains(string(r.Stderr), "busy") {
		t.Errorf("bloscfs unmount of the busy mount B: %v; want a failure that says it is busy, and no abort", r)
	}
	select {
	case <-exitedB:
		t.Errorf("B's live daemon exited: its connection was aborted")
	default:
	}
	buf := make([]byte, 7)
	if n, err := f.ReadAt(buf, 0); err != nil && n != 7 || string(buf) != "stuckd\n" {
		t.Errorf("reading B's open file after unmount B: %q, %v; want it served", buf[:n], err)
	}
	if !mounttest.IsMounted(dirB) {
		t.Errorf("B was unmounted with a file open there")
	}

	r = testkit.Run(60*time.Second, bin, "unmount", dirA)
	t.Logf("bloscfs unmount of the stuck mount: %v", r)
	if r.Err != nil || !strings.Contains(string(r.Stdout), "aborted FUSE connection") {
		t.Errorf("bloscfs unmount of the stuck mount A: %v; want exit 0 and a word on the aborted connection", r)
	}
	select {
	case <-exitedA:
	case <-time.After(5 * time.Second):
		t.Errorf("A's stuck daemon still runs 5s after bloscfs unmount")
	}
	if mounttest.IsMounted(dirA) {
		t.Errorf("%s is still mounted", dirA)
	}
	select {
	case <-exitedB:
		t.Errorf("B's daemon exited when A was unmounted")
	default:
	}
}

// TestMountThroughSymlink mounts at a symbolic link to the mountpoint,
// in the background and in the foreground, with and without
// auto_unmount: the mount is at the link's target (as the mount table
// shows it), `bloscfs unmount LINK` unmounts it, and auto_unmount clears
// it when its daemon is killed (before, the watcher looked for a mount
// at the link's own path, found none, and left the dead mount; unmount
// said "not a mountpoint") (issue 33, points 12 and 13).
func TestMountThroughSymlink(t *testing.T) {
	findTool(t, "fusermount3")
	for _, c := range []struct {
		name     string
		fg, auto bool
	}{{"bg", false, false}, {"fg", true, false}, {"bg-auto_unmount", false, true}, {"fg-auto_unmount", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			src, _ := smallSource(t)
			os.WriteFile(filepath.Join(src, "hello.txt"), []byte("hello\n"), 0o644)
			real := mounttest.NewMountpoint(t)
			link := filepath.Join(t.TempDir(), "link")
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
			m := mounttest.Expect(t, bin, src, real)
			log := filepath.Join(t.TempDir(), "log")
			m.Log = log
			args := []string{"mount", "--log", log}
			if c.auto {
				args = append(args, "-o", "auto_unmount")
			}
			if c.fg {
				args = append(args, "-f")
			}
			args = append(args, src, link)
			cmd := exec.Command(bin, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if c.fg {
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				go cmd.Wait()
				m.PID = cmd.Process.Pid
			} else if err := cmd.Run(); err != nil {
				t.Fatalf("%v: %v: %s", args, err, stderr.String())
			}
			if !testkit.Eventually(t, 30*time.Second, func() bool { return mounttest.IsMounted(real) }) {
				t.Fatalf("%s (the link's target) is not mounted: %s", real, stderr.String())
			}
			readHello(t, false, link)
			if !c.fg {
				if m.PID = mounttest.FindDaemon(real); m.PID == 0 {
					m.PID = mounttest.FindDaemon(link) // a daemon that kept the link's path
				}
			}
			if m.PID == 0 {
				t.Fatal("no daemon serves the mount")
			}
			if c.auto {
				syscall.Kill(m.PID, syscall.SIGKILL)
				killed := time.Now()
				if !testkit.Eventually(t, 5*time.Second, func() bool { return !mounttest.IsMounted(real) }) {
					t.Fatalf("%s is still mounted %v after its daemon was killed\nlog:\n%s", real, time.Since(killed), m.LogText())
				}
				t.Logf("the dead mount went %v after the SIGKILL", time.Since(killed).Round(time.Millisecond))
				checkUsableEmpty(t, real)
				return
			}
			r := testkit.Run(30*time.Second, bin, "unmount", link)
			if r.Err != nil {
				t.Fatalf("bloscfs unmount %s (a link to the mountpoint): %v", link, r)
			}
			if mounttest.IsMounted(real) {
				t.Errorf("%s is still mounted after bloscfs unmount of the link", real)
			}
			if !m.WaitExit(10 * time.Second) {
				t.Errorf("the daemon still runs after the unmount")
			}
			if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the link: %v, %v", fi, err)
			}
		})
	}
}
