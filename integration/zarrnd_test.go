package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bfs "github.com/bloscfs/bloscfs/fs"
	"github.com/bloscfs/bloscfs/internal/testkit"
)

// sliceGen writes OUT/walk.zarr, a float64 random walk of 1024×8192 in
// (128, 1024) chunks (Blosc LZ4 shuffle, as numcodecs writes it: each
// 1 MiB chunk one block).
const sliceGen = `
import sys, numpy as np, zarr, numcodecs
a = np.cumsum(np.random.default_rng(3).standard_normal((1024, 8192)), axis=1)
z = zarr.open(sys.argv[1] + "/walk.zarr", mode="w", shape=a.shape, chunks=(128, 1024), dtype="<f8",
              compressor=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE))
z[:] = a
`

// sliceRead maps the view, copies rows [500, 600) (with "header" only
// opens it) and checks them against python3-zarr's.
const sliceRead = `
import sys, numpy as np, zarr
m = np.load(sys.argv[1], mmap_mode="r")
if sys.argv[3] == "slice":
    s = np.array(m[500:600, :])
    if not np.array_equal(s, zarr.open(sys.argv[2], mode="r")[500:600, :]):
        sys.exit("rows 500:600 differ from zarr's")
`

// TestZarrSliceDecodes: a slice of a 2-D array read through a mapping of
// its view (np.load(mmap_mode="r")[500:600, :]) opens and decodes only
// the 16 chunks that hold rows 500-599 (chunk rows 3 and 4), each once
// (issue 36, point 4). np.load's own first read (the header, which
// Python reads 1 MiB of, and the kernel reads ahead) takes the first
// chunk row: the test maps the view once before, in a process of its
// own, and counts what the slice adds. The chunk files the daemon has
// opened are those it holds open (the store keeps up to 64 per array,
// while the array is open: the test holds it open).
func TestZarrSliceDecodes(t *testing.T) {
	py := testkit.Python(t, "zarr", "numcodecs", "numpy")
	src := t.TempDir()
	mustRun(t, py, "-c", sliceGen, src)
	m := mountDaemon(t, src)
	stats := func() bfs.Stats {
		t.Helper()
		r := testkit.Run(cmdTimeout, bin, "stats", "--json", m.Dir)
		var s bfs.Stats
		if err := json.Unmarshal(r.Stdout, &s); r.Err != nil || err != nil {
			t.Fatalf("stats --json: %v (%v)", r, err)
		}
		return s
	}
	store := filepath.Join(src, "walk.zarr")
	open := func() []string {
		t.Helper()
		ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(m.PID), "fd"))
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, e := range ents {
			p, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(m.PID), "fd", e.Name()))
			if err == nil && strings.HasPrefix(p, store+"/") && !strings.HasPrefix(filepath.Base(p), ".") {
				keys = append(keys, filepath.Base(p))
			}
		}
		slices.Sort(keys)
		return keys
	}
	// Held open, the view (and the chunk files its store keeps open) of
	// the processes' opens lives until the test has looked.
	hold, err := os.Open(m.Path("walk.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	mustRun(t, py, "-c", sliceRead, m.Path("walk.npy"), store, "header")
	// The kernel's read-ahead READs may still be served when the
	// process has exited.
	var before bfs.Stats
	testkit.Eventually(t, 10*time.Second, func() bool {
		s := stats()
		settled := s.Cache.Loads == before.Cache.Loads && s.Cache.Loads > 0
		before = s
		return settled
	})
	header := open()
	for _, k := range header {
		if !strings.HasPrefix(k, "0.") {
			t.Errorf("np.load's header read opened chunk %s, outside the first chunk row", k)
		}
	}
	mustRun(t, py, "-c", sliceRead, m.Path("walk.npy"), store, "slice")
	after := stats()
	var added []string
	for _, k := range open() {
		if !slices.Contains(header, k) {
			added = append(added, k)
		}
	}
	var want []string
	for _, r := range []string{"3", "4"} {
		for c := range 8 {
			want = append(want, r+"."+strconv.Itoa(c))
		}
	}
	slices.Sort(want)
	if !slices.Equal(added, want) {
		t.Errorf("the slice opened chunks %v; want %v (the chunks of rows 500-599)", added, want)
	}
	if loads := after.Cache.Loads - before.Cache.Loads; loads != 16 {
		t.Errorf("the slice decoded %d blocks into the cache; want 16 (one per chunk of rows 500-599, each once)", loads)
	}
	t.Logf("header read: chunks %v; slice: %d blocks decoded into the cache, %d decodes in all (some in part, straight into the READ), %d MiB",
		header, after.Cache.Loads-before.Cache.Loads, after.Codecs["blosc"].Blocks-before.Codecs["blosc"].Blocks,
		(after.Codecs["blosc"].DecodedBytes-before.Codecs["blosc"].DecodedBytes)>>20)
}
