package remote_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
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
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan()
	for sc.Scan() {
		p := strings.Split(sc.Text(), "\t")
		want[zip+"/"+strings.TrimSuffix(strings.TrimPrefix(p[0], strip), ".zarr")+".npy"] = p[1]
	}
	return sc.Err()
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

// TestZippedZarrGETs counts the requests a mount of the bucket makes to
// read a zipped 1 GiB sharded array (RFC-9: stored, ZIP64 extra fields
// in the local headers only), through a counting proxy: the archive's
// directory is one GET (a suffix of the archive, which holds the end
// records and the directory), its root zarr.json one; a first 4 KiB read
// in a shard costs the shard member's local header (where its data
// starts is told by the local header alone, whose extra field is not
// the central directory's), the shard's index and one inner chunk, each
// one ranged GET under If-Match; another 4 KiB read in that shard one
// GET. A directory larger than the first GET costs one more.
func TestZippedZarrGETs(t *testing.T) {
	uploadZips(t)
	counter := fakes3.NewFaults(endpoint, 0, 1)
	defer counter.Close()
	m := mountRemote(t, "s3://"+zipBucket, "--endpoint", counter.URL)
	mark := func() func() (int64, int64) {
		r0, b0 := counter.Requests.Load(), counter.Bytes.Load()
		return func() (int64, int64) { return counter.Requests.Load() - r0, counter.Bytes.Load() - b0 }
	}
	// The listing, then the archive opened: its directory and zarr.json.
	d := mark()
	if _, err := os.ReadDir(m.Dir); err != nil {
		t.Fatal(err)
	}
	listReq, _ := d()
	d = mark()
	f, err := os.Open(m.Path("big.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	openReq, openBytes := d()
	t.Logf("listing the bucket: %d requests; opening big.ozx (directory, zarr.json) and big.npy: %d requests, %d bytes", listReq, openReq, openBytes)
	if openReq != 2 {
		t.Errorf("opening big.ozx: %d requests, want 2 (the directory's suffix GET, zarr.json)", openReq)
	}
	st, _ := f.Stat()
	if st.Size() != zbigN*8+128 {
		t.Fatalf("big.npy: %d bytes", st.Size())
	}
	hdr := st.Size() - zbigN*8
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
	read := func(elem int64) (req, n int64) {
		d := mark()
		b := make([]byte, 4096)
		if _, err := f.ReadAt(b, hdr+elem*8); err != nil {
			t.Fatal(err)
		}
		if v := math.Float64frombits(binary.LittleEndian.Uint64(b)); v != float64(elem) {
			t.Fatalf("element %d reads %v", elem, v)
		}
		return d()
	}
	const index = zbigShard/zbigInner*16 + 4
	elem := int64(77*zbigShard + 3*zbigInner + 1000)
	req, n := read(elem)
	t.Logf("first 4 KiB read in a shard: %d requests, %d bytes", req, n)
	if req != 3 || n < zbigInner*8+index || n > zbigInner*8+index+64<<10 {
		t.Errorf("first 4 KiB read: %d requests, %d bytes; want 3 (local header, index, inner chunk) and about %d bytes", req, n, zbigInner*8+index)
	}
	req, n = read(elem + 2*zbigInner)
	t.Logf("second 4 KiB read in that shard: %d requests, %d bytes", req, n)
	if req != 1 || n != zbigInner*8 {
		t.Errorf("second 4 KiB read: %d requests, %d bytes; want 1 and %d bytes", req, n, zbigInner*8)
	}
	// A directory of 2 MB: the suffix GET, then the directory.
	d = mark()
	if _, err := os.Stat(m.Path("wide.zip/a00000.npy")); err != nil {
		t.Fatal(err)
	}
	req, n = d()
	t.Logf("opening wide.zip (a 2 MB directory) and stat of one array: %d requests, %d bytes", req, n)
	if req < 2 || req > 3 {
		t.Errorf("wide.zip: %d requests, want the suffix GET, the directory GET and a .zarray GET (or none, from the first)", req)
	}
}
