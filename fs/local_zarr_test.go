package fs

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"golang.org/x/sys/unix"
)

// writeConsolidated writes, with python3-zarr 2.13, a group at dir of n
// float64 arrays a000… (a000 with attributes) and a subgroup sub of
// three arrays, then consolidates its metadata (zarr.consolidate_metadata)
// into dir/.zmetadata. It skips without python3-zarr.
func writeConsolidated(t testing.TB, dir string, n int) {
	t.Helper()
	if exec.Command("/usr/bin/python3", "-c", "import zarr, numcodecs").Run() != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3-zarr is missing (make deps)")
		}
		t.Skip("python3-zarr is not installed")
	}
	script := `
import sys, numpy as np, zarr
root = zarr.open_group(sys.argv[1], mode="w")
for i in range(int(sys.argv[2])):
    z = root.create_dataset("a%03d" % i, shape=(100 + i,), chunks=(64,), dtype="<f8")
    z[:] = np.arange(100 + i)
root["a000"].attrs["units"] = "m"
sub = root.create_group("sub")
for i in range(3):
    sub.create_dataset("s%d" % i, shape=(5, 7 + i), chunks=(2, 3), dtype="<i4", order="F")[...] = i
zarr.consolidate_metadata(sys.argv[1])
`
	if out, err := exec.Command("/usr/bin/python3", "-c", script, dir, fmt.Sprint(n)).CombinedOutput(); err != nil {
		t.Fatalf("writing the consolidated group: %v: %s", err, out)
	}
}

// ageMetadata sets the mtime of every metadata file under dir other than
// its consolidated document (.zmetadata, or dir/zarr.json) one second
// before the document's, as after any consolidation on a clock finer
// than the time it takes: on a coarse clock, the files written in the
// same tick as the document are read, which the counts below would not
// allow.
func ageMetadata(t testing.TB, dir, doc string) {
	t.Helper()
	st, err := os.Stat(filepath.Join(dir, doc))
	if err != nil {
		t.Fatal(err)
	}
	old := st.ModTime().Add(-time.Second)
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		switch filepath.Base(p) {
		case ".zarray", ".zattrs", ".zgroup", "zarr.json":
			if p != filepath.Join(dir, doc) {
				if err := os.Chtimes(p, old, old); err != nil {
					t.Fatal(err)
				}
			}
		}
		return nil
	})
}

// openCounter counts the opens of files in watched directories, with
// inotify: whoever opens them (the in-process mount's daemon here).
type openCounter struct {
	fd   int
	dirs map[int32]string
}

// watchOpens starts counting the opens of the files in dir and in every
// directory below it.
func watchOpens(t *testing.T, dir string) *openCounter {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	o := &openCounter{fd: fd, dirs: map[int32]string{}}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			wd, err := unix.InotifyAddWatch(fd, p, unix.IN_OPEN)
			if err != nil {
				t.Fatal(err)
			}
			o.dirs[int32(wd)] = p
		}
		return nil
	})
	return o
}

// opens returns the files opened since the last call, with how often.
func (o *openCounter) opens(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	buf := make([]byte, 1<<16)
	for {
		n, err := unix.Read(o.fd, buf)
		if err == unix.EAGAIN {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			l := int(binary.NativeEndian.Uint32(buf[off+12:]))
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+l]), "\x00")
			if name != "" {
				out[filepath.Join(o.dirs[wd], name)]++
			}
			off += unix.SizeofInotifyEvent + l
		}
	}
}

// metaOpens returns the opens of arrays' and groups' own metadata files
// among opens, other than the consolidated document doc.
func metaOpens(opens map[string]int, doc string) []string {
	var out []string
	for p, n := range opens {
		if p == doc {
			continue
		}
		switch filepath.Base(p) {
		case ".zarray", ".zattrs", ".zgroup", "zarr.json":
			out = append(out, fmt.Sprintf("%s×%d", p, n))
		}
	}
	return out
}

