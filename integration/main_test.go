package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
)

var (
	// setup is what TestMain decided: setup.Require(t) skips or fails a
	// test that cannot run. bin is the bloscfs binary under test, in
	// binDir with the other binaries the tests build.
	setup       *mounttest.Setup
	bin, binDir string

	raceOnce sync.Once
	raceBin  string
	raceErr  error
)

// cmdTimeout bounds every program the tests run, so that a hung mount
// fails the test instead of hanging it.
const cmdTimeout = 2 * time.Minute

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	setup = mounttest.Prepare("integration tests")
	defer setup.Close()
	bin, binDir = setup.Bin, setup.Dir
	return mounttest.RunTests(m)
}

// raceBinary returns a bloscfs binary built with -race (built once).
func raceBinary(t *testing.T) string {
	t.Helper()
	raceOnce.Do(func() {
		raceBin = filepath.Join(binDir, "bloscfs-race")
		raceErr = testkit.BuildBloscfs(raceBin, "-race")
	})
	if raceErr != nil {
		t.Fatalf("building the -race daemon: %v", raceErr)
	}
	return raceBin
}

// requireTool fails when a program the test runs is missing: `make test`
// installs them, so a missing one is a broken set-up, not a reason to skip.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	setup.Require(t)
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: run `make deps` (apt-get install -y fuse3 python3-numpy python3-blosc fio rsync)", name)
	}
	return p
}

// mustRun runs a program and fails the test unless it exits 0.
func mustRun(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	r := testkit.Run(cmdTimeout, name, args...)
	if r.Err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), r)
	}
	return r.Stdout
}

// pythonNumpy returns Debian's python3 that imports numpy.
func pythonNumpy(t *testing.T) string {
	t.Helper()
	return testkit.Python(t, "numpy")
}

// runWithJSON runs `py -c script` with input as JSON on stdin and returns
// what it printed; a non-zero exit fails the test.
func runWithJSON(t *testing.T, py, script string, input any) string {
	t.Helper()
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	return string(out)
}

// --- fixtures and reference data ---

// loadFixtures reads the manifest.
func loadFixtures(t testing.TB) []fixtures.Fixture {
	t.Helper()
	fxs, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	return fxs
}

// diskName is a fixture's name in its directory (no trailing slash).
func diskName(fx fixtures.Fixture) string { return strings.TrimSuffix(fx.Name, "/") }

// fixtureByName finds one fixture of the manifest.
func fixtureByName(t testing.TB, fxs []fixtures.Fixture, name string) fixtures.Fixture {
	t.Helper()
	for _, fx := range fxs {
		if diskName(fx) == name {
			return fx
		}
	}
	t.Fatalf("fixture %s is not in the manifest", name)
	return fixtures.Fixture{}
}

var (
	refMu    sync.Mutex
	refCache = map[string][]byte{}
)

// unpacked returns `bloscfs unpack PATH -` of a source file, cached by
// path (the pristine fixtures are read, never written).
func unpacked(t testing.TB, path string) []byte {
	t.Helper()
	refMu.Lock()
	b, ok := refCache[path]
	refMu.Unlock()
	if ok {
		return b
	}
	b = mustRun(t, bin, "unpack", path, "-")
	if strings.HasPrefix(path, fixtures.Dir()) {
		refMu.Lock()
		refCache[path] = b
		refMu.Unlock()
	}
	return b
}

// copyTree copies a directory tree of regular files and directories,
// keeping permissions and modification times.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		} else {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, b, info.Mode().Perm()); err != nil {
				return err
			}
		}
		if err := os.Chmod(target, info.Mode().Perm()); err != nil {
			return err
		}
		return os.Chtimes(target, info.ModTime(), info.ModTime())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// copyFixtures copies testdata/fixtures into a fresh source directory.
func copyFixtures(t *testing.T) string {
	t.Helper()
	setup.Require(t)
	src := filepath.Join(t.TempDir(), "src")
	copyTree(t, fixtures.Dir(), src)
	return src
}

