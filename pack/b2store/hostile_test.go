package b2store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// craftStore writes a store frame of the given SChunk bytes whose
// estore_metadata vlmetalayer is meta as given (any bytes).
func craftStore(t testing.TB, data, meta []byte) []byte {
	t.Helper()
	var vl []frame.Metalayer
	if meta != nil {
		vl = append(vl, frame.Metalayer{Name: VLMetaEmbedMap, Value: meta})
	}
	return writeFrame(t, data, 1<<13, 1, []frame.Metalayer{{Name: MarkerEmbed, Value: version1(t)}}, vl)
}

// rangeMap is an embed map of byte ranges.
func rangeMap(t testing.TB, ents ...kv) []byte {
	return packb(t, []kv{{"embed_map", ents}, {"current_offset", 0}})
}

func rng(off, n any) []kv { return []kv{{"offset", off}, {"length", n}} }

// twoFrames is SChunk bytes holding two c-blosc2 frames, and their sizes.
func twoFrames(t testing.TB) ([]byte, int, int) {
	a := fixtureLeaf(t, "nd_f64_1d.b2nd").fr
	b := fixtureLeaf(t, "tiny_1byte.b2frame").fr
	return append(slices.Clone(a), b...), len(a), len(b)
}

func openCrafted(t *testing.T, b []byte) (*Store, error) {
	t.Helper()
	return OpenEmbedStore(bytes.NewReader(b), int64(len(b)), "crafted.b2e", nil)
}

// TestHostileEntries: every bad entry is left out with an error naming
// the store and the key, and the good ones still read.
func TestHostileEntries(t *testing.T) {
	data, na, nb := twoFrames(t)
	good := kv{"/ok", rng(na, nb)} // tiny_1byte: one plain byte
	deep := "/" + strings.Repeat("d/", MaxDepth) + "x"
	cases := []struct {
		name   string
		ents   []kv
		want   []string // in the problems, in order
		leaves []string
	}{
		{"overlap", []kv{{"/a", rng(0, na)}, {"/b", rng(na/2, 2000)}, good},
			[]string{`keys "/a" [0,4726) and "/b" [2363,4363) overlap; both are left out`}, []string{"/ok"}},
		{"overlap inside", []kv{{"/a", rng(0, na+nb)}, good},
			[]string{`keys "/a" [0,4931) and "/ok" [4726,4931) overlap`}, nil},
		{"past the end", []kv{{"/a", rng(na, 1000)}, good},
			[]string{`key "/a": bytes [4726,5726) run past the end of the store's 4931 bytes`}, []string{"/ok"}},
		{"offset past the end", []kv{{"/a", rng(1<<62, 100)}, good},
			[]string{`key "/a": bytes [4611686018427387904,4611686018427388004) run past`}, []string{"/ok"}},
		{"huge offset", []kv{{"/a", rng(uint64(1<<63), 100)}, good},
			[]string{`key "/a": offset: 9223372036854775808 out of range`}, []string{"/ok"}},
		{"negative length", []kv{{"/a", rng(0, -5)}, good},
			[]string{`key "/a": length: negative value -5`}, []string{"/ok"}},
		{"too short", []kv{{"/a", rng(0, 10)}, good},
			[]string{`key "/a": 10 bytes cannot hold a frame`}, []string{"/ok"}},
		{"dotdot", []kv{{"/a/../b", rng(0, na)}, good}, []string{`key "/a/../b": path segment ".."`}, []string{"/ok"}},
		{"dot", []kv{{"/./b", rng(0, na)}, good}, []string{`path segment "."`}, []string{"/ok"}},
		{"empty segment", []kv{{"/a//b", rng(0, na)}, good}, []string{`key "/a//b": empty path segment`}, []string{"/ok"}},
		{"trailing slash", []kv{{"/a/", rng(0, na)}, good}, []string{`empty path segment`}, []string{"/ok"}},
		{"NUL", []kv{{"/a\x00b", rng(0, na)}, good}, []string{`key "/a\x00b": NUL in a path segment`}, []string{"/ok"}},
		{"relative", []kv{{"a", rng(0, na)}, good}, []string{`key "a": key does not start with /`}, []string{"/ok"}},
		{"root", []kv{{"/", rng(0, na)}, good}, []string{`key "/": key "/" names the root`}, []string{"/ok"}},
		{"long segment", []kv{{"/" + strings.Repeat("s", 256), rng(0, na)}, good}, []string{`path segment of 256 bytes`}, []string{"/ok"}},
		{"long key", []kv{{"/" + strings.Repeat("s/", 2100), rng(0, na)}, good}, []string{`embed map entry 0: key: string of 4201 bytes (at most 4096)`}, []string{"/ok"}},
		{"deep", []kv{{deep, rng(0, na)}, good}, []string{fmt.Sprintf("%d levels deep", MaxDepth+1)}, []string{"/ok"}},
		{"leaf and directory", []kv{{"/a", rng(0, na)}, {"/a/b", rng(na, nb)}},
			[]string{`key "/a" is a leaf and also a directory (of "/a/b"); the leaf is left out`}, []string{"/a/b"}},
		{"twice", []kv{{"/a", rng(0, 100)}, {"/a", rng(0, na)}, good},
			[]string{`key "/a" is listed twice; the later value is kept`}, []string{"/a", "/ok"}},
		{"not a map", []kv{{"/a", 5}, good}, []string{`key "/a": an integer where a map is expected`}, []string{"/ok"}},
		{"offset a string", []kv{{"/a", []kv{{"offset", "0"}, {"length", na}}}, good},
			[]string{`key "/a": offset: a string where an integer is expected`}, []string{"/ok"}},
		{"no length", []kv{{"/a", []kv{{"offset", 0}}}, good},
			[]string{`key "/a": neither a byte range`}, []string{"/ok"}},
		{"urlbase not a string", []kv{{"/a", []kv{{"urlbase", 1}, {"path", "p"}}}, good},
			[]string{`key "/a": urlbase: an integer where a string is expected`}, []string{"/ok"}},
		{"reference without path", []kv{{"/a", []kv{{"urlbase", "https://x"}}}, good},
			[]string{`key "/a": C2Array reference to "https://x" without a path`}, []string{"/ok"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := openCrafted(t, craftStore(t, data, rangeMap(t, tc.ents...)))
			if err != nil {
				t.Fatal(err)
			}
			probs := s.Problems()
			if len(probs) != len(tc.want) {
				t.Fatalf("problems %v, want %d", probs, len(tc.want))
			}
			for i, p := range probs {
				if !errors.Is(p, ErrBadEntry) || !strings.Contains(p.Error(), "crafted.b2e: ") || !strings.Contains(p.Error(), tc.want[i]) {
					t.Errorf("problem %q, want ErrBadEntry naming the store and %q", p, tc.want[i])
				}
			}
			var keys []string
			for _, l := range s.Leaves() {
				keys = append(keys, l.Key)
				if _, _, err := l.View(); err != nil {
					t.Errorf("%s: %v", l.Key, err)
				}
			}
			if !slices.Equal(keys, tc.leaves) {
				t.Errorf("leaves %q, want %q", keys, tc.leaves)
			}
		})
	}
}

