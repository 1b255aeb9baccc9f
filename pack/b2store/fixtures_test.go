package b2store

import (
	"bytes"
	"flag"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// go test ./pack/b2store -run TestWriteFixtures -update rewrites
// testdata/b2store (and its .b2z archives, with /usr/bin/python3).
var update = flag.Bool("update", false, "rewrite testdata/b2store")

const (
	fixturesDir = "../../testdata/fixtures" // c-blosc2's frames
	storesDir   = "../../testdata/b2store"  // the stores written here

	c2URLBase = "https://cat2.cloud/demo"
	c2Path    = "@public/examples/ds-1d.b2nd"
)

// leafSrc is where a leaf's frame comes from: a fixture file written by
// c-blosc2, or one made here.
type leafSrc struct {
	name   string // fixture file, or "big" / "objects:META"
	fr     []byte
	nbytes int64  // the value's nbytes, which DictStore compares with its threshold
	ext    string // its suffix as an external leaf
}

// fixtureLeaf loads a c-blosc2 fixture as a value.
func fixtureLeaf(t testing.TB, name string) leafSrc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixturesDir, name))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := frame.Open(bytes.NewReader(b), int64(len(b)), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := fr.Array(); a != nil {
		return leafSrc{name, b, a.Len() * int64(a.Itemsize), ".b2nd"}
	}
	return leafSrc{name, b, fr.Size(), ".b2f"}
}

// bigArray is a float64 array of 300×30 (72000 bytes, over the 64 KiB
// threshold), written by pack/frame's array writer: none of c-blosc2's
// .b2nd fixtures is that large.
func bigArray(t testing.TB) leafSrc {
	t.Helper()
	data := make([]byte, 300*30*8)
	for i := range 300 * 30 {
		bits := math.Float64bits(float64(i) / 4)
		for j := range 8 {
			data[8*i+j] = byte(bits >> (8 * j))
		}
	}
	a, err := frame.NewArray([]int64{300, 30}, "<f8", 8, []int32{100, 30}, []int32{25, 30})
	if err != nil {
		t.Fatal(err)
	}
	m := &memFile{}
	if err := frame.WriteArray(m, bytes.NewReader(data), a, blosc.DefaultParams(8)); err != nil {
		t.Fatal(err)
	}
	return leafSrc{"big", m.B, int64(len(data)), ".b2nd"}
}

// objectsLeaf is a value of a kind that is listed, not read, of n bytes.
func objectsLeaf(t testing.TB, meta string, n int) leafSrc {
	plain := bytes.Repeat([]byte("objects, not read. "), n/19+1)[:n]
	fr := writeFrame(t, plain, 1<<16, 1, []frame.Metalayer{{Name: meta, Value: version1(t)}}, nil)
	ext := ".b2f"
	if meta == "batcharray" {
		ext = ".b2b"
	}
	return leafSrc{"objects:" + meta, fr, int64(n), ext}
}

// Vlmeta of the fixtures' trees.
var (
	rootVL = func() []kv {
		return []kv{
			{"author", "bloscfs tests"}, {"version", 3}, {"scale", 0.5},
			{"tags", tuple{"a", "b"}}, {"blob", []byte{0, 1, 2}},
			{"nested", []kv{{"k", []any{1, 2.5, nil, true}}}},
		}
	}
	rootVLJSON = map[string]string{
		"author": `"bloscfs tests"`, "version": `3`, "scale": `0.5`, "tags": `["a","b"]`,
		"blob": `{"$bytes":"AAEC"}`, "nested": `{"k":[1,2.5,null,true]}`,
	}
)

// buildEstore writes estore.b2e: an EmbedStore as python-blosc2 v4.11.0
// writes it (SChunk backing in chunks of 2**13 bytes, marker b2embed).
func buildEstore(t testing.TB) []byte {
	w := newStoreWriter(MarkerEmbed, 1<<13)
	w.Set("/node1", fixtureLeaf(t, "nd_f64_1d.b2nd").fr)
	w.Set("/node2", fixtureLeaf(t, "tiny_1byte.b2frame").fr)
	w.Set("/old", fixtureLeaf(t, "typesize2.b2frame").fr)
	w.SetC2("/dir1/node3", c2URLBase, c2Path)
	w.Set("/dir1/sub/node4", fixtureLeaf(t, "nd_u8_3d.b2nd").fr)
	w.Set("/dir1/objs", objectsLeaf(t, "vlarray", 100).fr)
	w.Set("/dir1/node5", fixtureLeaf(t, "v3_lz4_bitshuffle_meta.b2frame").fr)
	w.Del("/old")
	return w.Frame()
}

// buildTreeV370 writes tree_v370.b2d: a TreeStore as python-blosc2 v3.7.0
// writes it: embed.b2e marked b2embed in chunks of 2**16 bytes, values
// under the default threshold of 2**16 bytes embedded, root vlmeta only.
func buildTreeV370(t testing.TB, dir string) {
	d := newDictWriter(MarkerEmbed, 1<<16, 1<<16)
	d.Tree = true
	for _, p := range []struct {
		key string
		src leafSrc
	}{
		{"/arrays/a1", fixtureLeaf(t, "nd_f64_1d.b2nd")},
		{"/arrays/a2", fixtureLeaf(t, "nd_i32_2d.b2nd")},
		{"/arrays/big", bigArray(t)},
		{"/series/s1", fixtureLeaf(t, "data_const.b2frame")},
		{"/series/tiny", fixtureLeaf(t, "tiny_1byte.b2frame")},
	} {
		d.Set(p.key, p.src.fr, p.src.nbytes, p.src.ext)
	}
	var vl []kv
	d.SetVLMeta("", &vl, "author", "bloscfs tests")
	d.SetVLMeta("", &vl, "version", 3)
	d.Write(dir)
}

