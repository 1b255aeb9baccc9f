package remote_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit/b2w"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// b2Bucket holds python-blosc2 stores: the fixtures of testdata/b2store
// (a .b2d directory as a prefix) and two larger stores written here,
// big.b2z and big.b2e, whose reads the GET tests count.
const b2Bucket = "b2store"

var (
	b2Once  sync.Once
	b2Local string // a local copy of what the bucket holds
	b2Err   error
)

// The larger stores: big.b2z, a TreeStore(threshold=2**16) whose /big is
// a 16 MiB float64 array in a file of its own (1 MiB chunks of 256 KiB
// blocks) beside embedded arrays; big.b2e, an EmbedStore whose /big is a
// 2 MiB float64 array embedded in the store's 8 KiB chunks (256 KiB
// chunks of 64 KiB blocks).
const (
	bigZElems, bigZChunk, bigZBlock = 2 << 20, 128 << 10, 32 << 10
	bigEElems, bigEChunk, bigEBlock = 256 << 10, 32 << 10, 8 << 10
)

// uploadB2Store writes the stores and uploads them, once per run, and
// returns the local copy.
func uploadB2Store(t *testing.T) string {
	t.Helper()
	setup.Require(t)
	b2Once.Do(func() { b2Local, b2Err = doUploadB2Store() })
	if b2Err != nil {
		t.Fatal(b2Err)
	}
	return b2Local
}

// walkArray returns the float64 random walk of n elements (seed seed)
// as a b2nd frame of chunks and blocks of the given elements.
func walkArray(n, chunk, block int, seed uint64) []byte {
	data := make([]byte, 8*n)
	rng := rand.New(rand.NewPCG(seed, 1))
	x := 0.0
	for i := range n {
		x += math.Round(rng.NormFloat64()*100) / 100
		binary.LittleEndian.PutUint64(data[8*i:], math.Float64bits(x))
	}
	a, err := frame.NewArray([]int64{int64(n)}, "<f8", 8, []int32{int32(chunk)}, []int32{int32(block)})
	if err != nil {
		panic(err)
	}
	m := &b2w.MemFile{}
	if err := frame.WriteArray(m, bytes.NewReader(data), a, blosc.DefaultParams(8)); err != nil {
		panic(err)
	}
	return m.B
}

func doUploadB2Store() (string, error) {
	dir := filepath.Join(setup.Dir, "b2store")
	if err := os.CopyFS(dir, os.DirFS("../../testdata/b2store")); err != nil {
		return "", err
	}
	nd, err := os.ReadFile(filepath.Join(fixtures.Dir(), "nd_f64_1d.b2nd"))
	if err != nil {
		return "", err
	}
	u8, err := os.ReadFile(filepath.Join(fixtures.Dir(), "nd_u8_3d.b2nd"))
	if err != nil {
		return "", err
	}
	d := b2w.NewDictWriter(b2w.MarkerTree, 1<<13, 1<<16)
	d.Set("/big", walkArray(bigZElems, bigZChunk, bigZBlock, 1), 8*bigZElems, ".b2nd")
	d.Set("/small/a", nd, 8000, ".b2nd")
	d.Set("/small/y", u8, 10540, ".b2nd")
	var vl []b2w.KV
	d.SetVLMeta("", &vl, "title", "counted")
	bigD := filepath.Join(setup.Dir, "big.b2d")
	d.Write(bigD)
	// big.b2z as python-blosc2's to_b2z writes it, by Python's zipfile.
	script := `import sys; sys.path.insert(0, sys.argv[1]); import make_b2z; make_b2z.write(sys.argv[2], sys.argv[3])`
	if out, err := exec.Command("/usr/bin/python3", "-c", script, dir, bigD, filepath.Join(dir, "big.b2z")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("make_b2z.write: %v\n%s", err, out)
	}
	e := b2w.NewStoreWriter(b2w.MarkerEmbed, 1<<13)
	e.Set("/a", nd)
	e.Set("/big", walkArray(bigEElems, bigEChunk, bigEBlock, 2))
	e.Set("/y", u8)
	if err := os.WriteFile(filepath.Join(dir, "big.b2e"), e.Frame(), 0o644); err != nil {
		return "", err
	}
	s := newStore(nil, b2Bucket)
	ctx := context.Background()
	if err := s.CreateBucket(ctx); err != nil {
		return "", err
	}
	err = filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return s.Upload(ctx, filepath.ToSlash(rel), bytes.NewReader(b))
	})
	return dir, err
}

