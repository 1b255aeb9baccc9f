package b2store

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// walkTree returns every entry of a tree by path, reading each directory
// with ReadDir and checking it against Stat.
func walkTree(t testing.TB, tr pack.Tree) map[string]pack.TreeEntry {
	t.Helper()
	out := map[string]pack.TreeEntry{}
	var walk func(dir string)
	walk = func(dir string) {
		ents, err := tr.ReadDir(dir)
		if err != nil {
			t.Fatalf("ReadDir(%q): %v", dir, err)
		}
		if !slices.IsSortedFunc(ents, func(a, b pack.TreeEntry) int { return strings.Compare(a.Name, b.Name) }) {
			t.Errorf("ReadDir(%q) is not sorted", dir)
		}
		for _, e := range ents {
			p := path.Join(dir, e.Name)
			st, err := tr.Stat(p)
			if err != nil || st.Name != e.Name || st.Dir != e.Dir || st.Size != e.Size {
				t.Errorf("Stat(%q) = %+v, %v; ReadDir gave %+v", p, st, err, e)
			}
			out[p] = e
			if e.Dir {
				walk(p)
			}
		}
	}
	walk("")
	return out
}

// readTreeFile reads a file of a tree whole, through Open, and closes it.
func readTreeFile(t testing.TB, tr pack.Tree, p string) []byte {
	t.Helper()
	c, err := tr.Open(p)
	if err != nil {
		t.Fatalf("Open(%q): %v", p, err)
	}
	defer c.(io.Closer).Close()
	return readAll(t, c, c.Size())
}

// treeCase is what the tree of a store fixture shows.
type treeCase struct {
	name  string // a fixture file or directory
	files map[string]leafSrc
	c2    []string                     // paths of C2Array documents
	empty []string                     // paths of SChunks without bytes
	xattr map[string]map[string]string // directory path → vlmeta name → JSON
	objs  map[string]string            // directory path → object kind
	probs []string                     // in the problems
}

func treeCases(t testing.TB) []treeCase {
	var out []treeCase
	for _, sc := range storeCases(t) {
		tc := treeCase{name: sc.name, files: map[string]leafSrc{}, xattr: map[string]map[string]string{}}
		for key, src := range sc.leaves {
			if strings.HasPrefix(src.name, "objects:") {
				tc.probs = append(tc.probs, fmt.Sprintf("key %q is left out: %v (%s)", key, ErrUnsupportedKind, strings.TrimPrefix(src.name, "objects:")))
				continue
			}
			p := key[1:]
			if k, _ := wantView(t, src); k == KindNDArray {
				p += ".npy"
			}
			tc.files[p] = src
		}
		for _, key := range sc.c2 {
			tc.c2 = append(tc.c2, key[1:]+".json")
		}
		for dir, vm := range sc.vlmeta {
			tc.xattr[strings.TrimPrefix(dir, "/")] = vm
		}
		if sc.name == "tree_v411.b2d" {
			tc.empty = []string{"table/_meta"}
			tc.objs = map[string]string{"table": "ctable"}
		}
		out = append(out, tc)
		if z := strings.TrimSuffix(sc.name, ".b2d") + ".b2z"; sc.name != "tree_v370.b2d" {
			zc := tc
			zc.name = z
			out = append(out, zc)
			if z == "dict_t64k.b2z" {
				zc.name = "dict_t64k_zip64.b2z"
				out = append(out, zc)
			}
		}
	}
	out = append(out, treeCase{
		name: "estore.b2e",
		files: map[string]leafSrc{
			"node1.npy": fixtureLeaf(t, "nd_f64_1d.b2nd"), "node2": fixtureLeaf(t, "tiny_1byte.b2frame"),
			"dir1/sub/node4.npy": fixtureLeaf(t, "nd_u8_3d.b2nd"), "dir1/node5": fixtureLeaf(t, "v3_lz4_bitshuffle_meta.b2frame"),
		},
		c2:    []string{"dir1/node3.json"},
		xattr: map[string]map[string]string{"": {}, "dir1/node5": {"v1": `{"$raw":"eHl6"}`}},
		probs: []string{`key "/dir1/objs" is left out: ` + ErrUnsupportedKind.Error() + " (objectarray)"},
	})
	return out
}

