package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// Zipped Zarr stores (.zip, .ozx) in a mount: written by python3-zarr's
// ZipStore and by Python's zipfile as RFC-9 lays out an .ozx, read
// through the mount with sha256sum and np.load(mmap_mode="r"), compared
// with zarr.open(ZipStore(...))[...] and zarrita's reads; and archives
// that break each rule, read beside a sound array.

// zipManifest reads a MANIFEST.tsv (path, sha256, size) into a map.
func zipManifest(t testing.TB, path string) map[string]string {
	t.Helper()
	m, err := testkit.ReadZarrManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// zipView is where the array at manifest path p (below strip) is shown
// inside the tree.
func zipView(p, strip string) string {
	return strings.TrimSuffix(strings.TrimPrefix(p, strip), ".zarr") + ".npy"
}

// zippedStores writes the zipped stores into src: survey.zarr.zip and
// deflated.zip (gen_v2.py's hierarchy through ZipStore, stored and
// deflated), scan.ozx (zarrita's v3 stores, RFC-9), temp.zarr.zip (a
// root array, ZipStore), sharded.ozx (a group holding a sharded array),
// and plain.zip (no Zarr). It returns the manifests: the v2 ones by
// archive, and zarrita's.
func zippedStores(t *testing.T, src string) (v2 map[string]map[string]string, v3 map[string]string) {
	t.Helper()
	py := testkit.Python(t, "zarr", "numcodecs", "numpy")
	root := testkit.ModuleRoot()
	v2 = map[string]map[string]string{}
	for mode, name := range map[string]string{"stored": "survey.zarr.zip", "deflated": "deflated.zip"} {
		dir := t.TempDir()
		mustRun(t, py, filepath.Join(root, "testdata/zarr/gen_v2.py"), dir, mode)
		if err := os.Rename(filepath.Join(dir, "v2.zip"), filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
		v2[name] = zipManifest(t, filepath.Join(dir, "MANIFEST.tsv"))
	}
	zipper := filepath.Join(root, "testdata/zarr/zip_store.py")
	mustRun(t, py, zipper, filepath.Join(root, "testdata/zarr/zarrita/v3"), filepath.Join(src, "scan.ozx"))
	v3 = zipManifest(t, filepath.Join(root, "testdata/zarr/zarrita/MANIFEST.tsv"))
	group := filepath.Join(t.TempDir(), "group")
	for k, b := range testkit.ShardedZarr(1<<20, 1<<17, 1<<14) {
		p := filepath.Join(group, "big", k)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(group, "zarr.json"), []byte(`{"zarr_format":3,"node_type":"group","attributes":{"ome":{"version":"0.5"}}}`), 0o644)
	mustRun(t, py, zipper, group, filepath.Join(src, "sharded.ozx"))
	mustRun(t, py, "-c", `
import sys, zipfile, zarr, numpy as np
s = zarr.ZipStore(sys.argv[1] + "/temp.zarr.zip", mode="w")
a = zarr.open_array(store=s, mode="w", shape=(300, 40), chunks=(64, 16), dtype=">f4", order="F", fill_value=float("nan"))
a[:200] = np.arange(8000, dtype=">f4").reshape(200, 40)
s.close()
with zipfile.ZipFile(sys.argv[1] + "/plain.zip", "w") as z:
    z.writestr("readme.txt", "not a Zarr store")
`, src)
	return v2, v3
}

// sha256File returns the sha256 of a file, read through the mount.
func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// npLoadVsZarr is run by python3: np.load(VIEW, mmap_mode="r") of each
// NAME=VIEW pair against zarr.open(ZipStore(ZIP))[NAME][...]: np.save's
// bytes of both (dtype, shape, order and data). It prints the pairs that
// differ.
const npLoadVsZarr = `
import io, sys, numpy as np, zarr
g = zarr.open(zarr.ZipStore(sys.argv[1], mode="r"), mode="r")
def saved(a):
    b = io.BytesIO(); np.save(b, a); return b.getvalue()
for pair in sys.argv[2:]:
    name, view = pair.split("=", 1)
    want = g[...] if name == "" else g[name][...]
    got = np.load(view, mmap_mode="r")
    if saved(got) != saved(want):
        print("differs:", name, got.dtype, got.shape, want.dtype, want.shape)
`

// TestZippedZarrMount reads every array of the zipped stores through a
// mount: each .npy has the manifest's sha256 (np.save of what zarr or
// zarrita read), and np.load(mmap_mode="r") of every v2 array equals
// zarr.open(ZipStore)[...]. The names, sizes and attributes are those of
// a Zarr tree on disk; a .zip without Zarr passes through.
func TestZippedZarrMount(t *testing.T) {
	setup.Require(t)
	py := testkit.Python(t, "zarr", "numcodecs", "numpy")
	src := filepath.Join(t.TempDir(), "src")
	os.Mkdir(src, 0o755)
	v2, v3 := zippedStores(t, src)
	m := mountDaemon(t, src)
	ents, err := os.ReadDir(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, fmt.Sprintf("%s:%v", e.Name(), e.IsDir()))
	}
	want := []string{"deflated.zip:true", "plain.zip:false", "scan.ozx:true", "sharded.ozx:true", "survey.zarr.zip:true", "temp.npy:false"}
	if !slices.Equal(names, want) {
		t.Errorf("the mount lists %v, want %v", names, want)
	}
	for zip, man := range v2 {
		var pairs []string
		for p, sum := range man {
			view := filepath.Join(m.Dir, zip, zipView(p, "v2/"))
			if got := sha256File(t, view); got != sum {
				t.Errorf("%s: sha256 %s, want %s", view, got, sum)
			}
			pairs = append(pairs, strings.TrimPrefix(p, "v2/")+"="+view)
		}
		if out := mustRun(t, py, append([]string{"-c", npLoadVsZarr, filepath.Join(src, zip)}, pairs...)...); len(out) > 0 {
			t.Errorf("%s: np.load through the mount differs from zarr.open(ZipStore):\n%s", zip, out)
		}
	}
	if out := mustRun(t, py, "-c", npLoadVsZarr, filepath.Join(src, "temp.zarr.zip"), "="+filepath.Join(m.Dir, "temp.npy")); len(out) > 0 {
		t.Errorf("temp.npy: %s", out)
	}
	for p, sum := range v3 {
		view := filepath.Join(m.Dir, "scan.ozx", zipView(p, "v3/"))
		if got := sha256File(t, view); got != sum {
			t.Errorf("%s: sha256 %s, want %s (zarrita's read)", view, got, sum)
		}
	}
	big, err := os.ReadFile(filepath.Join(m.Dir, "sharded.ozx", "big.npy"))
	if err != nil || len(big) < 8<<20 {
		t.Fatalf("sharded.ozx/big.npy: %v, %d bytes", err, len(big))
	}
	data := big[len(big)-8<<20:]
	for i := range 1 << 20 {
		if v := math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:])); v != float64(i) {
			t.Fatalf("sharded.ozx/big.npy: element %d is %v", i, v)
		}
	}
	// Attributes, as for a Zarr tree on disk.
	attr := func(p, name string) string {
		b := make([]byte, 4096)
		n, err := syscall.Getxattr(p, name, b)
		if err != nil {
			return ""
		}
		return string(b[:n])
	}
	d2 := filepath.Join(m.Dir, "survey.zarr.zip", "dims", "d2.npy")
	if a := attr(d2, "user.zarr.attrs"); !strings.Contains(a, `"units"`) {
		t.Errorf("%s: user.zarr.attrs %q", d2, a)
	}
	if f, s := attr(d2, "user.bloscfs.format"), attr(d2, "user.bloscfs.shape"); f != "zarr2" || s != "11,13" {
		t.Errorf("%s: user.bloscfs.format %q, shape %q", d2, f, s)
	}
	if a := attr(filepath.Join(m.Dir, "sharded.ozx"), "user.zarr.attrs"); !strings.Contains(a, "ome") {
		t.Errorf("sharded.ozx: user.zarr.attrs %q", a)
	}
	if a := attr(filepath.Join(m.Dir, "sharded.ozx", "big.npy"), "user.bloscfs.innerchunkshape"); a != "16384" {
		t.Errorf("big.npy: innerchunkshape %q", a)
	}
	// The group's documents as they are stored; no chunk is shown.
	zg, err := os.ReadFile(filepath.Join(m.Dir, "survey.zarr.zip", ".zmetadata"))
	if err != nil || !json.Valid(zg) {
		t.Errorf(".zmetadata: %v", err)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "survey.zarr.zip", "dims", "d2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the array folder d2 is shown: %v", err)
	}
	plain, _ := os.ReadFile(filepath.Join(src, "plain.zip"))
	if got, err := os.ReadFile(filepath.Join(m.Dir, "plain.zip")); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("plain.zip does not pass through: %v", err)
	}
	// Read-only.
	if err := os.WriteFile(filepath.Join(m.Dir, "survey.zarr.zip", "x"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("creating a file in a zipped store: %v, want EROFS", err)
	}
	// The commands take a zipped store and a path inside it.
	out := string(mustRun(t, bin, "verify", filepath.Join(src, "survey.zarr.zip")))
	if !strings.Contains(out, " verified, 0 failed") || strings.Count(out, ".npy (zarr2,") != len(v2["survey.zarr.zip"]) {
		t.Errorf("verify survey.zarr.zip:\n%s", out)
	}
	out = string(mustRun(t, bin, "info", filepath.Join(src, "scan.ozx", "blosc")))
	if !strings.Contains(out, "zarr3") {
		t.Errorf("info scan.ozx/blosc:\n%s", out)
	}
	dst := filepath.Join(t.TempDir(), "d3.npy")
	mustRun(t, bin, "unpack", "-q", filepath.Join(src, "deflated.zip"), "dims/d3.npy", dst)
	if got, want := sha256File(t, dst), v2["deflated.zip"]["v2/dims/d3"]; got != want {
		t.Errorf("unpack deflated.zip dims/d3.npy: sha256 %s, want %s", got, want)
	}
}

