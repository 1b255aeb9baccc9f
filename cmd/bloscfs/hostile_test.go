package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/hostile"
)

// startInterrupted starts the binary with args, waits until it has made
// its temp output in dir, sends sig, and returns the exit code and what
// is left in dir. The waits only guard against a hang.
func startInterrupted(t *testing.T, dir string, sig syscall.Signal, args ...string) (int, []string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if !testkit.Eventually(t, 60*time.Second, func() bool {
		ms, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*"))
		return len(ms) > 0
	}) {
		t.Fatalf("%v made no temp file", args)
	}
	cmd.Process.Signal(sig)
	if exited, _ := testkit.Wait(cmd, 60*time.Second); !exited {
		t.Fatalf("%v did not exit on %v", args, sig)
	}
	ents, _ := os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	return cmd.ProcessState.ExitCode(), left
}

// TestInterruptRemovesTemp is finding 10 of issue 11: SIGINT or SIGTERM
// during pack or unpack removes the temp output, and the command exits
// with 130 or 143.
func TestInterruptRemovesTemp(t *testing.T) {
	src := t.TempDir()
	zero, err := hostile.ZeroFrame()
	if err != nil {
		t.Fatal(err)
	}
	zpath := filepath.Join(src, "zero.b2frame")
	if err := os.WriteFile(zpath, zero, 0o644); err != nil {
		t.Fatal(err)
	}
	// Incompressible data with the slowest codec: packing takes a while.
	raw := make([]byte, 96<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= len(raw); i += 8 {
		v := rng.Uint64()
		for k := 0; k < 8; k++ {
			raw[i+k] = byte(v >> (8 * k))
		}
	}
	rpath := filepath.Join(src, "random.bin")
	if err := os.WriteFile(rpath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		sig  syscall.Signal
		code int
		args func(out string) []string
	}{
		{"unpack SIGINT", syscall.SIGINT, 130, func(out string) []string { return []string{"unpack", zpath, filepath.Join(out, "zero")} }},
		{"unpack SIGTERM", syscall.SIGTERM, 143, func(out string) []string { return []string{"unpack", zpath, filepath.Join(out, "zero")} }},
		{"pack SIGINT", syscall.SIGINT, 130, func(out string) []string {
			return []string{"pack", "--codec", "zlib", "--clevel", "9", rpath, filepath.Join(out, "r.b2frame")}
		}},
		{"pack SIGTERM", syscall.SIGTERM, 143, func(out string) []string {
			return []string{"pack", "--format", "blp", "--codec", "zlib", "--clevel", "9", rpath, filepath.Join(out, "r.blp")}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			code, left := startInterrupted(t, out, c.sig, c.args(out)...)
			if code != c.code {
				t.Errorf("exit code %d, want %d", code, c.code)
			}
			if len(left) > 0 {
				t.Errorf("left behind: %s", strings.Join(left, ", "))
			}
		})
	}
}

// procValue is testkit.ProcValue, -1 when it fails.
func procValue(pid int, file, key string) int64 {
	n, _ := testkit.ProcValue(pid, file, key)
	return n
}

// TestHostileZeroFrameCommands is finding 5 of issue 11: verify of a
// frame claiming 32 PiB of zeros finishes (special chunks are recognised,
// not expanded), and unpack of it to /dev/null streams with a flat peak
// RSS (stopped after 4 GiB).
func TestHostileZeroFrameCommands(t *testing.T) {
	dir := t.TempDir()
	zero, err := hostile.ZeroFrame()
	if err != nil {
		t.Fatal(err)
	}
	zpath := filepath.Join(dir, "zero.b2frame")
	if err := os.WriteFile(zpath, zero, 0o644); err != nil {
		t.Fatal(err)
	}
	r := bloscfs(t, "verify", zpath)
	if r.code != 0 || !strings.Contains(string(r.stdout), "OK") {
		t.Fatalf("verify: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	cmd := exec.Command(binary, "unpack", zpath, "/dev/null")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	// The timeout is only against a hang.
	if !testkit.Eventually(t, 120*time.Second, func() bool { return procValue(pid, "io", "wchar") >= 4<<30 }) {
		t.Fatalf("unpack wrote %d bytes in 120 s", procValue(pid, "io", "wchar"))
	}
	hwm := procValue(pid, "status", "VmHWM")
	t.Logf("unpack of 32 PiB of zeros to /dev/null: %d bytes written, peak RSS %d MiB", procValue(pid, "io", "wchar"), hwm>>20)
	if hwm < 0 || hwm > 256<<20 {
		t.Fatalf("unpack peak RSS %d bytes after 4 GiB", hwm)
	}
}

// TestHostileTinyChunksCommands is finding 6 of issue 11: verify and
// unpack of a frame of half a million one-byte chunks stay in bounded memory.
func TestHostileTinyChunksCommands(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tiny.b2frame")
	if err := hostile.TinyChunks(p, 1<<19); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"verify", p}, {"unpack", p, filepath.Join(dir, "tiny")}} {
		rss, err := peakRSS(args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		t.Logf("%s of 2^19 one-byte chunks: peak RSS %d MiB", args[0], rss>>20)
		if rss > 256<<20 {
			t.Errorf("%s: peak RSS %d bytes", args[0], rss)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "tiny"))
	if err != nil || len(b) != 1<<19 || b[12345] != byte(12345%256) {
		t.Fatalf("unpacked %d bytes: %v", len(b), err)
	}
}

// peakRSS runs the binary and returns its peak RSS: VmHWM read from /proc
// until it exits (a high-water mark, so the last reading holds). The
// rusage of a child is no use here: a child started by vfork and exec
// reports the parent's peak.
func peakRSS(args ...string) (int64, error) {
	cmd := exec.Command(binary, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var hwm int64
	for {
		if v := procValue(cmd.Process.Pid, "status", "VmHWM"); v > hwm {
			hwm = v
		}
		select {
		case err := <-done:
			if err != nil {
				return hwm, fmt.Errorf("%v: %s", err, out.String())
			}
			return hwm, nil
		case <-time.After(2 * time.Millisecond):
		}
	}
}