// openTreeFixture opens a store fixture as a Tree, as the mount does: a
// directory through DirSource, a file through OpenFileTree.
func openTreeFixture(t testing.TB, name string, cache pack.BlockCache) *Tree {
	t.Helper()
	p := filepath.Join(storesDir, name)
	var tr *Tree
	var err error
	if strings.HasSuffix(name, ".b2d") {
		tr, err = OpenDirTree(NewDirSource(p), name, cache)
	} else {
		var f *os.File
		f, err = os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		st, _ := f.Stat()
		tr, err = OpenFileTree(f, st.Size(), name, cache)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// TestTree: every store fixture, as a directory, a .b2z archive or a
// .b2e file, shows its keys as paths, NDArray leaves as .npy files with
// the NPY view of the same array as a .b2nd, SChunk leaves as their
// bytes, C2Array references as JSON, vlmeta as extended attributes, and
// leaves of kinds not read left out with a problem.
func TestTree(t *testing.T) {
	for _, tc := range treeCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			tr := openTreeFixture(t, tc.name, newCountingCache())
			got := walkTree(t, tr)
			var want []string
			for p := range tc.files {
				want = append(want, p)
			}
			want = append(want, tc.c2...)
			want = append(want, tc.empty...)
			var files []string
			for p, e := range got {
				if !e.Dir {
					files = append(files, p)
				}
			}
			slices.Sort(want)
			slices.Sort(files)
			if !slices.Equal(files, want) {
				t.Fatalf("files %q, want %q", files, want)
			}
			for p, src := range tc.files {
				e := got[p]
				k, view := wantView(t, src)
				if e.Size != int64(len(view)) || e.Info.Size != e.Size {
					t.Errorf("%s: size %d (info %d), want %d", p, e.Size, e.Info.Size, len(view))
				}
				if b := readTreeFile(t, tr, p); !bytes.Equal(b, view) {
					t.Errorf("%s: content differs from %s's view", p, src.name)
				}
				key := "/" + strings.TrimSuffix(p, ".npy")
				if e.Attrs["kind"] != k.String() || e.Attrs["key"] != key {
					t.Errorf("%s: attrs %v", p, e.Attrs)
				}
				if k == KindNDArray {
					fr, err := frame.Open(bytes.NewReader(src.fr), int64(len(src.fr)), src.name, nil)
					if err != nil {
						t.Fatal(err)
					}
					a := fr.Array()
					if e.Info.Format != "b2nd" || e.Attrs["shape"] != dims(a.Shape) || e.Attrs["chunkshape"] != dims(a.ChunkShape) || e.Attrs["dtype"] == "" {
						t.Errorf("%s: info %q attrs %v", p, e.Info.Format, e.Attrs)
					}
				} else if e.Info.Format != "b2frame" {
					t.Errorf("%s: format %q", p, e.Info.Format)
				}
				if e.Info.Meta != nil {
					t.Errorf("%s: the entry keeps the frame's metadata", p)
				}
			}
			for _, p := range tc.c2 {
				want := `{"urlbase":"` + c2URLBase + `","path":"` + c2Path + `"}` + "\n"
				if b := readTreeFile(t, tr, p); string(b) != want || got[p].Size != int64(len(want)) || got[p].Info.Format != "" {
					t.Errorf("%s: %q (%d bytes, format %q)", p, b, got[p].Size, got[p].Info.Format)
				}
				if got[p].Attrs["urlbase"] != c2URLBase || got[p].Attrs["kind"] != "c2array" {
					t.Errorf("%s: attrs %v", p, got[p].Attrs)
				}
			}
			for _, p := range tc.empty {
				if got[p].Size != 0 || len(readTreeFile(t, tr, p)) != 0 {
					t.Errorf("%s: %d bytes", p, got[p].Size)
				}
			}
			for dir, vm := range tc.xattr {
				e := tr.Root()
				if dir != "" {
					e = got[dir]
				}
				if len(e.XAttrs) != len(vm) {
					t.Errorf("%q: xattrs %q, want %v", dir, e.XAttrs, vm)
				}
				for n, j := range vm {
					if v := e.XAttrs[XAttrPrefix+n]; string(v) != j {
						t.Errorf("%q: %s%s = %s, want %s", dir, XAttrPrefix, n, v, j)
					}
				}
			}
			for dir, k := range tc.objs {
				if got[dir].Attrs["object"] != k {
					t.Errorf("%s: attrs %v, want object %s", dir, got[dir].Attrs, k)
				}
			}
			probs := fmt.Sprint(tr.Problems())
			if n := len(tr.Problems()); n != len(tc.probs) {
				t.Errorf("%d problems, want %d: %s", n, len(tc.probs), probs)
			}
			for _, w := range tc.probs {
				if !strings.Contains(probs, w) {
					t.Errorf("problems %s\nlack %s", probs, w)
				}
			}
			if tr.Root().Attrs["store"] != tr.Store().Flavor().String() || tr.Root().Attrs["keys"] == "" {
				t.Errorf("root attrs %v", tr.Root().Attrs)
			}
			// Paths that name nothing, or a file as a directory.
			for _, p := range []string{"nope", "/", "a//b", "../x", "x/"} {
				if _, err := tr.Stat(p); !errors.Is(err, pack.ErrNotInTree) {
					t.Errorf("Stat(%q): %v", p, err)
				}
			}
			for _, p := range files[:1] {
				if _, err := tr.ReadDir(p); !errors.Is(err, pack.ErrNotInTree) {
					t.Errorf("ReadDir of the file %q: %v", p, err)
				}
			}
		})
	}
}