// containerSuffixes are the disk suffixes of containers, with the suffix
// of their view name (DESIGN.md, "The view").
var containerSuffixes = []struct{ disk, view string }{
	{".b2frame", ""}, {".b2f", ""}, {".b2", ""}, {".blp", ""}, {".blosc", ""}, {".b2nd", ".npy"},
}

// viewEntry is where a disk entry of the source appears in the mount.
type viewEntry struct {
	view       string
	compressed bool // shown decompressed
}

// isContainer reports whether pack can open path (independently of the
// mount).
func isContainer(path string) bool {
	v, err := all.OpenView(path, pack.NoCache{})
	if err != nil {
		return false
	}
	v.Close()
	return true
}

// viewNames applies the naming rules of the view to the entries of dir:
// a readable container is shown under its stem (x.b2nd as x.npy) unless
// the stem collides with another entry or another container's stem, then
// every container involved keeps its full name; everything else keeps its
// name.
func viewNames(t testing.TB, dir string) map[string]viewEntry {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for _, e := range ents {
		exists[e.Name()] = true
	}
	out := map[string]viewEntry{}
	byStem := map[string][]string{}
	for _, e := range ents {
		name := e.Name()
		stem := ""
		for _, s := range containerSuffixes {
			if strings.HasSuffix(name, s.disk) && len(name) > len(s.disk) {
				stem = strings.TrimSuffix(name, s.disk) + s.view
				break
			}
		}
		if stem != "" && e.Type()&os.ModeSymlink == 0 && isContainer(filepath.Join(dir, name)) {
			byStem[stem] = append(byStem[stem], name)
			continue
		}
		out[name] = viewEntry{view: name}
	}
	for stem, names := range byStem {
		if len(names) == 1 && !exists[stem] {
			out[names[0]] = viewEntry{view: stem, compressed: true}
			continue
		}
		for _, n := range names {
			out[n] = viewEntry{view: n, compressed: true}
		}
	}
	return out
}

// --- mounts ---

// mount is one bloscfs mount made by a test.
type mount = mounttest.Mount

// mountDaemon mounts src with the daemonizing `bloscfs mount` at a new
// mountpoint. flags go before SOURCE MOUNTPOINT.
func mountDaemon(t *testing.T, src string, flags ...string) *mount {
	t.Helper()
	setup.Require(t)
	return mounttest.Daemon(t, bin, src, mounttest.NewMountpoint(t), flags...)
}

// mountForeground runs `binary mount -f` at a new mountpoint in a child
// process and waits until the mount is ready.
func mountForeground(t *testing.T, binary, src string, flags ...string) *mount {
	t.Helper()
	setup.Require(t)
	return mounttest.Foreground(t, binary, src, mounttest.NewMountpoint(t), flags...)
}

// --- content helpers ---

// npyData splits an .npy file into its header length and data.
func npyData(b []byte) (int, []byte, error) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return 0, nil, errors.New("no NPY magic")
	}
	var hl, start int
	switch b[6] {
	case 1:
		hl, start = int(b[8])|int(b[9])<<8, 10
	case 2, 3:
		if len(b) < 12 {
			return 0, nil, errors.New("short NPY header")
		}
		hl, start = int(b[8])|int(b[9])<<8|int(b[10])<<16|int(b[11])<<24, 12
	default:
		return 0, nil, fmt.Errorf("NPY version %d", b[6])
	}
	if start+hl > len(b) {
		return 0, nil, fmt.Errorf("NPY header length %d past the end", hl)
	}
	return start + hl, b[start+hl:], nil
}

// firstDiff describes where two byte slices differ.
func firstDiff(got, want []byte) string {
	n := min(len(got), len(want))
	for i := 0; i < n; i++ {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at byte %d (got %#02x, want %#02x; lengths %d, %d)", i, got[i], want[i], len(got), len(want))
		}
	}
	return fmt.Sprintf("lengths differ: got %d, want %d", len(got), len(want))
}