// lsl lists dir as ls -l does (readdir, then lstat of each name), and
// returns the sizes by name.
func lsl(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, e := range ents {
		st, err := os.Lstat(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out[e.Name()] = st.Size()
	}
	return out
}

// realView returns the bytes of the .npy view of the array directory
// dir, opened from its own metadata.
func realView(t *testing.T, dir string) []byte {
	t.Helper()
	v, err := all.OpenView(dir, pack.NoCache{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	b := make([]byte, v.Size)
	if _, err := v.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

// consolidateV3 writes into group (a v3 group directory) the inline
// consolidated_metadata of the arrays directly in it, as zarr-python 3's
// consolidate_metadata does: no fixture of ours has one (zarrita does not
// write them).
func consolidateV3(t *testing.T, group string) {
	t.Helper()
	var g map[string]json.RawMessage
	b, err := os.ReadFile(filepath.Join(group, "zarr.json"))
	if err != nil || json.Unmarshal(b, &g) != nil {
		t.Fatalf("%s: %v", group, err)
	}
	meta := map[string]json.RawMessage{}
	ents, _ := os.ReadDir(group)
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join(group, e.Name(), "zarr.json")); err == nil {
			meta[e.Name()] = b
		}
	}
	cm, _ := json.Marshal(map[string]any{"kind": "inline", "must_understand": false, "metadata": meta})
	g["consolidated_metadata"] = cm
	b, _ = json.Marshal(g)
	if err := os.WriteFile(filepath.Join(group, "zarr.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLocalZarrConsolidated lists local groups with consolidated metadata
// as ls -l does through a fresh mount: a v2 group of 200 arrays written
// and consolidated by python3-zarr (and its subgroup, described by the
// same .zmetadata), and a v3 group holding consolidated_metadata (written
// by consolidateV3 over zarrita's arrays). No array's own metadata file
// is opened, and every size is the one the array's own metadata give.
func TestLocalZarrConsolidated(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	const n = 200
	src := filepath.Join(t.TempDir(), "src")
	writeConsolidated(t, filepath.Join(src, "g"), n)
	ageMetadata(t, filepath.Join(src, "g"), ".zmetadata")
	copyDir(t, "../testdata/zarr/zarrita/v3/blosc", filepath.Join(src, "v3"))
	consolidateV3(t, filepath.Join(src, "v3"))
	ageMetadata(t, filepath.Join(src, "v3"), "zarr.json")
	copyDir(t, "../testdata/zarr/zarrita/v3/dims", filepath.Join(src, "dims"))
	mnt, logs := mountSource(t, src)
	w := watchOpens(t, src)

	for _, c := range []struct {
		dir, doc string
		arrays   int
	}{{"g", "g/.zmetadata", n}, {"g/sub", "g/.zmetadata", 3}, {"v3", "v3/zarr.json", 15}} {
		sizes := lsl(t, filepath.Join(mnt, c.dir))
		opens := w.opens(t)
		if bad := metaOpens(opens, filepath.Join(src, c.doc)); len(bad) > 0 {
			t.Errorf("ls -l %s opened the metadata of arrays: %d files, e.g. %q", c.dir, len(bad), bad[:min(len(bad), 3)])
		}
		// The document is read once (a v3 group's zarr.json also tells
		// that its directory is a group).
		if k := opens[filepath.Join(src, c.doc)]; k > 1 {
			t.Errorf("ls -l %s opened %s %d times", c.dir, c.doc, k)
		}
		arrays := 0
		for name, size := range sizes {
			disk := filepath.Join(src, c.dir, strings.TrimSuffix(name, ".npy"))
			if !strings.HasSuffix(name, ".npy") {
				continue
			}
			arrays++
			if want := int64(len(realView(t, disk))); size != want {
				t.Errorf("%s/%s: size %d, want %d", c.dir, name, size, want)
			}
		}
		w.opens(t) // realView's
		if arrays != c.arrays {
			t.Errorf("ls -l %s: %d arrays, want %d: %v", c.dir, arrays, c.arrays, sizes)
		}
	}
	if zm := w.opens(t); len(zm) > 0 {
		t.Errorf("files opened with nothing asked: %v", zm)
	}
	// Without consolidated metadata, a v3 array's zarr.json is read
	// once per version to tell that it is an array, not at each probe.
	lsl(t, filepath.Join(mnt, "dims"))
	w.opens(t)
	lsl(t, filepath.Join(mnt, "dims"))
	if bad := metaOpens(w.opens(t), ""); len(bad) > 0 {
		t.Errorf("ls -l of an unconsolidated v3 group listed before opened metadata again: %q", bad)
	}
	// Reading an array reads its own metadata, and the data are right.
	for _, p := range []string{"g/a000", "g/a199", "g/sub/s2", "v3/zstd_shuffle"} {
		got, err := os.ReadFile(filepath.Join(mnt, p+".npy"))
		if want := realView(t, filepath.Join(src, p)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s.npy: %d bytes, %v; want the %d bytes of its view", p, len(got), err, len(want))
		}
	}
	var x [64]byte
	if n, err := syscall.Getxattr(filepath.Join(mnt, "g/a000.npy"), "user.zarr.attrs", x[:]); err != nil || !strings.Contains(string(x[:n]), `"units": "m"`) {
		t.Errorf("user.zarr.attrs of g/a000.npy = %q, %v", x[:max(n, 0)], err)
	}
	if strings.Contains(logs.String(), "consolidated") {
		t.Errorf("log: %s", logs.String())
	}
}

// TestLocalZarrConsolidatedStale changes arrays after consolidation: a
// .zarray rewritten (its mtime now newer than .zmetadata's) is read
// itself by the listing; one rewritten with its mtime set back fools the
// listing, but opening it reads its own metadata and the size and bytes
// read are the truth. A .zmetadata that does not parse, or is too large,
// is logged once and the arrays are probed one by one.
func TestLocalZarrConsolidatedStale(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	src := filepath.Join(t.TempDir(), "src")
	for _, g := range []string{"g", "bad", "big"} {
		writeConsolidated(t, filepath.Join(src, g), 4)
		ageMetadata(t, filepath.Join(src, g), ".zmetadata")
	}
	zm, _ := os.Stat(filepath.Join(src, "g/.zmetadata"))
	resize := `
import sys, numpy as np, zarr
z = zarr.open_array(sys.argv[1], mode="r+")
z.resize(int(sys.argv[2]))
z[:] = np.arange(int(sys.argv[2])) * 0.5
`
	for _, c := range []struct {
		arr  string
		size int
	}{{"g/a001", 3000}, {"g/a002", 5000}, {"g/a003", 10}} {
		if out, err := exec.Command("/usr/bin/python3", "-c", resize, filepath.Join(src, c.arr), fmt.Sprint(c.size)).CombinedOutput(); err != nil {
			t.Fatalf("resize %s: %v: %s", c.arr, err, out)
		}
	}
	// a002 and a003 changed with their mtime set back before the
	// consolidation.
	for _, arr := range []string{"g/a002", "g/a003"} {
		old := zm.ModTime().Add(-time.Second)
		os.Chtimes(filepath.Join(src, arr, ".zarray"), old, old)
	}
	os.WriteFile(filepath.Join(src, "bad/.zmetadata"), []byte(`{"zarr_consolidated_format": 1, "metadata": {`), 0o644)
	if err := os.Truncate(filepath.Join(src, "big/.zmetadata"), 65<<20); err != nil {
		t.Fatal(err)
	}
	// The kernel keeps the attributes of compressed files (an hour).
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	logs := &syncBuffer{}
	opts := DefaultOptions()
	opts.Logger = log.New(logs, "", 0)
	server, _, err := Mount(src, mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	unmountAtEnd(t, server, mnt)

	sizes := lsl(t, filepath.Join(mnt, "g"))
	if want := int64(len(realView(t, filepath.Join(src, "g/a001")))); sizes["a001.npy"] != want {
		t.Errorf("a001.npy, changed after consolidation: size %d, want %d", sizes["a001.npy"], want)
	}
	// The listing trusts a002's consolidated entry (its .zarray looks
	// older): the stale size, until it is opened.
	if stale := int64(len(realView(t, filepath.Join(src, "g/a002")))); sizes["a002.npy"] == stale {
		t.Fatalf("a002.npy: the listing read its changed metadata; the test needs it fooled")
	}
	for _, arr := range []string{"a001", "a002", "a003"} {
		want := realView(t, filepath.Join(src, "g", arr))
		got, err := os.ReadFile(filepath.Join(mnt, "g", arr+".npy"))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s.npy: read %d bytes, %v; want the %d bytes of its own metadata", arr, len(got), err, len(want))
		}
		st, err := os.Stat(filepath.Join(mnt, "g", arr+".npy"))
		if err != nil || st.Size() != int64(len(want)) {
			t.Errorf("%s.npy after reading: size %v, %v; want %d", arr, st.Size(), err, len(want))
		}
	}
	for _, arr := range []string{"g/a002", "g/a003"} {
		if !strings.Contains(logs.String(), filepath.Join(src, arr)+": consolidated metadata out of date") {
			t.Errorf("opening %s did not find its consolidated entry out of date: %s", arr, logs.String())
		}
	}
	for _, g := range []string{"bad", "big"} {
		sizes := lsl(t, filepath.Join(mnt, g))
		for _, name := range []string{"a000.npy", "a003.npy", "sub"} {
			if _, ok := sizes[name]; !ok {
				t.Errorf("%s: %s missing from the listing: %v", g, name, sizes)
			}
		}
		if want := int64(len(realView(t, filepath.Join(src, g, "a003")))); sizes["a003.npy"] != want {
			t.Errorf("%s/a003.npy: size %d, want %d", g, sizes["a003.npy"], want)
		}
		lsl(t, filepath.Join(mnt, g, "sub"))
		if k := strings.Count(logs.String(), filepath.Join(src, g, ".zmetadata")+": consolidated metadata not used"); k != 1 {
			t.Errorf("%s/.zmetadata logged %d times, want once: %s", g, k, logs.String())
		}
	}
}

// TestProbeZarrDir probes array directories of hand-written stores
// against consolidated metadata that differ from the arrays' own (a
// shape of 10 in the document, 20 in the .zarray), to tell which one
// answered: the document only while the array's metadata files are
// strictly older than it and it describes them, and never from above
// the source.
func TestProbeZarrDir(t *testing.T) {
	zarray := func(n int) string {
		return fmt.Sprintf(`{"zarr_format":2,"shape":[%d],"chunks":[5],"dtype":"<f8","compressor":null,"fill_value":0,"order":"C","filters":null}`, n)
	}
	zjson := func(n int) string {
		return fmt.Sprintf(`{"zarr_format":3,"node_type":"array","shape":[%d],"data_type":"float64","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[5]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes","configuration":{"endian":"little"}}]}`, n)
	}
	size := func(n int) int64 { return 128 + 8*int64(n) }
	past := time.Now().Add(-time.Hour)
	type store map[string]string
	v2 := func() store {
		return store{
			"g/.zgroup": `{"zarr_format":2}`,
			"g/.zmetadata": `{"zarr_consolidated_format":1,"metadata":{".zgroup":{"zarr_format":2},"a/.zarray":` + zarray(10) +
				`,"sub/.zgroup":{"zarr_format":2},"sub/b/.zarray":` + zarray(10) + `,"t/.zarray":` + zarray(10) + `,"t/.zattrs":{"k":1}}}`,
			"g/a/.zarray": zarray(20), "g/sub/.zgroup": `{"zarr_format":2}`, "g/sub/b/.zarray": zarray(20),
			"g/t/.zarray": zarray(20), "g/t/.zattrs": `{"k":1}`, "g/c/.zarray": zarray(20),
		}
	}
	v3 := store{
		"h/zarr.json": `{"zarr_format":3,"node_type":"group","attributes":{},"consolidated_metadata":{"kind":"inline","metadata":{"a":` + zjson(10) +
			`,"sub":{"zarr_format":3,"node_type":"group"},"sub/b":` + zjson(10) + `}}}`,
		"h/a/zarr.json": zjson(20), "h/sub/zarr.json": `{"zarr_format":3,"node_type":"group"}`, "h/sub/b/zarr.json": zjson(20),
		"p/zarr.json": `{"zarr_format":3,"node_type":"group"}`, "p/a/zarr.json": zjson(20),
	}
	for _, c := range []struct {
		name   string
		files  store
		source string // below the temporary directory
		path   string
		change func(dir string) // after the files are written and aged
		via    bool
		size   int64 // 0: not an array
		log    string
	}{
		{name: "v2", files: v2(), path: "g/a", via: true, size: size(10)},
		{name: "v2 nested", files: v2(), path: "g/sub/b", via: true, size: size(10)},
		{name: "v2 with attributes", files: v2(), path: "g/t", via: true, size: size(10)},
		{name: "v2 group", files: v2(), path: "g/sub", size: 0},
		{name: "v2 not consolidated", files: v2(), path: "g/c", size: size(20)},
		{name: "v2 .zarray changed", files: v2(), path: "g/a", size: size(20), change: func(d string) { os.Chtimes(filepath.Join(d, "g/a/.zarray"), time.Now(), time.Now()) }},
		{name: "v2 .zarray in the same tick", files: v2(), path: "g/a", size: size(20), change: func(d string) {
			st, _ := os.Stat(filepath.Join(d, "g/.zmetadata"))
			os.Chtimes(filepath.Join(d, "g/a/.zarray"), st.ModTime(), st.ModTime())
		}},
		{name: "v2 .zattrs changed", files: v2(), path: "g/t", size: size(20), change: func(d string) { os.Chtimes(filepath.Join(d, "g/t/.zattrs"), time.Now(), time.Now()) }},
		{name: "v2 .zattrs removed", files: v2(), path: "g/t", size: size(20), change: func(d string) { os.Remove(filepath.Join(d, "g/t/.zattrs")) }},
		{name: "v2 .zattrs added", files: v2(), path: "g/a", size: size(20), change: func(d string) {
			os.WriteFile(filepath.Join(d, "g/a/.zattrs"), []byte(`{}`), 0o644)
			os.Chtimes(filepath.Join(d, "g/a/.zattrs"), past, past)
		}},
		{name: "v2 .zmetadata malformed", files: v2(), path: "g/a", size: size(20), log: "consolidated metadata not used", change: func(d string) {
			os.WriteFile(filepath.Join(d, "g/.zmetadata"), []byte(`{"zarr_consolidated_format":1,"metadata":[`), 0o644)
		}},
		{name: "v2 .zmetadata too large", files: v2(), path: "g/a", size: size(20), log: "exceeds", change: func(d string) {
			os.Truncate(filepath.Join(d, "g/.zmetadata"), 65<<20)
		}},
		{name: "v2 .zmetadata above the source", files: v2(), source: "g/sub", path: "g/sub/b", size: size(20)},
		{name: "v2 .zmetadata at the source", files: v2(), source: "g", path: "g/sub/b", via: true, size: size(10)},
		{name: "v3", files: v3, path: "h/a", via: true, size: size(10)},
		{name: "v3 nested", files: v3, path: "h/sub/b", via: true, size: size(10)},
		{name: "v3 group", files: v3, path: "h/sub", via: true, size: 0},
		{name: "v3 zarr.json changed", files: v3, path: "h/a", size: size(20), change: func(d string) { os.Chtimes(filepath.Join(d, "h/a/zarr.json"), time.Now(), time.Now()) }},
		{name: "v3 not consolidated", files: v3, path: "p/a", size: size(20)},
		{name: "v3 group not consolidated", files: v3, path: "p", size: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range c.files {
				p := filepath.Join(dir, name)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
				if filepath.Base(name) != ".zmetadata" && name != "h/zarr.json" {
					os.Chtimes(p, past, past)
				}
			}
			if c.change != nil {
				c.change(dir)
			}
			logs := &syncBuffer{}
			_, f, err := New(filepath.Join(dir, c.source), Options{Logger: log.New(logs, "", 0)})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, c.path)
			var st syscall.Stat_t
			syscall.Lstat(path, &st)
			for range 2 { // the second from the caches
				p, err := f.probe(path, &st)
				if err != nil {
					t.Fatal(err)
				}
				var meta syscall.Stat_t
				_, key, _ := f.probeZarrDir(path, &meta)
				if got := key.via != 0; got != c.via {
					t.Errorf("answered from consolidated metadata: %v, want %v", got, c.via)
				}
				if c.size == 0 && p.ok || c.size != 0 && (!p.ok || p.size != c.size) {
					t.Errorf("probe: ok %v, size %d; want size %d", p.ok, p.size, c.size)
				}
			}
			if k := strings.Count(logs.String(), "\n"); c.log != "" && (k != 1 || !strings.Contains(logs.String(), c.log)) || c.log == "" && k != 0 {
				t.Errorf("log %q, want one line with %q", logs.String(), c.log)
			}
		})
	}
}

// BenchmarkZarrConsolidatedListing lists a group of 1000 v2 arrays
// consolidated by python3-zarr, as ls -l does (the listing, then a
// probe of each entry as its lookup makes), through the local backend of
// a fresh mount state each time (nothing probed yet; the files in the
// page cache): with the consolidated metadata used, and without.
func BenchmarkZarrConsolidatedListing(b *testing.B) {
	src := b.TempDir()
	g := filepath.Join(src, "g")
	writeConsolidated(b, g, 1000)
	ageMetadata(b, g, ".zmetadata")
	// In turns, so that the two see the same load.
	for range 3 {
		for _, use := range []bool{true, false} {
			b.Run(fmt.Sprintf("consolidated=%v", use), func(b *testing.B) {
				defer func(old bool) { localConsolidated = old }(localConsolidated)
				localConsolidated = use
				for b.Loop() {
					_, f, err := New(src, Options{Logger: log.New(io.Discard, "", 0)})
					if err != nil {
						b.Fatal(err)
					}
					ents, errno := viewEntries(localBackend{f}, g, nil)
					if errno != 0 || len(ents) < 1000 {
						b.Fatalf("%d entries, %v", len(ents), errno)
					}
					for _, e := range ents {
						if e.compressed {
							f.probe(filepath.Join(g, e.disk), e.meta.(*syscall.Stat_t))
						}
					}
				}
			})
		}
	}
}