// TestTreeSameAsDir: a .b2z shows what its .b2d shows, entry for entry.
func TestTreeSameAsDir(t *testing.T) {
	for _, pair := range [][2]string{{"tree_t64k.b2z", "tree_t64k.b2d"}, {"dict_t64k.b2z", "dict_t64k.b2d"},
		{"tree_v411.b2z", "tree_v411.b2d"}, {"dict_t64k_zip64.b2z", "dict_t64k.b2d"}} {
		z, d := walkTree(t, openTreeFixture(t, pair[0], nil)), walkTree(t, openTreeFixture(t, pair[1], nil))
		if len(z) != len(d) {
			t.Errorf("%s: %d entries, %s %d", pair[0], len(z), pair[1], len(d))
		}
		for p, e := range d {
			ze, ok := z[p]
			if ok && e.Attrs["member"] != "" {
				// Members are named the same; only their store differs.
				ok = ze.Attrs["member"] == e.Attrs["member"]
			}
			if !ok || ze.Size != e.Size || ze.Dir != e.Dir || fmt.Sprint(ze.XAttrs) != fmt.Sprint(e.XAttrs) || ze.Info.Codec != e.Info.Codec {
				t.Errorf("%s: %s: %+v, %s has %+v", pair[0], p, ze, pair[1], e)
			}
		}
	}
}

// TestZipSourceAgainstArchiveZip: every member read in place through
// ZipSource is the member archive/zip reads.
func TestZipSourceAgainstArchiveZip(t *testing.T) {
	for _, name := range []string{"tree_t64k.b2z", "dict_t64k.b2z", "tree_v411.b2z", "dict_t64k_zip64.b2z"} {
		b, err := os.ReadFile(filepath.Join(storesDir, name))
		if err != nil {
			t.Fatal(err)
		}
		src, err := OpenZip(bytes.NewReader(b), int64(len(b)), name)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		ms, _ := src.Members()
		if len(ms) != len(zr.File) || ms[len(ms)-1].Path != EmbedFile {
			t.Errorf("%s: members %v", name, ms)
		}
		for _, f := range zr.File {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			want, _ := io.ReadAll(rc)
			rc.Close()
			r, n, err := src.Open(f.Name)
			if err != nil || n != int64(len(want)) {
				t.Fatalf("%s: %s: %d bytes, %v", name, f.Name, n, err)
			}
			if got := readAll(t, r, n); !bytes.Equal(got, want) {
				t.Errorf("%s: %s differs from archive/zip's", name, f.Name)
			}
		}
	}
}

