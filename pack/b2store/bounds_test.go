package b2store

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// Lying inputs for the bounds of a store: each holds one item more than
// its bound allows (vlmeta shown as extended attributes, values of a
// .b2z), beside items at the bound, and must be refused as documented
// (the item left out with one problem naming the store and what is
// wrong), with no panic and bounded allocation.

// vlLeaf is an SChunk frame of one byte whose vlmetalayers are vl
// (values as given: msgpack, or not).
func vlLeaf(t testing.TB, vl ...frame.Metalayer) []byte {
	return writeFrame(t, []byte("v"), 1<<13, 1, nil, vl)
}

// jsonOfLen is a msgpack string whose JSON is n bytes: n-2 letters
// between quotes.
func jsonOfLen(t testing.TB, n int) []byte {
	return packb(t, strings.Repeat("x", n-2))
}

// notMsgpack is n bytes that are no msgpack (0xc1, a code msgpack never
// uses, then zeros): shown as {"$raw": base64}.
func notMsgpack(n int) []byte {
	b := make([]byte, n)
	b[0] = 0xc1
	return b
}

// xattrSizeMax is the largest value of an extended attribute Linux takes
// (XATTR_SIZE_MAX): the bound maxXAttrValue must keep.
const xattrSizeMax = 64 << 10

// TestTreeXAttrValueTooLarge lies with a leaf's vlmeta value whose JSON
// is one byte more than an extended attribute holds (Linux's 64 KiB),
// beside a value of exactly 64 KiB of JSON and a small one: the leaf is
// shown with the two that fit and without the liar, and the store
// records one problem naming the store, the key and the value.
func TestTreeXAttrValueTooLarge(t *testing.T) {
	fr := vlLeaf(t,
		frame.Metalayer{Name: "edge", Value: jsonOfLen(t, xattrSizeMax)},
		frame.Metalayer{Name: "over", Value: jsonOfLen(t, xattrSizeMax+1)},
		frame.Metalayer{Name: "small", Value: packb(t, "ok")})
	tr, err := treeOfBytes(embedStoreOf(t, map[string][]byte{"/leaf": fr}), "xattr.b2e")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ents, err := tr.ReadDir("")
	if err != nil || len(ents) != 1 || ents[0].Name != "leaf" {
		t.Fatalf("entries %v, %v; want the leaf", ents, err)
	}
	xa := ents[0].XAttrs
	if len(xa) != 2 || len(xa[XAttrPrefix+"edge"]) != xattrSizeMax || string(xa[XAttrPrefix+"small"]) != `"ok"` {
		t.Errorf("xattrs of %d values (edge %d bytes, small %q), want edge of %d bytes and small",
			len(xa), len(xa[XAttrPrefix+"edge"]), xa[XAttrPrefix+"small"], xattrSizeMax)
	}
	probs := tr.Problems()
	want := fmt.Sprintf(`xattr.b2e: "/leaf": vlmeta "over" is not shown: %v: %d bytes of JSON, more than an extended attribute holds (%d)`,
		ErrVLMeta, xattrSizeMax+1, xattrSizeMax)
	if len(probs) != 1 || !errors.Is(probs[0], ErrVLMeta) || probs[0].Error() != want {
		t.Errorf("problems %v\nwant one: %s", probs, want)
	}
	if b := readTreeFile(t, tr, "leaf"); string(b) != "v" {
		t.Errorf("the leaf reads %q", b)
	}
}