// TestHostileKeyTypes: keys that are not strings.
func TestHostileKeyTypes(t *testing.T) {
	data, na, nb := twoFrames(t)
	ok := packb(t, []kv{{"/ok", rng(na, nb)}})[1:] // the entry, without its map header
	val := packb(t, rng(0, na))
	meta := append([]byte{0x81, 0xa9}, "embed_map"...)
	meta = append(meta, 0x83, 0x05)            // {5: …,
	meta = append(meta, val...)                //
	meta = append(meta, 0xc4, 0x02, '/', 'b')  //  b"/b": …,
	meta = append(append(meta, val...), ok...) //  "/ok": …}
	s, err := openCrafted(t, craftStore(t, data, meta))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"embed map entry 0: key: an integer where a string is expected", "embed map entry 1: key: binary where a string is expected"}
	probs := s.Problems()
	if len(probs) != 2 || !strings.Contains(probs[0].Error(), want[0]) || !strings.Contains(probs[1].Error(), want[1]) {
		t.Errorf("problems %v, want %q", probs, want)
	}
	if l := s.Leaves(); len(l) != 1 || l[0].Key != "/ok" {
		t.Errorf("leaves %v", l)
	}
}

// TestHostileMap: maps that are not embed maps make the input not a
// store (it is shown as what it is), never a panic or a huge allocation.
func TestHostileMap(t *testing.T) {
	data, na, _ := twoFrames(t)
	nested := bytes.Repeat([]byte{0x91}, 200000) // [[[[…
	cases := map[string][]byte{
		"not msgpack":       []byte("xyz"),
		"not a map":         packb(t, []any{1, 2}),
		"no embed_map":      packb(t, []kv{{"current_offset", 0}}),
		"embed_map a list":  packb(t, []kv{{"embed_map", []any{1}}}),
		"trailing bytes":    append(rangeMap(t, kv{"/a", rng(0, na)}), 0xc0),
		"truncated":         rangeMap(t, kv{"/a", rng(0, na)})[:20],
		"map32 of 4G":       {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa9},
		"str32 of 4G key":   {0x81, 0xdb, 0xff, 0xff, 0xff, 0xff, 'e'},
		"bin32 of 4G value": append(packb(t, []kv{{"x", nil}})[:3], 0xc6, 0xff, 0xff, 0xff, 0xff),
		"deep nesting":      append(append([]byte{0x82, 0xa1, 'x'}, nested...), 0xc0),
		"embed_map twice":   packb(t, []kv{{"embed_map", []kv{}}, {"embed_map", []kv{}}}),
		"many values":       append([]byte{0x81, 0xa1, 'x'}, bytes.Repeat([]byte{0xdd, 0x7f, 0xff, 0xff, 0xff}, 1000)...),
	}
	for name, meta := range cases {
		t.Run(name, func(t *testing.T) {
			mem := testkit.StartAlloc()
			b := craftStore(t, data, meta)
			_, err := openCrafted(t, b)
			if !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), "crafted.b2e: ") {
				t.Errorf("%v, want ErrNotStore naming the store", err)
			}
			mem.Check(t, len(b), 0)
		})
	}
}

