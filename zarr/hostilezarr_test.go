package zarr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/hostile"
	"github.com/klauspost/compress/zstd"
)

// hostileInputs writes every hostile input (FIFOs and sparse files
// included) under a new temp dir, and returns it and the inputs by name.
func hostileInputs(t *testing.T) (string, map[string]hostile.ZarrInput) {
	t.Helper()
	root := t.TempDir()
	if _, err := hostile.WriteZarr(root, true); err != nil {
		t.Fatal(err)
	}
	ins, err := hostile.WriteZarr(t.TempDir(), false) // the list (no large files)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]hostile.ZarrInput{}
	for _, in := range ins {
		m[in.Name] = in
	}
	for _, n := range []string{"sparse_zattrs", "sparse_zarray", "sparse_zarr_json", "fifo_zattrs", "fifo_chunk", "fifo_shard", "fifo_zarr_json", "sparse_shards"} {
		m[n] = hostile.ZarrInput{Name: n, LocalOnly: true, Opens: n == "fifo_chunk" || n == "fifo_shard" || n == "sparse_shards"}
	}
	delete(m, "big_zattrs")
	return root, m
}

// unblockFIFOs opens the FIFOs under dir for writing, so that a reader
// blocked on one returns.
func unblockFIFOs(dir string) {
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
			if f, err := os.OpenFile(p, os.O_RDWR, 0); err == nil {
				time.AfterFunc(time.Second, func() { f.Close() })
			}
		}
		return nil
	})
}

// withinSeconds runs f and fails t if it does not return within 10 s
// (nothing is timed: it guards against a read that blocks for good).
func withinSeconds(t *testing.T, dir string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		unblockFIFOs(dir)
		<-done
		t.Fatal("blocked for more than 10 s (on a FIFO?)")
	}
}

// hostileAllocBound bounds what opening a hostile input and reading its
// first and last 4 KiB may allocate: the largest input's due (the 64 MiB
// index of a shard) and change. Each input claims far more (768 MiB to
// 1 TiB).
const hostileAllocBound = 96 << 20

// TestHostileZarr opens each hostile input (internal/testkit/hostile) from a
// directory and reads its view's first and last 4 KiB: every call
// returns, within bounded memory, the right bytes or an error that names
// what is wrong; nothing blocks, panics or allocates what the input
// claims. Issue 33, points 1–6.
func TestHostileZarr(t *testing.T) {
	root, inputs := hostileInputs(t)
	names := make([]string, 0, len(inputs))
	for n := range inputs {
		names = append(names, n)
	}
	for _, name := range names {
		in := inputs[name]
		t.Run(name, func(t *testing.T) {
			s, err := OpenDirStore(filepath.Join(root, name))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var a *Array
			var openErr, readErr error
			var got []byte
			runtime.GC()
			mem := testkit.StartAlloc()
			withinSeconds(t, root, func() {
				if a, openErr = Open(s, "", nil); openErr != nil {
					return
				}
				got = make([]byte, min(a.Size(), 4096))
				if _, readErr = a.ReadAt(got, 0); readErr == nil {
					_, readErr = a.ReadAt(got, a.Size()-int64(len(got)))
				}
			})
			if n := mem.Allocated(); n > hostileAllocBound {
				t.Errorf("allocated %d MiB (%s)", n>>20, in.What)
			}
			switch {
			case !in.Opens && openErr == nil && !strings.HasPrefix(name, "fifo_") && name != "sparse_zattrs":
				t.Errorf("opened; want an error (%s)", in.What)
			case in.Opens && openErr != nil:
				t.Errorf("open: %v", openErr)
			}
			t.Logf("open: %v; read: %v", openErr, readErr)
			switch name {
			case "fifo_zattrs", "fifo_chunk", "fifo_shard":
				// A FIFO is no object: no attributes, a missing chunk
				// or shard (the fill value).
				if openErr != nil || readErr != nil {
					t.Errorf("open %v, read %v; want the array, its FIFO missing", openErr, readErr)
				}
			case "sparse_zattrs", "sparse_zarray", "sparse_zarr_json":
				if !errors.Is(openErr, ErrFormat) || !errors.Is(openErr, ErrTooLarge) {
					t.Errorf("open: %v, want ErrFormat (too large)", openErr)
				}
			default:
				if in.Opens && !errors.Is(readErr, ErrCorrupt) {
					t.Errorf("read: %v, want ErrCorrupt", readErr)
				}
			}
		})
	}
}

