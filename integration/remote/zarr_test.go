package remote_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fakes3"
	"golang.org/x/sys/unix"
)

// zarrBucket holds the Zarr stores: v2 written by python3-zarr
// (testdata/zarr/gen_v2.py), v3 by zarrita (testdata/zarr/zarrita), and
// a sharded array written by testkit.ShardedZarr.
const zarrBucket = "zarr"

var (
	zarrOnce sync.Once
	zarrErr  error
	zarrWant map[string]string // array path → sha256 of its .npy
)

// Shape of the sharded array "big.zarr": 64 MiB of float64 in 8 MiB
// shards of 1 MiB inner chunks.
const bigN, bigShard, bigInner = 8 << 20, 1 << 20, 128 << 10

// uploadZarr writes the stores and uploads them, once per run.
func uploadZarr(t *testing.T) map[string]string {
	t.Helper()
	setup.Require(t)
	if exec.Command("/usr/bin/python3", "-c", "import zarr, numcodecs").Run() != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3-zarr is missing (make deps)")
		}
		t.Skip("python3-zarr is not installed")
	}
	zarrOnce.Do(func() { zarrWant, zarrErr = doUploadZarr() })
	if zarrErr != nil {
		t.Fatal(zarrErr)
	}
	return zarrWant
}

func readManifest(path string, into map[string]string) error {
	m, err := testkit.ReadZarrManifest(path)
	for k, v := range m {
		into[k] = v
	}
	return err
}

func doUploadZarr() (map[string]string, error) {
	dir, err := os.MkdirTemp("", "bloscfs-zarr-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if out, err := exec.Command("/usr/bin/python3", "../../testdata/zarr/gen_v2.py", dir).CombinedOutput(); err != nil {
		return nil, &exec.ExitError{Stderr: out}
	}
	want := map[string]string{}
	if err := readManifest(filepath.Join(dir, "MANIFEST.tsv"), want); err != nil {
		return nil, err
	}
	if err := readManifest("../../testdata/zarr/zarrita/MANIFEST.tsv", want); err != nil {
		return nil, err
	}
	s := newStore(nil, zarrBucket)
	ctx := context.Background()
	if err := s.CreateBucket(ctx); err != nil {
		return nil, err
	}
	objs := map[string][]byte{}
	for k, b := range testkit.ShardedZarr(bigN, bigShard, bigInner) {
		objs["big.zarr/"+k] = b
	}
	for root, prefix := range map[string]string{filepath.Join(dir, "v2"): "v2/", "../../testdata/zarr/zarrita/v3": "v3/"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			b, err := os.ReadFile(p)
			objs[prefix+filepath.ToSlash(rel)] = b
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(objs))
	sem := make(chan struct{}, 8)
	for k, b := range objs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := s.Upload(ctx, k, bytes.NewReader(b)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return want, <-errs
}

// TestZarr reads every Zarr fixture array through `mount s3://`: each
// .npy equals np.save's bytes of zarr.open(path)[...] (sha256 of the
// manifests), and np.load(mmap_mode="r") of some equals zarr.open()[...]
// of the store read by python3-zarr from the generated copy's manifest.
func TestZarr(t *testing.T) {
	want := uploadZarr(t)
	m := mountRemote(t, "s3://"+zarrBucket)
	for p, sum := range want {
		view := m.Path(strings.TrimSuffix(p, ".zarr") + ".npy")
		if got := run(t, "sh", "-c", `sha256sum < "$1"`, "sh", view); !strings.HasPrefix(got, sum) {
			t.Errorf("%s: sha256 %q, want %s", p, got, sum)
		}
	}
	for _, p := range []string{"v2/.zgroup", "v2/.zmetadata", "v3/zarr.json"} {
		if _, err := os.Stat(m.Path(p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	b, err := os.ReadFile(m.Path("big.npy"))
	if err != nil || len(b) < bigN*8 {
		t.Fatalf("big.npy: %v, %d bytes", err, len(b))
	}
	data := b[len(b)-bigN*8:]
	for _, i := range []int{0, 1, bigInner - 1, bigShard + 17, bigN - 1} {
		if v := math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:])); v != float64(i) {
			t.Errorf("big.npy element %d = %v", i, v)
		}
	}
}

// TestZarrShardGETs counts, through a proxy, the requests of a 4 KiB
// read of a sharded array in the bucket (kernel read-ahead off for the
// file): the shard's index (one GET of its end) and one ranged GET of one
// inner chunk; another 4 KiB in the same shard costs one GET.
func TestZarrShardGETs(t *testing.T) {
	uploadZarr(t)
	counter := fakes3.NewFaults(endpoint, 0, 1)
	defer counter.Close()
	m := mountRemote(t, "s3://"+zarrBucket, "--endpoint", counter.URL)
	f, err := os.Open(m.Path("big.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	hdr := st.Size() - bigN*8
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
	read := func(elem int64) (req, bytes int64) {
		r0, b0 := counter.Requests.Load(), counter.Bytes.Load()
		b := make([]byte, 4096)
		if _, err := f.ReadAt(b, hdr+elem*8); err != nil {
			t.Fatal(err)
		}
		if v := math.Float64frombits(binary.LittleEndian.Uint64(b)); v != float64(elem) {
			t.Fatalf("element %d reads %v", elem, v)
		}
		return counter.Requests.Load() - r0, counter.Bytes.Load() - b0
	}
	elem := int64(5*bigShard + 3*bigInner + 1000)
	const index = bigShard/bigInner*16 + 4
	if req, n := read(elem); req != 2 || n != bigInner*8+index {
		t.Errorf("first 4 KiB read: %d requests, %d bytes; want 2 (index, inner chunk) and %d bytes", req, n, bigInner*8+index)
	}
	if req, n := read(elem + 2*bigInner); req != 1 || n != bigInner*8 {
		t.Errorf("second 4 KiB read: %d requests, %d bytes; want 1 and %d bytes", req, n, bigInner*8)
	}
}