// writeZip writes files (name → content, in order) as a ZIP archive,
// each member deflated when its name is in deflate.
func writeZip(t testing.TB, names []string, files map[string][]byte, deflate ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, n := range names {
		m := zip.Store
		if slices.Contains(deflate, n) {
			m = zip.Deflate
		}
		f, err := w.CreateHeader(&zip.FileHeader{Name: n, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		f.Write(files[n])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// treeOfBytes opens b as a store file named name.
func treeOfBytes(b []byte, name string) (*Tree, error) {
	return OpenFileTree(bytes.NewReader(b), int64(len(b)), name, nil)
}

// TestTreeDeflated: a deflated leaf member is left out with an error
// naming the archive and the member, the others read; a deflated
// embed.b2e makes the archive no store.
func TestTreeDeflated(t *testing.T) {
	dir := t.TempDir()
	buildTreeV411(t, dir)
	files := map[string][]byte{}
	var names []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files[rel], _ = os.ReadFile(p)
			if rel != EmbedFile {
				names = append(names, rel)
			}
		}
		return err
	})
	names = append(names, EmbedFile)
	tr, err := treeOfBytes(writeZip(t, names, files, "g/b.b2nd"), "deflated.b2z")
	if err != nil {
		t.Fatal(err)
	}
	got := walkTree(t, tr)
	if _, ok := got["g/b.npy"]; ok {
		t.Error("the deflated member is shown")
	}
	if _, ok := got["a.npy"]; !ok {
		t.Errorf("a.npy is not shown: %v", got)
	}
	probs := fmt.Sprint(tr.Problems())
	if !strings.Contains(probs, `deflated.b2z: g/b.b2nd: unsupported ZIP feature: a deflated member cannot be read in place (python-blosc2 reads only stored members of a .b2z)`) {
		t.Errorf("problems %s", probs)
	}
	_, err = treeOfBytes(writeZip(t, names, files, EmbedFile), "deflated.b2z")
	if !errors.Is(err, pack.ErrFormat) || !strings.Contains(err.Error(), "embed.b2e: unsupported ZIP feature") {
		t.Errorf("deflated embed.b2e: %v", err)
	}
}

// TestTreeNotAStore: files and directories that are no store give errors
// wrapping pack.ErrFormat; errors of the system do not.
func TestTreeNotAStore(t *testing.T) {
	nd := fixtureLeaf(t, "nd_f64_1d.b2nd").fr
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"junk.b2z", []byte("PK but not a zip at all")},
		{"empty.b2z", writeZip(t, nil, nil)},
		{"noembed.b2z", writeZip(t, []string{"a.b2nd"}, map[string][]byte{"a.b2nd": nd})},
		{"frame.b2z", writeZip(t, []string{EmbedFile}, map[string][]byte{EmbedFile: nd})},
		{"frame.b2e", nd},
		{"text.b2e", []byte("hello")},
		{"nosuffix", []byte("hello")},
	} {
		if _, err := treeOfBytes(c.b, c.name); !errors.Is(err, pack.ErrFormat) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	dir := t.TempDir()
	if _, err := OpenDirTree(NewDirSource(dir), "empty.b2d", nil); !errors.Is(err, pack.ErrFormat) {
		t.Errorf("empty directory: %v", err)
	}
	// A read that fails for want of memory is no verdict on the file.
	b, _ := os.ReadFile(filepath.Join(storesDir, "estore.b2e"))
	_, err := OpenFileTree(failingReader{b, syscall.ENOMEM}, int64(len(b)), "estore.b2e", nil)
	if err == nil || errors.Is(err, pack.ErrFormat) || !pack.Transient(err) {
		t.Errorf("ENOMEM: %v", err)
	}
	// By content: a store file of another name.
	if tr, err := treeOfBytes(b, "store"); err != nil || tr.Store().Flavor() != FlavorEmbed {
		t.Errorf("a .b2e by content: %v", err)
	}
	z, _ := os.ReadFile(filepath.Join(storesDir, "tree_v411.b2z"))
	if tr, err := treeOfBytes(z, "store"); err != nil || tr.Store().Flavor() != FlavorTree {
		t.Errorf("a .b2z by content: %v", err)
	}
}

// failingReader fails every read past its first 100 bytes with err.
type failingReader struct {
	b   []byte
	err error
}

func (f failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > 100 {
		return 0, f.err
	}
	return copy(p, f.b[off:]), nil
}