// TestHostileDtypes: item sizes below 1, past the largest chunk, or
// whose arithmetic wraps are refused before anything is allocated for
// them, also for a 0-d array (issue 33, point 4).
func TestHostileDtypes(t *testing.T) {
	for _, dt := range []string{`"|V1099511627776"`, `"<U4611686018427387905"`, `"|S9223372036854775807"`, `"|S0"`, `"|V2147483648"`,
		`[["a","<u4",[4611686018427387905]]]`, `[["a","<U1073741824"]]`, `[["a","<u8",[1073741824]],["b","<u8"]]`} {
		for _, shape := range []string{"[]", "[1]"} {
			t.Run(dt+shape, func(t *testing.T) {
				doc := fmt.Sprintf(`{"zarr_format":2,"shape":%s,"chunks":%s,"dtype":%s,"compressor":null,"fill_value":null,"order":"C","filters":null}`, shape, shape, dt)
				_, err := OpenV2Meta(&memStore{m: map[string][]byte{}}, "x", []byte(doc), nil, nil)
				if !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrFormat) {
					t.Fatalf("got %v, want a refusal", err)
				}
			})
		}
	}
}

// countingStore counts the reads of a DirStore, by key.
type countingStore struct {
	*DirStore
	mu      sync.Mutex
	gets    map[string]int
	ranges  map[string]int
	objects map[string]int // reads through ObjectReader's readers (of watch, where set)
	watch   map[string][2]int64
}

func (c *countingStore) ObjectReader(key string) (io.ReaderAt, int64, error) {
	r, n, err := c.DirStore.ObjectReader(key)
	if err != nil {
		return nil, 0, err
	}
	return countingReaderAt{r, c, key}, n, nil
}

type countingReaderAt struct {
	r   io.ReaderAt
	c   *countingStore
	key string
}

func (r countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	r.c.mu.Lock()
	if w, ok := r.c.watch[r.key]; !ok || off < w[1] && off+int64(len(p)) > w[0] {
		r.c.objects[r.key]++
	}
	r.c.mu.Unlock()
	return r.r.ReadAt(p, off)
}

func newCountingStore(t *testing.T, dir string) *countingStore {
	s, err := OpenDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &countingStore{DirStore: s, gets: map[string]int{}, ranges: map[string]int{}, objects: map[string]int{}, watch: map[string][2]int64{}}
}

func (c *countingStore) Get(key string, limit int64) ([]byte, error) {
	c.mu.Lock()
	c.gets[key]++
	c.mu.Unlock()
	return c.DirStore.Get(key, limit)
}

func (c *countingStore) GetRange(key string, off, n int64) ([]byte, error) {
	c.mu.Lock()
	c.ranges[fmt.Sprintf("%s %d", key, n)]++
	c.mu.Unlock()
	return c.DirStore.GetRange(key, off, n)
}

