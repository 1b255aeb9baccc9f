package mmapfile

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// nowaitChildEnv makes the test binary the child of
// TestReadCachedPieces: it reads the file the variable names whole
// with ReadCached, and exits.
const nowaitChildEnv = "BLOSCFS_TEST_NOWAIT_FILE"

func TestMain(m *testing.M) {
	if p := os.Getenv(nowaitChildEnv); p != "" {
		f, err := os.Open(p)
		if err != nil {
			os.Exit(2)
		}
		b := make([]byte, 8<<20)
		for range 10 {
			// Whole once the file is in the page cache (others may
			// push it out meanwhile: then read it in again).
			if ReadCached(int(f.Fd()), b, 0) == len(b) {
				os.Exit(0)
			}
			os.ReadFile(p)
		}
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// TestReadCachedPieces: ReadCached's raw preadv2 calls, which the Go
// scheduler cannot interrupt (a stop-the-world waits for each to end),
// copy at most 1 MiB each: an 8 MiB read of a cached file is at least 8
// calls, as strace(1) sees them (issue 33, point 9).
func TestReadCachedPieces(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("needs strace")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	data := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(p); err != nil { // in the page cache
		t.Fatal(err)
	}
	out := filepath.Join(dir, "trace")
	cmd := exec.Command(strace, "-f", "-qq", "-e", "trace=preadv2", "-s", "0", "-o", out, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), nowaitChildEnv+"="+p)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, b)
	}
	trace, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	calls, most := 0, 0
	for _, m := range regexp.MustCompile(`preadv2\(.*\) = (\d+)`).FindAllSubmatch(trace, -1) {
		n, _ := strconv.Atoi(string(m[1]))
		calls++
		most = max(most, n)
	}
	t.Logf("%d preadv2 calls, the largest of %d bytes", calls, most)
	if calls == 0 {
		t.Fatalf("no preadv2 in the trace:\n%s", trace)
	}
	if most > 1<<20 {
		t.Errorf("a raw preadv2 copied %d bytes; at most 1 MiB per call", most)
	}
}
