package writes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
)

var (
	// setup is what TestMain decided: setup.Require(t) skips or fails a
	// test that cannot run. bin is the bloscfs binary it built.
	setup *mounttest.Setup
	bin   string
)

// cmdTimeout bounds every program a test runs, so that a hung mount
// fails the test instead of hanging the package.
const cmdTimeout = 3 * time.Minute

// helperEnv, when set, turns the test binary into one of the helper
// processes of the tests (see runHelper).
const helperEnv = "BLOSCFS_WRITES_HELPER"

// longRun reports whether BLOSCFS_LONG asks for the long variants.
func longRun() bool {
	v := os.Getenv("BLOSCFS_LONG")
	return v != "" && v != "0"
}

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h))
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	setup = mounttest.Prepare("write-path tests")
	defer setup.Close()
	bin = setup.Bin
	return mounttest.RunTests(m)
}

// requireTool fails when a program is missing: `make test` installs what
// the tests need, so a missing one is a broken set-up, not a reason to
// skip.
func requireTool(tb testing.TB, names ...string) {
	tb.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			tb.Fatalf("%s is not installed: run `make deps` (apt-get install -y fuse3 python3-numpy python3-blosc coreutils util-linux)", name)
		}
	}
}

// --- running programs ---

// mustRun runs a program and fails the test unless it exits 0.
func mustRun(tb testing.TB, name string, args ...string) []byte {
	tb.Helper()
	r := testkit.Run(cmdTimeout, name, args...)
	if r.Err != nil {
		tb.Fatalf("%s %s: %v", name, strings.Join(args, " "), r)
	}
	return r.Stdout
}

// python returns Debian's interpreter that imports modules (failing the
// test, not skipping, when none does).
func python(tb testing.TB, modules ...string) string {
	tb.Helper()
	if len(modules) == 0 {
		modules = []string{"os"}
	}
	return testkit.Python(tb, modules...)
}

// runPy runs a Python script with arguments and returns its stdout; a
// non-zero exit fails the test.
func runPy(tb testing.TB, py, script string, args ...string) string {
	tb.Helper()
	r := testkit.Run(cmdTimeout, py, append([]string{"-c", script}, args...)...)
	if r.Err != nil {
		tb.Fatalf("python %v: %v\nstdout: %s\nscript:\n%s", args, r, r.Stdout, script)
	}
	return string(r.Stdout)
}

// --- the source side: unpack and info ---

// unpack returns `bloscfs unpack PATH -`.
func unpack(tb testing.TB, path string) []byte {
	tb.Helper()
	return mustRun(tb, bin, "unpack", path, "-")
}

// unpackSHA streams `bloscfs unpack PATH -` into sha256.
func unpackSHA(path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "unpack", path, "-")
	var se bytes.Buffer
	cmd.Stderr = &se
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	h := sha256.New()
	_, cerr := io.Copy(h, out)
	if err := cmd.Wait(); err != nil {
		return "", fmt.Errorf("bloscfs unpack %s: %v: %s", path, err, strings.TrimSpace(se.String()))
	}
	if cerr != nil {
		return "", cerr
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// info is the part of `bloscfs info --json` that a rewrite must keep.
type info struct {
	Format    string            `json:"format"`
	Size      int64             `json:"size"`
	Chunks    int               `json:"chunks"`
	ChunkSize int64             `json:"chunk_size"`
	Codec     string            `json:"codec"`
	Clevel    int               `json:"clevel"`
	Typesize  int               `json:"typesize"`
	Filters   string            `json:"filters"`
	Checksum  string            `json:"checksum"`
	Meta      map[string]string `json:"meta"`
}

// params is what must not change when a file is rewritten.
func (i info) params() string {
	return fmt.Sprintf("format=%s codec=%s clevel=%d typesize=%d filters=%s checksum=%q chunk_size=%d meta=%v",
		i.Format, i.Codec, i.Clevel, i.Typesize, i.Filters, i.Checksum, i.ChunkSize, i.Meta)
}

// infoOf runs `bloscfs info --json PATH`.
func infoOf(tb testing.TB, path string) info {
	tb.Helper()
	out := mustRun(tb, bin, "info", "--json", path)
	var recs []info
	if err := json.Unmarshal(out, &recs); err != nil || len(recs) != 1 {
		tb.Fatalf("bloscfs info --json %s: %v\n%s", path, err, out)
	}
	return recs[0]
}

// --- files and data ---

// fixture returns the path of a fixture of testdata/fixtures.
func fixture(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(fixtures.Dir(), name)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("fixture %s: %v", name, err)
	}
	return p
}