// TestFailedChunkRemembered: a chunk that does not decode is read and
// decoded once, however often it is read, by one open of the array or
// another; once the file is replaced, the new version is read (issue
// 33, point 8).
func TestFailedChunkRemembered(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".zarray"), []byte(`{"zarr_format":2,"shape":[64],"chunks":[32],"dtype":"|u1","compressor":{"id":"zstd","level":1},"fill_value":0,"order":"C","filters":null}`), 0o644)
	os.WriteFile(filepath.Join(dir, "0"), hostile.ZstdBomb(64<<20), 0o644)
	s := newCountingStore(t, dir)
	b := make([]byte, 16)
	for open := range 2 {
		a, err := Open(s, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if _, err := a.ReadAt(b, int64(len(a.Header()))); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open %d: %v, want ErrCorrupt", open, err)
			}
		}
	}
	if n := s.gets["0"]; n != 1 {
		t.Errorf("the failing chunk was read %d times by 10 reads (2 opens); want once", n)
	}
	// A new version of the chunk (a file renamed over it) is read.
	enc, _ := zstd.NewWriter(nil)
	good := enc.EncodeAll(bytes.Repeat([]byte{7}, 32), nil)
	tmp := filepath.Join(dir, "0.tmp")
	os.WriteFile(tmp, good, 0o644)
	if err := os.Rename(tmp, filepath.Join(dir, "0")); err != nil {
		t.Fatal(err)
	}
	a, err := Open(s, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReadAt(b, int64(len(a.Header()))); err != nil || !bytes.Equal(b, bytes.Repeat([]byte{7}, 16)) {
		t.Fatalf("the replaced chunk: %v, %v", err, b)
	}
}

// TestFailedBlockRemembered: a Blosc block that does not decode, in an
// array read block by block (a Blosc array of the plain bytes, as a
// .b2frame is), is read and decoded once however often it is read, as
// a random reader's and a sequential reader's, whole and in rows; the
// chunks around it read.
func TestFailedBlockRemembered(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".zarray"), []byte(`{"zarr_format":2,"shape":[128,128],"chunks":[64,64],"dtype":"<f4","compressor":{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1,"blocksize":4096},"fill_value":0,"order":"C","filters":null}`), 0o644)
	plain := make([]byte, 64*64*4)
	rng := rand.New(rand.NewPCG(1, 2))
	x := float32(0)
	for i := 0; i < len(plain); i += 4 { // a random walk: chunks larger than blosc.HeadRead, read in parts
		x += float32(rng.NormFloat64())
		binary.LittleEndian.PutUint32(plain[i:], math.Float32bits(x))
	}
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 4, Blocksize: 4096, Blosc1: true}
	p.Filters[5] = blosc.FilterShuffle
	var bad [2]int64 // the compressed bytes of the bad block
	for _, k := range []string{"0.0", "0.1", "1.0", "1.1"} {
		c, err := blosc.Compress(nil, plain, p)
		if err != nil {
			t.Fatal(err)
		}
		if k == "0.1" {
			ch, err := blosc.NewChunkBytes(c)
			if err != nil {
				t.Fatal(err)
			}
			bad[0], bad[1] = ch.CompressedExtent(2)
			copy(c[bad[0]:], []byte{0xff, 0xff, 0xff, 0x7f}) // block 2's first stream: far past its end
		}
		os.WriteFile(filepath.Join(dir, k), c, 0o644)
	}
	s := newCountingStore(t, dir)
	s.watch["0.1"] = bad
	a, err := Open(s, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.cr == nil {
		t.Fatal("not read block by block")
	}
	h := int64(len(a.Header()))
	all := make([]byte, a.Size())
	row := make([]byte, 512)
	for round := range 5 {
		for k, err := range []error{
			func() error { _, err := a.ReadAt(all, 0); return err }(),
			func() error { _, err := a.ReadAtOnce(all, 0); return err }(),
			func() error { _, err := a.ReadAt(row[:16], h+40*512+256+4); return err }(), // row 40, in block 2 of chunk 0.1
			func() error { _, err := a.ReadAtOnce(row, h+40*512); return err }(),
		} {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "0.1") {
				t.Fatalf("round %d, read %d: %v, want ErrCorrupt naming chunk 0.1", round, k, err)
			}
		}
	}
	if n := s.objects["0.1"]; n != 1 {
		t.Errorf("the bad block of chunk 0.1 was read %d times by 20 reads; want once", n)
	}
	// Rows of the other chunks read.
	if _, err := a.ReadAt(row, h+72*512); err != nil || !bytes.Equal(row[:256], plain[8*256:9*256]) || !bytes.Equal(row[256:], plain[8*256:9*256]) {
		t.Fatalf("row 72: %v", err)
	}
}

