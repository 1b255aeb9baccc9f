package fs

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// kernelHasPassthrough reports whether the running kernel has FUSE
// passthrough (Linux 6.9 and later).
func kernelHasPassthrough() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	parts := strings.SplitN(unix.ByteSliceToString(u.Release[:]), ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return major > 6 || major == 6 && minor >= 9
}

// mountStats reads a mount's Stats through its root's StatsXattr, as
// `bloscfs stats` does.
func mountStats(t *testing.T, mnt string) Stats {
	t.Helper()
	buf := make([]byte, 1<<16)
	n, err := unix.Getxattr(mnt, StatsXattr, buf)
	if err != nil {
		t.Fatalf("getxattr %s: %v", StatsXattr, err)
	}
	var s Stats
	if err := json.Unmarshal(buf[:n], &s); err != nil {
		t.Fatalf("stats: %v", err)
	}
	return s
}

// TestPassthroughStats: a plain file opened through the mount (as root,
// on a kernel with FUSE passthrough) is read by the kernel from the
// source file, and Stats name it while it is open; its bytes are right
// either way, and a closed file is no longer named.
func TestPassthroughStats(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("plain bytes, passed through\n"), 40000)
	if err := os.WriteFile(filepath.Join(src, "sub", "p.txt"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	mnt, _ := mountSrc(t, src, base, Options{})
	f, err := os.Open(filepath.Join(mnt, "sub", "p.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want)+1)
	n, _ := f.ReadAt(got, 0)
	if !bytes.Equal(got[:n], want) {
		t.Errorf("read %d bytes, want the file's %d", n, len(want))
	}
	s := mountStats(t, mnt)
	if kernelHasPassthrough() && os.Geteuid() == 0 {
		if len(s.Passthrough) != 1 || s.Passthrough[0] != "sub/p.txt" {
			t.Errorf("passthrough %q with sub/p.txt open and read, want it named", s.Passthrough)
		}
	} else if len(s.Passthrough) != 0 {
		t.Errorf("passthrough %q where the kernel or privileges allow none", s.Passthrough)
	}
	f.Close()
	// RELEASE reaches the daemon after close returns.
	for i := 0; i < 100 && len(mountStats(t, mnt).Passthrough) != 0; i++ {
		unix.Nanosleep(&unix.Timespec{Nsec: 20e6}, nil)
	}
	if s := mountStats(t, mnt); len(s.Passthrough) != 0 {
		t.Errorf("passthrough %q after the file was closed", s.Passthrough)
	}
}
