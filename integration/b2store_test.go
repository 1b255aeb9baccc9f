package integration

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/b2w"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// storesDir holds the store fixtures (testdata/b2store/README.md says
// which writer wrote which).
const storesDir = "../testdata/b2store"

// storeNames returns the stores of dir: .b2e and .b2z files, .b2d
// directories.
func storeNames(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if _, ok := pack.TreeFormatFor(e.Name(), e.IsDir()); ok {
			out = append(out, e.Name())
		}
	}
	return out
}

// openStore opens the store at p as the mount does, closed at the end of
// the test.
func openStore(t testing.TB, p string) pack.Tree {
	t.Helper()
	tr, err := all.OpenTree(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// TestB2Store mounts the store fixtures (a TreeStore and a DictStore
// with embedded and external leaves, nested keys and subtree vlmeta, a
// 3.7.0 TreeStore, a 4.11 TreeStore of files only, an EmbedStore, and
// the .b2z archives of three, one with ZIP64 local headers): each is a
// read-only directory of its own name that shows what its tree shows,
// names, sizes, bytes and attributes; NumPy loads its arrays; every
// change is refused with EROFS; what a store leaves out is logged.
func TestB2Store(t *testing.T) {
	setup.Require(t)
	py := pythonNumpy(t)
	src := filepath.Join(t.TempDir(), "src")
	copyTree(t, storesDir, src)
	for _, n := range []string{"nd_i32_2d.b2nd", "nd_u8_3d.b2nd"} {
		b, err := os.ReadFile(filepath.Join(fixtures.Dir(), n))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(src, n), b, 0o644)
	}
	m := mountDaemon(t, src)
	names := storeNames(t, src)
	if len(names) != 9 {
		t.Fatalf("stores %q", names)
	}
	var problems []string
	for _, name := range names {
		st, err := os.Stat(m.Path(name))
		if err != nil || !st.IsDir() || st.Mode().Perm()&0o222 != 0 {
			t.Fatalf("%s: %v, %v: want a read-only directory", name, st.Mode(), err)
		}
		tr := openStore(t, filepath.Join(src, name))
		n := mounttest.CheckTree(t, tr, m.Path(name))
		t.Logf("%s: %d files", name, n)
		if p, ok := tr.(pack.TreeProblems); ok {
			for _, err := range p.Problems() {
				problems = append(problems, strings.ReplaceAll(err.Error(), filepath.Join(src, name), ""))
			}
		}
	}
	// NumPy reads the arrays as it reads the same arrays as .b2nd files.
	out := runWithJSON(t, py, `
import json, sys, numpy as np
m = json.load(sys.stdin)
big = np.load(m + "/tree_t64k.b2z/group/sub/big.npy", mmap_mode="r")
assert big.shape == (300, 30) and big.dtype == np.float64, (big.shape, big.dtype)
assert (big.ravel() == np.arange(9000) / 4).all()
for store, key, ref in [("tree_t64k.b2z", "group/x.npy", "nd_i32_2d.npy"), ("tree_t64k.b2d", "group/sub/y.npy", "nd_u8_3d.npy"),
                        ("estore.b2e", "dir1/sub/node4.npy", "nd_u8_3d.npy"), ("tree_v370.b2d", "arrays/a2.npy", "nd_i32_2d.npy")]:
    a, b = np.load(m + "/" + store + "/" + key), np.load(m + "/" + ref)
    assert a.dtype == b.dtype and a.shape == b.shape and (a == b).all(), (store, key)
print("ok")
`, m.Dir)
	if strings.TrimSpace(out) != "ok" {
		t.Errorf("numpy: %s", out)
	}
	// Read-only: every change is EROFS.
	z := m.Path("tree_t64k.b2z")
	for what, err := range map[string]error{
		"create":   os.WriteFile(filepath.Join(z, "new"), nil, 0o644),
		"write":    os.WriteFile(filepath.Join(z, "a.npy"), nil, 0o644),
		"remove":   os.Remove(filepath.Join(z, "a.npy")),
		"rmdir":    os.Remove(filepath.Join(z, "group", "sub")),
		"mkdir":    os.Mkdir(filepath.Join(z, "d"), 0o755),
		"rename":   os.Rename(filepath.Join(z, "a.npy"), filepath.Join(z, "b.npy")),
		"chmod":    os.Chmod(filepath.Join(z, "a.npy"), 0o600),
		"setxattr": unix.Setxattr(z, "user.blosc2.vlmeta.author", []byte(`"x"`), 0),
	} {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s in a store: %v, want EROFS", what, err)
		}
	}
	// The stores' problems (a BatchArray, an ObjectArray left out) are
	// logged, once each, with the store's name.
	log := m.LogText()
	if len(problems) == 0 {
		t.Error("no store left anything out")
	}
	for _, p := range problems {
		if !strings.Contains(log, p) {
			t.Errorf("the log lacks %q:\n%s", p, log)
		}
	}
	for _, line := range []string{"dict_t64k.b2z: key \"/dir/batch\" is left out"} {
		if strings.Count(log, line) != 1 {
			t.Errorf("the log has %q %d times:\n%s", line, strings.Count(log, line), log)
		}
	}
}