// copyFile copies a file or, recursively, a directory.
func copyFile(tb testing.TB, src, dst string) {
	tb.Helper()
	st, err := os.Stat(src)
	if err != nil {
		tb.Fatal(err)
	}
	if st.IsDir() {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			tb.Fatal(err)
		}
		ents, err := os.ReadDir(src)
		if err != nil {
			tb.Fatal(err)
		}
		for _, e := range ents {
			copyFile(tb, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
		}
		return
	}
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// series fills b with a compressible little-endian float64 series that
// starts at element index first; seed shifts the values.
func series(b []byte, first int64, seed float64) {
	for i := 0; i+8 <= len(b); i += 8 {
		k := first + int64(i/8)
		// Quantized to 1/64: the low mantissa bits are zero, as in
		// measured data, so that shuffle + a codec compress it.
		v := math.Round((math.Sin(float64(k)*1e-3)*1000+float64(k%4096)*0.25+seed)*64) / 64
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(first + int64(i))
	}
}

// seriesBytes returns n bytes of series.
func seriesBytes(n int, seed float64) []byte {
	b := make([]byte, n)
	series(b, 0, seed)
	return b
}

// writeSeriesFile writes size bytes of series to path, in pieces.
func writeSeriesFile(tb testing.TB, path string, size int64, seed float64) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 8<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), size-off)]
		series(b, off/8, seed)
		if _, err := f.Write(b); err != nil {
			tb.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// hiddenIn lists the bloscfs temp and staging files in dir.
func hiddenIn(dir string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, ".bloscfs-") {
			out = append(out, n)
		}
	}
	return out
}

// waitNoHidden waits up to d until dir holds no bloscfs temp or staging
// file (staging files go at RELEASE, which the kernel sends after close
// returns; stale files of earlier mounts go in a background goroutine)
// and returns those left.
func waitNoHidden(tb testing.TB, dir string, d time.Duration) []string {
	tb.Helper()
	var left []string
	testkit.Eventually(tb, d, func() bool { left = hiddenIn(dir); return len(left) == 0 })
	return left
}

// firstDiff describes where two byte slices first differ.
func firstDiff(got, want []byte) string {
	n := min(len(got), len(want))
	for i := 0; i < n; i++ {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at byte %d: got %#02x, want %#02x (sizes %d, %d)", i, got[i], want[i], len(got), len(want))
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("sizes differ: got %d bytes, want %d (equal up to %d)", len(got), len(want), n)
	}
	return "equal"
}

// --- mounts ---

// mount is one bloscfs mount made by a test.
type mount = mounttest.Mount

// newDirs makes a source and a mountpoint side by side (the mountpoint
// is never inside the source) under a fresh temp dir.
func newDirs(tb testing.TB) (root, src, mnt string) {
	tb.Helper()
	root = tb.TempDir()
	src, mnt = filepath.Join(root, "src"), filepath.Join(root, "mnt")
	for _, d := range []string{src, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return root, src, mnt
}

// mountBG mounts src at dir with `bloscfs mount` (the daemonizing form).
func mountBG(tb testing.TB, src, dir string, flags ...string) *mount {
	tb.Helper()
	return mounttest.Daemon(tb, bin, src, dir, flags...)
}

// mountFG runs `bloscfs mount -f` as a child process and waits until the
// mount is ready.
func mountFG(tb testing.TB, src, dir string, flags ...string) *mount {
	tb.Helper()
	return mounttest.Foreground(tb, bin, src, dir, flags...)
}

// errnoOf extracts the errno of an error (0 if none).
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}
