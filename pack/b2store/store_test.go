package b2store

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"golang.org/x/sys/unix"

	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// countingCache is a real cache that records the blocks it loads.
type countingCache struct {
	*cache.Cache[pack.BlockKey]
	mu    sync.Mutex
	loads []pack.BlockKey
}

func newCountingCache() *countingCache {
	return &countingCache{Cache: cache.New[pack.BlockKey](64 << 20)}
}

func (c *countingCache) Acquire(k pack.BlockKey, load func() ([]byte, error)) (*cache.Ref, error) {
	return c.Cache.Acquire(k, func() ([]byte, error) {
		c.mu.Lock()
		c.loads = append(c.loads, k)
		c.mu.Unlock()
		return load()
	})
}

// chunks returns the distinct chunks loaded since the last call, of the
// container id (any container: 0).
func (c *countingCache) chunks() []int64 { return c.chunksOf(0) }

func (c *countingCache) chunksOf(id uint64) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int64
	for _, k := range c.loads {
		if id != 0 && k.Container != id {
			continue
		}
		if !slices.Contains(out, k.Chunk) {
			out = append(out, k.Chunk)
		}
	}
	c.loads = nil
	slices.Sort(out)
	return out
}

func readAll(t testing.TB, r io.ReaderAt, n int64) []byte {
	t.Helper()
	b := make([]byte, n)
	if m, err := r.ReadAt(b, 0); int64(m) != n || (err != nil && err != io.EOF) {
		t.Fatalf("read %d of %d bytes: %v", m, n, err)
	}
	return b
}