// TestB2StoreHostile mounts hostile stores beside good ones: keys that
// cannot be paths, ranges over one another or past the store, a key both
// a leaf and a directory, deep nesting, 20,000 leaves in one directory,
// a deflated member, a member named out of the archive, a .b2z that is no
// ZIP and one without a store, a .b2d without embed.b2e. Each problem is
// one clear log line naming the store and the key or member; what is
// good in each store reads; what is no store is shown as it is stored;
// the daemon's memory stays bounded.
func TestB2StoreHostile(t *testing.T) {
	setup.Require(t)
	src := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	nd, err := os.ReadFile(filepath.Join(fixtures.Dir(), "nd_f64_1d.b2nd"))
	if err != nil {
		t.Fatal(err)
	}
	tiny, err := os.ReadFile(filepath.Join(fixtures.Dir(), "tiny_1byte.b2frame"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rng := func(off, n int) []b2w.KV { return []b2w.KV{{"offset", off}, {"length", n}} }
	embedStore := func(data []byte, ents ...b2w.KV) []byte {
		meta := b2w.Packb([]b2w.KV{{"embed_map", ents}, {"current_offset", len(data)}})
		return b2w.WriteFrame(data, 1<<13, 1, []frame.Metalayer{{Name: b2w.MarkerEmbed, Value: b2w.Version1()}},
			[]frame.Metalayer{{Name: b2w.EmbedMap, Value: meta}})
	}
	// Bad entries: each left out, the good ones read. The store's bytes:
	// nd, tiny, 200 bytes of junk, nd, 200 bytes, nd.
	junk := bytes.Repeat([]byte{0x9e}, 200)
	var data []byte
	for _, b := range [][]byte{nd, tiny, junk, nd, junk, nd} {
		data = append(data, b...)
	}
	na, nb := len(nd), len(tiny)
	deep := strings.Repeat("d/", 63) + "leaf"
	write("entries.b2e", embedStore(data,
		b2w.KV{"/ok", rng(na, nb)},
		b2w.KV{"/x/../y", rng(na, nb)},
		b2w.KV{"/a//b", rng(na, nb)},
		b2w.KV{"/n\x00", rng(na, nb)},
		b2w.KV{"/junk", rng(na+nb, 200)},
		b2w.KV{"/" + deep, rng(na+nb+200, na)},
		b2w.KV{"/p", rng(2*na+nb+200, 100)}, b2w.KV{"/q", rng(2*na+nb+250, 100)},
		b2w.KV{"/nd", rng(2*na+nb+400, na)}, b2w.KV{"/nd/sub", []b2w.KV{{"urlbase", "https://example.org"}, {"path", "x"}}},
		b2w.KV{"/past", rng(na, 1<<40)},
	))
	// 20,000 leaves in one directory.
	many := b2w.NewStoreWriter(b2w.MarkerEmbed, 1<<13)
	for i := range 20000 {
		many.Set(fmt.Sprintf("/k%05d", i), tiny)
	}
	write("many.b2e", many.Frame())
	// A .b2z with a deflated member, a member named out of the archive,
	// and good ones.
	d := b2w.NewDictWriter(b2w.MarkerTree, 1<<13, 0)
	d.Set("/good", nd, 0, ".b2nd")
	d.Set("/g/deflated", nd, 0, ".b2nd")
	files := d.Contents()
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for _, n := range []string{"g/deflated.b2nd", "good.b2nd", "../evil.b2nd", b2w.EmbedFile} {
		method := zip.Store
		if n == "g/deflated.b2nd" {
			method = zip.Deflate
		}
		f, err := zw.CreateHeader(&zip.FileHeader{Name: n, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		b := files[n]
		if b == nil {
			b = nd
		}
		f.Write(b)
	}
	zw.Close()
	write("members.b2z", zb.Bytes())
	// No stores: shown as they are stored.
	write("notzip.b2z", []byte("PK, but no ZIP archive"))
	write("nostore.b2z", b2w.B2Z(map[string][]byte{"x.b2nd": nd}))
	write("nomarker.b2e", nd)
	os.Mkdir(filepath.Join(src, "noembed.b2d"), 0o755)
	os.WriteFile(filepath.Join(src, "noembed.b2d", "x.b2nd"), nd, 0o644)

	m := mountDaemon(t, src, "--cache-size", "64MiB")
	start := time.Now()
	listed := mustRun(t, "ls", "-l", m.Path("many.b2e"))
	t.Logf("ls -l of 20,000 leaves: %d lines in %v", bytes.Count(listed, []byte("\n")), time.Since(start))
	for i := range 20000 {
		if i%997 == 0 {
			if b, err := os.ReadFile(m.Path(fmt.Sprintf("many.b2e/k%05d", i))); err != nil || len(b) != 1 {
				t.Errorf("k%05d: %q, %v", i, b, err)
			}
		}
	}
	for _, name := range storeNames(t, src) {
		if name == "many.b2e" {
			continue
		}
		tr, err := all.OpenTree(filepath.Join(src, name), nil)
		if err != nil {
			// Not a store: shown as it is stored.
			if !errors.Is(err, pack.ErrFormat) {
				t.Fatalf("%s: %v", name, err)
			}
			st, err := os.Stat(m.Path(name))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if name == "noembed.b2d" {
				if _, err := os.Stat(m.Path("noembed.b2d/x.npy")); !st.IsDir() || err != nil {
					t.Errorf("%s: not shown as the directory of frames it is: %v", name, err)
				}
			} else if got, _ := os.ReadFile(m.Path(name)); !st.Mode().IsRegular() || !bytes.Equal(got, mustRead(t, filepath.Join(src, name))) {
				t.Errorf("%s: not shown as the file it is", name)
			}
			if log := m.LogText(); !strings.Contains(log, filepath.Join(src, name)+": shown as it is stored") {
				t.Errorf("%s: no log line says why it is no store:\n%s", name, log)
			}
			continue
		}
		defer tr.Close()
		mounttest.CheckTree(t, tr, m.Path(name))
	}
	if ents, err := os.ReadDir(m.Path("many.b2e")); err != nil || len(ents) != 20000 {
		t.Errorf("many.b2e: %d entries, %v", len(ents), err)
	}
	log := m.LogText()
	for _, w := range []string{
		`entries.b2e: invalid store entry: key "/x/../y": path segment ".."`,
		`entries.b2e: invalid store entry: key "/a//b": empty path segment`,
		`entries.b2e: invalid store entry: key "/n\x00": NUL in a path segment`,
		`entries.b2e: invalid store entry: key "/past": bytes [4726,1099511632502) run past the end of the store's`,
		`entries.b2e: invalid store entry: keys "/p" [9857,9957) and "/q" [9907,10007) overlap; both are left out`,
		`entries.b2e: invalid store entry: key "/nd" is a leaf and also a directory`,
		`entries.b2e: invalid store entry: key "/junk" is left out:`,
		`members.b2z: invalid store entry: key "/g/deflated" is left out: ` + filepath.Join(src, "members.b2z") + `: g/deflated.b2nd: unsupported ZIP feature: a deflated member cannot be read in place (python-blosc2 reads only stored members of a .b2z)`,
		`members.b2z: invalid store entry: file "../evil.b2nd": key "/../evil": path segment ".."`,
	} {
		if n := strings.Count(log, w); n != 1 {
			t.Errorf("the log has %q %d times", w, n)
		}
	}
	for _, p := range []string{"entries.b2e/ok", "entries.b2e/" + deep + ".npy", "entries.b2e/nd/sub.json", "members.b2z/good.npy"} {
		if _, err := os.Stat(m.Path(p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", log)
	}
	// Memory: the 20,000 leaves listed, every file read, within the
	// block cache and a bounded rest.
	hwm, err := testkit.ProcValue(m.PID, "status", "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("daemon peak RSS %d MiB", hwm>>20)
	if hwm > 64<<20+192<<20 {
		t.Errorf("daemon peak RSS %d MiB, over the 64 MiB cache + 192 MiB", hwm>>20)
	}
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// walkArrayFrame returns a float64 random walk of n elements as a .b2nd
// frame of chunks and blocks of the given elements, compressed with p.
func walkArrayFrame(t testing.TB, n, chunk, block int, p blosc.Params) []byte {
	t.Helper()
	data := make([]byte, 8*n)
	genWalkSeed(data, 3)
	a, err := frame.NewArray([]int64{int64(n)}, "<f8", 8, []int32{int32(chunk)}, []int32{int32(block)})
	if err != nil {
		t.Fatal(err)
	}
	m := &b2w.MemFile{}
	if err := frame.WriteArray(m, bytes.NewReader(data), a, p); err != nil {
		t.Fatal(err)
	}
	return m.B
}

// genWalkSeed fills b with a float64 random walk (genWalk's).
func genWalkSeed(b []byte, seed uint64) { genWalk(b, seed) }

// TestB2StoreEmbeddedDecodes: a 4 KiB read through the mount of an
// array embedded in an EmbedStore decodes only the store chunks that
// hold the bytes it needs (the leaf chunk's header and block starts, and
// the block's compressed bytes), counted by the mount's statistics: the
// store's chunks decode to 8 KiB blocks, the array's to 64 KiB ones (or
// the part a read needs).
func TestB2StoreEmbeddedDecodes(t *testing.T) {
	setup.Require(t)
	src := filepath.Join(t.TempDir(), "src")
	os.Mkdir(src, 0o755)
	const n, chunk, block = 256 << 10, 32 << 10, 8 << 10 // 2 MiB of 256 KiB chunks of 64 KiB blocks
	leaf := walkArrayFrame(t, n, chunk, block, blosc.DefaultParams(8))
	w := b2w.NewStoreWriter(b2w.MarkerEmbed, 1<<13)
	w.Set("/big", leaf)
	store := w.Frame()
	if err := os.WriteFile(filepath.Join(src, "s.b2e"), store, 0o644); err != nil {
		t.Fatal(err)
	}
	m := mountDaemon(t, src)
	f, err := os.Open(m.Path("s.b2e/big.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
	// decodes returns the blocks the mount has decoded, and their bytes.
	decodes := func() (blocks, bytes int64) {
		var s struct {
			Codecs map[string]struct {
				Blocks int64 `json:"blocks"`
				Bytes  int64 `json:"decoded_bytes"`
			} `json:"codecs"`
		}
		buf := make([]byte, 64<<10)
		k, err := unix.Getxattr(m.Dir, "user.bloscfs.stats", buf)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(buf[:k], &s); err != nil {
			t.Fatal(err)
		}
		for _, c := range s.Codecs {
			blocks, bytes = blocks+c.Blocks, bytes+c.Bytes
		}
		return blocks, bytes
	}
	want := readAllFile(t, filepath.Join(src, "s.b2e"), "big")
	st, _ := f.Stat()
	hdr := st.Size() - 8*n
	for _, at := range []int64{3*8*chunk + 2*8*block + 8192, 6*8*chunk + 8192} {
		off := (hdr + at) &^ 4095
		b0, n0 := decodes()
		b := make([]byte, 4096)
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, want[off:off+4096]) {
			t.Fatalf("4 KiB at %d differ", off)
		}
		b1, n1 := decodes()
		// One decode of the array (a 64 KiB block, or the 4 KiB of it
		// the read needs); the others are store chunks of 8 KiB.
		stored := b1 - b0 - 1
		t.Logf("4 KiB at %d: %d blocks decoded, %d bytes: %d of the store's %d chunks", off, b1-b0, n1-n0, stored, (len(store)+1<<13-1)>>13)
		// A 64 KiB block of the array compresses to at most 64 KiB and
		// the overhead: at most 9 store chunks, and one for its chunk's
		// header and block starts.
		if stored < 1 || stored > 11 || n1-n0 > stored<<13+8*8*block {
			t.Errorf("4 KiB at %d: %d blocks of %d bytes decoded", off, b1-b0, n1-n0)
		}
	}
}

// readAllFile returns the view of path/key of the store at path, from
// its tree.
func readAllFile(t testing.TB, path, key string) []byte {
	t.Helper()
	tr := openStore(t, path)
	ents, err := tr.ReadDir("")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.TrimSuffix(e.Name, ".npy") == key {
			c, err := tr.Open(e.Name)
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, c.Size())
			c.ReadAt(b, 0)
			c.(interface{ Close() error }).Close()
			return b
		}
	}
	t.Fatalf("%s has no %s", path, key)
	return nil
}