// TestShardIndexCache: the indexes of 8 sparse shards of 64 MiB each,
// read by two opens of the array, are kept once each within
// MaxShardIndexBytes for the whole process: what stays after a GC is
// about one index, not 16 (issue 33, point 7).
func TestShardIndexCache(t *testing.T) {
	root, _ := hostileInputs(t)
	s := newCountingStore(t, filepath.Join(root, "sparse_shards"))
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b := make([]byte, 1)
	var arrays []*Array
	for range 2 {
		a, err := Open(s, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		arrays = append(arrays, a)
		h := int64(len(a.Header()))
		for sh := range int64(hostile.ShardFiles) {
			if _, err := a.ReadAt(b, h+sh*hostile.ShardEntries+5); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("shard %d: %v, want ErrCorrupt", sh, err)
			}
		}
	}
	// The second open reads the first shard again: its index is the
	// first open's (the last one kept).
	if _, err := arrays[1].ReadAt(b, int64(len(arrays[1].Header()))+(hostile.ShardFiles-1)*hostile.ShardEntries+9); !errors.Is(err, ErrCorrupt) {
		t.Fatal(err)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap kept after 2 opens × %d shards: %d MiB", hostile.ShardFiles, kept>>20)
	if kept > MaxShardIndexBytes+32<<20 {
		t.Errorf("%d MiB of heap kept after reading %d shards with 2 opens, more than the index budget (%d MiB) + 32 MiB", kept>>20, hostile.ShardFiles, MaxShardIndexBytes>>20)
	}
	idxReads := 0
	for k, n := range s.ranges {
		if strings.HasSuffix(k, fmt.Sprint(" ", 16*hostile.ShardEntries)) {
			idxReads += n
		}
	}
	if idxReads > 2*hostile.ShardFiles {
		t.Errorf("%d reads of shard indexes by 2 opens × %d shards", idxReads, hostile.ShardFiles)
	}
	runtime.KeepAlive(arrays)
}

// TestShardIndexShared: two opens of a sharded array read each index
// once; a shard replaced is read anew.
func TestShardIndexShared(t *testing.T) {
	dir := t.TempDir()
	for k, v := range testkit.ShardedZarr(1<<12, 1<<10, 1<<6) {
		p := filepath.Join(dir, k)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, v, 0o644)
	}
	s := newCountingStore(t, dir)
	b := make([]byte, 8)
	for range 3 {
		a, err := Open(s, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.ReadAt(b, int64(len(a.Header()))+8*100); err != nil {
			t.Fatal(err)
		}
	}
	idx := fmt.Sprintf("c/0 %d", (1<<10)/(1<<6)*16+4)
	if n := s.ranges[idx]; n != 1 {
		t.Errorf("index of shard c/0 read %d times by 3 opens; want once", n)
	}
	// Touch the shard: a new version, whose index is read again.
	now := time.Now().Add(time.Second)
	os.Chtimes(filepath.Join(dir, "c", "0"), now, now)
	a, _ := Open(s, "", nil)
	if _, err := a.ReadAt(b, int64(len(a.Header()))+8*100); err != nil {
		t.Fatal(err)
	}
	if n := s.ranges[idx]; n != 2 {
		t.Errorf("index of shard c/0 read %d times after it changed; want twice", n)
	}
}

// TestFIFOList: a FIFO where a group's directory is expected is no
// directory, and listing it does not block.
func TestFIFOList(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "g"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var lerr error
	withinSeconds(t, dir, func() { _, lerr = s.List("g") })
	if lerr == nil {
		t.Error("listed a FIFO")
	}
	var calls atomic.Int64
	withinSeconds(t, dir, func() {
		if _, err := s.GetRange("g", 0, 0); err == nil {
			t.Error("read a FIFO")
		}
		calls.Add(1)
	})
}

// TestCodecBounds: each codec, as a stage in the middle of a v3 chain
// (at most max bytes) or as the last (exactly max), refuses a stream
// that decodes to more before allocating what its header claims: a
// 24 KiB zstd frame of 768 MiB, a gzip stream of 1 GiB, a Blosc header
// of 2 GB, an LZ4 size prefix of 1 GiB, LZMA and xz dictionaries of
// 2–3 GiB (issue 33, points 1–3).
func TestCodecBounds(t *testing.T) {
	gz, err := hostile.GzipBomb(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	gzipc, _ := parseV2Compressor([]byte(`{"id":"gzip"}`))
	xzc, _ := parseV2Compressor([]byte(`{"id":"lzma"}`))
	lzmac, _ := parseV2Compressor([]byte(`{"id":"lzma","format":2}`))
	for _, c := range []struct {
		name string
		c    compressor
		src  []byte
	}{
		{"zstd", zstdCodec{}, hostile.ZstdBomb(768 << 20)},
		{"gzip", gzipc, gz},
		{"blosc", bloscCodec{}, hostile.BloscClaims(2_000_000_000)},
		{"lz4", lz4Codec{}, []byte{0, 0, 0, 0x40, 0}},
		{"lzma", lzmac, hostile.LZMAAloneDict()},
		{"xz", xzc, hostile.XZDict()},
		{"crc32c", crc32cCodec{}, make([]byte, 1<<20)},
	} {
		for _, exact := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/exact=%v", c.name, exact), func(t *testing.T) {
				const bound = 4096
				runtime.GC()
				mem := testkit.StartAlloc()
				out, err := c.c.decompress(c.src, bound, exact)
				if n := mem.Allocated(); n > 16<<20 {
					t.Errorf("allocated %d MiB for a bound of %d bytes", n>>20, bound)
				}
				// The empty xz block decodes (to nothing) where nothing
				// is asked of its size.
				if !errors.Is(err, ErrCorrupt) && (exact || c.name != "xz" || len(out) != 0) {
					t.Errorf("got %d bytes, %v; want ErrCorrupt", len(out), err)
				}
			})
		}
	}
}