// TestHostileNesting: values nested 200,000 deep are passed by (without
// recursion) where python-blosc2 reads nothing, and are a bad entry where
// it expects a map.
func TestHostileNesting(t *testing.T) {
	data, na, nb := twoFrames(t)
	nested := append(bytes.Repeat([]byte{0x91}, 200000), 0xc0) // [[[[…nil…]]]]
	meta := append([]byte{0x82, 0xa1, 'x'}, nested...)         // {"x": [[…]],
	meta = append(append(meta, 0xa9), "embed_map"...)          //  "embed_map":
	meta = append(meta, 0x83, 0xa2, '/', 'a')                  //    {"/a": [[…]],
	meta = append(meta, nested...)                             //
	meta = append(meta, 0xa2, '/', 'b', 0x83, 0xa1, 'z')       //     "/b": {"z": [[…]],
	meta = append(append(meta, nested...), packb(t, rng(0, na))[1:]...)
	meta = append(meta, packb(t, []kv{{"/ok", rng(na, nb)}})[1:]...) // "/ok": …}}
	mem := testkit.StartAlloc()
	s, err := openCrafted(t, craftStore(t, data, meta))
	mem.Check(t, len(meta), 0)
	if err != nil {
		t.Fatal(err)
	}
	probs := s.Problems()
	if len(probs) != 1 || !strings.Contains(probs[0].Error(), `key "/a": an array where a map is expected`) {
		t.Errorf("problems %v", probs)
	}
	var keys []string
	for _, l := range s.Leaves() {
		keys = append(keys, l.Key)
	}
	if !slices.Equal(keys, []string{"/b", "/ok"}) {
		t.Errorf("leaves %q", keys)
	}
	if _, err := MsgpackToJSON(nested, 1<<20); !errors.Is(err, ErrVLMeta) {
		t.Errorf("JSON of a value nested 200,000 deep: %v", err)
	}
}

func TestNotAStore(t *testing.T) {
	plain := fixtureLeaf(t, "nd_f64_1d.b2nd").fr
	if _, err := openCrafted(t, plain); !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), "none of the b2embed") {
		t.Errorf("a frame without a marker: %v", err)
	}
	if _, err := openCrafted(t, []byte("not a frame at all")); !errors.Is(err, ErrNotStore) {
		t.Errorf("not a frame: %v", err)
	}
	// A marked frame without estore_metadata is an empty store (a store
	// python-blosc2 3.7 created and never wrote to).
	s, err := openCrafted(t, craftStore(t, nil, nil))
	if err != nil || len(s.Leaves()) != 0 || len(s.Problems()) != 0 {
		t.Errorf("empty store: %v %v", err, s.Problems())
	}
}

// TestHostileHugeMap: a map over MaxEntries keeps its first entries.
func TestHostileHugeMap(t *testing.T) {
	defer func(n int) { MaxEntries = n }(MaxEntries)
	MaxEntries = 10
	data, na, _ := twoFrames(t)
	var ents []kv
	for i := range 50 {
		ents = append(ents, kv{fmt.Sprintf("/k%02d", i), rng(0, na)})
	}
	// Every entry is the same range: the 10 kept overlap one another.
	s, err := openCrafted(t, craftStore(t, data, rangeMap(t, ents...)))
	if err != nil {
		t.Fatal(err)
	}
	probs := s.Problems()
	if len(probs) == 0 || !strings.Contains(probs[0].Error(), "the embed map has 50 entries; those past the first 10 are left out") {
		t.Fatalf("problems %v", probs)
	}
	// MaxProblems bounds what is kept.
	defer func(n int) { MaxProblems = n }(MaxProblems)
	MaxProblems = 3
	s, _ = openCrafted(t, craftStore(t, data, rangeMap(t, ents...)))
	if probs := s.Problems(); len(probs) != 4 || !strings.Contains(probs[3].Error(), "more problems not listed") {
		t.Errorf("problems %v", probs)
	}
}