// buildTreeT64k writes tree_t64k.b2d: TreeStore(threshold=2**16) of
// python-blosc2 v4.11.0: embed.b2e marked b2tree in chunks of 2**13
// bytes, small values and all vlmeta embedded, large ones in files.
func buildTreeT64k(t testing.TB, dir string) {
	d := newDictWriter(MarkerTree, 1<<13, 1<<16)
	for _, p := range []struct {
		key string
		src leafSrc
	}{
		{"/a", fixtureLeaf(t, "nd_f64_1d.b2nd")},
		{"/group/x", fixtureLeaf(t, "nd_i32_2d.b2nd")},
		{"/group/sub/y", fixtureLeaf(t, "nd_u8_3d.b2nd")},
		{"/group/sub/big", bigArray(t)},
		{"/group/s", fixtureLeaf(t, "typesize2.b2frame")},
		{"/group/tiny", fixtureLeaf(t, "tiny_1byte.b2frame")},
	} {
		d.Set(p.key, p.src.fr, p.src.nbytes, p.src.ext)
	}
	d.ES.SetC2("/remote", c2URLBase, c2Path)
	var root, group, sub []kv
	for _, p := range rootVL() {
		d.SetVLMeta("", &root, p.Key(), p.Value())
	}
	d.SetVLMeta("/group", &group, "units", "m")
	d.SetVLMeta("/group", &group, "origin", tuple{0, 0})
	d.SetVLMeta("/group/sub", &sub, "note", "sub")
	d.Write(dir)
}

// buildDictT64k writes dict_t64k.b2d: DictStore(threshold=2**16) of
// python-blosc2 v4.11.0: embed.b2e marked b2dict.
func buildDictT64k(t testing.TB, dir string) {
	d := newDictWriter(MarkerDict, 1<<13, 1<<16)
	for _, p := range []struct {
		key string
		src leafSrc
	}{
		{"/x", fixtureLeaf(t, "nd_f64_1d.b2nd")},
		{"/dir/y", fixtureLeaf(t, "nd_f64_2d_bitshuffle.b2nd")},
		{"/dir/z", fixtureLeaf(t, "data_const.b2frame")},
		{"/dir/big", bigArray(t)},
		{"/dir/batch", objectsLeaf(t, "batcharray", 70000)},
		{"/dir/deep/er/v", fixtureLeaf(t, "v3_lz4_bitshuffle_meta.b2frame")},
	} {
		d.Set(p.key, p.src.fr, p.src.nbytes, p.src.ext)
	}
	d.Write(dir)
}

// buildTreeV411 writes tree_v411.b2d: a TreeStore of python-blosc2
// v4.11.0 with the default threshold 0: every value in a file of its own
// (vlmeta too, as __vlmeta__.b2f), C2Arrays in the embed store, and an
// inline CTable registered in _object_registry.
func buildTreeV411(t testing.TB, dir string) {
	d := newDictWriter(MarkerTree, 1<<13, 0)
	for _, p := range []struct {
		key string
		src leafSrc
	}{
		{"/a", fixtureLeaf(t, "nd_f64_1d.b2nd")},
		{"/g/b", fixtureLeaf(t, "nd_i32_2d.b2nd")},
		{"/g/s", fixtureLeaf(t, "tiny_1byte.b2frame")},
		{"/table/_cols/x", fixtureLeaf(t, "nd_f64_1d.b2nd")},
	} {
		d.Set(p.key, p.src.fr, p.src.nbytes, p.src.ext)
	}
	d.Set("/table/_meta", schunkWithVLMeta(t, []kv{{"kind", "ctable"}, {"version", 1}, {"schema", []kv{{"x", "float64"}}}}), 0, ".b2f")
	d.ES.SetC2("/remote", c2URLBase, c2Path)
	d.ES.ExtraVL = []kv{{VLMetaObjectRegistry, []kv{{"/table", []kv{{"kind", "ctable"}, {"version", 1}, {"layout", "inline-tree-subtree"}}}}}}
	var root, g []kv
	d.SetVLMeta("", &root, "author", "bloscfs tests")
	d.SetVLMeta("/g", &g, "units", "m")
	d.Write(dir)
}

// writeStores writes every store fixture under dir.
func writeStores(t testing.TB, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "estore.b2e"), buildEstore(t), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, build := range map[string]func(testing.TB, string){
		"tree_v370.b2d": buildTreeV370, "tree_t64k.b2d": buildTreeT64k,
		"dict_t64k.b2d": buildDictT64k, "tree_v411.b2d": buildTreeV411,
	} {
		p := filepath.Join(dir, name)
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		build(t, p)
	}
}

// TestWriteFixtures writes the stores into a temporary directory and
// checks that each opens without problems; with -update it rewrites
// testdata/b2store, and its .b2z archives with make_b2z.py.
func TestWriteFixtures(t *testing.T) {
	dir := t.TempDir()
	if *update {
		dir = storesDir
	}
	writeStores(t, dir)
	if *update {
		cmd := exec.Command("/usr/bin/python3", filepath.Join(dir, "make_b2z.py"), dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make_b2z.py: %v\n%s", err, out)
		}
	}
	for _, name := range []string{"tree_v370.b2d", "tree_t64k.b2d", "dict_t64k.b2d", "tree_v411.b2d"} {
		s, err := OpenDir(NewDirSource(filepath.Join(dir, name)), name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p := s.Problems(); len(p) > 0 {
			t.Errorf("%s: %v", name, p)
		}
		s.Close()
	}
}
