package zarr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/hostile"
)

// metaSeeds returns every .zarray and zarr.json of the committed fixtures.
func metaSeeds(f *testing.F) [][]byte {
	var out [][]byte
	filepath.WalkDir("../testdata/zarr", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (d.Name() == "zarr.json" || d.Name() == ".zarray") {
			if b, err := os.ReadFile(p); err == nil {
				out = append(out, b)
			}
		}
		return nil
	})
	if len(out) == 0 {
		f.Fatal("no metadata seeds")
	}
	return out
}

// FuzzMeta parses metadata documents as v2 and v3 arrays and reads the
// first bytes of the view from an empty store: no input may panic, hang
// or allocate without bound.
func FuzzMeta(f *testing.F) {
	for _, b := range metaSeeds(f) {
		f.Add(b)
	}
	f.Add([]byte(`{"zarr_format":2,"shape":[3],"chunks":[2],"dtype":[["a","<f8"],["b","|S2",[2]]],"compressor":null,"fill_value":"AAAAAAAAAAAAAAAAAA==","order":"F","filters":[{"id":"delta","dtype":"<f8"}]}`))
	dir := f.TempDir()
	s, err := OpenDirStore(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"zarr_format":3,"node_type":"group","consolidated_metadata":{"kind":"inline","metadata":{"a":{"node_type":"array"}}}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		// Consolidated metadata: keys are checked, no panic.
		if m, err := ConsolidatedV3(doc, "g"); err == nil {
			for k := range m {
				if !ValidKey(k) {
					t.Fatalf("consolidated key %q", k)
				}
			}
		}
		ParseConsolidated(doc, "g")
		for _, open := range []func() (*Array, error){
			func() (*Array, error) { return OpenV2Meta(s, "a", doc, nil, nil) },
			func() (*Array, error) { return OpenV3Meta(s, "a", doc, nil) },
		} {
			a, err := open()
			if err != nil {
				continue
			}
			b := make([]byte, min(a.Size(), 4096))
			a.ReadAt(b, 0)
			a.ReadAt(b, max(0, a.Size()-int64(len(b))))
		}
	})
}