// TestB2Store mounts the bucket of stores: every store, a .b2z or .b2e
// object or a .b2d prefix, shows what it shows through a local mount
// (what its tree shows: names, sizes, bytes, attributes).
func TestB2Store(t *testing.T) {
	local := uploadB2Store(t)
	m := mountRemote(t, "s3://"+b2Bucket)
	ents, err := os.ReadDir(local)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if _, ok := pack.TreeFormatFor(e.Name(), e.IsDir()); !ok {
			continue
		}
		tr, err := all.OpenTree(filepath.Join(local, e.Name()), nil)
		if err != nil {
			t.Fatal(err)
		}
		files := mounttest.CheckTree(t, tr, m.Path(e.Name()))
		tr.Close()
		t.Logf("%s: %d files", e.Name(), files)
		n++
	}
	if n != 11 {
		t.Errorf("%d stores", n)
	}
	if log := m.LogText(); !strings.Contains(log, `dict_t64k.b2z: key "/dir/batch" is left out`) {
		t.Errorf("the log lacks the BatchArray left out:\n%s", log)
	}
	// unpack STORE KEY and verify read the bucket's stores as they read local ones.
	out := filepath.Join(t.TempDir(), "big.npy")
	run(t, bin, "unpack", "-q", "s3://"+b2Bucket+"/big.b2z", "/small/y", out)
	got, _ := os.ReadFile(out)
	want, _ := os.ReadFile(m.Path("big.b2z/small/y.npy"))
	if !bytes.Equal(got, want) || len(got) == 0 {
		t.Errorf("unpack s3://…/big.b2z /small/y: %d bytes, the mount shows %d", len(got), len(want))
	}
	if v := run(t, bin, "verify", "s3://"+b2Bucket+"/tree_t64k.b2z"); !strings.Contains(v, "7 verified, 0 failed") {
		t.Errorf("verify: %s", v)
	}
}

// request is one request a recorder forwarded.
type request struct {
	method, key string
	query       url.Values
	start, end  int64 // the range [start, end); end -1 for none
}

// recorder is a reverse proxy to the S3 server that records the
// requests it forwards.
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []request // since the last take
	all  []request
}

func newRecorder(target string) *recorder {
	u, err := url.Parse(target)
	if err != nil {
		panic(err)
	}
	r := &recorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		rq := request{method: q.Method, key: strings.TrimPrefix(strings.TrimPrefix(q.URL.Path, "/"+b2Bucket), "/"), query: q.URL.Query(), end: -1}
		if rg := q.Header.Get("Range"); rg != "" {
			a, b, _ := strings.Cut(strings.TrimPrefix(rg, "bytes="), "-")
			rq.start, _ = strconv.ParseInt(a, 10, 64)
			e, _ := strconv.ParseInt(b, 10, 64)
			rq.end = e + 1
		}
		r.mu.Lock()
		r.reqs = append(r.reqs, rq)
		r.all = append(r.all, rq)
		r.mu.Unlock()
		proxy.ServeHTTP(w, q)
	}))
	return r
}

// take returns the requests since the last take.
func (r *recorder) take() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

// gets returns the ranged GETs of key among reqs.
func gets(reqs []request, key string) []request {
	var out []request
	for _, q := range reqs {
		if q.method == http.MethodGet && q.key == key && q.end >= 0 {
			out = append(out, q)
		}
	}
	return out
}

