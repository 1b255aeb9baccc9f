package remote_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fakes3"
	"golang.org/x/sys/unix"
)

// zipBucket holds zipped Zarr stores: gen_v2.py's hierarchy written by
// python3-zarr's ZipStore (stored), zarrita's v3 stores and a 1 GiB
// sharded array zipped by Python's zipfile as RFC-9 lays out an .ozx,
// a zip whose directory does not fit in the first GET, and the hostile
// archive of the bad-ZIP rules.
const zipBucket = "zipzarr"

// The 1 GiB sharded array "big.ozx" (its root: shown as big.npy):
// float64 element i is i, 128 shards of 8 MiB, inner chunks of 1 MiB.
const zbigN, zbigShard, zbigInner = 1 << 27, 1 << 20, 1 << 17

var (
	zipOnce sync.Once
	zipErr  error
	zipWant map[string]string // view path in the bucket's mount → sha256
)

// uploadZips writes the archives and uploads them, once per run.
func uploadZips(t *testing.T) map[string]string {
	t.Helper()
	setup.Require(t)
	py := testkit.Python(t, "zarr", "numcodecs", "numpy")
	zipOnce.Do(func() { zipWant, zipErr = doUploadZips(py) })
	if zipErr != nil {
		t.Fatal(zipErr)
	}
	return zipWant
}

// manifest reads a MANIFEST.tsv into want, as mount paths: the array at
// PATH (below strip) of archive zip is zip/PATH.npy.
func manifest(path, zip, strip string, want map[string]string) error {
	m, err := testkit.ReadZarrManifest(path)
	for k, v := range m {
		want[zip+"/"+strings.TrimSuffix(strings.TrimPrefix(k, strip), ".zarr")+".npy"] = v
	}
	return err
}

