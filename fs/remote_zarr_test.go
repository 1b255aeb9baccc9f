package fs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fakes3"
	"github.com/bloscfs/bloscfs/remote"
	"github.com/bloscfs/bloscfs/zarr"
	"golang.org/x/sys/unix"
)

// mountBucket mounts prefix of the fake bucket srv; it returns the mount
// point, the mount's log and its state.
func mountBucket(t *testing.T, srv *fakes3.Server, prefix string) (string, *syncBuffer, *RemoteFS) {
	t.Helper()
	return mountBucketConfig(t, srv, prefix, remote.Config{})
}

// mountBucketConfig is mountBucket with the store's settings of cfg
// (its endpoint, credentials and logger are the fake's and the test's).
func mountBucketConfig(t *testing.T, srv *fakes3.Server, prefix string, cfg remote.Config) (string, *syncBuffer, *RemoteFS) {
	t.Helper()
	logs := &syncBuffer{}
	logger := log.New(logs, "", 0)
	cfg.Endpoint, cfg.Anonymous, cfg.Logger = srv.URL, true, logger
	store, err := remote.New(context.Background(), srv.Bucket, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	opts := DefaultOptions()
	opts.Logger = logger
	server, r, err := MountRemote(store, prefix, mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	unmountAtEnd(t, server, mnt)
	return mnt, logs, r
}

// putDir uploads the files under dir to srv as prefix/relative-path.
func putDir(t *testing.T, srv *fakes3.Server, dir, prefix string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			srv.Put(prefix+"/"+filepath.ToSlash(rel), b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRemoteZarr mounts a fake bucket holding the v2 stores python3-zarr
// writes and the zarrita v3 stores: each array is a .npy file equal to
// np.save's bytes of zarr.open(path)[...], groups are directories, and
// listing a v2 array's parent lists no array prefix (no LIST of chunks).
func TestRemoteZarr(t *testing.T) {
	src, want := zarrSource(t)
	srv := fakes3.New("bkt")
	defer srv.Close()
	putDir(t, srv, src, "st")
	mnt, logs, _ := mountBucket(t, srv, "st")

	for p, sum := range want {
		view := filepath.Join(mnt, zarrView(p))
		out, err := exec.Command("sh", "-c", `cat "$1" | sha256sum`, "sh", view).Output()
		if err != nil || !strings.HasPrefix(string(out), sum) {
			t.Errorf("%s: cat | sha256sum = %q (%v), want %s", view, out, err, sum)
		}
	}
	for _, p := range []string{"v2/.zgroup", "v2/.zmetadata", "v2/deep/a/b/.zattrs", "v3/zarr.json", "v3/blosc/zarr.json"} {
		if _, err := os.Stat(filepath.Join(mnt, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(mnt, "v2/dims/d2")); err == nil {
		t.Errorf("array prefix still visible under its own name")
	}
	if st, err := os.Stat(filepath.Join(mnt, "broken.zarr")); err != nil || !st.IsDir() {
		t.Errorf("broken store: %v, %v; want a directory", st, err)
	}
	if !strings.Contains(logs.String(), "broken.zarr") {
		t.Errorf("no log line for the broken store: %s", logs.String())
	}
	var x [64]byte
	for attr, want := range map[string]string{"user.bloscfs.format": "zarr2", "user.bloscfs.chunkshape": "4,5", "user.zarr.attrs": `"units": "m"`} {
		n, err := syscall.Getxattr(filepath.Join(mnt, "v2/dims/d2.npy"), attr, x[:])
		if err != nil || !strings.Contains(string(x[:n]), want) {
			t.Errorf("%s = %q, %v; want %q", attr, x[:max(n, 0)], err, want)
		}
	}
	checkStoredXattrs(t, filepath.Join(mnt, "v2/dims/d2.npy"), filepath.Join(src, "v2/dims/d2"))
	checkStoredXattrs(t, filepath.Join(mnt, "v3/blosc/lz4_shuffle.npy"), filepath.Join(src, "v3/blosc/lz4_shuffle"))
	// A fresh listing of a group of arrays lists the group, never an
	// array's prefix (its chunks).
	srv.ResetCounts()
	ents, err := os.ReadDir(filepath.Join(mnt, "v2/blosc"))
	if err != nil || len(ents) == 0 {
		t.Fatalf("readdir: %v, %d entries", err, len(ents))
	}
	for _, l := range srv.Log() {
		if p, ok := strings.CutPrefix(l, "LIST "); ok && p != "st/v2/blosc/" {
			t.Errorf("listing a prefix other than the group's (cached or one LIST): %s", l)
		}
	}
}

// TestRemoteZarrShardGETs reads 4 KiB of a sharded array in a bucket:
// the shard's index (one GET of its end) and one ranged GET of one inner
// chunk; a second read in the same shard costs one GET (the index is
// kept). Kernel read-ahead is off for the file (FADV_RANDOM).
func TestRemoteZarrShardGETs(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	srv := fakes3.New("bkt")
	defer srv.Close()
	const n, shard, inner = 4 << 20, 1 << 20, 128 << 10 // 32 MiB in 4 shards of 8 inner chunks of 1 MiB
	for k, b := range testkit.ShardedZarr(n, shard, inner) {
		srv.Put("z/big.zarr/"+k, b)
	}
	for i := range 5 {
		srv.Put(fmt.Sprintf("z/plain%d/x", i), []byte("x"))
	}
	mnt, _, _ := mountBucket(t, srv, "z")
	// Listing a prefix of plain prefixes lists it alone: they are no
	// Zarr nodes (no .zarr suffix, no Zarr parent) nor sparse frames.
	srv.ResetCounts()
	if ents, err := os.ReadDir(mnt); err != nil || len(ents) != 6 {
		t.Fatalf("readdir: %v, %d entries", err, len(ents))
	}
	if l := srv.Log(); len(l) > 2 || strings.Contains(strings.Join(l, ","), "plain") {
		t.Errorf("readdir of the root: requests %q, want at most its LIST and the GET of the array's zarr.json", l)
	}
	f, err := os.Open(filepath.Join(mnt, "big.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	hdr := st.Size() - n*8
	if hdr <= 0 || hdr > 256 {
		t.Fatalf("size %d: not a .npy of %d float64", st.Size(), n)
	}
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
	read := func(elem int64) []string {
		srv.ResetCounts()
		b := make([]byte, 4096)
		if _, err := f.ReadAt(b, hdr+elem*8); err != nil {
			t.Fatal(err)
		}
		if v := math.Float64frombits(binary.LittleEndian.Uint64(b)); v != float64(elem) {
			t.Fatalf("element %d reads %v", elem, v)
		}
		var gets []string
		for _, l := range srv.Log() {
			if strings.HasPrefix(l, "GET ") {
				gets = append(gets, l)
			}
		}
		return gets
	}
	elem := int64(2*shard + 3*inner + 1000) // shard 2, inner chunk 3
	gets := read(elem)
	if len(gets) != 2 || !strings.Contains(gets[0], "bytes=-") || !strings.Contains(gets[1], fmt.Sprintf("bytes=%d-%d", 3*inner*8, 4*inner*8-1)) {
		t.Errorf("first 4 KiB read: GETs %q, want the index and inner chunk 3", gets)
	}
	gets = read(elem + 2*inner) // inner chunk 5 of the same shard
	if len(gets) != 1 || !strings.Contains(gets[0], fmt.Sprintf("bytes=%d-", 5*inner*8)) {
		t.Errorf("second 4 KiB read: GETs %q, want inner chunk 5 alone", gets)
	}
	if _, err := os.Stat(filepath.Join(mnt, "big.zarr")); err == nil {
		t.Errorf("array prefix still visible under its own name")
	}
}

// metaGETs returns the GETs of srv's log of Zarr metadata objects.
func metaGETs(srv *fakes3.Server) (meta []string, all int) {
	for _, l := range srv.Log() {
		if !strings.HasPrefix(l, "GET ") {
			continue
		}
		all++
		for _, m := range []string{".zarray", ".zattrs", ".zgroup", ".zmetadata", "zarr.json"} {
			if strings.Contains(l, "/"+m+" ") {
				meta = append(meta, l)
			}
		}
	}
	return meta, all
}

// TestRemoteZarrConsolidated lists groups with consolidated metadata in
// a fresh mount: v2 (.zmetadata at the root of python3-zarr's hierarchy)
// and v3 (consolidated_metadata in a group's zarr.json). `ls -l` of a
// group of arrays reads the consolidated document once and no array's
// own metadata.
func TestRemoteZarrConsolidated(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	srv := fakes3.New("bkt")
	defer srv.Close()
	const n, shard, inner = 4096, 1024, 256
	arr := testkit.ShardedZarr(n, shard, inner)
	for _, p := range []string{"g3/a", "g3/sub/b"} {
		for k, b := range arr {
			srv.Put(p+"/"+k, b)
		}
	}
	group := `{"zarr_format":3,"node_type":"group","attributes":{}}`
	srv.Put("g3/sub/zarr.json", []byte(group))
	srv.Put("g3/zarr.json", []byte(`{"zarr_format":3,"node_type":"group","attributes":{},
"consolidated_metadata":{"kind":"inline","must_understand":false,"metadata":{
"a":`+string(arr["zarr.json"])+`,"sub":`+group+`,"sub/b":`+string(arr["zarr.json"])+`}}}`))
	python := exec.Command("/usr/bin/python3", "-c", "import zarr, numcodecs").Run() == nil
	if python {
		src := filepath.Join(t.TempDir(), "src")
		if out, err := exec.Command("/usr/bin/python3", "../testdata/zarr/gen_v2.py", src).CombinedOutput(); err != nil {
			t.Fatalf("gen_v2.py: %v: %s", err, out)
		}
		putDir(t, srv, filepath.Join(src, "v2"), "v2")
	} else if os.Getenv("CI") == "true" {
		t.Fatal("python3-zarr is missing (make deps)")
	}
	mnt, logs, _ := mountBucket(t, srv, "")
	ls := func(dir string, want int) {
		t.Helper()
		srv.ResetCounts()
		ents, err := os.ReadDir(filepath.Join(mnt, dir))
		if err != nil {
			t.Fatal(err)
		}
		arrays := 0
		for _, e := range ents {
			if _, err := os.Stat(filepath.Join(mnt, dir, e.Name())); err != nil {
				t.Errorf("%s/%s: %v", dir, e.Name(), err)
			}
			if strings.HasSuffix(e.Name(), ".npy") {
				arrays++
			}
		}
		meta, _ := metaGETs(srv)
		if arrays < want || len(meta) > 1 {
			t.Errorf("ls -l %s: %d arrays (want ≥ %d), metadata GETs %q (want at most the consolidated document)", dir, arrays, want, meta)
		}
	}
	ls("g3", 1)
	ls("g3/sub", 1)
	if python {
		ls("v2/blosc", 20)
		ls("v2/dtypes", 5)
	}
	b, err := os.ReadFile(filepath.Join(mnt, "g3/sub/b.npy"))
	if err != nil || len(b) < n*8 {
		t.Fatalf("g3/sub/b.npy: %v, %d bytes", err, len(b))
	}
	if v := math.Float64frombits(binary.LittleEndian.Uint64(b[len(b)-8:])); v != n-1 {
		t.Errorf("last element %v, want %d (log: %s)", v, n-1, logs.String())
	}
}

// TestRemoteZarrMetaLimit: opening an array of a bucket for reading
// refuses a metadata object past zarr.MaxMetaSize (a .zattrs of 65 MiB)
// from the answer's Content-Length: ErrFormat, and hardly any of its
// bytes fetched (issue 33, point 5).
func TestRemoteZarrMetaLimit(t *testing.T) {
	srv := fakes3.New("bkt")
	defer srv.Close()
	srv.Put("a.zarr/.zarray", []byte(`{"zarr_format":2,"shape":[4],"chunks":[4],"dtype":"|u1","compressor":null,"fill_value":0,"order":"C","filters":null}`))
	srv.Put("a.zarr/.zattrs", append(append([]byte(`{"pad":"`), bytes.Repeat([]byte{'x'}, 65<<20)...), `"}`...))
	store, err := remote.New(context.Background(), "bkt", remote.Config{Endpoint: srv.URL, Anonymous: true, Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	srv.ResetCounts()
	_, err = zarr.Open(newRemoteZarrStore(store, "a.zarr/"), "", nil)
	_, sent := srv.Counts()
	if !errors.Is(err, zarr.ErrFormat) {
		t.Errorf("open: %v, want ErrFormat (metadata too large)", err)
	}
	if sent > 8<<20 {
		t.Errorf("%d MiB of the 65 MiB .zattrs fetched to refuse it", sent>>20)
	}
}
