package remote_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fakes3"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/pack/frame"
	"github.com/bloscfs/bloscfs/remote"
)

// newStore returns a store of the fake's bucket through endpoint.
func newStore(t testing.TB, endpoint, bucket string, cfg remote.Config) *remote.Store {
	t.Helper()
	cfg.Endpoint = endpoint
	cfg.Anonymous = true
	if cfg.Logger == nil {
		cfg.Logger = log.New(io.Discard, "", 0)
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	s, err := remote.New(context.Background(), bucket, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

func TestParseURL(t *testing.T) {
	for _, c := range []struct{ in, b, k string }{{"s3://b", "b", ""}, {"s3://b/", "b", ""}, {"s3://b/x/y.blp", "b", "x/y.blp"}} {
		b, k, ok := remote.ParseURL(c.in)
		if !ok || b != c.b || k != c.k {
			t.Errorf("ParseURL(%q) = %q %q %v", c.in, b, k, ok)
		}
	}
	for _, in := range []string{"s3://", "s3:///k", "/tmp/x", "http://x"} {
		if _, _, ok := remote.ParseURL(in); ok {
			t.Errorf("ParseURL(%q) accepted", in)
		}
	}
}

// TestFixturesThroughFaults reads every valid fixture file through a
// proxy that fails a third of the requests: each read is bit-exact or an
// error, never wrong bytes.
func TestFixturesThroughFaults(t *testing.T) {
	fxs, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	srv := fakes3.New("bkt")
	defer srv.Close()
	faults := fakes3.NewFaults(srv.URL, 0.3, 7)
	defer faults.Close()
	faults.Delay.Store(int64(5 * time.Millisecond))
	s := newStore(t, faults.URL, "bkt", remote.Config{Attempts: 8, CacheSize: 1 << 20})
	ok, failed := 0, 0
	for _, fx := range fxs {
		if fx.IsDir || !fx.ValidPlain || fx.Kind == "b2nd" {
			continue
		}
		data, err := os.ReadFile(fx.Path)
		if err != nil {
			t.Fatal(err)
		}
		srv.Put(fx.Name, data)
		o, err := s.Open(context.Background(), fx.Name)
		if err != nil {
			failed++
			continue
		}
		v, err := all.OpenViewReader(o, o.Size, o.Name(), nil)
		o.Opened()
		if err != nil {
			if errors.Is(err, pack.ErrUnknownFormat) {
				t.Errorf("%s: %v", fx.Name, err)
			}
			failed++
			continue
		}
		got := make([]byte, v.Size)
		_, err = v.ReadAt(got, 0)
		if err != nil && err != io.EOF {
			failed++
			continue
		}
		if sum(got) != fx.PlainSHA {
			t.Errorf("%s: wrong bytes through the faulty proxy", fx.Name)
		}
		ok++
	}
	t.Logf("%d fixtures read, %d failed after retries; faults: drop %d, 500 %d, 503 %d, delay %d, truncate %d",
		ok, failed, faults.Count("drop"), faults.Count("500"), faults.Count("503"), faults.Count("delay"), faults.Count("truncate"))
	if ok < 20 {
		t.Errorf("only %d fixtures read", ok)
	}
	if faults.Count("truncate") == 0 || faults.Count("drop") == 0 {
		t.Errorf("the proxy injected too few faults")
	}
}

// TestEveryFaultFails: with every request failing, a read returns an
// error naming the object and the range, after a bounded number of tries.
func TestEveryFaultFails(t *testing.T) {
	srv := fakes3.New("bkt")
	defer srv.Close()
	srv.Put("k", bytes.Repeat([]byte("x"), 1000))
	s := newStore(t, srv.URL, "bkt", remote.Config{Attempts: 3})
	o, err := s.Open(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	o.Opened()
	for _, kind := range []string{"drop", "500", "503", "truncate"} {
		faults := fakes3.NewFaults(srv.URL, 1, 1)
		faults.Only = kind
		fs := newStore(t, faults.URL, "bkt", remote.Config{Attempts: 3})
		fo := fs.OpenInfo(o.ObjectInfo)
		fo.Opened()
		start := time.Now()
		_, err = fo.ReadAt(make([]byte, 10), 100)
		if err == nil || !strings.Contains(err.Error(), "s3://bkt/k") || !strings.Contains(err.Error(), "[100,110)") {
			t.Errorf("%s: err = %v, want one naming s3://bkt/k and [100,110)", kind, err)
		}
		if req, _ := fs.Stats().Snapshot(); req != 3 {
			t.Errorf("%s: %d requests, want 3", kind, req)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s: failing took %v", kind, d)
		}
		faults.Close()
	}
}

// TestReplaced: an object replaced after open gives ErrChanged on the
// next uncached read, never the new bytes.
func TestReplaced(t *testing.T) {
	srv := fakes3.New("bkt")
	defer srv.Close()
	old := bytes.Repeat([]byte("old!"), 1<<18)
	srv.Put("k", old)
	s := newStore(t, srv.URL, "bkt", remote.Config{ReadAheadMax: -1})
	o, err := s.Open(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	o.Opened()
	b := make([]byte, 4096)
	if _, err := o.ReadAt(b, 0); err != nil || !bytes.Equal(b, old[:4096]) {
		t.Fatalf("first read: %v", err)
	}
	srv.Put("k", bytes.Repeat([]byte("new!"), 1<<18))
	_, err = o.ReadAt(b, 8192)
	if !errors.Is(err, remote.ErrChanged) {
		t.Fatalf("read after replace: %v, want ErrChanged", err)
	}
	if !o.Changed() {
		t.Error("Changed() is false")
	}
	// A reopen sees the new version.
	o2, err := s.Open(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	o2.Opened()
	if _, err := o2.ReadAt(b, 8192); err != nil || string(b[:4]) != "new!" {
		t.Fatalf("reopened: %v %q", err, b[:4])
	}
}

// TestReplacedUnderFaults replaces an object again and again while
// readers read it through a faulty proxy: every read returns the bytes of
// the version opened, or an error.
func TestReplacedUnderFaults(t *testing.T) {
	srv := fakes3.New("bkt")
	defer srv.Close()
	faults := fakes3.NewFaults(srv.URL, 0.2, 3)
	defer faults.Close()
	faults.Delay.Store(int64(time.Millisecond))
	s := newStore(t, faults.URL, "bkt", remote.Config{CacheSize: 64 << 10, Attempts: 6})
	versions := make([][]byte, 4)
	for i := range versions {
		versions[i] = bytes.Repeat([]byte{byte('a' + i)}, 1<<20)
	}
	srv.Put("k", versions[0])
	rng := rand.New(rand.NewPCG(1, 2))
	bad, errs := 0, 0
	for round := range 40 {
		v := round % len(versions)
		srv.Put("k", versions[v])
		o, err := s.Open(context.Background(), "k")
		if err != nil {
			errs++
			continue
		}
		o.Opened()
		for range 5 {
			if rng.IntN(3) == 0 {
				srv.Put("k", versions[(v+1)%len(versions)])
			}
			off := rng.Int64N(1<<20 - 5000)
			b := make([]byte, 1+rng.IntN(5000))
			if _, err := o.ReadAt(b, off); err != nil {
				errs++
				continue
			}
			if !bytes.Equal(b, versions[v][off:off+int64(len(b))]) {
				bad++
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d reads returned bytes of another version", bad)
	}
	t.Logf("%d reads failed (changed or faults)", errs)
}

// TestListPaginated lists a prefix of more objects than a page holds.
func TestListPaginated(t *testing.T) {
	srv := fakes3.New("bkt")
	defer srv.Close()
	srv.MaxKeys = 100
	for i := range 1050 {
		srv.Put("d/"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+"-"+itoa(i), []byte{1})
	}
	srv.Put("d/sub/y", []byte{1})
	srv.Put("d/sub2/z/w", []byte{1})
	s := newStore(t, srv.URL, "bkt", remote.Config{})
	l, err := s.List(context.Background(), "d/")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Objects) != 1050 || !l.Prefixes["sub"] || !l.Prefixes["sub2"] || len(l.Prefixes) != 2 {
		t.Fatalf("%d objects, prefixes %v", len(l.Objects), l.Prefixes)
	}
	req, _ := s.Stats().Snapshot()
	if _, err := s.List(context.Background(), "d/"); err != nil {
		t.Fatal(err)
	}
	if req2, _ := s.Stats().Snapshot(); req2 != req {
		t.Errorf("a cached listing sent %d requests", req2-req)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// bigFrame writes a frame of nchunks 1 MiB chunks (256 KiB blocks, LZ4
// and shuffle) cycling through a few distinct chunks, and returns its
// bytes and the plain chunks.
func bigFrame(t testing.TB, nchunks int) ([]byte, [][]byte) {
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: 256 << 10}
	p.Filters[5] = blosc.FilterShuffle
	path := filepath.Join(t.TempDir(), "big.b2frame")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := frame.NewWriter(f, frame.Params{Chunk: p, ChunkSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var plains, comps [][]byte
	for range 4 {
		plain := make([]byte, 1<<20)
		for i := 0; i < len(plain); i += 8 {
			plain[i] = byte((i >> 3) % 251)
		}
		for i := 0; i < len(plain); i += 4096 {
			plain[i+1] = byte(rng.IntN(256))
		}
		c, err := w.Compress(plain)
		if err != nil {
			t.Fatal(err)
		}
		plains, comps = append(plains, plain), append(comps, c)
	}
	for i := range nchunks {
		if err := w.AddCompressed(comps[i%4], 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data, plains
}

// TestRequestCounts: opening a 1 GiB remote frame costs a fixed number of
// requests whatever its chunk count, and one 4 KiB read at a random
// offset fetches at most the blocks it touches plus its chunk's first
// blosc.HeadRead bytes (header and block starts), in one GET per chunk
// for its header and starts and one per block touched (blocks decode in
// parallel, so that is two round trips).
func TestRequestCounts(t *testing.T) {
	srv := fakes3.New("bkt")
	defer srv.Close()
	opens := map[int]int64{}
	for _, n := range []int{512, 2048} {
		data, plains := bigFrame(t, n)
		key := "big" + itoa(n) + ".b2frame"
		srv.Put(key, data)
		local, err := frame.Open(bytes.NewReader(data), int64(len(data)), "local", pack.NoCache{})
		if err != nil {
			t.Fatal(err)
		}
		s := newStore(t, srv.URL, "bkt", remote.Config{})
		srv.ResetCounts()
		o, err := s.Open(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		v, err := all.OpenViewReader(o, o.Size, o.Name(), nil)
		if err != nil {
			t.Fatal(err)
		}
		o.Opened()
		req, byt := srv.Counts()
		opens[n] = req
		t.Logf("%d chunks (%d MiB plain, %d bytes stored): open took %d requests, %d bytes", n, n, len(data), req, byt)
		rng := rand.New(rand.NewPCG(uint64(n), 9))
		for range 20 {
			off := rng.Int64N(v.Size - 4096)
			srv.ResetCounts()
			b := make([]byte, 4096)
			if _, err := v.ReadAt(b, off); err != nil {
				t.Fatal(err)
			}
			ci := int(off >> 20)
			if want := plains[ci%4][off&(1<<20-1):][:min(4096, 1<<20-off&(1<<20-1))]; !bytes.Equal(b[:len(want)], want) {
				t.Fatalf("wrong bytes at %d", off)
			}
			req, byt := srv.Counts()
			// The bound: this chunk's header and block starts, and the
			// streams of the blocks touched (of this chunk and maybe the
			// next, whose header and starts then count too).
			var bound, reqs int64
			for c := ci; c <= int((off+4095)>>20) && c < n; c++ {
				ch, err := local.OpenChunk(c)
				if err != nil {
					t.Fatal(err)
				}
				lo, hi := max(off, int64(c)<<20)-int64(c)<<20, min(off+4096, int64(c+1)<<20)-int64(c)<<20
				bound += max(blosc.HeadRead, blosc.ExtHeaderLen+4*int64(ch.NumBlocks()))
				reqs++
				for b := ch.BlockAt(lo); b <= ch.BlockAt(hi-1); b++ {
					s, e := ch.CompressedExtent(b)
					bound += e - s
					reqs++
				}
			}
			if byt > bound {
				t.Errorf("read at %d fetched %d bytes in %d requests, bound %d: %q", off, byt, req, bound, srv.Log())
			}
			if req > reqs {
				t.Errorf("read at %d took %d requests, bound %d: %q", off, req, reqs, srv.Log())
			}
		}
	}
	if opens[512] != opens[2048] {
		t.Errorf("open took %d requests for 512 chunks, %d for 2048", opens[512], opens[2048])
	}
}

// TestBigFrameUnderFaults reads random ranges of a 512 MiB frame (and
// sequential runs, which start read-ahead) through a proxy that fails a
// fifth of the requests: bit-exact or an error.
func TestBigFrameUnderFaults(t *testing.T) {
	srv := fakes3.New("bkt")
	defer srv.Close()
	data, plains := bigFrame(t, 512)
	srv.Put("big.b2frame", data)
	faults := fakes3.NewFaults(srv.URL, 0.2, 11)
	defer faults.Close()
	faults.Delay.Store(int64(2 * time.Millisecond))
	s := newStore(t, faults.URL, "bkt", remote.Config{CacheSize: 4 << 20, ReadAheadMax: 8 << 20, Attempts: 6})
	o, err := s.Open(context.Background(), "big.b2frame")
	if err != nil {
		t.Fatal(err)
	}
	v, err := all.OpenViewReader(o, o.Size, o.Name(), pack.NoCache{})
	if err != nil {
		t.Fatal(err)
	}
	o.Opened()
	rng := rand.New(rand.NewPCG(3, 4))
	plainAt := func(off int64) byte { return plains[(off>>20)%4][off&(1<<20-1)] }
	fails := 0
	for i := range 60 {
		off := rng.Int64N(v.Size - 4<<20)
		n := 1 + rng.IntN(3<<20)
		steps := 1
		if i%4 == 0 {
			steps = 8 // a sequential run
		}
		for range steps {
			b := make([]byte, n)
			if _, err := v.ReadAt(b, off); err != nil {
				fails++
				break
			}
			for j := 0; j < n; j += 997 {
				if b[j] != plainAt(off+int64(j)) {
					t.Fatalf("wrong byte at %d", off+int64(j))
				}
			}
			off += int64(n)
			if off+int64(n) > v.Size {
				break
			}
		}
	}
	req, byt := s.Stats().Snapshot()
	t.Logf("%d reads failed; %d requests, %d bytes; faults: drop %d, 500 %d, 503 %d, delay %d, truncate %d", fails, req, byt,
		faults.Count("drop"), faults.Count("500"), faults.Count("503"), faults.Count("delay"), faults.Count("truncate"))
}

// TestCacheDir: ranges fetched by one store are served from the cache
// directory to a new store (a remount) without requests, and not for a
// replaced object; the directory stays within its bound.
func TestCacheDir(t *testing.T) {
	srv := fakes3.New("bkt")
	defer srv.Close()
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i * 7 >> 5)
	}
	srv.Put("k", data)
	dir := t.TempDir()
	read := func(s *remote.Store) ([]byte, error) {
		o, err := s.Open(context.Background(), "k")
		if err != nil {
			return nil, err
		}
		o.Opened()
		b := make([]byte, 100000)
		_, err = o.ReadAt(b, 1<<20)
		return b, err
	}
	s1 := newStore(t, srv.URL, "bkt", remote.Config{CacheDir: dir, CacheDirSize: 1 << 20, ReadAheadMax: -1})
	if b, err := read(s1); err != nil || !bytes.Equal(b, data[1<<20:1<<20+100000]) {
		t.Fatalf("first read: %v", err)
	}
	s2 := newStore(t, srv.URL, "bkt", remote.Config{CacheDir: dir, CacheDirSize: 1 << 20, ReadAheadMax: -1})
	srv.ResetCounts()
	if b, err := read(s2); err != nil || !bytes.Equal(b, data[1<<20:1<<20+100000]) {
		t.Fatalf("read after a remount: %v", err)
	}
	if req, byt := srv.Counts(); req != 1 || byt != 0 { // the HEAD of open
		t.Errorf("read after a remount: %d requests, %d bytes", req, byt)
	}
	// A cached range that fails its check is dropped, logged and fetched
	// again, never served: a flipped byte (rot); a file of its full
	// length filled with zeros (what XFS leaves of a file renamed into
	// place without an fsync when the machine crashes); a file without
	// its trailer (as this cache wrote before it had one), dropped when
	// the directory is indexed.
	for _, c := range []struct {
		name    string
		corrupt func(path string)
		log     string
	}{
		{"a flipped byte", func(p string) {
			b, _ := os.ReadFile(p)
			b[len(b)/3] ^= 0x40
			os.WriteFile(p, b, 0o600)
		}, "checksum mismatch"},
		{"zeros", func(p string) {
			b, _ := os.ReadFile(p)
			os.WriteFile(p, make([]byte, len(b)), 0o600)
		}, "checksum mismatch"},
		{"no trailer", func(p string) {
			info, _ := os.Stat(p)
			os.Truncate(p, info.Size()-8)
		}, ""},
	} {
		files := cachedFiles(t, dir)
		if len(files) == 0 {
			t.Fatalf("%s: nothing cached", c.name)
		}
		for _, f := range files {
			c.corrupt(f)
		}
		var logged bytes.Buffer
		s := newStore(t, srv.URL, "bkt", remote.Config{CacheDir: dir, CacheDirSize: 1 << 20, ReadAheadMax: -1, Logger: log.New(&logged, "", 0)})
		srv.ResetCounts()
		if b, err := read(s); err != nil || !bytes.Equal(b, data[1<<20:1<<20+100000]) {
			t.Fatalf("%s: read: %v, right bytes: %v", c.name, err, bytes.Equal(b, data[1<<20:1<<20+100000]))
		}
		if _, byt := srv.Counts(); byt < 100000 {
			t.Errorf("%s: %d bytes fetched: the damaged cache served the read", c.name, byt)
		}
		if !strings.Contains(logged.String(), c.log) || c.log == "" && logged.Len() != 0 {
			t.Errorf("%s: logged %q, want %q", c.name, logged.String(), c.log)
		}
		// Fetched again and cached again: the next mount reads from it.
		s = newStore(t, srv.URL, "bkt", remote.Config{CacheDir: dir, CacheDirSize: 1 << 20, ReadAheadMax: -1})
		srv.ResetCounts()
		if b, err := read(s); err != nil || !bytes.Equal(b, data[1<<20:1<<20+100000]) {
			t.Fatalf("%s: read after the repair: %v", c.name, err)
		}
		if req, byt := srv.Counts(); req != 1 || byt != 0 {
			t.Errorf("%s: read after the repair: %d requests, %d bytes", c.name, req, byt)
		}
	}
	// A replaced object is fetched anew.
	data2 := bytes.Repeat([]byte{9}, 3<<20)
	srv.Put("k", data2)
	s3 := newStore(t, srv.URL, "bkt", remote.Config{CacheDir: dir, CacheDirSize: 1 << 20, ReadAheadMax: -1})
	if b, err := read(s3); err != nil || !bytes.Equal(b, data2[1<<20:1<<20+100000]) {
		t.Fatalf("read of the replaced object: %v", err)
	}
	var total int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	if total > 1<<20 {
		t.Errorf("the cache dir holds %d bytes, bound 1 MiB", total)
	}
}

// cachedFiles lists the ranges a cache directory holds.
func cachedFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	return files
}

// TestList100k lists a prefix of 100,000 objects (100 pages).
func TestList100k(t *testing.T) {
	n := 100000
	if testkit.RaceEnabled {
		n = 20000 // the XML of 100 pages is minutes under -race; make canary lists 100,000
	}
	srv := fakes3.New("bkt")
	defer srv.Close()
	for i := range n {
		srv.Put("big/"+strconv.Itoa(i)+".b2frame", nil)
	}
	s := newStore(t, srv.URL, "bkt", remote.Config{})
	l, err := s.List(context.Background(), "big/")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Objects) != n {
		t.Fatalf("%d objects listed, want %d", len(l.Objects), n)
	}
	if req, _ := s.Stats().Snapshot(); req != int64(n/1000) {
		t.Errorf("%d requests, want %d pages", req, n/1000)
	}
}

// TestListConcurrent: Lists of one prefix at once, while its listing is
// being fetched and as it expires, share listings and agree (under -race
// this caught the listing's fields written outside the lock its readers
// take).
func TestListConcurrent(t *testing.T) {
	srv := fakes3.New("bkt")
	defer srv.Close()
	for i := range 50 {
		srv.Put("d/"+strconv.Itoa(i), nil)
	}
	s := newStore(t, srv.URL, "bkt", remote.Config{DirCache: time.Nanosecond})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				l, err := s.List(context.Background(), "d/")
				if err != nil {
					t.Error(err)
					return
				}
				if len(l.Objects) != 50 {
					t.Errorf("listing of %d objects, want 50", len(l.Objects))
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestReadInPlace: bytes already in the range cache are lent where they
// lie; bytes that are not, or that span two ranges, are not, and ReadAt
// serves them.
func TestReadInPlace(t *testing.T) {
	srv := fakes3.New("bkt")
	defer srv.Close()
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i * 13)
	}
	srv.Put("k", data)
	s := newStore(t, srv.URL, "bkt", remote.Config{ReadAheadMax: -1})
	o, err := s.Open(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	o.Opened()
	var _ blosc.InPlaceReader = o
	lend := func(off, n int64) (bool, []byte, error) {
		var got []byte
		ok, err := o.ReadInPlace(off, n, func(b []byte) error { got = bytes.Clone(b); return nil })
		return ok, got, err
	}
	if ok, _, _ := lend(1<<20, 4096); ok {
		t.Fatal("lent bytes that were never fetched")
	}
	buf := make([]byte, 256<<10)
	if _, err := o.ReadAt(buf, 1<<20); err != nil {
		t.Fatal(err)
	}
	requests, _ := srv.Counts()
	ok, got, err := lend(1<<20+1000, 100<<10)
	if !ok || err != nil || !bytes.Equal(got, data[1<<20+1000:1<<20+1000+100<<10]) {
		t.Fatalf("lending fetched bytes: %v, %v, equal %v", ok, err, bytes.Equal(got, data[1<<20+1000:1<<20+1000+100<<10]))
	}
	if now, _ := srv.Counts(); now != requests {
		t.Error("lending cached bytes sent a request")
	}
	if ok, _, _ := lend(int64(len(data))-10, 11); ok {
		t.Error("lent bytes past the end")
	}
}

// TestOpenTail: while an object opens, a read near its end (a frame's
// trailer) also fetches a whole window before it, where the index lies,
// whatever the object's size modulo the window: cut at the window
// boundary, an object whose trailer began a window cost one GET more to
// open (TestRequestCounts met it when a new LZ4 encoder moved a frame's
// end by some KiB).
func TestOpenTail(t *testing.T) {
	srv := fakes3.New("bkt")
	defer srv.Close()
	s := newStore(t, srv.URL, "bkt", remote.Config{})
	for _, size := range []int64{8*remote.OpenWindow + 100, 8*remote.OpenWindow + remote.OpenWindow/2, 9 * remote.OpenWindow} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 31)
		}
		key := "obj" + itoa(int(size))
		srv.Put(key, data)
		o, err := s.Open(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		srv.ResetCounts()
		// The trailer, then an index 40 KiB before the end.
		for _, r := range [][2]int64{{size - 64, 64}, {size - 40<<10, 16 << 10}} {
			b := make([]byte, r[1])
			if _, err := o.ReadAt(b, r[0]); err != nil || !bytes.Equal(b, data[r[0]:r[0]+r[1]]) {
				t.Fatalf("size %d: read at %d: %v", size, r[0], err)
			}
		}
		if req, _ := srv.Counts(); req != 1 {
			t.Errorf("size %d: trailer and index took %d GETs, want 1: %q", size, req, srv.Log())
		}
		o.Opened()
	}
}
