package fs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"golang.org/x/sys/unix"
)

// TestNotCarriedXattrs: POSIX ACLs and security.* attributes are not
// supported through the mount (EOPNOTSUPP for get, set and remove, left
// out of lists) on compressed files, plain files and directories, while
// user.* attributes still reach the source.
func TestNotCarriedXattrs(t *testing.T) {
	src := t.TempDir()
	frameData, err := os.ReadFile(filepath.Join(fixtures.Dir(), "blocksize_16384.b2frame"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"f.b2frame": frameData, "p.txt": []byte("plain\n")} {
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(src, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A security attribute on the source, where its filesystem takes one
	// (root on tmpfs or ext4): the mount must not list it.
	labelled := 0
	for _, name := range []string{"f.b2frame", "p.txt", "d"} {
		if unix.Lsetxattr(filepath.Join(src, name), "security.bloscfs-test", []byte("x"), 0) == nil {
			labelled++
		}
	}
	mnt, _ := mountSource(t, src)
	buf := make([]byte, 4096)
	for _, name := range []string{"f", "p.txt", "d", "."} {
		p := filepath.Join(mnt, name)
		for _, attr := range []string{"security.selinux", "security.capability", "security.bloscfs-test", "system.posix_acl_access", "system.posix_acl_default"} {
			if _, err := unix.Lgetxattr(p, attr, buf); !errors.Is(err, unix.EOPNOTSUPP) {
				t.Errorf("getxattr %s %s: %v, want EOPNOTSUPP", name, attr, err)
			}
		}
		if err := unix.Lsetxattr(p, "security.bloscfs-test", []byte("y"), 0); !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("setxattr %s security.bloscfs-test: %v, want EOPNOTSUPP", name, err)
		}
		if err := unix.Lremovexattr(p, "security.bloscfs-test"); !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("removexattr %s security.bloscfs-test: %v, want EOPNOTSUPP", name, err)
		}
		if err := unix.Lsetxattr(p, "user.note", []byte("kept"), 0); err != nil {
			t.Errorf("setxattr %s user.note: %v", name, err)
		} else if n, err := unix.Lgetxattr(p, "user.note", buf); err != nil || string(buf[:n]) != "kept" {
			t.Errorf("getxattr %s user.note: %q, %v", name, buf[:max(n, 0)], err)
		}
		n, err := unix.Llistxattr(p, buf)
		if err != nil {
			t.Errorf("listxattr %s: %v", name, err)
			continue
		}
		list := string(buf[:n])
		if strings.Contains(list, "security.") || strings.Contains(list, "system.posix_acl") {
			t.Errorf("listxattr %s lists what the mount does not carry: %q", name, list)
		}
		if !strings.Contains(list, "user.note\x00") {
			t.Errorf("listxattr %s: %q, want user.note", name, list)
		}
	}
	if n, err := unix.Lgetxattr(filepath.Join(src, "p.txt"), "user.note", buf); err != nil || string(buf[:n]) != "kept" {
		t.Errorf("user.note did not reach the source: %q, %v", buf[:max(n, 0)], err)
	}
	t.Logf("%d of 3 source files took a security attribute", labelled)
}

// TestLsAsksOnce: `ls -l` of a directory through the mount asks for ACLs
// and security contexts once for the whole mount, not once per file
// (coreutils stops asking a device that answered EOPNOTSUPP).
func TestLsAsksOnce(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Fatal("strace is needed (make deps installs it)")
	}
	src := t.TempDir()
	frameData, err := os.ReadFile(filepath.Join(fixtures.Dir(), "blocksize_16384.b2frame"))
	if err != nil {
		t.Fatal(err)
	}
	const files = 40
	for i := 0; i < files; i++ {
		name, data := filepath.Join(src, "f"+string(rune('a'+i%26))+string(rune('a'+i/26))+".b2frame"), frameData
		if i%2 == 1 {
			name, data = strings.TrimSuffix(name, ".b2frame")+".txt", []byte("plain\n")
		}
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mnt, _ := mountSource(t, src)
	out, err := exec.Command(strace, "-f", "-e", "trace=getxattr,lgetxattr,fgetxattr", "-o", "/dev/stdout", "ls", "-l", mnt).Output()
	if err != nil {
		t.Fatalf("strace ls -l: %v\n%s", err, out)
	}
	calls := bytes.Count(out, []byte("xattr("))
	if calls > 4 {
		t.Errorf("ls -l of %d files asked for %d extended attributes, want at most 4:\n%s", files, calls, out)
	}
	if !bytes.Contains(out, []byte("EOPNOTSUPP")) && calls > 0 {
		t.Errorf("ls -l was not told EOPNOTSUPP:\n%s", out)
	}
	t.Logf("ls -l of %d files: %d GETXATTR", files, calls)
}