// memberRange returns where member name's data lies in the ZIP archive p.
func memberRange(t *testing.T, p, name string) (int64, int64) {
	t.Helper()
	z, err := zip.OpenReader(p)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	for _, f := range z.File {
		if f.Name == name {
			off, err := f.DataOffset()
			if err != nil {
				t.Fatal(err)
			}
			return off, off + int64(f.CompressedSize64)
		}
	}
	t.Fatalf("%s has no member %s", p, name)
	return 0, 0
}

// frameSections returns where a frame at off of a file (its first
// bytes in head) keeps its chunks: [headerLen, headerLen+cbytes); its
// index and trailer follow.
func frameSections(head []byte) (int64, int64) {
	hl := int64(binary.BigEndian.Uint32(head[11:]))
	cb := int64(binary.BigEndian.Uint64(head[39:]))
	return hl, hl + cb
}

// read4K reads 4 KiB of the mounted file p at off, kernel read-ahead off,
// and checks them against want.
func read4K(t *testing.T, p string, off int64, want []byte) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
	b := make([]byte, 4096)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want[off:off+4096]) {
		t.Fatalf("%s: 4 KiB at %d differ", p, off)
	}
}

// TestB2StoreGETs counts, through a proxy, what the mount asks of the
// bucket for a .b2z and a .b2e: the zip directory, and the store frame's
// index, once, when the store is first listed; then a 4 KiB read of a
// leaf fetches only ranges of the chunks that hold it: of the leaf's
// member, for a .b2z, at most two GETs per chunk; of the store's chunks
// section, for a .b2e, never its index again. A .b2d prefix is listed by
// one LIST without delimiter.
func TestB2StoreGETs(t *testing.T) {
	local := uploadB2Store(t)
	rec := newRecorder(endpoint)
	defer rec.srv.Close()
	m := mountRemote(t, "s3://"+b2Bucket, "--endpoint", rec.srv.URL)

	// big.b2z: the directory once, then the leaf's chunks.
	zpath := filepath.Join(local, "big.b2z")
	st, err := os.Stat(zpath)
	if err != nil {
		t.Fatal(err)
	}
	size := st.Size()
	want := func(p string) []byte {
		tr, err := all.OpenTree(filepath.Join(local, p[:strings.Index(p, "/")]), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		c, err := tr.Open(p[strings.Index(p, "/")+1:])
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, c.Size())
		c.ReadAt(b, 0)
		return b
	}
	bigNPY := want("big.b2z/big.npy")
	if _, err := os.ReadDir(m.Path("big.b2z")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadDir(m.Path("big.b2z/small")); err != nil {
		t.Fatal(err)
	}
	listing := gets(rec.take(), "big.b2z")
	tail := 0
	for _, q := range listing {
		if q.end == size {
			tail++
		}
	}
	t.Logf("listing big.b2z (%d bytes): %d GETs %v", size, len(listing), listing)
	if tail != 1 {
		t.Errorf("listing big.b2z: %d GETs of its end (the directory), want 1", tail)
	}
	ms, me := memberRange(t, zpath, "big.b2nd")
	hdr := int64(len(bigNPY)) - 8*bigZElems
	// 4 KiB in one block (the kernel reads whole pages: the page holding
	// the read must not reach into the block before), each block away
	// from the last one read (a read that follows on from the last
	// starts the object's read-ahead).
	inBlock := func(chunk, block int64) int64 { return (hdr + chunk*8*bigZChunk + block*8*bigZBlock + 64<<10) &^ 4095 }
	for i, off := range []int64{inBlock(5, 1), inBlock(9, 3), inBlock(5, 3)} {
		read4K(t, m.Path("big.b2z/big.npy"), off, bigNPY)
		gs := gets(rec.take(), "big.b2z")
		t.Logf("4 KiB at %d of big.b2z/big.npy: %d GETs %v", off, len(gs), gs)
		limit := 2
		if i == 2 {
			limit = 1 // a chunk seen before: its block only
		}
		if len(gs) > limit {
			t.Errorf("4 KiB at %d: %d GETs, want at most %d", off, len(gs), limit)
		}
		for _, q := range gs {
			if q.start < ms || q.end > me || q.end-q.start > 8*bigZChunk {
				t.Errorf("4 KiB at %d: GET [%d,%d) outside the member's data [%d,%d) or over a chunk", off, q.start, q.end, ms, me)
			}
		}
	}
	// An embedded leaf of the .b2z: ranges of embed.b2e's member only.
	es, ee := memberRange(t, zpath, b2w.EmbedFile)
	yNPY := want("big.b2z/small/y.npy")
	read4K(t, m.Path("big.b2z/small/y.npy"), int64(len(yNPY))-4096, yNPY)
	for _, q := range gets(rec.take(), "big.b2z") {
		if q.start < es || q.end > ee || q.end == size {
			t.Errorf("4 KiB of an embedded leaf: GET [%d,%d) outside embed.b2e [%d,%d)", q.start, q.end, es, ee)
		}
	}

	// big.b2e: the store's index once; a 4 KiB read of its embedded
	// /big fetches ranges of the chunks section only.
	epath := filepath.Join(local, "big.b2e")
	eb, err := os.ReadFile(epath)
	if err != nil {
		t.Fatal(err)
	}
	cs, ce := frameSections(eb)
	if _, err := os.ReadDir(m.Path("big.b2e")); err != nil {
		t.Fatal(err)
	}
	listing = gets(rec.take(), "big.b2e")
	index := 0
	for _, q := range listing {
		if q.end > ce {
			index++
		}
	}
	t.Logf("listing big.b2e (%d bytes, chunks [%d,%d)): %d GETs %v", len(eb), cs, ce, len(listing), listing)
	if index != 1 {
		t.Errorf("listing big.b2e: %d GETs past its chunks (its index and trailer), want 1", index)
	}
	eNPY := want("big.b2e/big.npy")
	ehdr := int64(len(eNPY)) - 8*bigEElems
	var fetched int64
	for _, off := range []int64{(ehdr + 3*8*bigEChunk + 8<<10) &^ 4095, (ehdr + 6*8*bigEChunk + 2*8*bigEBlock + 8<<10) &^ 4095} {
		read4K(t, m.Path("big.b2e/big.npy"), off, eNPY)
		gs := gets(rec.take(), "big.b2e")
		t.Logf("4 KiB at %d of big.b2e/big.npy: %d GETs %v", off, len(gs), gs)
		for _, q := range gs {
			fetched += q.end - q.start
			if q.start < cs || q.end > ce {
				t.Errorf("4 KiB at %d: GET [%d,%d) outside the store's chunks [%d,%d)", off, q.start, q.end, cs, ce)
			}
		}
	}
	if fetched > int64(len(eb))/4 {
		t.Errorf("two 4 KiB reads of the embedded array fetched %d bytes of the %d-byte store", fetched, len(eb))
	}

	// A .b2d prefix: one LIST without delimiter, however deep it is read.
	for _, p := range []string{"tree_t64k.b2d", "tree_t64k.b2d/group", "tree_t64k.b2d/group/sub"} {
		if _, err := os.ReadDir(m.Path(p)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.ReadFile(m.Path("tree_t64k.b2d/group/sub/big.npy")); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	var lists []request
	for _, q := range rec.all {
		if q.key == "" && q.query.Has("list-type") && strings.HasPrefix(q.query.Get("prefix"), "tree_t64k.b2d") {
			lists = append(lists, q)
		}
	}
	rec.mu.Unlock()
	if len(lists) != 1 || lists[0].query.Get("delimiter") != "" {
		t.Errorf("LISTs of the .b2d prefix: %+v, want one without delimiter", lists)
	}
}