// TestTreeXAttrsPastTreeLimit lies with a store whose vlmeta, each small,
// pass MaxTreeXAttrs in all (lowered here to eight values' worth: the
// store's own, then five in /a and five in /b, listed in that order):
// the root and /a show theirs, /b shows two of its five entries' and the
// other three entries without theirs, one problem each, and what the
// tree keeps is exactly the bound. Listing /b again changes nothing.
func TestTreeXAttrsPastTreeLimit(t *testing.T) {
	const valueJSON = 100
	cost := int64(len(XAttrPrefix+"v") + valueJSON)
	defer func(n int64) { MaxTreeXAttrs = n }(MaxTreeXAttrs)
	MaxTreeXAttrs = 8 * cost
	w := newStoreWriter(MarkerEmbed, 1<<13)
	fr := vlLeaf(t, frame.Metalayer{Name: "v", Value: jsonOfLen(t, valueJSON)})
	for _, d := range []string{"a", "b"} {
		for i := range 5 {
			w.Set(fmt.Sprintf("/%s/l%d", d, i), fr)
		}
	}
	w.ExtraVL = []kv{{"v", strings.Repeat("x", valueJSON-2)}}
	tr, err := treeOfBytes(w.Frame(), "many.b2e")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	kept := int64(0)
	count := func(ents []pack.TreeEntry) (shown int) {
		for _, e := range ents {
			for n, v := range e.XAttrs {
				kept += int64(len(n) + len(v))
				shown++
			}
		}
		return shown
	}
	if n := count([]pack.TreeEntry{tr.Root()}); n != 1 {
		t.Errorf("the root shows %d values, want its one", n)
	}
	for _, c := range []struct {
		dir   string
		shown int
	}{{"a", 5}, {"b", 2}} {
		ents, err := tr.ReadDir(c.dir)
		if err != nil || len(ents) != 5 {
			t.Fatalf("%s: %d entries, %v; want all 5, with or without vlmeta", c.dir, len(ents), err)
		}
		if n := count(ents); n != c.shown {
			t.Errorf("%s: %d entries show their vlmeta, want %d", c.dir, n, c.shown)
		}
	}
	if kept != MaxTreeXAttrs {
		t.Errorf("the tree shows %d bytes of vlmeta, want the bound, %d", kept, MaxTreeXAttrs)
	}
	probs := tr.Problems()
	if len(probs) != 3 {
		t.Errorf("%d problems, want 3: %v", len(probs), probs)
	}
	for _, p := range probs {
		if !errors.Is(p, ErrVLMeta) || !strings.HasPrefix(p.Error(), `many.b2e: "/b/l`) ||
			!strings.Contains(p.Error(), fmt.Sprintf(`vlmeta "v" is not shown: %v: the store's vlmeta pass %d bytes`, ErrVLMeta, MaxTreeXAttrs)) {
			t.Errorf("problem %q, want ErrVLMeta naming the store, a key of /b and the bound", p)
		}
	}
	if _, err := tr.ReadDir("b"); err != nil || len(tr.Problems()) != 3 {
		t.Errorf("listing /b again: %v, %d problems", err, len(tr.Problems()))
	}
}

// failingSource is a store directory in memory whose member bad fails to
// open (a bucket's read that failed: no verdict on the store).
type failingSource struct {
	files map[string][]byte
	mu    sync.Mutex
	bad   string
}

func (s *failingSource) fail(p string) { s.mu.Lock(); s.bad = p; s.mu.Unlock() }