// TestTreeTransientListing: a directory whose leaves fail to read (the
// system short of something, a bucket's read that failed: any error that
// says nothing of the bytes) is not kept as it was seen then: listing it
// again reads them. (An embedded leaf's frame is read through the store
// frame's chunk reader, which remembers a chunk whose read failed but
// for errors of the system: the bucket's case is shown on a .b2z's
// external leaves.)
func TestTreeTransientListing(t *testing.T) {
	for _, c := range []struct {
		name    string
		failure error
		entries int
	}{
		{"estore.b2e", syscall.EIO, 3},
		{"tree_v411.b2z", syscall.EIO, 4},
		{"tree_v411.b2z", errors.New("range [0,100): read failed: 503 SlowDown"), 4},
	} {
		b, _ := os.ReadFile(filepath.Join(storesDir, c.name))
		fr := &flakyReader{b: b, err: c.failure}
		tr, err := OpenFileTree(fr, int64(len(b)), c.name, pack.NoCache{})
		if err != nil {
			t.Fatal(err)
		}
		fr.fail(true)
		if _, err := tr.ReadDir(""); !errors.Is(err, c.failure) {
			t.Fatalf("%s: ReadDir with failing reads: %v", c.name, err)
		}
		fr.fail(false)
		ents, err := tr.ReadDir("")
		if err != nil || len(ents) != c.entries {
			t.Fatalf("%s: ReadDir again: %v %v", c.name, ents, err)
		}
		if n := len(tr.Problems()); n != 0 {
			t.Errorf("%s: problems %v", c.name, tr.Problems())
		}
		// Nor is a store whose file failed to read taken for no store.
		fr.fail(true)
		if _, err := OpenFileTree(fr, int64(len(b)), c.name, nil); !errors.Is(err, c.failure) || errors.Is(err, pack.ErrFormat) {
			t.Errorf("%s: open with failing reads: %v", c.name, err)
		}
	}
}

type flakyReader struct {
	b     []byte
	err   error
	mu    sync.Mutex
	fails bool
}

func (f *flakyReader) fail(v bool) { f.mu.Lock(); f.fails = v; f.mu.Unlock() }

func (f *flakyReader) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails {
		return 0, f.err
	}
	return bytes.NewReader(f.b).ReadAt(p, off)
}

// embedStoreOf writes an EmbedStore holding each value (key → frame),
// in key order.
func embedStoreOf(t testing.TB, vals map[string][]byte) []byte {
	t.Helper()
	w := newStoreWriter(MarkerEmbed, 1<<13)
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w.Set(k, vals[k])
	}
	return w.Frame()
}

// TestTreeNames: a leaf whose name with its suffix collides with another
// entry keeps its bare key name, still shown as its view.
func TestTreeNames(t *testing.T) {
	nd := fixtureLeaf(t, "nd_f64_1d.b2nd")
	sc := fixtureLeaf(t, "tiny_1byte.b2frame")
	w := newStoreWriter(MarkerEmbed, 1<<13)
	for _, p := range []struct {
		key string
		src leafSrc
	}{
		{"/a", nd}, {"/a.npy", sc}, // a.npy is the SChunk's: the array is a
		{"/b", nd}, {"/b.npy", nd}, // no collision: b.npy, b.npy.npy
		{"/d", nd}, {"/d.npy", nd}, {"/d.npy.npy", sc}, // a chain: d, d.npy, d.npy.npy
		{"/c.json/x", sc}, // a directory c.json
	} {
		w.Set(p.key, p.src.fr)
	}
	w.SetC2("/c", c2URLBase, c2Path) // c.json is the directory's: the reference is c
	b := w.Frame()
	tr, err := treeOfBytes(b, "names.b2e")
	if err != nil {
		t.Fatal(err)
	}
	ents, err := tr.ReadDir("")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name+map[bool]string{true: "/"}[e.Dir]+":"+e.Attrs["key"])
	}
	want := []string{"a:/a", "a.npy:/a.npy", "b.npy:/b", "b.npy.npy:/b.npy", "c:/c", "c.json/:/c.json",
		"d:/d", "d.npy:/d.npy", "d.npy.npy:/d.npy.npy"}
	if !slices.Equal(names, want) {
		t.Errorf("names %q\nwant %q", names, want)
	}
	_, ndView := wantView(t, nd)
	_, scView := wantView(t, sc)
	for p, v := range map[string][]byte{"a": ndView, "a.npy": scView, "d": ndView, "d.npy": ndView, "d.npy.npy": scView, "c.json/x": scView} {
		if got := readTreeFile(t, tr, p); !bytes.Equal(got, v) {
			t.Errorf("%s: wrong content", p)
		}
	}
	if got := readTreeFile(t, tr, "c"); !strings.Contains(string(got), c2URLBase) {
		t.Errorf("c: %q", got)
	}
}

