package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// TestConnName: the FUSE control filesystem names a connection by the
// whole device number of its mount, major<<20 | minor; every FUSE mount
// of this machine has its connection under that name (issue 33, point
// 11).
func TestConnName(t *testing.T) {
	for _, c := range []struct {
		major, minor uint32
		want         string
	}{{0, 45, "45"}, {7, 3, "7340035"}, {259, 1 << 19, "272105472"}} {
		if got := (MountInfo{Major: c.major, Minor: c.minor}).Conn(); got != c.want {
			t.Errorf("%d:%d: %s, want %s", c.major, c.minor, got, c.want)
		}
	}
	ms, err := Mounts()
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := IsMountpoint("/sys/fs/fuse/connections"); !ok {
		t.Skip("the FUSE control filesystem is not mounted")
	}
	for _, m := range ms {
		if m.FSType != "fuse" && m.FSType != "fuseblk" && !strings.HasPrefix(m.FSType, "fuse.") {
			continue
		}
		if _, err := os.Stat(filepath.Join("/sys/fs/fuse/connections", m.Conn())); err != nil {
			if now, ok, _ := MountAt(m.Dir); !ok || now.Dev() != m.Dev() {
				continue // unmounted meanwhile (other tests mount too)
			}
			t.Errorf("%s (%s, %s): no connection %s: %v", m.Dir, m.FSType, m.Dev(), m.Conn(), err)
		}
	}
}

// deadMountAt mounts an empty tree at a new directory under t's temp dir
// and aborts its connection: a dead bloscfs mount, as a killed daemon
// leaves it. It is detached when the test ends.
func deadMountAt(t *testing.T) (string, MountInfo) {
	t.Helper()
	if skip, fail := testkit.MountPrereqs("these tests"); fail != "" {
		t.Fatal(fail)
	} else if skip != "" {
		t.Skip(skip)
	}
	src, mnt := t.TempDir(), filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	server, _, err := Mount(src, mnt, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ok, _ := IsMountpoint(mnt); ok {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	m, ok, err := MountAt(mnt)
	if err != nil || !ok {
		t.Fatalf("not in the mount table: %v", err)
	}
	abortConn(t, m)
	server.Wait()
	if st := ProbeMount(mnt, 5*time.Second); st != MountDead {
		t.Fatalf("the aborted mount is %v, not dead", st)
	}
	return mnt, m
}

// abortConn aborts the connection of the FUSE mount m, as the death of
// its daemon does.
func abortConn(t *testing.T, m MountInfo) {
	t.Helper()
	if ok, _ := IsMountpoint("/sys/fs/fuse/connections"); !ok {
		if err := syscall.Mount("fusectl", "/sys/fs/fuse/connections", "fusectl", 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join("/sys/fs/fuse/connections", m.Conn(), "abort"), []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
}

// TestWatcherOnlyItsMount: the auto_unmount watcher leaves a dead mount
// alone unless it is the daemon's: the daemon told it another device, or
// an empty line (it has no mount of its own there), or nothing at all
// while the dead mount was there before the daemon started or what was
// there is not known; and Unmount
// never follows a symbolic link to a mountpoint (issue 33, point 13).
func TestWatcherOnlyItsMount(t *testing.T) {
	mnt, m := deadMountAt(t)
	for _, c := range []struct{ dev, below string }{
		{"", m.Stamp()}, {"", ""}, {"\n", NothingBelow}, {"\n", m.Stamp()}, {"0:1\n", NothingBelow}, {"7:" + m.Dev(), NothingBelow},
	} {
		if err := WatchAutoUnmount(mnt, c.below, strings.NewReader(c.dev)); err != nil {
			t.Errorf("device %q, below %q: %v", c.dev, c.below, err)
		}
		if ok, _ := IsMountpoint(mnt); !ok {
			t.Fatalf("the watcher told device %q (below %q) unmounted the dead mount %s", c.dev, c.below, m.Stamp())
		}
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(mnt, link); err != nil {
		t.Fatal(err)
	}
	if err := Unmount(link, true); err == nil {
		t.Errorf("Unmount of a symbolic link to a mountpoint succeeded")
	}
	if ok, _ := IsMountpoint(mnt); !ok {
		t.Fatalf("Unmount followed the symbolic link %s to the mountpoint", link)
	}
	if err := WatchAutoUnmount(mnt, m.Stamp(), strings.NewReader(m.Dev()+"\n")); err != nil {
		t.Fatal(err)
	}
	if ok, _ := IsMountpoint(mnt); ok {
		t.Errorf("the watcher told the mount's own device %s left it", m.Dev())
	}
}

// TestWatcherDaemonDiedEarly: a daemon killed between mount(2) and
// telling its watcher the mount's device tells it nothing. Its mount is
// then the bloscfs mount at the mountpoint that was not there before it
// started: the watcher unmounts it, whether nothing was mounted there
// before or another mount was (one whose stamp differs in its ID alone,
// or in its device alone; TestWatcherOnlyItsMount: not when that mount
// is the one there now). A pipe that fails to read is not the daemon's
// silence.
func TestWatcherDaemonDiedEarly(t *testing.T) {
	for _, c := range []struct {
		name  string
		below func(MountInfo) string
	}{
		{"nothing", func(MountInfo) string { return NothingBelow }},
		{"another ID", func(m MountInfo) string { return fmt.Sprintf("%d %s", m.ID+1, m.Dev()) }},
		{"another device", func(m MountInfo) string { return fmt.Sprintf("%d %d:%d", m.ID, m.Major, m.Minor+1) }},
	} {
		mnt, m := deadMountAt(t)
		below := c.below(m)
		if m.ID == 0 || m.Stamp() == below {
			t.Fatalf("%s: no mount ID read from the mount table: %+v", c.name, m)
		}
		if err := WatchAutoUnmount(mnt, below, iotest.ErrReader(errors.New("bad fd"))); err == nil {
			t.Errorf("%s: a pipe that fails to read: no error", c.name)
		}
		if ok, _ := IsMountpoint(mnt); !ok {
			t.Fatalf("%s: the watcher unmounted %s after its pipe failed to read", c.name, m.Stamp())
		}
		if err := WatchAutoUnmount(mnt, below, strings.NewReader("")); err != nil {
			t.Fatal(err)
		}
		if ok, _ := IsMountpoint(mnt); ok {
			t.Errorf("%s: the watcher of a daemon that said nothing left its dead mount %s (below it before: %q)", c.name, m.Stamp(), below)
		}
	}
}

// TestResolveMountpoint: links above and at the mountpoint are resolved,
// as the mount table shows it; a name that does not exist is kept.
func TestResolveMountpoint(t *testing.T) {
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(d, "real", "mnt"), 0o755)
	os.Symlink(filepath.Join(d, "real"), filepath.Join(d, "up"))
	os.Symlink("mnt", filepath.Join(d, "real", "rel"))
	os.Symlink(filepath.Join(d, "up", "rel"), filepath.Join(d, "chain"))
	for in, want := range map[string]string{
		filepath.Join(d, "up", "mnt"): filepath.Join(d, "real", "mnt"),
		filepath.Join(d, "chain"):     filepath.Join(d, "real", "mnt"),
		filepath.Join(d, "up", "new"): filepath.Join(d, "real", "new"),
	} {
		if got, err := ResolveMountpoint(in); err != nil || got != want {
			t.Errorf("%s: %s, %v; want %s", in, got, err, want)
		}
	}
	os.Symlink("loop", filepath.Join(d, "loop"))
	if _, err := ResolveMountpoint(filepath.Join(d, "loop")); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("a loop: %v", err)
	}
}
