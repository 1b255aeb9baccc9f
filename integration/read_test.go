package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"golang.org/x/sys/unix"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestSHA256SumFixtures runs sha256sum on every valid fixture through the
// mount and compares with the manifest; .npy views of .b2nd arrays are
// checked as NPY header + C-order data, and as a whole against `bloscfs
// unpack`.
func TestSHA256SumFixtures(t *testing.T) {
	requireTool(t, "sha256sum")
	src := copyFixtures(t)
	m := mountDaemon(t, src)
	names := viewNames(t, src)

	var paths []string
	byPath := map[string]fixtures.Fixture{}
	for _, fx := range loadFixtures(t) {
		if !fx.ValidPlain {
			continue
		}
		e, ok := names[diskName(fx)]
		if !ok || !e.compressed {
			t.Errorf("%s: valid fixture, but pack cannot open it (%+v)", fx.Name, e)
			continue
		}
		p := m.Path(e.view)
		paths = append(paths, p)
		byPath[p] = fx
	}
	if len(paths) < 100 {
		t.Fatalf("only %d valid fixtures", len(paths))
	}
	out := mustRun(t, "sha256sum", paths...)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		sum, p, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("sha256sum printed %q", line)
		}
		got[p] = sum
	}
	for _, p := range paths {
		fx := byPath[p]
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", fx.Name, err)
			continue
		}
		if fx.Kind != "b2nd" {
			if got[p] != fx.PlainSHA || st.Size() != fx.PlainSize {
				t.Errorf("%s: sha256sum %s, stat size %d; manifest %s, %d", p, got[p], st.Size(), fx.PlainSHA, fx.PlainSize)
			}
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		_, data, err := npyData(b)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if sha(data) != fx.PlainSHA || int64(len(data)) != fx.PlainSize {
			t.Errorf("%s: NPY data of %d bytes sha %s; manifest %d %s", p, len(data), sha(data), fx.PlainSize, fx.PlainSHA)
		}
		if want := sha(unpacked(t, fx.Path)); got[p] != want || st.Size() != int64(len(b)) {
			t.Errorf("%s: sha256sum %s (stat size %d, read %d); bloscfs unpack gives %s", p, got[p], st.Size(), len(b), want)
		}
	}
}

// xattrInt reads a numeric user.bloscfs.* attribute.
func xattrInt(t testing.TB, path, name string) int64 {
	t.Helper()
	buf := make([]byte, 64)
	n, err := unix.Getxattr(path, "user.bloscfs."+name, buf)
	if err != nil {
		t.Fatalf("getxattr %s user.bloscfs.%s: %v", path, name, err)
	}
	v, err := strconv.ParseInt(string(buf[:n]), 10, 64)
	if err != nil {
		t.Fatalf("user.bloscfs.%s of %s = %q", name, path, buf[:n])
	}
	return v
}