func (s *failingSource) Members() ([]Member, error) {
	var out []Member
	for p, b := range s.files {
		out = append(out, Member{Path: p, Size: int64(len(b))})
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func (s *failingSource) Open(p string) (io.ReaderAt, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.files[p]
	switch {
	case !ok:
		return nil, 0, fmt.Errorf("%s: %w", p, ErrNotFound)
	case p == s.bad:
		return nil, 0, fmt.Errorf("%s: read failed: 503 SlowDown", p)
	}
	return bytes.NewReader(b), int64(len(b)), nil
}

// TestTreeXAttrsBoundAfterFailedListing lies with a TreeStore whose
// vlmeta fill MaxTreeXAttrs exactly (lowered here to five values' worth:
// those of directory a and of leaves l0 to l3), and listings of its top
// directory that fail after some of them were counted: one on a read of
// b's vlmeta (a's seen), one on a read of leaf z (a's and the four
// leaves' seen). The listing that follows, which reads, shows all five,
// as the vlmeta of a listing that failed, and is not kept, are no longer
// counted against the bound.
func TestTreeXAttrsBoundAfterFailedListing(t *testing.T) {
	const valueJSON = 100
	defer func(n int64) { MaxTreeXAttrs = n }(MaxTreeXAttrs)
	MaxTreeXAttrs = 5 * int64(len(XAttrPrefix+"v")+valueJSON)
	d := newDictWriter(MarkerTree, 1<<13, 0) // every value in a file of its own
	fr := vlLeaf(t, frame.Metalayer{Name: "v", Value: jsonOfLen(t, valueJSON)})
	for i := range 4 {
		d.Set(fmt.Sprintf("/l%d", i), fr, 1, ".b2f")
	}
	d.Set("/z", vlLeaf(t), 1, ".b2f")
	var vl []kv
	d.SetVLMeta("/a", &vl, "v", strings.Repeat("x", valueJSON-2))
	d.Set("/b/"+vlmetaKey, schunkWithVLMeta(t, nil), 0, ".b2f")
	d.Set("/a/x", vlLeaf(t), 1, ".b2f")
	d.Set("/b/x", vlLeaf(t), 1, ".b2f")
	src := &failingSource{files: d.Contents()}
	tr, err := OpenDirTree(src, "flaky.b2d", pack.NoCache{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for _, bad := range []string{"b/" + vlmetaKey + ".b2f", "z.b2f"} {
		src.fail(bad)
		if _, err := tr.ReadDir(""); err == nil || !strings.Contains(err.Error(), bad+": read failed") {
			t.Fatalf("listing with %s failing: %v, want its failure", bad, err)
		}
	}
	src.fail("")
	ents, err := tr.ReadDir("")
	if err != nil || len(ents) != 7 {
		t.Fatalf("listing again: %d entries, %v", len(ents), err)
	}
	for _, e := range ents {
		want := 1
		if e.Name == "b" || e.Name == "z" {
			want = 0
		}
		if len(e.XAttrs) != want {
			t.Errorf("%s: %d vlmeta shown, want %d", e.Name, len(e.XAttrs), want)
		}
	}
	if p := tr.Problems(); len(p) != 0 {
		t.Errorf("problems %v", p)
	}
}

// rawFits is the largest value of bytes that are no msgpack whose
// {"$raw": base64} is at most MaxVLMetaJSON bytes.
func rawFits() int {
	return (MaxVLMetaJSON - len(`{"$raw":""}`)) / 4 * 3
}

// TestVLMetaRawTooLarge lies with vlmeta values that are no msgpack (as
// c-blosc2's own tools write them, shown as {"$raw": base64}) whose
// base64 would pass MaxVLMetaJSON: one 3 bytes over the largest that
// fits, and one of pack.MaxMetaLayer bytes (16 MiB that a frame stores
// in a few KiB). VLMeta.Shown refuses both with an error wrapping
// ErrVLMeta that names the store, the key and the value, without
// encoding them (the largest allocates no more than its two readings),
// and shows the one that fits; the tree shows the leaf without any of
// the three (the one that fits is still too large for an attribute),
// with one problem each.
func TestVLMetaRawTooLarge(t *testing.T) {
	fits := rawFits()
	if n := base64.StdEncoding.EncodedLen(fits+1) + len(`{"$raw":""}`); n <= MaxVLMetaJSON {
		t.Fatalf("%d bytes show in %d bytes: not past the bound", fits+1, n)
	}
	huge := int(pack.MaxMetaLayer)
	fr := vlLeaf(t,
		frame.Metalayer{Name: "fits", Value: notMsgpack(fits)},
		frame.Metalayer{Name: "over", Value: notMsgpack(fits + 1)},
		frame.Metalayer{Name: "huge", Value: notMsgpack(huge)})
	b := embedStoreOf(t, map[string][]byte{"/leaf": fr})
	s, err := OpenEmbedStore(bytes.NewReader(b), int64(len(b)), "raw.b2e", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, l, err := s.Lookup("/leaf")
	if err != nil {
		t.Fatal(err)
	}
	vm, err := l.VLMeta()
	if err != nil {
		t.Fatal(err)
	}
	j, err := vm.Shown("fits")
	if err != nil || len(j) > MaxVLMetaJSON || len(j) < MaxVLMetaJSON-3 || !bytes.HasPrefix(j, []byte(`{"$raw":"wQAA`)) {
		t.Errorf("fits: %d bytes %.20q, %v; want {\"$raw\": …} of at most %d bytes", len(j), j, err, MaxVLMetaJSON)
	}
	for _, c := range []struct {
		name string
		n    int
	}{{"over", fits + 1}, {"huge", huge}} {
		mem := testkit.StartAlloc()
		j, err := vm.Shown(c.name)
		got := mem.Allocated()
		want := fmt.Sprintf(`raw.b2e:/leaf: vlmeta %q: %v: %d bytes, not msgpack, too large to show`, c.name, ErrVLMeta, c.n)
		if err == nil || !errors.Is(err, ErrVLMeta) || err.Error() != want {
			t.Errorf("%s: %d bytes, %v\nwant the error %s", c.name, len(j), err, want)
		}
		// Reading the value twice (as msgpack, then as it is) is what it
		// may cost; its base64 would be a third of that again, twice.
		if limit := uint64(2*c.n + 1<<20); got > limit {
			t.Errorf("%s: refusing %d bytes allocated %d, more than %d", c.name, c.n, got, limit)
		}
	}

	tr, err := treeOfBytes(b, "raw.b2e")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ents, err := tr.ReadDir("")
	if err != nil || len(ents) != 1 || len(ents[0].XAttrs) != 0 {
		t.Fatalf("entries %v, %v; want the leaf without vlmeta", ents, err)
	}
	probs := fmt.Sprint(tr.Problems())
	if n := len(tr.Problems()); n != 3 {
		t.Errorf("%d problems, want 3: %s", n, probs)
	}
	for _, w := range []string{
		fmt.Sprintf(`raw.b2e: "/leaf": vlmeta "fits" is not shown: %v: %d bytes of JSON, more than an extended attribute holds`, ErrVLMeta, len(j)),
		fmt.Sprintf(`raw.b2e: "/leaf": vlmeta "over" is not shown: raw.b2e:/leaf: vlmeta "over": %v: %d bytes, not msgpack, too large to show`, ErrVLMeta, fits+1),
		fmt.Sprintf(`raw.b2e: "/leaf": vlmeta "huge" is not shown: raw.b2e:/leaf: vlmeta "huge": %v: %d bytes, not msgpack, too large to show`, ErrVLMeta, huge),
	} {
		if !strings.Contains(probs, w) {
			t.Errorf("problems %s\nlack %s", probs, w)
		}
	}
}

// docEntries is the most values of a store the user guide promises to
// show (and FORMATS.md §14): the bound MaxEntries must keep.
const docEntries = 1 << 16

// TestZipMembersPastMaxEntries lies with a .b2z of 1,000 more values
// than MaxEntries (the real bound, 65,536: the archive is 7 MB of
// headers, embed.b2e last as python-blosc2 writes it): ZipSource lists
// no more than MaxEntries+1 of them and embed.b2e, the store keeps the
// first MaxEntries and records one ErrBadEntry naming the archive, all
// in bounded memory.
func TestZipMembersPastMaxEntries(t *testing.T) {
	n := docEntries + 1000
	ms := make([]testkit.ZipMember, 0, n+1)
	for i := range n {
		ms = append(ms, testkit.ZipMember{Name: fmt.Sprintf("k%06d.b2nd", i)}) // no bytes: no frame
	}
	ms = append(ms, testkit.ZipMember{Name: EmbedFile, Data: newStoreWriter(MarkerDict, 1<<13).Frame()})
	b := testkit.BuildZip(ms, nil)

	mem := testkit.StartAlloc()
	src, err := OpenZip(bytes.NewReader(b), int64(len(b)), "many.b2z")
	if err != nil {
		t.Fatal(err)
	}
	members, _ := src.Members()
	if len(members) != docEntries+2 || members[len(members)-1].Path != EmbedFile {
		t.Errorf("%d members listed of %d, want %d: the first %d and %s", len(members), n+1, docEntries+2, docEntries+1, EmbedFile)
	}
	tr, err := OpenDirTree(src, "many.b2z", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	mem.Check(t, len(b), 0)
	s := tr.Store()
	if got := len(s.Leaves()); got != docEntries || tr.Root().Attrs["keys"] != fmt.Sprint(docEntries) {
		t.Errorf("%d leaves (keys %s), want %d", got, tr.Root().Attrs["keys"], docEntries)
	}
	for key, in := range map[string]bool{"/k000000": true, fmt.Sprintf("/k%06d", docEntries-1): true, fmt.Sprintf("/k%06d", docEntries): false} {
		if _, _, err := s.Lookup(key); (err == nil) != in {
			t.Errorf("%s: %v, want kept %v", key, err, in)
		}
	}
	probs := tr.Problems()
	want := fmt.Sprintf("files beside %s; those past the first %d are left out", EmbedFile, docEntries)
	if len(probs) != 1 || !errors.Is(probs[0], ErrBadEntry) || !strings.HasPrefix(probs[0].Error(), "many.b2z: ") || !strings.HasSuffix(probs[0].Error(), want) {
		t.Errorf("problems %v\nwant one: %s", probs, want)
	}
}

// TestStoreOfMaxEntriesValues checks that MaxEntries bounds a store's
// values, not its files: embed.b2e beside exactly MaxEntries values is
// no problem, in a .b2z at the real limit and in a .b2d (the bound
// lowered), and one value more is left out (.b2z) or refused (.b2d,
// whose walk stops past the bound).
func TestStoreOfMaxEntriesValues(t *testing.T) {
	embed := newStoreWriter(MarkerDict, 1<<13).Frame()
	ms := make([]testkit.ZipMember, 0, docEntries+1)
	for i := range docEntries {
		ms = append(ms, testkit.ZipMember{Name: fmt.Sprintf("k%06d.b2nd", i)})
	}
	ms = append(ms, testkit.ZipMember{Name: EmbedFile, Data: embed})
	b := testkit.BuildZip(ms, nil)
	src, err := OpenZip(bytes.NewReader(b), int64(len(b)), "full.b2z")
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenDir(src, "full.b2z", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, probs := len(s.Leaves()), s.Problems(); got != docEntries || len(probs) != 0 {
		t.Errorf(".b2z of %d values and %s: %d leaves, problems %v; want them all and none", docEntries, EmbedFile, got, probs)
	}

	defer func(m int) { MaxEntries = m }(MaxEntries)
	MaxEntries = 8
	for _, tc := range []struct {
		values int
		ok     bool
	}{{8, true}, {9, false}} {
		dir := t.TempDir()
		for i := range tc.values {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("k%d.b2nd", i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, EmbedFile), embed, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := OpenDir(NewDirSource(dir), "full.b2d", nil)
		switch {
		case tc.ok && err != nil:
			t.Errorf(".b2d of %d values and %s, MaxEntries %d: %v", tc.values, EmbedFile, MaxEntries, err)
		case tc.ok && (len(s.Leaves()) != tc.values || len(s.Problems()) != 0):
			t.Errorf(".b2d of %d values and %s, MaxEntries %d: %d leaves, problems %v", tc.values, EmbedFile, MaxEntries, len(s.Leaves()), s.Problems())
		case !tc.ok && !errors.Is(err, ErrBadEntry):
			t.Errorf(".b2d of %d values and %s, MaxEntries %d: %v, want ErrBadEntry", tc.values, EmbedFile, MaxEntries, err)
		}
		if s != nil {
			s.Close()
		}
	}
}
