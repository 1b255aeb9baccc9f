package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	bfs "github.com/bloscfs/bloscfs/fs"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"golang.org/x/sys/unix"
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
	// The zstd decoder: klauspost's in a static build; libzstd in a cgo
	// build where the system's libzstd.so.1 loads, unless BLOSCFS_ZSTD=go.
	// The binary of TestMain is one of the two builds (go's default cgo
	// setting); the other is built here, with the version set by
	// -ldflags as release builds set it.
	def, err := exec.Command("go", "env", "CGO_ENABLED").Output()
	if err != nil {
		t.Fatal(err)
	}
	cgoDefault := strings.TrimSpace(string(def))
	other := map[string]string{"0": "1", "1": "0"}[cgoDefault]
	if other == "" {
		t.Fatalf("go env CGO_ENABLED: %q", def)
	}
	built := map[string]string{cgoDefault: binary} // CGO_ENABLED → binary
	built[other] = filepath.Join(t.TempDir(), "bloscfs-cgo"+other)
	build := exec.Command("go", "build", "-ldflags=-X main.version=v9.8.7", "-o", built[other], ".")
	build.Env = append(os.Environ(), "CGO_ENABLED="+other)
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	if r := run1(t, built[other], "--version"); !strings.HasPrefix(r, "bloscfs v9.8.7\n") {
		t.Errorf("-ldflags version: %q", r)
	}
	for _, tc := range []struct{ cgo, env, want string }{
		{"0", "", "zstd:     decoding with klauspost/compress (pure Go)"},
		{"1", "", "zstd:     decoding with libzstd 1."},
		{"1", "BLOSCFS_ZSTD=go", "zstd:     decoding with klauspost/compress (pure Go)"},
	} {
		if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libzstd.so.1"); err != nil && tc.cgo == "1" {
			continue // no libzstd where Debian puts it: a cgo build decodes with klauspost's
		}
		cmd := exec.Command(built[tc.cgo], "version")
		cmd.Env = append(os.Environ(), tc.env)
		if got, err := cmd.Output(); err != nil || !strings.Contains(string(got), tc.want) {
			t.Errorf("CGO_ENABLED=%s %s: %v, %q, want %q", tc.cgo, tc.env, err, got, tc.want)
		}
	}
}