// TestTreeOpenLeavesBounded: listing a store keeps at most MaxOpenLeaves
// leaf frames (and files) open; files opened for reading keep theirs
// until closed, however many.
func TestTreeOpenLeavesBounded(t *testing.T) {
	defer func(n int) { MaxOpenLeaves = n }(MaxOpenLeaves)
	MaxOpenLeaves = 3
	nd := fixtureLeaf(t, "nd_f64_1d.b2nd")
	_, want := wantView(t, nd)
	vals := map[string][]byte{}
	for i := range 40 {
		vals[fmt.Sprintf("/g%d/v%02d", i%2, i)] = nd.fr
	}
	dir := t.TempDir()
	d := newDictWriter(MarkerTree, 1<<13, 0)
	for k, v := range vals {
		d.Set(k, v, nd.nbytes, ".b2nd")
	}
	d.Write(dir)
	embedded, err := treeOfBytes(embedStoreOf(t, vals), "many.b2e")
	if err != nil {
		t.Fatal(err)
	}
	external, err := OpenDirTree(NewDirSource(dir), "many.b2d", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []*Tree{embedded, external} {
		defer tr.Close()
		// What a leaf holds open: its frame; an external one its file.
		open := func() (n int) {
			for _, l := range tr.Store().Leaves() {
				l.mu.Lock()
				if l.fr != nil || l.r != nil {
					n++
				}
				l.mu.Unlock()
			}
			return n
		}
		if n := len(walkTree(t, tr)); n != 42 {
			t.Fatalf("%d entries", n)
		}
		if n, m := open(), tr.openLeaves(); n > MaxOpenLeaves || m > MaxOpenLeaves {
			t.Errorf("after a listing: %d leaves open (%d kept), at most %d", n, m, MaxOpenLeaves)
		}
		var files []io.Closer
		for i := range 6 {
			p := fmt.Sprintf("g%d/v%02d.npy", i%2, i)
			c, err := tr.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, c.(io.Closer))
			walkTree(t, tr)
			if got := readAll(t, c, c.Size()); !bytes.Equal(got, want) {
				t.Fatalf("%s: wrong content", p)
			}
		}
		if n := open(); n < 6 {
			t.Errorf("%d leaves open while 6 files are", n)
		}
		for i, c := range files {
			c.Close()
			c.Close() // twice: once counts
			if i == 2 {
				if n := open(); n < 3 || n > 4 {
					t.Errorf("%d leaves open while 3 files are", n)
				}
			}
		}
		if n := open(); n > MaxOpenLeaves {
			t.Errorf("%d leaves open once every file is closed", n)
		}
		// Opened again, a file reads as before.
		if got := readTreeFile(t, tr, "g0/v00.npy"); !bytes.Equal(got, want) {
			t.Error("reopened file differs")
		}
	}
}

// TestTreeHostile: keys that cannot be paths, ranges over one another,
// a key both a leaf and a directory, bytes that hold no frame, deep
// nesting: each is left out with a problem naming the store and key, and
// the rest of the store reads.
func TestTreeHostile(t *testing.T) {
	data, na, nb := twoFrames(t)
	data = append(data, bytes.Repeat([]byte{0x9e}, 200)...)
	data = append(data, data[:na]...)
	deep := strings.Repeat("d/", MaxDepth-1) + "leaf"
	b := craftStore(t, data, rangeMap(t,
		kv{"/ok", rng(na, nb)},
		kv{"/" + deep, rng(na+nb+200, na)},
		kv{"/x/../y", rng(na, nb)},
		kv{"/a//b", rng(na, nb)},
		kv{"/n\x00", rng(na, nb)},
		kv{"/junk", rng(na+nb, 200)},
		kv{"/p", rng(0, 100)}, kv{"/q", rng(50, 100)}, // overlap
		kv{"/ok/sub", []kv{{"urlbase", c2URLBase}, {"path", c2Path}}}, // /ok is also a directory
	))
	tr, err := treeOfBytes(b, "hostile.b2e")
	if err != nil {
		t.Fatal(err)
	}
	got := walkTree(t, tr)
	var files []string
	for p, e := range got {
		if !e.Dir {
			files = append(files, p)
		}
	}
	slices.Sort(files)
	if want := []string{deep + ".npy", "ok/sub.json"}; !slices.Equal(files, want) {
		t.Errorf("files %q, want %q", files, want)
	}
	if v := readTreeFile(t, tr, deep+".npy"); !bytes.Equal(v, readAll(t, openNPY(t, "nd_f64_1d.b2nd"), int64(len(v)))) {
		t.Error("the deep leaf reads wrong")
	}
	probs := fmt.Sprint(tr.Problems())
	for _, w := range []string{`hostile.b2e: invalid store entry: key "/x/../y": path segment ".."`,
		`key "/a//b": empty path segment`, `key "/n\x00": NUL in a path segment`,
		`keys "/p" [0,100) and "/q" [50,150) overlap`,
		`key "/ok" is a leaf and also a directory`,
		`hostile.b2e: invalid store entry: key "/junk" is left out: hostile.b2e:/junk:`} {
		if !strings.Contains(probs, w) {
			t.Errorf("problems %s\nlack %s", probs, w)
		}
	}
}

