package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHelp: help goes to stdout with exit 0, for the whole command and
// for each command, flags are shown with two dashes, the general usage
// names every flag of every command, and no default is given twice.
func TestHelp(t *testing.T) {
	general := bloscfs(t, "--help")
	if general.code != 0 || len(general.stderr) != 0 || !strings.Contains(string(general.stdout), "bloscfs mount") {
		t.Fatalf("--help: exit %d, stdout %q, stderr %q", general.code, general.stdout, general.stderr)
	}
	for _, word := range []string{"--read-ahead", "--debug", "--new-format", "b2nd", "--version", "stats"} {
		if !strings.Contains(string(general.stdout), word) {
			t.Errorf("the general usage does not mention %s", word)
		}
	}
	flagRE := regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z-]+)`)
	for _, cmd := range []string{"mount", "unmount", "stats", "pack", "unpack", "info", "verify", "version"} {
		h := bloscfs(t, "help", cmd)
		if h.code != 0 || len(h.stderr) != 0 || !strings.HasPrefix(string(h.stdout), "usage: bloscfs "+cmd) {
			t.Errorf("help %s: exit %d, stdout %q, stderr %q", cmd, h.code, h.stdout, h.stderr)
			continue
		}
		if d := bloscfs(t, cmd, "--help"); d.code != 0 || string(d.stdout) != string(h.stdout) {
			t.Errorf("%s --help: exit %d, differs from help %s", cmd, d.code, cmd)
		}
		if d := bloscfs(t, cmd, "-h"); d.code != 0 || string(d.stdout) != string(h.stdout) {
			t.Errorf("%s -h: exit %d, differs from help %s", cmd, d.code, cmd)
		}
		for _, m := range flagRE.FindAllStringSubmatch(string(h.stdout), -1) {
			if !strings.Contains(string(general.stdout), m[1]) {
				t.Errorf("the general usage does not list %s %s", cmd, m[1])
			}
		}
		for _, line := range strings.Split(string(h.stdout), "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("help %s: a default given twice: %q", cmd, line)
			}
			if regexp.MustCompile(`^\s+-[a-z][a-z]`).MatchString(line) {
				t.Errorf("help %s: a flag with one dash: %q", cmd, line)
			}
		}
	}
	if r := bloscfs(t, "help", "frobnicate"); r.code != 2 {
		t.Errorf("help frobnicate: exit %d, want 2", r.code)
	}
}

// TestVersion: --version and version print our version, Go's, go-fuse's
// and the codec libraries', and the shuffle kernels in use.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}, {"-V"}} {
		r := bloscfs(t, args...)
		out := string(r.stdout)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		for _, want := range []string{"bloscfs ", "go1.", "go-fuse:  v2.", "klauspost/compress v1.", "pierrec/lz4 v4.", "kernels (CPU:"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: no %q in\n%s", args, want, out)
			}
		}
	}
	// Release builds set the version with -ldflags.
	bin := filepath.Join(t.TempDir(), "bloscfs")
	if out, err := goBuild(bin, "-ldflags=-X main.version=v9.8.7"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r := run1(t, bin, "--version"); !strings.HasPrefix(r, "bloscfs v9.8.7\n") {
		t.Errorf("-ldflags version: %q", r)
	}
}

// TestMountHelperForm: a first argument that is not a command, as
// mount.fuse3 passes it (`bloscfs SOURCE MOUNTPOINT -o OPTIONS`), is a
// mount, with -o after the operands; auto_unmount is refused at once.
func TestMountHelperForm(t *testing.T) {
	dir := t.TempDir()
	src, mnt := filepath.Join(dir, "src"), filepath.Join(dir, "missing-mnt")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	r := bloscfs(t, src, mnt, "-o", "rw,noatime,dev,suid,nofail,_netdev,x-systemd.automount,cache_size=64M,read_ahead=1M,new_format=blp,log=/dev/null")
	if r.code != 1 || !strings.Contains(string(r.stderr), "bloscfs mount: ") || !strings.Contains(string(r.stderr), mnt) {
		t.Errorf("helper form: exit %d, stderr %q; want the mount's error about %s", r.code, r.stderr, mnt)
	}
	r = bloscfs(t, src, mnt, "-o", "cache_size=lots")
	if r.code != 2 || !strings.Contains(string(r.stderr), "lots") {
		t.Errorf("bad -o cache_size: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{src, mnt, "-o", "auto_unmount"},
		{"mount", "-f", "-o", "ro,auto_unmount", src, mnt},
	} {
		r := bloscfs(t, args...)
		if r.code != 2 || !strings.Contains(string(r.stderr), "auto_unmount is not supported") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if r := bloscfs(t, "frobnicate"); r.code != 2 || !strings.Contains(string(r.stderr), "unknown command") {
		t.Errorf("frobnicate: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestNonEmptyMountpoint: a mountpoint with files is refused unless
// -o nonempty (checked before mounting, so no root is needed).
func TestNonEmptyMountpoint(t *testing.T) {
	dir := t.TempDir()
	src, mnt := filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
	for _, d := range []string{src, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(mnt, "precious"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := bloscfs(t, "mount", src, mnt)
	if r.code != 1 || !strings.Contains(string(r.stderr), "not empty") || !strings.Contains(string(r.stderr), "-o nonempty") {
		t.Errorf("non-empty mountpoint: exit %d, stderr %q", r.code, r.stderr)
	}
}

// goBuild builds this command into out with extra build flags.
func goBuild(out string, flags ...string) ([]byte, error) {
	args := append(append([]string{"build"}, flags...), "-o", out, ".")
	return exec.Command("go", args...).CombinedOutput()
}

// run1 runs a program and returns its stdout.
func run1(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return string(out)
}
