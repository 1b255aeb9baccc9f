package zarr

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/npy"
	"github.com/bloscfs/bloscfs/pack"
)

// countingReader is an io.ReaderAt over bytes that counts its reads, as
// an object store counts ranged GETs.
type countingReader struct {
	b     []byte
	reads atomic.Int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.reads.Add(1)
	if off < 0 || off > int64(len(c.b)) {
		return 0, io.EOF
	}
	n := copy(p, c.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// requestReader is a countingReader that says it is a RequestReader (a
// file in an object store).
type requestReader struct{ *countingReader }

func (r requestReader) ReadExact(p []byte, off int64) error {
	_, err := r.ReadAt(p, off)
	return err
}

var (
	zipV2Once sync.Once
	zipV2Dirs map[string]string // "stored", "deflated" → dir holding v2.zip and MANIFEST.tsv
	zipV2Err  error
)

// zipV2Stores writes testdata/zarr/gen_v2.py's hierarchy with
// python3-zarr's ZipStore, members stored and deflated (once per test
// binary). Without python3-zarr the test fails (make deps installs it).
func zipV2Stores(t testing.TB) map[string]string {
	t.Helper()
	py := testkit.Python(t, "zarr", "numcodecs")
	zipV2Once.Do(func() {
		zipV2Dirs = map[string]string{}
		for _, mode := range []string{"stored", "deflated"} {
			dir, err := os.MkdirTemp("", "zarr-zip-"+mode+"-")
			if err != nil {
				zipV2Err = err
				return
			}
			zipV2Dirs[mode] = dir
			if out, err := exec.Command(py, "../testdata/zarr/gen_v2.py", dir, mode).CombinedOutput(); err != nil {
				zipV2Err = errors.New(string(out))
				return
			}
		}
	})
	if zipV2Err != nil {
		t.Fatalf("gen_v2.py into a ZipStore: %v", zipV2Err)
	}
	return zipV2Dirs
}

// zipStore zips the store directory src as testdata/zarr/zip_store.py
// does (RFC-9: root zarr.json first, ZIP64, stored) into out; args are
// its options (--folder NAME, --deflate).
func zipStore(t testing.TB, src, out string, args ...string) {
	t.Helper()
	py := testkit.Python(t, "zipfile")
	cmd := exec.Command(py, append([]string{"../testdata/zarr/zip_store.py", src, out}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("zip_store.py: %v\n%s", err, b)
	}
}

// openZip opens the tree of the file at path, through a counting
// reader.
func openZip(t testing.TB, path string, c pack.BlockCache) (*ZipTree, *countingReader) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := &countingReader{b: b}
	tr, err := OpenZipTree(r, int64(len(b)), path, c)
	if err != nil {
		t.Fatal(err)
	}
	return tr, r
}

// treePath is where the array at manifest path p (relative to the
// store's root, after strip) is in the tree.
func treePath(p, strip string) string {
	p = strings.TrimPrefix(p, strip)
	return strings.TrimSuffix(p, ".zarr") + ".npy"
}

// readTreeFile reads the whole file at p of the tree.
func readTreeFile(t testing.TB, tr *ZipTree, p string) []byte {
	t.Helper()
	c, err := tr.Open(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	b := make([]byte, c.Size())
	if n, err := c.ReadAt(b, 0); err != nil && !(err == io.EOF && n == len(b)) {
		t.Fatalf("%s: %v", p, err)
	}
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestZipTreeV2 reads every array of gen_v2.py's hierarchy (every
// compressor and filter, C and F order, every dtype in both byte orders,
// missing chunks with fill values, nested groups, consolidated
// metadata) written by python3-zarr's ZipStore, members stored and
// deflated, and compares each with np.save of zarr.open(ZipStore)[...].
func TestZipTreeV2(t *testing.T) {
	for mode, dir := range zipV2Stores(t) {
		t.Run(mode, func(t *testing.T) {
			tr, r := openZip(t, filepath.Join(dir, "v2.zip"), cache.New[pack.BlockKey](32<<20))
			if root := tr.Root(); !root.Dir || root.Name != "" {
				t.Fatalf("root %+v, want a group", root)
			}
			if p := tr.Problems(); len(p) > 0 {
				t.Fatalf("problems: %v", p)
			}
			// The whole tree is listed from the consolidated metadata:
			// one read of .zmetadata.
			r.reads.Store(0)
			var walk func(string) int
			walk = func(p string) int {
				ents, err := tr.ReadDir(p)
				if err != nil {
					t.Fatalf("ReadDir(%q): %v", p, err)
				}
				n := 0
				for _, e := range ents {
					if e.Dir {
						n += walk(JoinKey(p, e.Name))
					} else if e.Info.Format != "" {
						n++
					}
				}
				return n
			}
			fx := readManifest(t, dir)
			if n := walk(""); n != len(fx) {
				t.Errorf("the tree shows %d arrays, the manifest has %d", n, len(fx))
			}
			if n := r.reads.Load(); n != 1 {
				t.Errorf("listing the whole tree made %d reads, want 1 (.zmetadata)", n)
			}
			for _, f := range fx {
				p := treePath(f.path, "v2/")
				e, err := tr.Stat(p)
				if err != nil {
					t.Errorf("%s: %v", p, err)
					continue
				}
				if e.Size != f.size || e.Info.Format != "zarr2" || e.Attrs["format"] != "zarr2" || e.Info.StoredSize <= 0 {
					t.Errorf("%s: %+v, want %d bytes of zarr2", p, e, f.size)
				}
				if got := sum(readTreeFile(t, tr, p)); got != f.sum {
					t.Errorf("%s: sha256 %s, want %s (np.save of zarr.open(ZipStore)[...])", p, got, f.sum)
				}
			}
			e, err := tr.Stat("dims/d2.npy")
			if err != nil || string(e.XAttrs["user.zarr.attrs"]) == "" || !strings.Contains(string(e.XAttrs["user.zarr.attrs"]), `"units"`) {
				t.Errorf("dims/d2.npy: %+v %v: want user.zarr.attrs with units", e, err)
			}
			g, err := tr.Stat("deep/a/b")
			if err != nil || !g.Dir || !strings.Contains(string(g.XAttrs["user.zarr.attrs"]), "nested") {
				t.Errorf("deep/a/b: %+v %v: want a directory with its attributes", g, err)
			}
			ents, _ := tr.ReadDir("")
			var names []string
			for _, e := range ents {
				names = append(names, e.Name)
			}
			for _, want := range []string{".zgroup", ".zmetadata", "comp", "dims", "deep"} {
				if !slices.Contains(names, want) {
					t.Errorf("the root lists %v, without %s", names, want)
				}
			}
			if ents, _ := tr.ReadDir("deep/a/b"); len(ents) != 3 || ents[2].Name != "c.npy" {
				t.Errorf("deep/a/b lists %+v, want .zattrs, .zgroup, c.npy", ents)
			}
			if _, err := tr.ReadDir("comp/zlib"); !errors.Is(err, pack.ErrNotInTree) {
				t.Errorf("ReadDir of an array folder: %v, want ErrNotInTree", err)
			}
			if _, err := tr.Stat("comp/zlib/0.0"); !errors.Is(err, pack.ErrNotInTree) {
				t.Errorf("Stat of a chunk: %v, want ErrNotInTree", err)
			}
			if b := readTreeFile(t, tr, ".zgroup"); !bytes.Contains(b, []byte("zarr_format")) {
				t.Errorf(".zgroup reads %q", b)
			}
		})
	}
}

// TestZipTreeV2NoConsolidated lists a ZipStore's group without
// consolidated metadata: the arrays' own metadata are read once, in one
// read of the archive.
func TestZipTreeV2NoConsolidated(t *testing.T) {
	py := testkit.Python(t, "zarr", "numcodecs")
	dir := t.TempDir()
	zp := filepath.Join(dir, "g.zarr.zip")
	script := `
import sys, zarr, numpy as np, zipfile
s = zarr.ZipStore(sys.argv[1], mode="w", compression=zipfile.ZIP_DEFLATED)
g = zarr.group(store=s)
for i in range(20):
    a = g.create_dataset("a%02d" % i, shape=(100, 3), chunks=(40, 3), dtype=">f8" if i % 2 else "<i4", order="F" if i % 3 == 0 else "C")
    a[:50] = np.arange(150).reshape(50, 3)
    a.attrs["i"] = i
g.create_group("sub").create_dataset("x", data=np.arange(10))
s.close()
`
	if out, err := exec.Command(py, "-c", script, zp).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	tr, r := openZip(t, zp, nil)
	r.reads.Store(0)
	ents, err := tr.ReadDir("")
	if err != nil || len(ents) != 22 {
		t.Fatalf("%d entries, %v", len(ents), err)
	}
	// 20 .zarray and 20 .zattrs, read together (the chunks between them
	// are small); the subgroup's .zgroup is not read.
	if n := r.reads.Load(); n != 1 {
		t.Errorf("listing 20 arrays made %d reads, want 1", n)
	}
	if ents[0].Name != ".zgroup" || ents[1].Name != "a00.npy" || !ents[21].Dir {
		t.Errorf("entries %+v", ents)
	}
	r.reads.Store(0)
	if _, err := tr.ReadDir(""); err != nil || r.reads.Load() != 0 {
		t.Errorf("a second listing made %d reads (%v)", r.reads.Load(), err)
	}
	out, err := exec.Command(py, "-c", `
import sys, io, hashlib, zarr, numpy as np
g = zarr.open(zarr.ZipStore(sys.argv[1], mode="r"), mode="r")
for p in ["a00", "a01", "a03", "sub/x"]:
    b = io.BytesIO(); np.save(b, g[p][...]); print(p, hashlib.sha256(b.getvalue()).hexdigest())
`, zp).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		p, want, _ := strings.Cut(line, " ")
		if got := sum(readTreeFile(t, tr, p+".npy")); got != want {
			t.Errorf("%s: sha256 %s, want %s", p, got, want)
		}
	}
}

// TestZipTreeRootArray reads archives whose root is an array: one file
// named after the archive, at the top (a ZipStore) or in one top-level
// folder (zip -r of a directory, with macOS's __MACOSX beside it).
func TestZipTreeRootArray(t *testing.T) {
	py := testkit.Python(t, "zarr", "numcodecs")
	dir := t.TempDir()
	script := `
import sys, io, hashlib, os, zarr, numpy as np, zipfile
d = sys.argv[1]
s = zarr.ZipStore(d + "/temp.zarr.zip", mode="w")
a = zarr.open_array(store=s, mode="w", shape=(30, 20), chunks=(7, 6), dtype=">i8", order="F", fill_value=-1)
a[:20] = np.arange(400).reshape(20, 20)
s.close()
zarr.save_array(zarr.DirectoryStore(d + "/scan.zarr"), np.linspace(0, 1, 1000).reshape(10, 100), chunks=(3, 30))
with zipfile.ZipFile(d + "/scan.zip", "w") as z:
    for root, _, files in os.walk(d + "/scan.zarr"):
        for f in sorted(files):
            p = os.path.join(root, f)
            z.write(p, os.path.relpath(p, d))
    z.writestr("__MACOSX/._scan.zarr", b"resource fork")
for p in ["temp.zarr.zip", "scan.zip"]:
    st = zarr.ZipStore(d + "/" + p, mode="r")
    b = io.BytesIO(); np.save(b, zarr.open_array(st, mode="r", path="scan.zarr" if p == "scan.zip" else "")[...])
    print(p, hashlib.sha256(b.getvalue()).hexdigest())
`
	out, err := exec.Command(py, "-c", script, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		p, s, _ := strings.Cut(line, " ")
		want[p] = s
	}
	for file, name := range map[string]string{"temp.zarr.zip": "temp.npy", "scan.zip": "scan.npy"} {
		tr, _ := openZip(t, filepath.Join(dir, file), nil)
		root := tr.Root()
		if root.Dir || root.Name != name || root.Info.Format != "zarr2" {
			t.Errorf("%s: root %+v, want the file %s", file, root, name)
		}
		if got := sum(readTreeFile(t, tr, "")); got != want[file] {
			t.Errorf("%s: sha256 %s, want %s", file, got, want[file])
		}
		if _, err := tr.ReadDir(""); !errors.Is(err, pack.ErrNotInTree) {
			t.Errorf("%s: ReadDir of a root array: %v", file, err)
		}
	}
	for name, want := range map[string]string{
		"a.zarr.zip": "a.npy", "a.ozx": "a.npy", "dir/b.zip": "b.npy", "s3://bkt/x/c.zarr.ozx": "c.npy",
		".zarr.zip": ".zarr.npy", "d.zip.zip": "d.zip.npy",
	} {
		if got := RootArrayName(name); got != want {
			t.Errorf("RootArrayName(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestZipTreeV3 reads zarrita's v3 stores zipped as RFC-9 lays out an
// .ozx (root zarr.json first, ZIP64 extra fields in the local headers
// only, members stored) and deflated, at the top and in one folder, and
// compares each array with zarrita's read of the unzipped store (the
// manifest).
func TestZipTreeV3(t *testing.T) {
	dir := t.TempDir()
	fx := readManifest(t, "../testdata/zarr/zarrita")
	for _, v := range []struct {
		name string
		args []string
	}{{"store.ozx", nil}, {"deflated.zip", []string{"--deflate"}}, {"folder.zip", []string{"--folder", "store.zarr"}}} {
		t.Run(v.name, func(t *testing.T) {
			zp := filepath.Join(dir, v.name)
			zipStore(t, "../testdata/zarr/zarrita/v3", zp, v.args...)
			tr, r := openZip(t, zp, cache.New[pack.BlockKey](16<<20))
			if p := tr.Problems(); len(p) > 0 {
				t.Fatalf("problems: %v", p)
			}
			// Listing a directory reads the zarr.json of its arrays and
			// groups together: one read (RFC-9 puts them first).
			r.reads.Store(0)
			dirs := 0
			var walk func(string)
			walk = func(p string) {
				dirs++
				ents, err := tr.ReadDir(p)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range ents {
					if e.Dir {
						walk(JoinKey(p, e.Name))
					}
				}
			}
			walk("")
			if n := r.reads.Load(); n > int64(dirs) {
				t.Errorf("listing %d directories made %d reads, want at most one each", dirs, n)
			}
			for _, f := range fx {
				p := treePath(f.path, "v3/")
				e, err := tr.Stat(p)
				if err != nil {
					t.Errorf("%s: %v", p, err)
					continue
				}
				if e.Size != f.size || e.Info.Format != "zarr3" {
					t.Errorf("%s: %+v, want %d bytes of zarr3", p, e, f.size)
				}
				if got := sum(readTreeFile(t, tr, p)); got != f.sum {
					t.Errorf("%s: sha256 %s, want %s (zarrita's read)", p, got, f.sum)
				}
			}
		})
	}
}

// TestZipTreeSharded zips the sharded arrays of the tests' writer
// (RFC-9: stored, ZIP64), each as its own .ozx (a root array) and all
// in one group, and compares them with what was written and with
// zarrita's read of the unzipped store.
func TestZipTreeSharded(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "group")
	os.MkdirAll(store, 0o755)
	os.WriteFile(filepath.Join(store, "zarr.json"), []byte(`{"zarr_format":3,"node_type":"group","attributes":{"ome":{"version":"0.5"}}}`), 0o644)
	want := map[string][]byte{}
	for name, sp := range shardCases {
		data := writeSharded(t, store, name, sp)
		want[name] = append(npy.Header("'<i4'", sp.shape), data...)
		zp := filepath.Join(dir, name+".ozx")
		zipStore(t, filepath.Join(store, name), zp)
		tr, _ := openZip(t, zp, cache.New[pack.BlockKey](8<<20))
		if root := tr.Root(); root.Name != name+".npy" || root.Attrs["innerchunkshape"] == "" {
			t.Errorf("%s: root %+v", name, root)
		}
		got := readTreeFile(t, tr, "")
		if !bytes.Equal(got, want[name]) {
			t.Errorf("%s.ozx differs from what was written", name)
		}
		if !sp.atStart {
			if z := crossCheck(t, store, name); z != nil && !bytes.Equal(z, data) {
				t.Errorf("%s: zarrita reads the unzipped store differently", name)
			}
		}
	}
	// The group, stored and deflated: a deflated shard is inflated whole
	// (within its largest size), once for its index and inner chunks.
	for _, args := range [][]string{nil, {"--deflate"}} {
		zp := filepath.Join(dir, "group.ozx")
		zipStore(t, store, zp, args...)
		tr, _ := openZip(t, zp, cache.New[pack.BlockKey](8<<20))
		if !strings.Contains(string(tr.Root().XAttrs["user.zarr.attrs"]), "ome") {
			t.Errorf("the root group's attributes: %q", tr.Root().XAttrs["user.zarr.attrs"])
		}
		for name, w := range want {
			if got := readTreeFile(t, tr, name+".npy"); !bytes.Equal(got, w) {
				t.Errorf("group.ozx %v: %s differs from what was written", args, name)
			}
		}
	}
}

// TestZipShardReadCost counts the reads of the archive that small reads
// of a zipped sharded array make: opening costs the directory (one read:
// the suffix holds it) and the root zarr.json; a first 4 KiB read the
// shard's index (read where the shard's bytes must be if they end where
// the next record starts, as Python's zipfile lays them out, and
// confirmed by its crc32c: the local header is not read) and one inner
// chunk; a second read in that shard one read. In an archive whose shard
// is followed by bytes the directory does not tell of, the index does
// not check there: the local header is read, then the index, at the
// cost of one more read.
func TestZipShardReadCost(t *testing.T) {
	dir := t.TempDir()
	// 8 MiB of int32 in 2 shards of 4 MiB, inner chunks of 64 KiB.
	sp := shardSpec{shape: []int64{2048, 1024}, shard: []int64{1024, 1024}, inner: []int64{16, 1024}, codec: "zstd"}
	data := writeSharded(t, dir, "a", sp)
	zp := filepath.Join(dir, "a.ozx")
	zipStore(t, filepath.Join(dir, "a"), zp)
	b, err := os.ReadFile(zp)
	if err != nil {
		t.Fatal(err)
	}
	var ms []testkit.ZipMember
	filepath.WalkDir(filepath.Join(dir, "a"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(filepath.Join(dir, "a"), p)
			body, _ := os.ReadFile(p)
			ms = append(ms, testkit.ZipMember{Name: filepath.ToSlash(rel), Data: body, Gap: []byte("not told of")})
		}
		return err
	})
	gapped := testkit.BuildZip(ms, nil)
	for _, tc := range []struct {
		name          string
		zip           []byte
		remote        bool
		first, second int64
	}{
		{"local", b, false, 2, 3},
		{"object store", b, true, 2, 3},
		{"gaps", gapped, false, 4, 5},
		{"gaps, object store", gapped, true, 4, 5},
	} {
		b := tc.zip
		cr := &countingReader{b: b}
		var r io.ReaderAt = cr
		if tc.remote {
			r = requestReader{cr}
		}
		tr, err := OpenZipTree(r, int64(len(b)), zp, cache.New[pack.BlockKey](64<<20))
		if err != nil {
			t.Fatal(err)
		}
		if n := cr.reads.Load(); n != 2 {
			t.Errorf("opening made %d reads, want 2 (the directory, zarr.json)", n)
		}
		a, err := tr.Open("")
		if err != nil {
			t.Fatal(err)
		}
		cr.reads.Store(0)
		hdr := int64(len(a.(*ZipArray).Header()))
		p := make([]byte, 4096)
		for k, at := range []int64{4 * 1024 * 40, 4 * 1024 * 900} {
			if _, err := a.ReadAt(p, hdr+at); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if !bytes.Equal(p, data[at:at+4096]) {
				t.Errorf("%s: read %d: wrong bytes", tc.name, k)
			}
			if n, want := cr.reads.Load(), []int64{tc.first, tc.second}[k]; n != want {
				t.Errorf("%s: after 4 KiB read %d: %d reads of the archive, want %d", tc.name, k, n, want)
			}
		}
	}
}

// TestZipTreeArchiveZip reads zarrita's v3 stores zipped by Go's
// archive/zip (data descriptors after every member, deflated and stored)
// against zarrita's reads.
func TestZipTreeArchiveZip(t *testing.T) {
	fx := readManifest(t, "../testdata/zarr/zarrita")
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		var buf bytes.Buffer
		w := zip.NewWriter(&buf)
		root := "../testdata/zarr/zarrita/v3"
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			m, err := w.CreateHeader(&zip.FileHeader{Name: filepath.ToSlash(rel), Method: method})
			if err != nil {
				t.Fatal(err)
			}
			m.Write(b)
			return nil
		})
		w.Close()
		tr, err := OpenZipTree(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "go.zip", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fx {
			p := treePath(f.path, "v3/")
			if got := sum(readTreeFile(t, tr, p)); got != f.sum {
				t.Errorf("method %d: %s: sha256 %s, want %s", method, p, got, f.sum)
			}
		}
	}
}

// TestZipTreeNames: an array folder x/ beside a file x.npy, or beside
// x.zarr/, keeps its folder's name, as containers do; a member and a
// folder of one name show the folder (the member is left out, a
// problem).
func TestZipTreeNames(t *testing.T) {
	ms, plain := testkit.ZarrZipGroup("a", "b", "b.zarr", "c", "d")
	ms = append(ms,
		testkit.ZipMember{Name: "a.npy", Data: []byte("a file")},
		testkit.ZipMember{Name: "c.zarr.npy", Data: []byte("no collision")},
		testkit.ZipMember{Name: "d", Data: []byte("beside the array d/: no collision")},
		testkit.ZipMember{Name: "e", Data: []byte("a member named as a folder")},
		testkit.ZipMember{Name: "e/f/g.txt", Data: []byte("a plain folder")},
	)
	b := testkit.BuildZip(ms, nil)
	tr, err := OpenZipTree(bytes.NewReader(b), int64(len(b)), "names.zip", nil)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := tr.ReadDir("")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		kind := "file"
		switch {
		case e.Dir:
			kind = "dir"
		case e.Info.Format != "":
			kind = "array"
		}
		got = append(got, e.Name+":"+kind)
	}
	want := []string{".zgroup:file", "a:array", "a.npy:file", "b:array", "b.zarr:array", "c.npy:array", "c.zarr.npy:file", "d:file", "d.npy:array", "e:dir"}
	if !slices.Equal(got, want) {
		t.Errorf("the root lists %v, want %v", got, want)
	}
	for _, p := range []string{"a", "b", "b.zarr", "c.npy", "d.npy"} {
		if got := readTreeFile(t, tr, p); !bytes.HasSuffix(got, plain) {
			t.Errorf("%s does not read the array", p)
		}
	}
	if got := string(readTreeFile(t, tr, "e/f/g.txt")); got != "a plain folder" {
		t.Errorf("e/f/g.txt reads %q", got)
	}
	if p := fmt.Sprint(tr.Problems()); !strings.Contains(p, `names.zip: "e": left out`) {
		t.Errorf("problems %s, want one for the member e", p)
	}
}

// TestZipDeflatedShardReads: a deflated shard is read and inflated once
// for its index and all its inner chunks (kept while within 64 MiB),
// and bounded by the shard's largest size.
func TestZipDeflatedShardReads(t *testing.T) {
	dir := t.TempDir()
	sp := shardSpec{shape: []int64{2048, 1024}, shard: []int64{1024, 1024}, inner: []int64{16, 1024}, codec: "zstd"}
	data := writeSharded(t, dir, "a", sp)
	zp := filepath.Join(dir, "a.zip")
	zipStore(t, filepath.Join(dir, "a"), zp, "--deflate")
	tr, r := openZip(t, zp, cache.New[pack.BlockKey](64<<20))
	a, err := tr.Open("")
	if err != nil {
		t.Fatal(err)
	}
	hdr := int64(len(a.(*ZipArray).Header()))
	r.reads.Store(0)
	p := make([]byte, 4096)
	for _, off := range []int64{40, 900, 10, 1000} {
		if _, err := a.ReadAt(p, hdr+4*1024*off); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p, data[4*1024*off:][:4096]) {
			t.Fatalf("row %d differs", off)
		}
	}
	if n := r.reads.Load(); n != 1 {
		t.Errorf("4 reads in a deflated shard: %d reads of the archive, want 1", n)
	}
	// 64 inner chunks of 64 KiB, zstd: each at most 64 KiB + 1/16 + 64 KiB.
	if max, want := a.(*ZipArray).maxStored(), int64(64*16+4+64*(65536+65536/16+64<<10)); max != want {
		t.Errorf("a shard's bound is %d bytes, want %d: its index and 64 inner chunks at their largest", max, want)
	}
}