// hostileZip returns a zipped group (testkit.ZarrZipGroup) of a sound
// array "good" and one array per bad-ZIP rule whose chunk 0 breaks it,
// beside members with unsafe names; want names the arrays that must
// give EIO, each with the member its log line names.
func hostileZip() (zip []byte, plain []byte, want map[string]string) {
	names := []string{"good", "encrypted", "method", "duplicate", "overlap", "bomb", "liar"}
	ms, plain := testkit.ZarrZipGroup(names...)
	chunk0 := func(name string) *testkit.ZipMember { return &ms[1+3*slices.Index(names, name)+1] }
	chunk0("encrypted").Flags |= 1
	chunk0("method").Method = 93
	ms = append(ms, testkit.ZipMember{Name: "duplicate/0", Data: make([]byte, 400)})
	// overlap/1's entry points at overlap/0's bytes.
	ms[1+3*slices.Index(names, "overlap")+2].HeaderOf = 1 + 3*slices.Index(names, "overlap") + 1 + 1
	bomb := testkit.DeflateZeros(1 << 30)
	*chunk0("bomb") = testkit.ZipMember{Name: "bomb/0", Data: bomb, Method: 8, USize: 1 << 30, Plain: []byte{}}
	*chunk0("liar") = testkit.ZipMember{Name: "liar/0", Data: bomb, Method: 8, USize: 400, Plain: make([]byte, 400)}
	ms = append(ms,
		testkit.ZipMember{Name: "../../etc/passwd", Data: []byte("x")},
		testkit.ZipMember{Name: "/abs/0", Data: []byte("x")},
		testkit.ZipMember{Name: "bomb.bin", Data: bomb, Method: 8, USize: 1 << 30, Plain: []byte{}})
	want = map[string]string{
		"encrypted": "encrypted/0", "method": "method/0", "duplicate": "duplicate/0",
		"overlap": "overlap/", "bomb": "bomb/0", "liar": "liar/0",
	}
	return testkit.BuildZip(ms, nil), plain, want
}