func doUploadZips(py string) (map[string]string, error) {
	dir, err := os.MkdirTemp("", "bloscfs-zipzarr-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	root := testkit.ModuleRoot()
	zipper := filepath.Join(root, "testdata/zarr/zip_store.py")
	want := map[string]string{}
	runPy := func(args ...string) error {
		if r := testkit.Run(5*time.Minute, py, args...); r.Err != nil {
			return fmt.Errorf("%s: %v", strings.Join(args, " "), r)
		}
		return nil
	}
	if err := runPy(filepath.Join(root, "testdata/zarr/gen_v2.py"), dir, "stored"); err != nil {
		return nil, err
	}
	if err := manifest(filepath.Join(dir, "MANIFEST.tsv"), "survey.zarr.zip", "v2/", want); err != nil {
		return nil, err
	}
	if err := os.Rename(filepath.Join(dir, "v2.zip"), filepath.Join(dir, "survey.zarr.zip")); err != nil {
		return nil, err
	}
	if err := runPy(zipper, filepath.Join(root, "testdata/zarr/zarrita/v3"), filepath.Join(dir, "scan.ozx")); err != nil {
		return nil, err
	}
	if err := manifest(filepath.Join(root, "testdata/zarr/zarrita/MANIFEST.tsv"), "scan.ozx", "v3/", want); err != nil {
		return nil, err
	}
	// The 1 GiB sharded array, shard by shard.
	big := filepath.Join(dir, "big")
	os.MkdirAll(filepath.Join(big, "c"), 0o755)
	if err := os.WriteFile(filepath.Join(big, "zarr.json"), testkit.ShardedZarrMeta(zbigN, zbigShard, zbigInner), 0o644); err != nil {
		return nil, err
	}
	for s := 0; s*zbigShard < zbigN; s++ {
		if err := os.WriteFile(filepath.Join(big, "c", fmt.Sprint(s)), testkit.ShardedZarrShard(s, zbigShard, zbigInner), 0o644); err != nil {
			return nil, err
		}
	}
	if err := runPy(zipper, big, filepath.Join(dir, "big.ozx")); err != nil {
		return nil, err
	}
	os.RemoveAll(big)
	// A group of 20,000 one-chunk arrays: a directory of 2 MB, past the
	// first GET's mebibyte.
	if err := runPy("-c", `
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr(".zgroup", '{"zarr_format":2}')
    for i in range(20000):
        z.writestr("a%05d/.zarray" % i, '{"zarr_format":2,"shape":[2],"chunks":[2],"dtype":"<i4","compressor":null,"fill_value":0,"order":"C","filters":null}')
        z.writestr("a%05d/0" % i, (i).to_bytes(4, "little") * 2)
`, filepath.Join(dir, "wide.zip")); err != nil {
		return nil, err
	}
	hostile, _, _ := hostileZip()
	if err := os.WriteFile(filepath.Join(dir, "hostile.zarr.zip"), hostile, 0o644); err != nil {
		return nil, err
	}
	s := newStore(nil, zipBucket)
	ctx := context.Background()
	if err := s.CreateBucket(ctx); err != nil {
		return nil, err
	}
	for _, name := range []string{"survey.zarr.zip", "scan.ozx", "big.ozx", "wide.zip", "hostile.zarr.zip"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		err = s.Upload(ctx, name, f)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return want, nil
}

// hostileZip is integration's hostile archive (see zipzarr_test.go
// there): a sound array "good", and one array per bad-ZIP rule.
func hostileZip() (zip []byte, plain []byte, bad []string) {
	names := []string{"good", "encrypted", "method", "duplicate", "bomb"}
	ms, plain := testkit.ZarrZipGroup(names...)
	chunk0 := func(k int) *testkit.ZipMember { return &ms[1+3*k+1] }
	chunk0(1).Flags |= 1
	chunk0(2).Method = 93
	ms = append(ms, testkit.ZipMember{Name: "duplicate/0", Data: make([]byte, 400)})
	*chunk0(4) = testkit.ZipMember{Name: "bomb/0", Data: testkit.DeflateZeros(1 << 30), Method: 8, USize: 1 << 30, Plain: []byte{}}
	ms = append(ms, testkit.ZipMember{Name: "../x", Data: []byte("x")})
	return testkit.BuildZip(ms, nil), plain, names[1:]
}

// TestZippedZarrBucket reads every array of the zipped stores through
// `mount s3://`: each .npy equals np.save's bytes of what python3-zarr
// (ZipStore) or zarrita read; the hostile archive's bad arrays are EIO
// with a log line naming the archive and the member, beside a sound one.
func TestZippedZarrBucket(t *testing.T) {
	want := uploadZips(t)
	m := mountRemote(t, "s3://"+zipBucket)
	for p, sum := range want {
		if got := run(t, "sh", "-c", `sha256sum < "$1"`, "sh", m.Path(p)); !strings.HasPrefix(got, sum) {
			t.Errorf("%s: sha256 %q, want %s", p, got, sum)
		}
	}
	if ents, err := os.ReadDir(m.Path("wide.zip")); err != nil || len(ents) != 20001 {
		t.Errorf("wide.zip lists %d entries (%v), want 20001", len(ents), err)
	}
	b, err := os.ReadFile(m.Path("wide.zip/a12345.npy"))
	if err != nil || binary.LittleEndian.Uint32(b[len(b)-4:]) != 12345 {
		t.Errorf("wide.zip/a12345.npy: %v", err)
	}
	_, plain, bad := hostileZip()
	if got, err := os.ReadFile(m.Path("hostile.zarr.zip/good.npy")); err != nil || !bytes.HasSuffix(got, plain) {
		t.Errorf("hostile.zarr.zip/good.npy: %v", err)
	}
	for _, name := range bad {
		if _, err := os.ReadFile(m.Path("hostile.zarr.zip/" + name + ".npy")); !errors.Is(err, syscall.EIO) {
			t.Errorf("hostile.zarr.zip/%s.npy: %v, want EIO", name, err)
		}
	}
	log := m.LogText()
	for _, name := range append(bad, `"../x"`) {
		if !strings.Contains(log, "hostile.zarr.zip") || !strings.Contains(log, name) {
			t.Errorf("no log line names hostile.zarr.zip and %s:\n%s", name, log)
		}
	}
}

// getLog is a proxy in front of the server that records the requests
// for each object: method and Range.
type getLog struct {
	mu   sync.Mutex
	reqs map[string][]string // object key → "GET bytes=a-b", in order
	srv  *httptest.Server
}

func newGetLog(next http.Handler) *getLog {
	l := &getLog{reqs: map[string][]string{}}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/"+zipBucket+"/")
		l.mu.Lock()
		l.reqs[key] = append(l.reqs[key], r.Method+" "+r.Header.Get("Range"))
		l.mu.Unlock()
		next.ServeHTTP(w, r)
	}))
	return l
}

