package b2store

import (
	"bytes"
	"io"
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// storeSeeds returns the store frames of the fixtures: estore.b2e and
// every directory's embed.b2e.
func storeSeeds(t testing.TB) [][]byte {
	var out [][]byte
	for _, p := range []string{"estore.b2e", "tree_v370.b2d/embed.b2e", "tree_t64k.b2d/embed.b2e", "dict_t64k.b2d/embed.b2e", "tree_v411.b2d/embed.b2e"} {
		b, err := os.ReadFile(filepath.Join(storesDir, p))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzEmbedMap decodes arbitrary bytes as the estore_metadata of a store
// of 100,000 bytes and validates the entries. Nothing may panic,
// recurse without bound or allocate more than the input justifies.
func FuzzEmbedMap(f *testing.F) {
	for _, b := range storeSeeds(f) {
		e, err := OpenEmbed(bytes.NewReader(b), int64(len(b)), "seed", nil)
		if err != nil {
			f.Fatal(err)
		}
		raw, err := e.rawVLMeta(VLMetaEmbedMap)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add(rangeMap(f, kv{"/a", rng(0, 5000)}, kv{"/a/b", rng(2500, 100)}, kv{"/../x", rng(0, 1)}, kv{"/c", []kv{{"urlbase", "u"}, {"path", "p"}}}))
	f.Add(append([]byte{0x81, 0xa9}, append([]byte("embed_map"), bytes.Repeat([]byte{0x91}, 1000)...)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := testkit.StartAlloc()
		defer func() { mem.Check(t, len(data), 0) }()
		var probs problems
		em, err := parseEmbedMap(data, "fuzz", &probs)
		if err != nil {
			return
		}
		ents := em.validate("fuzz", 100000, &probs)
		// What validate keeps can be read: keys that are paths, ranges
		// inside the store.
		for i, e := range ents {
			if checkKey(e.Key) != nil {
				t.Fatalf("kept key %q", e.Key)
			}
			if i > 0 && ents[i-1].Key >= e.Key {
				t.Fatal("keys not sorted and unique")
			}
			if e.C2 == nil && (e.Offset < 0 || e.Length < 0 || e.Offset+e.Length > 100000) {
				t.Fatalf("kept range %d+%d", e.Offset, e.Length)
			}
		}
		_ = probs.errors()
	})
}

// FuzzOpenEmbed opens arbitrary bytes as a .b2e store and reads what it
// holds: its tree, a few leaves (kind, view, vlmeta as JSON), its
// objects. Opening the store may allocate at most what its input
// justifies (testkit.AllocBound); each leaf, at most what the same
// frame as a file of its own would (its bytes are the store's plain
// bytes, which a small input can make large).
func FuzzOpenEmbed(f *testing.F) {
	for _, b := range storeSeeds(f) {
		f.Add(b)
	}
	data, na, nb := twoFrames(f)
	f.Add(craftStore(f, data, rangeMap(f, kv{"/a", rng(0, na)}, kv{"/a/b", rng(na, nb)}, kv{"/c", rng(na/2, 100)})))
	const maxLeaves = 4
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := testkit.StartAlloc()
		s, err := OpenEmbedStore(bytes.NewReader(data), int64(len(data)), "fuzz", nil)
		mem.Check(t, len(data), 0)
		if err != nil {
			return
		}
		_ = s.Problems()
		if vm, err := s.VLMeta(); err == nil {
			for _, n := range vm.Names()[:min(2, len(vm.Names()))] {
				_, _ = vm.JSON(n)
			}
		}
		buf := make([]byte, 64<<10)
		for i, l := range s.Leaves() {
			if i == maxLeaves {
				break
			}
			mem := testkit.StartAlloc()
			if _, _, err := l.Kind(); err == nil {
				if r, n, err := l.View(); err == nil {
					_, _ = r.ReadAt(buf[:min(n, int64(len(buf)))], 0)
					if n > int64(len(buf)) {
						_, _ = r.ReadAt(buf, n-int64(len(buf)))
					}
				}
				if vm, err := l.VLMeta(); err == nil {
					for _, n := range vm.Names()[:min(2, len(vm.Names()))] {
						_, _ = vm.JSON(n)
					}
				}
			}
			l.Forget()
			mem.Check(t, len(data)+int(min(l.Size, 1<<30)), 0)
		}
		if r, err := s.Embed().Bytes(0, s.Embed().Size()); err == nil {
			_, _ = r.ReadAt(buf[:min(s.Embed().Size(), int64(len(buf)))], 0)
		}
		_, _ = s.Objects()
	})
}

// FuzzTree opens arbitrary bytes as a store file (a .b2z archive when
// they start with "PK", else a .b2e) and walks its tree as the mount
// does: every directory listed, Stat of each entry, the first bytes and
// the last of a few files read. Opening may allocate at most what the
// input justifies; listing a directory, for each of its leaves, at most
// what the leaf's frame as a file of its own would.
func FuzzTree(f *testing.F) {
	for _, b := range storeSeeds(f) {
		f.Add(b)
	}
	for _, name := range []string{"tree_t64k.b2z", "dict_t64k_zip64.b2z", "tree_v411.b2z"} {
		b, err := os.ReadFile(filepath.Join(storesDir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	const maxDirs, maxFiles = 16, 4
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := testkit.StartAlloc()
		tr, err := OpenFileTree(bytes.NewReader(data), int64(len(data)), "fuzz", nil)
		if err != nil {
			mem.Check(t, len(data), 0)
			return
		}
		defer tr.Close()
		mem.Check(t, len(data), uint64(min(leafAllowance(tr.Store().Root()), 1<<30)))
		buf := make([]byte, 4096)
		dirs, files := []string{""}, 0
		for i := 0; i < len(dirs) && i < maxDirs; i++ {
			d, _, _ := tr.Store().Lookup("/" + dirs[i])
			mem := testkit.StartAlloc()
			ents, err := tr.ReadDir(dirs[i])
			if err != nil {
				t.Fatalf("ReadDir(%q) of a listed directory: %v", dirs[i], err)
			}
			mem.Check(t, len(data), uint64(leafAllowance(d)))
			for _, e := range ents {
				p := path.Join(dirs[i], e.Name)
				if _, err := tr.Stat(p); err != nil {
					t.Fatalf("Stat(%q) of a listed entry: %v", p, err)
				}
				if e.Dir {
					dirs = append(dirs, p)
					continue
				}
				if files++; files > maxFiles {
					continue
				}
				c, err := tr.Open(p)
				if err != nil {
					continue // a frame that opened to be listed may fail on a second look only for its bytes
				}
				if c.Size() != e.Size {
					t.Fatalf("%s: size %d, listed %d", p, c.Size(), e.Size)
				}
				_, _ = c.ReadAt(buf[:min(c.Size(), int64(len(buf)))], 0)
				if c.Size() > int64(len(buf)) {
					_, _ = c.ReadAt(buf, c.Size()-int64(len(buf)))
				}
				c.(io.Closer).Close()
			}
		}
		_ = tr.Problems()
		if m := tr.openLeaves(); m > MaxOpenLeaves {
			t.Fatalf("%d leaves open", m)
		}
	})
}

// leafAllowance is what listing directory d may allocate beyond its
// input: for each leaf (and its vlmeta leaf), what its frame as a file of
// its own of its size may (testkit.AllocBound), and a record for it.
func leafAllowance(d *Dir) int64 {
	if d == nil {
		return 0
	}
	var n int64
	add := func(l *Leaf) {
		if l != nil {
			n += min(int64(testkit.AllocBound(int(min(l.Size, 1<<30)))), 1<<40) + 4<<10
		}
	}
	for _, l := range d.leaves {
		add(l)
	}
	for _, sub := range d.dirs {
		add(sub.vlmeta)
	}
	add(d.vlmeta)
	return n
}