// TestZippedZarrHostileMount mounts a zipped group that breaks every
// bad-ZIP rule (an encrypted member, an unknown method, a name given
// twice, members sharing bytes, a deflate bomb honest and lying about
// its size, names with ".." or a leading "/") beside a sound array,
// and an archive whose directory lies past its end: each bad array is
// EIO with a log line naming the archive and the member, the sound one
// reads, unsafe names are nowhere, and the daemon's memory stays
// bounded.
func TestZippedZarrHostileMount(t *testing.T) {
	setup.Require(t)
	src := filepath.Join(t.TempDir(), "src")
	os.Mkdir(src, 0o755)
	zip, plain, want := hostileZip()
	if err := os.WriteFile(filepath.Join(src, "hostile.zarr.zip"), zip, 0o644); err != nil {
		t.Fatal(err)
	}
	ms, _ := testkit.ZarrZipGroup("a")
	broken := testkit.BuildZip(ms, &testkit.ZipEnd{DirOffset: 1 << 30})
	os.WriteFile(filepath.Join(src, "broken.zip"), broken, 0o644)
	m := mountDaemon(t, src, "--cache-size", "64MiB")
	dir := filepath.Join(m.Dir, "hostile.zarr.zip")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), "..") || e.Name() == "abs" || e.Name() == "etc" {
			t.Errorf("an unsafe member is shown: %s", e.Name())
		}
	}
	if got, err := os.ReadFile(filepath.Join(dir, "good.npy")); err != nil || !bytes.HasSuffix(got, plain) {
		t.Errorf("good.npy: %v", err)
	}
	for name := range want {
		_, err := os.ReadFile(filepath.Join(dir, name+".npy"))
		if !errors.Is(err, syscall.EIO) {
			t.Errorf("%s.npy: %v, want EIO", name, err)
		}
	}
	if _, err := os.ReadFile(filepath.Join(dir, "bomb.bin")); !errors.Is(err, syscall.EIO) {
		t.Errorf("bomb.bin: %v, want EIO", err)
	}
	// The sound array still reads after all that.
	if got, err := os.ReadFile(filepath.Join(dir, "good.npy")); err != nil || !bytes.HasSuffix(got, plain) {
		t.Errorf("good.npy after the bad ones: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(m.Dir, "broken.zip")); err != nil || !bytes.Equal(got, broken) {
		t.Errorf("broken.zip is not shown as it is stored: %v", err)
	}
	log := m.LogText()
	for name, member := range want {
		found := false
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "hostile.zarr.zip") && strings.Contains(l, member) {
				found = true
			}
		}
		if !found {
			t.Errorf("no log line names hostile.zarr.zip and %s (%s.npy):\n%s", member, name, log)
		}
	}
	for _, s := range []string{`"../../etc/passwd"`, `"/abs/0"`, "bomb.bin", "broken.zip"} {
		if !strings.Contains(log, s) {
			t.Errorf("no log line names %s:\n%s", s, log)
		}
	}
	if hwm, err := testkit.ProcValue(m.PID, "status", "VmHWM"); err != nil || hwm > 256<<20 {
		t.Errorf("the daemon's peak RSS is %d KiB (%v), want under 256 MiB", hwm, err)
	}
}