// TestHostileLeafBytes: a range that holds no frame fails alone.
func TestHostileLeafBytes(t *testing.T) {
	data, na, nb := twoFrames(t)
	data = append(data, bytes.Repeat([]byte{0x9e}, 200)...)
	s, err := openCrafted(t, craftStore(t, data, rangeMap(t,
		kv{"/junk", rng(na+nb, 200)}, kv{"/x", rng(0, na)}, kv{"/cut", rng(na, nb-1)})))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"/junk", "/cut"} {
		_, l, _ := s.Lookup(k)
		if _, _, err := l.View(); err == nil || !strings.Contains(err.Error(), "crafted.b2e:"+k) {
			t.Errorf("%s: %v, want an error naming the store and key", k, err)
		}
	}
	_, l, _ := s.Lookup("/x")
	checkLeaf(t, l, fixtureLeaf(t, "nd_f64_1d.b2nd"))
}

// TestHostileDir: conflicts between files and embedded entries.
func TestHostileDir(t *testing.T) {
	dir := t.TempDir()
	d := newDictWriter(MarkerTree, 1<<13, 1<<16)
	nd := fixtureLeaf(t, "nd_f64_1d.b2nd")
	d.Set("/a", nd.fr, nd.nbytes, ".b2nd") // embedded
	d.Set("/b", nd.fr, nd.nbytes, ".b2nd") // embedded, and a file below
	d.Files["a/x.b2nd"] = nd.fr            // /a is then also a directory
	d.Files["c.b2nd"] = nd.fr
	d.Files["c.b2f"] = fixtureLeaf(t, "tiny_1byte.b2frame").fr // two files of /c
	d.Files["b.b2nd"] = nd.fr                                  // a file overrides the embedded /b
	d.Files["junk.txt"] = []byte("not a frame")                // not a leaf
	d.Files["frame.raw"] = nd.fr                               // a frame of another suffix: a leaf
	d.Write(dir)
	s, err := OpenDir(NewDirSource(dir), "hostile.b2d", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var keys []string
	for _, l := range s.Leaves() {
		keys = append(keys, l.Key)
	}
	if want := []string{"/a/x", "/b", "/c", "/frame"}; !slices.Equal(keys, want) {
		t.Errorf("leaves %q, want %q", keys, want)
	}
	_, b, _ := s.Lookup("/b")
	_, c, _ := s.Lookup("/c")
	if b.Embedded || c.Member != "c.b2nd" {
		t.Errorf("/b embedded %v; /c from %q", b.Embedded, c.Member)
	}
	probs := fmt.Sprint(s.Problems())
	for _, w := range []string{`files "c.b2nd" and "c.b2f" both hold key "/c"; "c.b2f" is left out`,
		`key "/a" is a leaf and also a directory (of "/a/x"); the leaf is left out`} {
		if !strings.Contains(probs, w) {
			t.Errorf("problems %s\nlack %s", probs, w)
		}
	}
	// No embed.b2e, or one that is not a store: not a store.
	os.Remove(filepath.Join(dir, EmbedFile))
	if _, err := OpenDir(NewDirSource(dir), "x", nil); !errors.Is(err, ErrNotStore) {
		t.Errorf("without embed.b2e: %v", err)
	}
	os.WriteFile(filepath.Join(dir, EmbedFile), nd.fr, 0o644)
	if _, err := OpenDir(NewDirSource(dir), "x", nil); !errors.Is(err, ErrNotStore) {
		t.Errorf("embed.b2e without a marker: %v", err)
	}
}

// TestDirSourceWalkBound walks a store directory of many entries that
// are not files (symbolic links, empty folders): they count against
// maxWalked, so that a directory of millions of them is refused rather
// than read; under the bound the files among them are listed, across
// reads of a thousand entries.
func TestDirSourceWalkBound(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f.b2nd"), []byte("x"), 0o644)
	for i := range 1500 {
		os.Symlink("f.b2nd", filepath.Join(dir, fmt.Sprintf("l%04d", i)))
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	for i := range 40 {
		os.Mkdir(filepath.Join(dir, "sub", fmt.Sprintf("d%02d", i)), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "sub", "g.b2f"), []byte("y"), 0o644)
	ms, err := NewDirSource(dir).Members()
	if err != nil || len(ms) != 2 {
		t.Fatalf("members %v, %v; want f.b2nd and sub/g.b2f", ms, err)
	}
	defer func(n int) { maxWalked = n }(maxWalked)
	maxWalked = 1000
	if _, err := NewDirSource(dir).Members(); !errors.Is(err, ErrBadEntry) {
		t.Fatalf("1,543 entries, bound 1,000: %v, want ErrBadEntry", err)
	}
}