// take returns and forgets the requests made for key.
func (l *getLog) take(key string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.reqs[key]
	delete(l.reqs, key)
	return r
}

// rangeLen returns the length of a "GET bytes=a-b" request.
func rangeLen(req string) int64 {
	var a, b int64
	if _, err := fmt.Sscanf(req, "GET bytes=%d-%d", &a, &b); err != nil {
		return -1
	}
	return b - a + 1
}

// TestZippedZarrGETs counts the requests a mount of the bucket makes to
// read a zipped 1 GiB sharded array (RFC-9: stored, ZIP64 extra fields
// in the local headers only), logged by a proxy: opening the archive
// costs one GET of its end (the end records and the directory) and one
// of its root zarr.json; a first 4 KiB read in a shard costs the shard's
// index (read where the shard's bytes end if nothing lies between them
// and the next member, as Python's zipfile writes them, and confirmed by
// the index's crc32c, so that the member's local header, whose extra
// field is not the central directory's, need not be read) and one inner
// chunk, each one ranged GET under If-Match; another 4 KiB read in that
// shard one GET of one inner chunk. An
// archive whose directory is larger than the first GET costs one more,
// and the listing of its 20,000 arrays one GET of their .zarray.
func TestZippedZarrGETs(t *testing.T) {
	uploadZips(t)
	counter := fakes3.NewFaults(endpoint, 0, 1)
	defer counter.Close()
	gets := newGetLog(counter)
	defer gets.srv.Close()
	m := mountRemote(t, "s3://"+zipBucket, "--endpoint", gets.srv.URL)
	f, err := os.Open(m.Path("big.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	open := gets.take("big.ozx")
	t.Logf("opening big.ozx: %q", open)
	if len(open) != 2 || rangeLen(open[0]) < 1<<20 || rangeLen(open[1]) > 128<<10 {
		t.Errorf("opening big.ozx: %q; want 2 GETs (its last mebibyte or so: the directory; its start: zarr.json)", open)
	}
	st, _ := f.Stat()
	if st.Size() != zbigN*8+128 {
		t.Fatalf("big.npy: %d bytes", st.Size())
	}
	hdr := st.Size() - zbigN*8
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
	read := func(elem int64) []string {
		b := make([]byte, 4096)
		if _, err := f.ReadAt(b, hdr+elem*8); err != nil {
			t.Fatal(err)
		}
		if v := math.Float64frombits(binary.LittleEndian.Uint64(b)); v != float64(elem) {
			t.Fatalf("element %d reads %v", elem, v)
		}
		return gets.take("big.ozx")
	}
	const index = zbigShard/zbigInner*16 + 4
	elem := int64(77*zbigShard + 3*zbigInner + 1000)
	first := read(elem)
	t.Logf("first 4 KiB read in a shard: %q", first)
	if len(first) != 2 || rangeLen(first[0]) != index || rangeLen(first[1]) != zbigInner*8 {
		t.Errorf("first 4 KiB read: %q; want 2 GETs: the %d-byte index, one %d-byte inner chunk", first, index, zbigInner*8)
	}
	second := read(elem + 2*zbigInner)
	t.Logf("second 4 KiB read in that shard: %q", second)
	if len(second) != 1 || rangeLen(second[0]) != zbigInner*8 {
		t.Errorf("second 4 KiB read: %q; want 1 GET of one inner chunk", second)
	}
	// The directory of wide.zip (2 MB) takes two GETs, its 20,000
	// arrays' .zarray one.
	if _, err := os.Stat(m.Path("wide.zip/a00000.npy")); err != nil {
		t.Fatal(err)
	}
	wide := gets.take("wide.zip")
	t.Logf("opening wide.zip and listing its 20,000 arrays: %q", wide)
	if len(wide) != 3 || rangeLen(wide[0]) < 1<<20 {
		t.Errorf("wide.zip: %q; want 3 GETs: its end, the rest of its directory, its arrays' .zarray", wide)
	}
}