func openFixtureFrame(t testing.TB, name string) *frame.Frame {
	t.Helper()
	src := fixtureLeaf(t, name)
	fr, err := frame.Open(bytes.NewReader(src.fr), int64(len(src.fr)), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fr
}

// openNPY opens the NPY view of a .b2nd fixture.
func openNPY(t testing.TB, name string) io.ReaderAt {
	v, err := openFixtureFrame(t, name).NPY()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// wantView is what a leaf made from a source must show: the source's NPY
// view for an array, its plain bytes for an SChunk.
func wantView(t testing.TB, src leafSrc) (Kind, []byte) {
	t.Helper()
	fr, err := frame.Open(bytes.NewReader(src.fr), int64(len(src.fr)), src.name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fr.Array() != nil {
		v, err := fr.NPY()
		if err != nil {
			t.Fatal(err)
		}
		return KindNDArray, readAll(t, v, v.Size())
	}
	return KindSChunk, readAll(t, fr, fr.Size())
}

// checkLeaf checks a leaf's kind and view against its source.
func checkLeaf(t *testing.T, l *Leaf, src leafSrc) {
	t.Helper()
	k, sub, err := l.Kind()
	if err != nil {
		t.Fatalf("%s: %v", l.Key, err)
	}
	if strings.HasPrefix(src.name, "objects:") {
		if k != KindOther {
			t.Errorf("%s: kind %v (%s), want other", l.Key, k, sub)
		}
		if _, _, err := l.View(); !errors.Is(err, ErrUnsupportedKind) {
			t.Errorf("%s: View of a %s: %v, want ErrUnsupportedKind", l.Key, sub, err)
		}
		return
	}
	wk, want := wantView(t, src)
	if k != wk {
		t.Fatalf("%s: kind %v (%s), want %v", l.Key, k, sub, wk)
	}
	r, n, err := l.View()
	if err != nil {
		t.Fatalf("%s: %v", l.Key, err)
	}
	if n != int64(len(want)) {
		t.Fatalf("%s: view of %d bytes, want %d", l.Key, n, len(want))
	}
	if got := readAll(t, r, n); !bytes.Equal(got, want) {
		t.Fatalf("%s: view differs from the source's (%s)", l.Key, src.name)
	}
	if n <= 64<<10 {
		if err := iotest.TestReader(io.NewSectionReader(r, 0, n), want); err != nil {
			t.Errorf("%s: %v", l.Key, err)
		}
	}
}

func TestEmbedStore(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(storesDir, "estore.b2e"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenEmbedStore(bytes.NewReader(b), int64(len(b)), "estore.b2e", newCountingCache())
	if err != nil {
		t.Fatal(err)
	}
	if s.Flavor() != FlavorEmbed || s.Embed().Marker() != MarkerEmbed {
		t.Errorf("flavor %v marker %s", s.Flavor(), s.Embed().Marker())
	}
	if p := s.Problems(); len(p) != 0 {
		t.Fatalf("problems: %v", p)
	}
	var keys []string
	for _, l := range s.Leaves() {
		keys = append(keys, l.Key)
	}
	want := []string{"/dir1/node3", "/dir1/node5", "/dir1/objs", "/dir1/sub/node4", "/node1", "/node2"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	// The deleted /old left its bytes: current_offset counts them.
	if got, want := s.Embed().CurrentOffset(), s.Embed().Size(); got != want {
		t.Errorf("current_offset %d, store size %d", got, want)
	}
	srcs := map[string]leafSrc{
		"/node1": fixtureLeaf(t, "nd_f64_1d.b2nd"), "/node2": fixtureLeaf(t, "tiny_1byte.b2frame"),
		"/dir1/sub/node4": fixtureLeaf(t, "nd_u8_3d.b2nd"), "/dir1/node5": fixtureLeaf(t, "v3_lz4_bitshuffle_meta.b2frame"),
		"/dir1/objs": objectsLeaf(t, "vlarray", 100),
	}
	for key, src := range srcs {
		_, l, err := s.Lookup(key)
		if err != nil {
			t.Fatal(err)
		}
		if !l.Embedded {
			t.Errorf("%s is not embedded", key)
		}
		checkLeaf(t, l, src)
	}
	_, c2, err := s.Lookup("/dir1/node3")
	if err != nil {
		t.Fatal(err)
	}
	if k, _, _ := c2.Kind(); k != KindC2Array {
		t.Errorf("/dir1/node3: kind %v", k)
	}
	r, n, err := c2.View()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(readAll(t, r, n)); got != `{"urlbase":"`+c2URLBase+`","path":"`+c2Path+`"}`+"\n" {
		t.Errorf("C2Array JSON %s", got)
	}
	// Directories.
	d, _, err := s.Lookup("/dir1")
	if err != nil || d == nil {
		t.Fatalf("/dir1: %v", err)
	}
	if got := d.Names(); !slices.Equal(got, []string{"node3", "node5", "objs", "sub"}) {
		t.Errorf("/dir1 holds %q", got)
	}
	if _, _, err := s.Lookup("/old"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted key: %v", err)
	}
	// The leaf's own vlmeta (a c-blosc2 frame with a non-msgpack value).
	_, l5, _ := s.Lookup("/dir1/node5")
	vm, err := l5.VLMeta()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(vm.Names(), []string{"v1"}) {
		t.Errorf("vlmeta names %q", vm.Names())
	}
	if raw, err := vm.Raw("v1"); err != nil || string(raw) != "xyz" {
		t.Errorf("raw vlmeta %q %v", raw, err)
	}
	if _, err := vm.JSON("v1"); !errors.Is(err, ErrVLMeta) {
		t.Errorf("vlmeta that is not msgpack: %v", err)
	}
	// The store's own vlmeta holds only python-blosc2's.
	if vm, err := s.VLMeta(); err != nil || len(vm.Names()) != 0 {
		t.Errorf("store vlmeta %q %v", vm.Names(), err)
	}
}

// TestEmbeddedReadDecodesItsChunks: a 4 KiB read of an embedded leaf's
// bytes decodes only the store chunks that hold them.
func TestEmbeddedReadDecodesItsChunks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(storesDir, "estore.b2e"))
	if err != nil {
		t.Fatal(err)
	}
	c := newCountingCache()
	s, err := OpenEmbedStore(bytes.NewReader(b), int64(len(b)), "estore.b2e", c)
	if err != nil {
		t.Fatal(err)
	}
	_, l, err := s.Lookup("/dir1/sub/node4")
	if err != nil {
		t.Fatal(err)
	}
	r, n, err := l.FrameReader()
	if err != nil {
		t.Fatal(err)
	}
	whole := fixtureLeaf(t, "nd_u8_3d.b2nd").fr
	cs := s.Embed().Frame().ChunkSize()
	if n < 3*cs || cs != 1<<13 {
		t.Fatalf("leaf of %d bytes in store chunks of %d: the test needs a leaf over 3 chunks", n, cs)
	}
	total := int64(s.Embed().Frame().NumChunks())
	for _, off := range []int64{0, 1000, cs - 100, 2*cs - l.Offset%cs, n - 4096} {
		c.Purge()
		c.chunks()
		got := make([]byte, 4096)
		if _, err := r.ReadAt(got, off); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, whole[off:off+4096]) {
			t.Fatalf("bytes at %d differ", off)
		}
		first, last := (l.Offset+off)/cs, (l.Offset+off+4095)/cs
		var want []int64
		for i := first; i <= last; i++ {
			want = append(want, i)
		}
		if loaded := c.chunks(); !slices.Equal(loaded, want) {
			t.Errorf("4 KiB at %d of the leaf (store bytes %d): decoded store chunks %v of %d, want %v", off, l.Offset+off, loaded, total, want)
		}
	}
	// Reading again decodes nothing: the cache holds the blocks.
	if _, err := r.ReadAt(make([]byte, 4096), 1000); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	store := c.loads[0].Container // only the store's blocks were read
	c.mu.Unlock()
	c.chunks()
	if _, err := r.ReadAt(make([]byte, 4096), 1000); err != nil {
		t.Fatal(err)
	}
	if loaded := c.chunks(); len(loaded) != 0 {
		t.Errorf("a cached read decoded chunks %v", loaded)
	}
	// The NPY view of the leaf reads through the same store chunks: its
	// header and first rows need the leaf's header, index and first chunk.
	v, vn, err := l.View()
	if err != nil {
		t.Fatal(err)
	}
	want := readAll(t, openNPY(t, "nd_u8_3d.b2nd"), vn)
	c.Purge()
	c.chunks()
	got := make([]byte, 4096)
	if _, err := v.ReadAt(got, vn-4096); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want[vn-4096:]) {
		t.Error("the NPY view's last 4 KiB differ")
	}
	t.Logf("the last 4 KiB of the NPY view decoded store chunks %v of %d", c.chunksOf(store), total)
}

// storeCase describes a store fixture: its flavor, its leaves and where
// each comes from, and its vlmeta.
type storeCase struct {
	name     string
	flavor   Flavor
	marker   string
	leaves   map[string]leafSrc // key → source; external leaves are marked by ext
	external []string           // keys held in files of their own
	c2       []string
	vlmeta   map[string]map[string]string // directory → name → JSON
}

func storeCases(t testing.TB) []storeCase {
	nd1 := fixtureLeaf(t, "nd_f64_1d.b2nd")
	return []storeCase{{
		name: "tree_v370.b2d", flavor: FlavorDir, marker: MarkerEmbed,
		leaves: map[string]leafSrc{
			"/arrays/a1": nd1, "/arrays/a2": fixtureLeaf(t, "nd_i32_2d.b2nd"), "/arrays/big": bigArray(t),
			"/series/s1": fixtureLeaf(t, "data_const.b2frame"), "/series/tiny": fixtureLeaf(t, "tiny_1byte.b2frame"),
		},
		external: []string{"/arrays/big", "/series/s1"},
		vlmeta:   map[string]map[string]string{"/": {"author": `"bloscfs tests"`, "version": "3"}, "/arrays": {}},
	}, {
		name: "tree_t64k.b2d", flavor: FlavorTree, marker: MarkerTree,
		leaves: map[string]leafSrc{
			"/a": nd1, "/group/x": fixtureLeaf(t, "nd_i32_2d.b2nd"), "/group/sub/y": fixtureLeaf(t, "nd_u8_3d.b2nd"),
			"/group/sub/big": bigArray(t), "/group/s": fixtureLeaf(t, "typesize2.b2frame"),
			"/group/tiny": fixtureLeaf(t, "tiny_1byte.b2frame"),
		},
		external: []string{"/group/sub/big", "/group/s"},
		c2:       []string{"/remote"},
		vlmeta: map[string]map[string]string{
			"/": rootVLJSON, "/group": {"units": `"m"`, "origin": "[0,0]"}, "/group/sub": {"note": `"sub"`},
		},
	}, {
		name: "dict_t64k.b2d", flavor: FlavorDict, marker: MarkerDict,
		leaves: map[string]leafSrc{
			"/x": nd1, "/dir/y": fixtureLeaf(t, "nd_f64_2d_bitshuffle.b2nd"), "/dir/z": fixtureLeaf(t, "data_const.b2frame"),
			"/dir/big": bigArray(t), "/dir/batch": objectsLeaf(t, "batcharray", 70000),
			"/dir/deep/er/v": fixtureLeaf(t, "v3_lz4_bitshuffle_meta.b2frame"),
		},
		external: []string{"/dir/z", "/dir/big", "/dir/batch", "/dir/deep/er/v"},
		vlmeta:   map[string]map[string]string{"/": {}},
	}, {
		name: "tree_v411.b2d", flavor: FlavorTree, marker: MarkerTree,
		leaves: map[string]leafSrc{
			"/a": nd1, "/g/b": fixtureLeaf(t, "nd_i32_2d.b2nd"), "/g/s": fixtureLeaf(t, "tiny_1byte.b2frame"),
			"/table/_cols/x": nd1,
		},
		external: []string{"/a", "/g/b", "/g/s", "/table/_cols/x", "/table/_meta"},
		c2:       []string{"/remote"},
		vlmeta:   map[string]map[string]string{"/": {"author": `"bloscfs tests"`}, "/g": {"units": `"m"`}},
	}}
}

func TestDirStores(t *testing.T) {
	for _, tc := range storeCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			s, err := OpenDir(NewDirSource(filepath.Join(storesDir, tc.name)), tc.name, newCountingCache())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Flavor() != tc.flavor || s.Embed().Marker() != tc.marker {
				t.Errorf("flavor %v marker %s, want %v %s", s.Flavor(), s.Embed().Marker(), tc.flavor, tc.marker)
			}
			if p := s.Problems(); len(p) != 0 {
				t.Fatalf("problems: %v", p)
			}
			var want []string
			for k := range tc.leaves {
				want = append(want, k)
			}
			want = append(want, tc.c2...)
			if tc.name == "tree_v411.b2d" {
				want = append(want, "/table/_meta")
			}
			slices.Sort(want)
			var keys []string
			for _, l := range s.Leaves() {
				keys = append(keys, l.Key)
				if strings.HasSuffix(l.Key, vlmetaKey) {
					t.Errorf("metadata key %s listed as a leaf", l.Key)
				}
				if ext := slices.Contains(tc.external, l.Key); l.C2 == nil && (ext == l.Embedded || (ext && l.Member == "")) {
					t.Errorf("%s: embedded %v, member %q", l.Key, l.Embedded, l.Member)
				}
			}
			if !slices.Equal(keys, want) {
				t.Fatalf("keys %q, want %q", keys, want)
			}
			for key, src := range tc.leaves {
				_, l, err := s.Lookup(key)
				if err != nil {
					t.Fatal(err)
				}
				checkLeaf(t, l, src)
			}
			for _, key := range tc.c2 {
				_, l, _ := s.Lookup(key)
				if l.C2 == nil || l.C2.URLBase != c2URLBase || l.C2.Path != c2Path {
					t.Errorf("%s: %+v", key, l.C2)
				}
			}
			for dir, want := range tc.vlmeta {
				d, _, err := s.Lookup(dir)
				if err != nil || d == nil {
					t.Fatalf("%s: %v", dir, err)
				}
				vm, err := d.VLMeta()
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]string{}
				for _, n := range vm.Names() {
					j, err := vm.JSON(n)
					if err != nil {
						t.Fatalf("%s %s: %v", dir, n, err)
					}
					got[n] = string(j)
				}
				if len(got) != len(want) {
					t.Errorf("%s: vlmeta %v, want %v", dir, got, want)
				}
				for n, w := range want {
					if got[n] != w {
						t.Errorf("%s: vlmeta %s = %s, want %s", dir, n, got[n], w)
					}
				}
			}
		})
	}
}