// TestTreeManyLeaves: a directory of 20,000 leaves lists with memory
// that grows by a small record per leaf, not by its frame, and with at
// most MaxOpenLeaves frames open.
func TestTreeManyLeaves(t *testing.T) {
	const n = 20000
	sc := fixtureLeaf(t, "tiny_1byte.b2frame").fr
	w := newStoreWriter(MarkerEmbed, 1<<13)
	for i := range n {
		w.Set(fmt.Sprintf("/k%05d", i), sc)
	}
	b := w.Frame()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tr, err := treeOfBytes(b, "many.b2e")
	if err != nil {
		t.Fatal(err)
	}
	ents, err := tr.ReadDir("")
	if err != nil || len(ents) != n {
		t.Fatalf("%d entries, %v", len(ents), err)
	}
	ents = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("a store of %d leaves, %d bytes: %d bytes kept per leaf once listed", n, len(b), per)
	if per > 4<<10 {
		t.Errorf("%d bytes kept per leaf", per)
	}
	if m := tr.openLeaves(); m > MaxOpenLeaves {
		t.Errorf("%d leaves kept open", m)
	}
	if got := readTreeFile(t, tr, "k12345"); len(got) != 1 {
		t.Errorf("k12345: %d bytes", len(got))
	}
	runtime.KeepAlive(tr)
}

// TestTreeFormatRegistered: the mount finds the format by suffix.
func TestTreeFormatRegistered(t *testing.T) {
	for _, c := range []struct {
		name string
		dir  bool
	}{{"a.b2z", false}, {"a.b2e", false}, {"a.b2d", true}} {
		if f, ok := pack.TreeFormatFor(c.name, c.dir); !ok || f.Name != "b2store" {
			t.Errorf("%s: %v %v", c.name, f.Name, ok)
		}
	}
	for _, c := range []struct {
		name string
		dir  bool
	}{{"a.b2d", false}, {"a.b2z", true}, {".b2z", false}} {
		if f, ok := pack.TreeFormatFor(c.name, c.dir); ok && f.Name == "b2store" {
			t.Errorf("%s (dir %v) is taken as a store", c.name, c.dir)
		}
	}
}

// TestTreeConcurrent lists, stats, opens and reads every file of stores
// from several goroutines at once, with room for two open leaf frames:
// frames are closed and opened again under the readers' feet, and every
// read gives the bytes a lone reader gets.
func TestTreeConcurrent(t *testing.T) {
	defer func(n int) { MaxOpenLeaves = n }(MaxOpenLeaves)
	MaxOpenLeaves = 2
	for _, name := range []string{"tree_t64k.b2z", "dict_t64k.b2d", "estore.b2e"} {
		want := map[string][]byte{}
		for p, e := range walkTree(t, openTreeFixture(t, name, nil)) {
			if !e.Dir {
				want[p] = readTreeFile(t, openTreeFixture(t, name, nil), p)
			}
		}
		tr := openTreeFixture(t, name, newCountingCache())
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 10 {
					for p, w := range want {
						if (g+i)%3 == 0 {
							dir := strings.TrimPrefix(path.Dir(p), ".")
							if _, err := tr.ReadDir(dir); err != nil {
								t.Error(err)
							}
						}
						c, err := tr.Open(p)
						if err != nil {
							t.Error(err)
							return
						}
						got := make([]byte, c.Size())
						if _, err := c.ReadAt(got, 0); err != nil && err != io.EOF {
							t.Errorf("%s: %s: %v", name, p, err)
						}
						c.(io.Closer).Close()
						if !bytes.Equal(got, w) {
							t.Errorf("%s: %s differs", name, p)
						}
					}
				}
			})
		}
		wg.Wait()
		if n := tr.openLeaves(); n > MaxOpenLeaves {
			t.Errorf("%s: %d leaves open", name, n)
		}
	}
}
