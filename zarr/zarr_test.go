package zarr

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/pack"
)

// fixture is one array of a manifest: its path under the fixture root and
// the sha256 and size of what np.save writes for zarr.open(path)[...].
type fixture struct {
	path, sum string
	size      int64
}

func readManifest(t testing.TB, root string) []fixture {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "MANIFEST.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []fixture
	sc := bufio.NewScanner(f)
	for first := true; sc.Scan(); first = false {
		if first {
			continue
		}
		parts := strings.Split(sc.Text(), "\t")
		if len(parts) < 3 {
			t.Fatalf("manifest line %q", sc.Text())
		}
		n, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fixture{parts[0], parts[1], n})
	}
	if len(out) == 0 {
		t.Fatal("empty manifest")
	}
	return out
}

var (
	v2Once sync.Once
	v2Dir  string
	v2Err  error
)

// V2Stores writes the v2 fixtures with python3-zarr (once per test
// binary) and returns their root. Without python3-zarr the tests skip,
// except in CI, where they fail.
func v2Stores(t testing.TB) string {
	t.Helper()
	v2Once.Do(func() {
		py := "/usr/bin/python3"
		if _, err := os.Stat(py); err != nil {
			py = "python3"
		}
		if err := exec.Command(py, "-c", "import zarr, numcodecs").Run(); err != nil {
			v2Err = err
			return
		}
		dir, err := os.MkdirTemp("", "zarr-v2-")
		if err != nil {
			v2Err = err
			return
		}
		out, err := exec.Command(py, "../testdata/zarr/gen_v2.py", dir).CombinedOutput()
		if err != nil {
			v2Err = err
			os.RemoveAll(dir)
			t.Logf("%s", out)
			return
		}
		v2Dir = dir
	})
	if v2Err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3-zarr fixtures: %v", v2Err)
		}
		t.Skipf("python3-zarr not available: %v", v2Err)
	}
	return v2Dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if v2Dir != "" {
		os.RemoveAll(v2Dir)
	}
	os.Exit(code)
}

// checkArray reads the whole view of an array, compares it with the
// manifest, and checks reads at random offsets against it.
func checkArray(t *testing.T, a *Array, fx fixture, full bool) {
	t.Helper()
	if a.Size() != fx.size {
		t.Fatalf("size %d, want %d", a.Size(), fx.size)
	}
	all := make([]byte, a.Size())
	if _, err := a.ReadAt(all, 0); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(all)
	if hex.EncodeToString(sum[:]) != fx.sum {
		t.Fatalf("sha256 differs from np.save(zarr.open()[...]); header %q", a.Header())
	}
	rng := rand.New(rand.NewPCG(1, uint64(len(all))))
	tries := 50
	if testkit.RaceEnabled {
		tries = 5 // the race detector makes each read slow; the serial checks run without it
	}
	for range tries {
		off := rng.Int64N(a.Size() + 1)
		n := rng.Int64N(min(a.Size()-off, 5000) + 1)
		b := make([]byte, n)
		if _, err := a.ReadAt(b, off); err != nil && !(err == io.EOF && off+n == a.Size()) {
			t.Fatalf("ReadAt(%d, %d): %v", n, off, err)
		}
		if !bytes.Equal(b, all[off:off+n]) {
			t.Fatalf("ReadAt(%d, %d) differs from the whole read", n, off)
		}
	}
	checkOnce(t, a, all, rng)
	if !full || len(all) > 64<<10 {
		return
	}
	if err := iotest.TestReader(io.NewSectionReader(a, 0, a.Size()), all); err != nil {
		t.Fatal(err)
	}
}

// checkOnce reads the view of a as a mount's sequential reader does
// (ReadAtOnce), in uneven steps, two reads at a time and the later one
// first, as the kernel's read-ahead READs arrive, and compares it with
// all.
func checkOnce(t *testing.T, a *Array, all []byte, rng *rand.Rand) {
	t.Helper()
	got := make([]byte, len(all))
	step := 1 + rng.Int64N(max(int64(len(all))/9, 1))
	read := func(off int64) error {
		if off >= int64(len(all)) {
			return nil
		}
		b := got[off:min(off+step, int64(len(all)))]
		if _, err := a.ReadAtOnce(b, off); err != nil && err != io.EOF {
			return fmt.Errorf("ReadAtOnce(%d, %d): %w", len(b), off, err)
		}
		return nil
	}
	for off := int64(0); off < int64(len(all)); off += 2 * step {
		var wg sync.WaitGroup
		var err2 error
		wg.Go(func() { err2 = read(off + step) })
		err := read(off)
		wg.Wait()
		if err = errors.Join(err, err2); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, all) {
		i := 0
		for got[i] == all[i] {
			i++
		}
		t.Fatalf("ReadAtOnce in steps of %d differs from the whole read from byte %d", step, i)
	}
}

// TestV2Fixtures reads every array python3-zarr wrote, through the block
// cache and without one.
func TestV2Fixtures(t *testing.T) {
	root := v2Stores(t)
	s, err := OpenDirStore(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := cache.New[pack.BlockKey](64 << 20)
	for _, fx := range readManifest(t, root) {
		t.Run(fx.path, func(t *testing.T) {
			caches := []pack.BlockCache{nil, c}
			if testkit.RaceEnabled {
				caches = caches[1:]
			}
			for _, bc := range caches {
				a, err := Open(s, fx.path, bc)
				if err != nil {
					t.Fatal(err)
				}
				checkArray(t, a, fx, bc != nil)
			}
		})
	}
}

// TestV3Fixtures reads every array zarrita (npm) wrote; the manifest
// holds np.save's bytes of what zarrita reads back
// (testdata/zarr/gen_v3.mjs, npy_manifest.py).
func TestV3Fixtures(t *testing.T) {
	root := "../testdata/zarr/zarrita"
	s, err := OpenDirStore(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := cache.New[pack.BlockKey](64 << 20)
	for _, fx := range readManifest(t, root) {
		t.Run(fx.path, func(t *testing.T) {
			caches := []pack.BlockCache{nil, c}
			if testkit.RaceEnabled {
				caches = caches[1:]
			}
			for _, bc := range caches {
				a, err := Open(s, fx.path, bc)
				if err != nil {
					t.Fatal(err)
				}
				checkArray(t, a, fx, bc != nil)
			}
		})
	}
}

// TestBloscReadsOnlyTouchedBlocks reads a few bytes of a Blosc chunk of
// many blocks twice: the bytes alone are decoded, then one block, never
// the chunk.
func TestBloscReadsOnlyTouchedBlocks(t *testing.T) {
	root := v2Stores(t)
	s, err := OpenDirStore(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := cache.New[pack.BlockKey](64 << 20)
	a, err := Open(s, "v2/blosc/big_blocks", c)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 100)
	if _, err := a.ReadAt(b, int64(len(a.Header()))+70000); err != nil {
		t.Fatal(err)
	}
	// The first read of the block decodes its 100 bytes alone; the
	// second decodes the block into the cache.
	if st := c.Stats(); st.Loads != 0 || st.Bytes > 4096 {
		t.Fatalf("a 100-byte read loaded %d blocks, %d bytes; want none", st.Loads, st.Bytes)
	}
	if _, err := a.ReadAt(b, int64(len(a.Header()))+70200); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Loads != 1 || st.Bytes > 65536+4096 {
		t.Fatalf("a second 100-byte read loaded %d blocks, %d bytes; want one block of 64 KiB", st.Loads, st.Bytes)
	}
	if c.Contains(pack.BlockKey{Container: a.id, Chunk: 0, Block: -1}) {
		t.Fatal("the whole chunk was decoded")
	}
}