func TestObjects(t *testing.T) {
	s, err := OpenDir(NewDirSource(filepath.Join(storesDir, "tree_v411.b2d")), "tree_v411.b2d", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	objs, err := s.Objects()
	if err != nil {
		t.Fatal(err)
	}
	want := []Object{{Key: "/table", Kind: "ctable", Version: 1, Layout: "inline-tree-subtree"}}
	if !slices.Equal(objs, want) {
		t.Errorf("objects %+v, want %+v", objs, want)
	}
	// Without the registry, the manifest is found by probing.
	objs, err = s.probeObjects()
	if err != nil || !slices.Equal(objs, want) {
		t.Errorf("probed objects %+v %v, want %+v", objs, err, want)
	}
}

// TestDirSourceSafety: symbolic links and special files are not members,
// and a member path cannot leave the directory.
func TestDirSourceSafety(t *testing.T) {
	dir := t.TempDir()
	buildTreeV411(t, dir)
	outside := t.TempDir()
	secret := fixtureLeaf(t, "nd_i32_2d.b2nd").fr
	if err := os.WriteFile(filepath.Join(outside, "secret.b2nd"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.b2nd"), filepath.Join(dir, "link.b2nd")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(filepath.Join(dir, "fifo.b2nd")); err != nil {
		t.Fatal(err)
	}
	src := NewDirSource(dir)
	ms, err := src.Members()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if strings.Contains(m.Path, "link") || strings.Contains(m.Path, "fifo") || strings.Contains(m.Path, "secret") {
			t.Errorf("member %s", m.Path)
		}
	}
	for _, p := range []string{"link.b2nd", "linkdir/secret.b2nd", "fifo.b2nd", "../" + filepath.Base(outside) + "/secret.b2nd", "/etc/passwd", "g/../a.b2nd"} {
		if r, _, err := src.Open(p); err == nil {
			r.(io.Closer).Close()
			t.Errorf("opened %s", p)
		}
	}
	s, err := OpenDir(src, "dir", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range []string{"/link", "/linkdir/secret", "/fifo"} {
		if _, _, err := s.Lookup(k); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v", k, err)
		}
	}
}

func mkfifo(p string) error { return unix.Mkfifo(p, 0o644) }

// openZipSource opens a .b2z fixture as a ZipSource.
func openZipSource(t testing.TB, p string) *ZipSource {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, _ := f.Stat()
	src, err := OpenZip(f, st.Size(), filepath.Base(p))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestZipStores: each .b2z reads as its .b2d does.
func TestZipStores(t *testing.T) {
	for _, pair := range [][2]string{{"tree_t64k.b2z", "tree_t64k.b2d"}, {"dict_t64k.b2z", "dict_t64k.b2d"},
		{"tree_v411.b2z", "tree_v411.b2d"}, {"dict_t64k_zip64.b2z", "dict_t64k.b2d"}} {
		t.Run(pair[0], func(t *testing.T) {
			z, err := OpenDir(openZipSource(t, filepath.Join(storesDir, pair[0])), pair[0], nil)
			if err != nil {
				t.Fatal(err)
			}
			d, err := OpenDir(NewDirSource(filepath.Join(storesDir, pair[1])), pair[1], nil)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if len(z.Problems()) != 0 || z.Flavor() != d.Flavor() {
				t.Fatalf("problems %v, flavor %v", z.Problems(), z.Flavor())
			}
			zl, dl := z.Leaves(), d.Leaves()
			if len(zl) != len(dl) {
				t.Fatalf("%d leaves, the directory has %d", len(zl), len(dl))
			}
			for i := range zl {
				if zl[i].Key != dl[i].Key || zl[i].Embedded != dl[i].Embedded {
					t.Fatalf("leaf %s (embedded %v), the directory's %s (%v)", zl[i].Key, zl[i].Embedded, dl[i].Key, dl[i].Embedded)
				}
				zr, zn, zerr := zl[i].View()
				dr, dn, derr := dl[i].View()
				if (zerr == nil) != (derr == nil) || zn != dn {
					t.Fatalf("%s: %v %v", zl[i].Key, zerr, derr)
				}
				if zerr == nil && !bytes.Equal(readAll(t, zr, zn), readAll(t, dr, dn)) {
					t.Errorf("%s reads differently", zl[i].Key)
				}
			}
		})
	}
}

// TestConcurrentLeaves reads every leaf of a store from several
// goroutines at once, some of them forgetting leaves as they go.
func TestConcurrentLeaves(t *testing.T) {
	s, err := OpenDir(NewDirSource(filepath.Join(storesDir, "tree_t64k.b2d")), "tree_t64k.b2d", newCountingCache())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := map[string][]byte{}
	for _, l := range s.Leaves() {
		if r, n, err := l.View(); err == nil {
			want[l.Key] = readAll(t, r, n)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				for _, l := range s.Leaves() {
					r, n, err := l.View()
					if err != nil {
						t.Error(err)
						return
					}
					got := make([]byte, n)
					if _, err := r.ReadAt(got, 0); err != nil && err != io.EOF {
						// A reader of an external leaf that another
						// goroutine forgot is closed: open anew.
						if l.Embedded || !errors.Is(err, os.ErrClosed) {
							t.Error(err)
						}
						continue
					}
					if !bytes.Equal(got, want[l.Key]) {
						t.Errorf("%s differs", l.Key)
					}
					if (g+i)%5 == 0 && l.Embedded {
						l.Forget()
					}
				}
			}
		})
	}
	wg.Wait()
}