// TestDDRanges reads ranges at odd offsets and sizes with dd (half of
// them with O_DIRECT), including ranges that cross chunk and block
// boundaries and ranges that end past EOF, and compares them with the
// same range of `bloscfs unpack`.
func TestDDRanges(t *testing.T) {
	requireTool(t, "dd")
	src := copyFixtures(t)
	m := mountDaemon(t, src)
	names := viewNames(t, src)
	fxs := loadFixtures(t)
	files := []struct {
		name  string
		extra []int64 // known chunk boundaries when chunks vary in size
	}{
		{"chunks_large_2MB.b2frame", nil},
		{"default_cli_log.blp", nil},
		{"default_api_f64.blp", nil},
		{"chunks_5000.b2frame", nil},
		{"blocksize_4096.b2frame", nil},
		{"zstd_use_dict.b2frame", nil},
		{"special_mixed_all.b2frame", nil},
		{"v3_variable_chunks.b2frame", []int64{10000, 75536}},
		{"sparse_frame.b2frame", nil},
		{"ndarray_f64_2d.blp", nil},
		{"nd_f64_2d_bitshuffle.b2nd", nil},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	checked := 0
	for _, f := range files {
		fx := fixtureByName(t, fxs, f.name)
		e := names[f.name]
		if !e.compressed {
			t.Errorf("%s is not shown decompressed", f.name)
			continue
		}
		p := m.Path(e.view)
		want := unpacked(t, fx.Path)
		size := int64(len(want))
		cs, bs := xattrInt(t, p, "chunksize"), xattrInt(t, p, "blocksize")
		type span struct{ off, n, bs int64 }
		var ranges []span
		add := func(off, n int64) {
			if off < 0 {
				off = 0
			}
			// Alternate dd block sizes: 1 byte, odd, and large.
			dbs := []int64{1, 4097, 65537, 1 << 20}[len(ranges)%4]
			if dbs == 1 && n > 8192 {
				dbs = 511
			}
			ranges = append(ranges, span{off, n, dbs})
		}
		bounds := append([]int64(nil), f.extra...)
		if cs > 0 {
			for b := cs; b < size && len(bounds) < 6; b += cs {
				bounds = append(bounds, b)
			}
		}
		for _, b := range bounds {
			add(b-3, 7)             // across a chunk boundary
			add(b-1, 1)             // last byte of a chunk
			add(b-bs-5, bs+cs/3+11) // across a block and the chunk boundary
		}
		if bs > 0 && bs < size {
			add(bs-1, 2)        // across the first block boundary
			add(3*bs+1, 2*bs+3) // over several blocks
			add(bs/2, bs)       // half blocks at both ends
		}
		add(0, 1)
		add(size-10, 100)  // ends past EOF
		add(size-1, 1)     // last byte
		add(size, 5)       // starts at EOF
		add(size+4096, 10) // starts past EOF
		for range 3 {
			off := rng.Int64N(size)
			add(off, 1+rng.Int64N(3*max(bs, 4096)))
		}
		for i, r := range ranges {
			// Every other range with O_DIRECT: the page cache would turn
			// the others into page-aligned READs; these reach the daemon
			// at the odd offsets and sizes themselves.
			iflag := "iflag=skip_bytes,count_bytes"
			if i%2 == 1 {
				iflag += ",direct"
			}
			got := mustRun(t, "dd", "if="+p, "bs="+strconv.FormatInt(r.bs, 10),
				"skip="+strconv.FormatInt(r.off, 10), "count="+strconv.FormatInt(r.n, 10),
				iflag, "status=none")
			lo, hi := min(r.off, size), min(r.off+r.n, size)
			if !bytes.Equal(got, want[lo:hi]) {
				t.Errorf("dd %s bs=%d skip=%d count=%d %s: %d bytes, want %d: %s", e.view, r.bs, r.off, r.n, iflag, len(got), hi-lo, firstDiff(got, want[lo:hi]))
			}
			checked++
		}
	}
	t.Logf("%d dd ranges over %d files", checked, len(files))
}

// TestNumpy reads float64 and int32 fixtures with numpy.fromfile and
// np.memmap slices, and loads every .npy view of a .b2nd with np.load
// (mmap_mode='r'), comparing with numpy on the unpacked bytes and with the
// manifest's dtype, shape and C-order sha256.
func TestNumpy(t *testing.T) {
	src := copyFixtures(t)
	m := mountDaemon(t, src)
	names := viewNames(t, src)
	ref := t.TempDir()

	type flat struct {
		Mnt   string `json:"mnt"`
		Ref   string `json:"ref"`
		Dtype string `json:"dtype"`
	}
	type arr struct {
		Mnt   string `json:"mnt"`
		Ref   string `json:"ref"`
		Dtype string `json:"dtype"`
		Shape []int  `json:"shape"`
		SHA   string `json:"sha"`
	}
	var flats []flat
	var arrs []arr
	for _, fx := range loadFixtures(t) {
		if !fx.ValidPlain {
			continue
		}
		e := names[diskName(fx)]
		refPath := filepath.Join(ref, e.view)
		switch {
		case fx.Kind == "b2nd":
			var shape []int
			for _, s := range strings.Split(fx.Shape, "x") {
				n, err := strconv.Atoi(s)
				if err != nil {
					t.Fatalf("%s: shape %q", fx.Name, fx.Shape)
				}
				shape = append(shape, n)
			}
			if err := os.WriteFile(refPath, unpacked(t, fx.Path), 0o644); err != nil {
				t.Fatal(err)
			}
			arrs = append(arrs, arr{m.Path(e.view), refPath, fx.Dtype, shape, fx.COrderSHA})
		case fx.Params["data"] == "f64smooth" && fx.PlainSize%8 == 0 && fx.PlainSize >= 4096,
			fx.Params["data"] == "i32count" && fx.PlainSize%4 == 0 && fx.PlainSize >= 4096:
			dt := "<f8"
			if fx.Params["data"] == "i32count" {
				dt = "<i4"
			}
			if err := os.WriteFile(refPath, unpacked(t, fx.Path), 0o644); err != nil {
				t.Fatal(err)
			}
			flats = append(flats, flat{m.Path(e.view), refPath, dt})
		}
	}
	var nf64, ni32 int
	for _, f := range flats {
		if f.Dtype == "<f8" {
			nf64++
		} else {
			ni32++
		}
	}
	if nf64 < 3 || ni32 < 2 || len(arrs) < 4 {
		t.Fatalf("too few fixtures: %d float64, %d int32, %d b2nd", nf64, ni32, len(arrs))
	}
	out := runPython(t, numpyScript, map[string]any{"flat": flats, "npy": arrs})
	t.Logf("numpy: %s", strings.TrimSpace(out))
}

// numpyScript checks the files listed in the JSON on stdin; it prints one
// line per problem and exits 1 when there is any.
const numpyScript = `
import hashlib, json, sys
import numpy as np

spec = json.load(sys.stdin)
bad = []
checks = 0

def same(what, got, want):
    global checks
    checks += 1
    if got.dtype != want.dtype or got.shape != want.shape or got.tobytes() != want.tobytes():
        bad.append("%s: got %s %s %r..., want %s %s %r..." % (what, got.dtype, got.shape, got.ravel()[:4], want.dtype, want.shape, want.ravel()[:4]))

rng = np.random.default_rng(7)
for f in spec["flat"]:
    dt = np.dtype(f["dtype"])
    ref = np.fromfile(f["ref"], dtype=dt)
    n = ref.size
    # fromfile with element-aligned and unaligned byte offsets
    for off, count in [(0, 1), (0, n), (dt.itemsize * (n - 3), 3), (dt.itemsize * (n // 2) + 3, 17)] + \
            [(int(rng.integers(0, n)) * dt.itemsize, int(rng.integers(1, 5000))) for _ in range(3)]:
        count = min(count, (n * dt.itemsize - off) // dt.itemsize)
        got = np.fromfile(f["mnt"], dtype=dt, count=count, offset=off)
        want = np.frombuffer(open(f["ref"], "rb").read()[off:off + count * dt.itemsize], dtype=dt)
        same("%s fromfile(count=%d, offset=%d)" % (f["mnt"], count, off), got, want)
    mm = np.memmap(f["mnt"], dtype=dt, mode="r")
    rm = np.memmap(f["ref"], dtype=dt, mode="r")
    if mm.shape != rm.shape:
        bad.append("%s: memmap shape %s, want %s" % (f["mnt"], mm.shape, rm.shape))
        continue
    for a, b, s in [(0, 10, 1), (n - 10, n, 1), (n // 3, n // 3 + 1000, 7), (1, n, 997)] + \
            [tuple(sorted(int(x) for x in rng.integers(0, n, 2))) + (1,) for _ in range(3)]:
        same("%s memmap[%d:%d:%d]" % (f["mnt"], a, b, s), np.array(mm[a:b:s]), np.array(rm[a:b:s]))
    same("%s memmap[-1]" % f["mnt"], np.array(mm[-1:]), np.array(rm[-1:]))
    del mm, rm

for a in spec["npy"]:
    arr = np.load(a["mnt"], mmap_mode="r")
    ref = np.load(a["ref"])
    checks += 1
    if not isinstance(arr, np.memmap):
        bad.append("%s: np.load(mmap_mode='r') gave %s, not a memmap" % (a["mnt"], type(arr)))
    if arr.dtype != np.dtype(a["dtype"]) or list(arr.shape) != a["shape"]:
        bad.append("%s: dtype %s shape %s, manifest %s %s" % (a["mnt"], arr.dtype, arr.shape, a["dtype"], a["shape"]))
        continue
    h = hashlib.sha256(arr.tobytes()).hexdigest()
    if h != a["sha"]:
        bad.append("%s: sha256 of arr.tobytes() %s, manifest %s" % (a["mnt"], h, a["sha"]))
    same(a["mnt"] + " np.load", np.array(arr), ref)
    idx = tuple(s // 2 for s in arr.shape)
    same(a["mnt"] + " element %s" % (idx,), np.array(arr[idx]), np.array(ref[idx]))
    same(a["mnt"] + " last row", np.array(arr[-1]), ref[-1])
    del arr

for b in bad:
    print(b)
print("%d checks on %d flat files and %d arrays" % (checks, len(spec["flat"]), len(spec["npy"])))
sys.exit(1 if bad else 0)
`

// TestRsync copies the whole mount with rsync -a and compares every copy
// (cmp) with `bloscfs unpack` of its source, or with the source itself for
// files that pass through. Fixtures whose data are corrupt are left out
// of the source: rsync would rightly fail on them.
func TestRsync(t *testing.T) {
	requireTool(t, "rsync")
	requireTool(t, "cmp")
	src := copyFixtures(t)
	for _, fx := range loadFixtures(t) {
		if fx.IsInvalid && isContainer(fx.Path) {
			if err := os.RemoveAll(filepath.Join(src, diskName(fx))); err != nil {
				t.Fatal(err)
			}
		}
	}
	names := viewNames(t, src)
	m := mountDaemon(t, src)
	dest := filepath.Join(t.TempDir(), "dest")
	exp := t.TempDir()
	mustRun(t, "rsync", "-a", m.Dir+"/", dest+"/")

	var want []string
	for disk, e := range names {
		want = append(want, e.view)
		srcPath := filepath.Join(src, disk)
		var b []byte
		var err error
		if e.compressed {
			b = unpacked(t, filepath.Join(fixtures.Dir(), disk)) // the same bytes as the copy
		} else if b, err = os.ReadFile(srcPath); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(exp, e.view), b, 0o644); err != nil {
			t.Fatal(err)
		}
		r := testkit.Run(cmdTimeout, "cmp", filepath.Join(exp, e.view), filepath.Join(dest, e.view))
		if r.Err != nil {
			t.Errorf("cmp %s (from %s): %s %v", e.view, disk, r.Stdout, r)
			continue
		}
		// rsync -a keeps the times and permissions the view shows, which
		// are the source's.
		sst, err1 := os.Stat(srcPath)
		dst, err2 := os.Stat(filepath.Join(dest, e.view))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !dst.Mode().IsRegular() || sst.ModTime().Unix() != dst.ModTime().Unix() {
			t.Errorf("%s: copy mode %v mtime %v; source %v %v", e.view, dst.Mode(), dst.ModTime(), sst.Mode(), sst.ModTime())
		}
	}
	ents, err := os.ReadDir(dest)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rsync copied %d names, the view has %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	t.Logf("rsync: %d files compared", len(want))
}

// runPython runs a script with numpy's interpreter and JSON on stdin; a
// non-zero exit fails the test with what the script printed.
func runPython(t *testing.T, script string, input any) string {
	t.Helper()
	py := pythonNumpy(t)
	return runWithJSON(t, py, script, input)
}