// FuzzShardIndex reads a sharded array whose one shard is the fuzz input
// (seeded with shards the tests write): broken indexes and inner chunks
// are errors, never a panic or a huge allocation.
func FuzzShardIndex(f *testing.F) {
	dir := f.TempDir()
	for name, sp := range map[string]shardSpec{
		"z": {shape: []int64{8, 8}, shard: []int64{8, 8}, inner: []int64{4, 4}, codec: "zstd"},
		"c": {shape: []int64{8, 8}, shard: []int64{8, 8}, inner: []int64{4, 4}, codec: "crc32c", missing: func(i int64) bool { return i == 2 }},
	} {
		writeSharded(f, dir, name, sp)
		b, err := os.ReadFile(filepath.Join(dir, name, "c", "0", "0"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, name == "z")
	}
	// An index of 4 entries pointing far away, with a good checksum.
	idx := make([]byte, 64)
	for i := range 4 {
		binary.LittleEndian.PutUint64(idx[16*i:], 1<<60)
		binary.LittleEndian.PutUint64(idx[16*i+8:], 1<<30)
	}
	f.Add(binary.LittleEndian.AppendUint32(idx, crc32.Checksum(idx, castagnoli())), false)
	metas := map[string][]byte{}
	for _, name := range []string{"c", "z"} {
		b, err := os.ReadFile(filepath.Join(dir, name, "zarr.json"))
		if err != nil {
			f.Fatal(err)
		}
		metas[name] = b
	}
	f.Fuzz(func(t *testing.T, shard []byte, zstd bool) {
		name := "c"
		if zstd {
			name = "z"
		}
		s := &memStore{m: map[string][]byte{"zarr.json": metas[name], "c/0/0": shard}}
		a, err := Open(s, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, a.Size())
		a.ReadAt(b, 0)
	})
}

// memStore is a Store in memory that counts its reads.
type memStore struct {
	m    map[string][]byte
	gets atomic.Int64
}

func (s *memStore) Get(key string, limit int64) ([]byte, error) {
	s.gets.Add(1)
	b, ok := s.m[key]
	if !ok {
		return nil, ErrNotExist
	}
	if int64(len(b)) > limit {
		return nil, ErrTooLarge
	}
	return b, nil
}

func (s *memStore) GetRange(key string, off, n int64) ([]byte, error) {
	s.gets.Add(1)
	b, ok := s.m[key]
	if !ok {
		return nil, ErrNotExist
	}
	if off < 0 {
		off = int64(len(b)) - n
	}
	if n < 0 || off < 0 || off > int64(len(b))-n {
		return nil, io.ErrUnexpectedEOF
	}
	return b[off : off+n], nil
}

// fuzzStore is the store of FuzzZarrRead: one metadata document, a
// .zattrs of attrs bytes (spaces, read up to the caller's limit as a
// store reads a file), and every other key (every chunk, every shard)
// the fuzz chunk. It tells one version for the chunk, so that the
// reader's memory of failures works as with a directory.
type fuzzStore struct {
	meta  map[string][]byte
	attrs int64
	chunk []byte
	ver   Version
}

func (s *fuzzStore) Get(key string, limit int64) ([]byte, error) {
	if b, ok := s.meta[key]; ok {
		if int64(len(b)) > limit {
			return nil, ErrTooLarge
		}
		return b, nil
	}
	switch key {
	case ".zattrs":
		if s.attrs == 0 {
			return nil, ErrNotExist
		}
		b := bytes.Repeat([]byte{' '}, int(min(s.attrs, limit+1)))
		if int64(len(b)) > limit {
			return nil, ErrTooLarge
		}
		return append(b, '{', '}'), nil
	case "zarr.json", ".zarray", ".zgroup", ".zmetadata":
		return nil, ErrNotExist
	}
	if int64(len(s.chunk)) > limit {
		return nil, ErrTooLarge
	}
	return s.chunk, nil
}

func (s *fuzzStore) GetRange(key string, off, n int64) ([]byte, error) {
	b, err := s.Get(key, MaxObject)
	if err != nil {
		return nil, err
	}
	if off < 0 {
		off = int64(len(b)) - n
	}
	if n < 0 || off < 0 || off > int64(len(b))-n {
		return nil, io.ErrUnexpectedEOF
	}
	return b[off : off+n], nil
}

func (s *fuzzStore) Version(string) (Version, error) { return s.ver, nil }

// hostileSeeds returns the metadata and chunk of each hostile input that
// is a plain file (internal/testkit/hostile).
func hostileSeeds(f *testing.F) (metas, chunks [][]byte) {
	dir := f.TempDir()
	ins, err := hostile.WriteZarr(dir, false)
	if err != nil {
		f.Fatal(err)
	}
	for _, in := range ins {
		var m, c []byte
		for _, name := range []string{"zarr.json", ".zarray"} {
			if b, err := os.ReadFile(filepath.Join(dir, in.Name, name)); err == nil {
				m = b
			}
		}
		for _, name := range []string{"c/0", "0"} {
			if b, err := os.ReadFile(filepath.Join(dir, in.Name, name)); err == nil {
				c = b
			}
		}
		metas, chunks = append(metas, m), append(chunks, c)
	}
	return metas, chunks
}

// FuzzZarrRead opens random metadata over a store whose every chunk is
// the random chunk bytes, and reads the view's first and last 4 KiB
// twice. What one read allocates must stay under a bound computed from
// the metadata: for each chunk it touches, a few times the chunk's plain
// size and its largest encoding, plus the shard index, plus the fuzz
// bound of the input's own size (testkit.AllocBound); a .zattrs of any
// size costs at most the metadata limit; a chunk that failed to decode
// is not decoded again by the second read. Seeded with the hostile
// inputs of issue 33 (a zstd chunk that inflates 24 KiB to 768 MiB, a
// gzip stage before blosc, a Blosc header claiming 2 GB, LZ4 and LZMA
// headers, item sizes that wrap) and the fixtures' metadata.
func FuzzZarrRead(f *testing.F) {
	metas, chunks := hostileSeeds(f)
	for i := range metas {
		f.Add(metas[i], chunks[i], uint32(0))
	}
	for i, b := range metaSeeds(f) {
		if i%8 == 0 { // a sample: FuzzMeta has them all
			f.Add(b, []byte{}, uint32(0))
		}
	}
	f.Add([]byte(`{"zarr_format":2,"shape":[4],"chunks":[4],"dtype":"|u1","compressor":null,"fill_value":0,"order":"C","filters":null}`), []byte{1, 2, 3, 4}, uint32(1<<30))
	f.Fuzz(func(t *testing.T, meta, chunk []byte, attrs uint32) {
		s := &fuzzStore{meta: map[string][]byte{}, attrs: int64(attrs), chunk: chunk, ver: TagVersion(fmt.Sprintf("fuzz %x %x", maphash.Bytes(metaSeed, meta), maphash.Bytes(metaSeed, chunk)))}
		if bytes.Contains(meta, []byte(`"zarr_format":3`)) {
			s.meta["zarr.json"] = meta
		} else {
			s.meta[".zarray"] = meta
		}
		in := len(meta) + len(chunk)
		mem := testkit.StartAlloc()
		a, err := Open(s, "", nil)
		if n := mem.Allocated(); n > testkit.AllocBound(in)+2*MaxMetaSize {
			t.Fatalf("open allocated %d bytes (a .zattrs of %d bytes)", n, attrs)
		}
		if err != nil || a.Size() == 0 {
			return
		}
		const read = 4096
		touched := min(a.NumChunks(), read+1)
		per := 4*a.ChunkBytes() + 2*a.rawMax + 64<<10
		if a.v3 != nil && a.v3.shard != nil {
			per = 4*a.ChunkBytes() + 2*a.v3.shard.chain.raw + 64<<10 + 2*a.v3.shard.indexSize()/max(1, touched)
		}
		if per > (256<<20)/max(1, touched) {
			return // what the metadata allow is too much to fuzz quickly
		}
		bound := testkit.AllocBound(in) + uint64(touched*per)
		p := make([]byte, min(a.Size(), read))
		var errs [2]error
		for try := range 2 {
			mem := testkit.StartAlloc()
			_, errs[try] = a.ReadAt(p, 0)
			a.ReadAt(p, a.Size()-int64(len(p)))
			if n := mem.Allocated(); n > bound {
				t.Fatalf("read %d of %d: allocated %d bytes, over %d (%d chunks touched of %d plain bytes, encoded at most %d)", try+1, a.Size(), n, bound, touched, a.ChunkBytes(), a.rawMax)
			}
		}
		if errors.Is(errs[0], ErrCorrupt) && !errors.Is(errs[1], ErrCorrupt) {
			t.Fatalf("a read after a corrupt chunk: %v", errs[1])
		}
	})
}