// TestLargeItemFill opens arrays of items larger than maxFillItem (up
// to the 1 GiB a chunk may hold): the open allocates nothing of the
// item's size (listing a directory opens every array in it), a zero or
// absent fill value reads as zeros, and any other is refused.
func TestLargeItemFill(t *testing.T) {
	for _, tc := range []struct {
		dt, fill string
		ok       bool
	}{
		{`"|V1073741824"`, `null`, true},
		{`"|V1073741824"`, `0`, true},
		{`"|S2000000"`, `""`, true},
		{`"|S2000000"`, `"AAAA"`, true}, // base64 of three zero bytes
		{`"|S2000000"`, `"AAEA"`, false},
		{`"<U600000"`, `""`, true},
		{`"<U600000"`, `"x"`, false},
		{`"|V2000000"`, `1`, false},
	} {
		doc := fmt.Sprintf(`{"zarr_format":2,"shape":[4],"chunks":[1],"dtype":%s,"compressor":null,"fill_value":%s,"order":"C","filters":null}`, tc.dt, tc.fill)
		runtime.GC()
		mem := testkit.StartAlloc()
		a, err := OpenV2Meta(&memStore{m: map[string][]byte{}}, "x", []byte(doc), nil, nil)
		if n := mem.Allocated(); n > 1<<20 {
			t.Errorf("%s fill %s: open allocated %d KiB", tc.dt, tc.fill, n>>10)
		}
		if !tc.ok {
			if !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrFormat) {
				t.Errorf("%s fill %s: %v, want a refusal", tc.dt, tc.fill, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s fill %s: %v", tc.dt, tc.fill, err)
		}
		if tc.dt != `"|S2000000"` {
			continue
		}
		// A missing chunk of the 2 MB items reads as zeros.
		buf := make([]byte, 3<<20)
		for i := range buf {
			buf[i] = 0xff
		}
		h := int64(len(a.Header()))
		if _, err := a.ReadAt(buf, h+1000); err != nil {
			t.Fatalf("%s fill %s: read: %v", tc.dt, tc.fill, err)
		}
		if i := slices.IndexFunc(buf, func(c byte) bool { return c != 0 }); i >= 0 {
			t.Fatalf("%s fill %s: byte %d of a missing chunk is %#x", tc.dt, tc.fill, i, buf[i])
		}
	}
}