// TestMountHelperForm: a first argument that is not a command, as
// mount.fuse3 passes it (`bloscfs SOURCE MOUNTPOINT -o OPTIONS`), is a
// mount, with -o after the operands; auto_unmount is accepted; a log or
// cache inside the mountpoint is refused.
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
		// Accepted: what fails is the missing mountpoint.
		r := bloscfs(t, args...)
		if r.code != 1 || !strings.Contains(string(r.stderr), mnt) {
			t.Errorf("%v: exit %d, stderr %q; want the mount's error about %s", args, r.code, r.stderr, mnt)
		}
	}
	for _, args := range [][]string{
		{"mount", "--log", filepath.Join(mnt, "x.log"), src, mnt},
		{src, mnt, "-o", "log=" + filepath.Join(mnt, "sub", "x.log")},
		{"mount", "--cache-dir", mnt, "s3://bucket/p", mnt},
	} {
		r := bloscfs(t, args...)
		if r.code != 2 || !strings.Contains(string(r.stderr), "inside the mountpoint") {
			t.Errorf("%v: exit %d, stderr %q; want a refusal of a path inside the mountpoint", args, r.code, r.stderr)
		}
	}
	if r := bloscfs(t, "mount", "--log", "stderr", src, mnt); r.code != 2 || !strings.Contains(string(r.stderr), "needs -f") {
		t.Errorf("--log stderr in the background: exit %d, stderr %q", r.code, r.stderr)
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
	// Should the refusal fail (as root the mount would succeed), leave
	// no mount behind.
	t.Cleanup(func() {
		if ok, _ := bfs.IsMountpoint(mnt); ok {
			if r := bloscfs(t, "unmount", mnt); r.code != 0 {
				exec.Command("umount", "-l", mnt).Run()
			}
			t.Errorf("%s was mounted", mnt)
		}
	})
	r := bloscfs(t, "mount", "--log", filepath.Join(dir, "log"), src, mnt)
	if r.code != 1 || !strings.Contains(string(r.stderr), "not empty") || !strings.Contains(string(r.stderr), "-o nonempty") {
		t.Errorf("non-empty mountpoint: exit %d, stderr %q", r.code, r.stderr)
	}
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

// writeNPY writes a little-endian float64 .npy file of n elements.
func writeNPY(t *testing.T, path string, n int) {
	t.Helper()
	hdr := fmt.Sprintf("{'descr': '<f8', 'fortran_order': False, 'shape': (%d,), }", n)
	for (10+len(hdr)+1)%64 != 0 {
		hdr += " "
	}
	hdr += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), byte(len(hdr)>>8))
	b = append(b, hdr...)
	for i := range n {
		b = appendUint64LE(b, math.Float64bits(float64(i)*0.5))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// onTerminal runs a shell command with a pseudo-terminal as its stdin,
// stdout and stderr (util-linux script) and returns what it printed.
func onTerminal(t *testing.T, command string) string {
	t.Helper()
	script, err := exec.LookPath("script")
	if err != nil {
		t.Fatal("script (util-linux) is not installed")
	}
	out, err := exec.Command(script, "-qec", command, "/dev/null").CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
	return string(out)
}

// TestProgressBars: pack of a .npy and unpack to standard output show a
// progress bar when stderr is a terminal.
func TestProgressBars(t *testing.T) {
	dir := t.TempDir()
	npy := filepath.Join(dir, "x.npy")
	writeNPY(t, npy, 1<<20)
	out := onTerminal(t, fmt.Sprintf("%s pack %s", binary, npy))
	if !strings.Contains(out, "pack x.npy") || !strings.Contains(out, "100%") {
		t.Errorf("pack x.npy on a terminal: no progress bar in %q", out)
	}
	out = onTerminal(t, fmt.Sprintf("%s unpack %s - >/dev/null", binary, filepath.Join(dir, "x.b2nd")))
	if !strings.Contains(out, "unpack x.b2nd") || !strings.Contains(out, "100%") {
		t.Errorf("unpack x.b2nd - on a terminal: no progress bar in %q", out)
	}
}

// TestPackPolish: pack and unpack print a summary, pack refuses a
// container without -f, and pack - reads standard input into OUT.
func TestPackPolish(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "data")
	plain := bytes.Repeat([]byte("bloscfs packs this line again and again\n"), 50000)
	if err := os.WriteFile(in, plain, 0o644); err != nil {
		t.Fatal(err)
	}
	r := bloscfs(t, "pack", in)
	if r.code != 0 || !regexp.MustCompile(`^packed \S+/data → \S+/data.b2frame: 1.91 MiB plain, [0-9.]+ KiB stored \(ratio [0-9.]+\) in [0-9.]+ s \([0-9.]+ [KMG]iB/s\)\n$`).Match(r.stderr) {
		t.Errorf("pack summary: exit %d, %q", r.code, r.stderr)
	}
	if r := bloscfs(t, "pack", "-q", in, in+".2.blp"); r.code != 0 || len(r.stderr) != 0 {
		t.Errorf("pack -q: exit %d, %q", r.code, r.stderr)
	}
	r = bloscfs(t, "unpack", in+".b2frame", in+".back")
	if r.code != 0 || !strings.HasPrefix(string(r.stderr), "unpacked "+in+".b2frame → "+in+".back: 1.91 MiB plain") {
		t.Errorf("unpack summary: exit %d, %q", r.code, r.stderr)
	}
	// To a device the summary gives the plain size all the same (it
	// said "0 B plain", the device's size). pack writes to a device it
	// can seek in (it failed to cut /dev/null to the frame's length),
	// and refuses a FIFO, whose header it could not complete, at once.
	r = bloscfs(t, "unpack", "-f", in+".b2frame", os.DevNull)
	if r.code != 0 || !regexp.MustCompile(`^unpacked \S+/data.b2frame → /dev/null: 1.91 MiB plain, [0-9.]+ KiB stored \(ratio [0-9.]+\)`).Match(r.stderr) {
		t.Errorf("unpack to %s: exit %d, %q", os.DevNull, r.code, r.stderr)
	}
	for _, f := range []string{"b2frame", "blp"} {
		r = bloscfs(t, "pack", "-f", "--format", f, "--typesize", "1", in, os.DevNull)
		if r.code != 0 || !regexp.MustCompile(`^packed \S+/data → /dev/null: 1.91 MiB plain in [0-9.]+ s`).Match(r.stderr) {
			t.Errorf("pack --format %s to %s: exit %d, %q", f, os.DevNull, r.code, r.stderr)
		}
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	r = bloscfs(t, "pack", "-f", in, fifo)
	if r.code != 1 || !strings.Contains(string(r.stderr), fifo+": cannot seek in it") {
		t.Errorf("pack to a FIFO: exit %d, %q", r.code, r.stderr)
	}
	os.Remove(fifo)
	// A container is not packed again without -f.
	r = bloscfs(t, "pack", in+".b2frame")
	if r.code != 1 || !strings.Contains(string(r.stderr), "already a b2frame container") || fileExists(in+".b2frame.b2frame") {
		t.Errorf("pack of a container: exit %d, %q", r.code, r.stderr)
	}
	if r := bloscfs(t, "pack", "-f", "-q", in+".b2frame"); r.code != 0 || !fileExists(in+".b2frame.b2frame") {
		t.Errorf("pack -f of a container: exit %d, %q", r.code, r.stderr)
	}
	// Standard input needs OUT, and packs.
	if r := bloscfs(t, "pack", "-"); r.code != 2 || !strings.Contains(string(r.stderr), "needs OUT") {
		t.Errorf("pack -: exit %d, %q", r.code, r.stderr)
	}
	for _, out := range []string{"stdin.b2frame", "stdin.blp"} {
		cmd := exec.Command(binary, "pack", "-q", "-", filepath.Join(dir, out))
		cmd.Stdin = bytes.NewReader(plain)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pack - %s: %v: %s", out, err, b)
		}
		if u := bloscfs(t, "unpack", filepath.Join(dir, out), "-"); u.code != 0 || !bytes.Equal(u.stdout, plain) {
			t.Errorf("pack - %s: unpack gives %d bytes, exit %d", out, len(u.stdout), u.code)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) != 0 {
		t.Errorf("temp files left: %v", m)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestInfoPolish: info walks directories, shows Bloscpack's header
// fields and decoded b2nd meta, and its JSON has no clevel for Bloscpack,
// an error object per failing file, and no HTML escapes.
func TestInfoPolish(t *testing.T) {
	fx := fixtures.Dir()
	dir := t.TempDir()
	odd := filepath.Join(dir, "sub", "a<b&c>.blp")
	if err := os.MkdirAll(filepath.Dir(odd), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(fx, "checksum_sha256.blp"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(odd, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plain.txt"), []byte("not a container"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := bloscfs(t, "info", "--json", dir)
	if r.code != 0 || !strings.Contains(string(r.stdout), `"path": "`+odd+`"`) {
		t.Fatalf("info --json DIR: exit %d, %s%s", r.code, r.stdout, r.stderr)
	}
	var recs []map[string]any
	if err := json.Unmarshal(r.stdout, &recs); err != nil || len(recs) != 1 {
		t.Fatalf("info --json DIR: %d records, %v", len(recs), err)
	}
	if _, ok := recs[0]["clevel"]; ok {
		t.Errorf("Bloscpack record has a clevel: %v", recs[0]["clevel"])
	}
	if recs[0]["last_chunk"] != 24928.0 || recs[0]["max_app_chunks"] != 50.0 || recs[0]["offsets"] != true || recs[0]["chunk_offsets"] == nil {
		t.Errorf("Bloscpack header fields: %v", recs[0])
	}
	r = bloscfs(t, "info", "--json", filepath.Join(fx, "invalid_bad_magic.b2frame"), filepath.Join(dir, "missing"))
	recs = nil
	if err := json.Unmarshal(r.stdout, &recs); err != nil || r.code != 1 || len(recs) != 2 || recs[0]["error"] == nil || recs[1]["error"] == nil {
		t.Errorf("info --json of failing files: exit %d, %s", r.code, r.stdout)
	}
	r = bloscfs(t, "info", filepath.Join(fx, "nd_f64_1d.b2nd"), filepath.Join(fx, "checksum_sha256.blp"))
	for _, want := range []string{"meta b2nd: version 0, shape [1000], chunkshape [300], blockshape [70], dtype <f8", "last_chunk 24928, max_app_chunks 50, offsets true\n  chunk offsets [472 12371 24195 36048 47895]\n"} {
		if !strings.Contains(string(r.stdout), want) {
			t.Errorf("info: no %q in\n%s", want, r.stdout)
		}
	}
	// verify names the path once in its FAIL line.
	bad := filepath.Join(fx, "invalid_blp_truncated.blp")
	r = bloscfs(t, "verify", bad)
	if line := strings.Split(string(r.stdout), "\n")[0]; strings.Count(line, "invalid_blp_truncated.blp") != 1 {
		t.Errorf("verify FAIL line: %q", line)
	}
}

// appendUint64LE appends v in little-endian order.
func appendUint64LE(b []byte, v uint64) []byte {
	for i := range 8 {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}
