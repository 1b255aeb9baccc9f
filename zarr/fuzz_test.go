package zarr

import (
	"encoding/binary"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
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
