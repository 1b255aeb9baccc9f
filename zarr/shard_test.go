package zarr

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/npy"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/klauspost/compress/zstd"
)

// shardSpec describes a sharded int32 array for writeSharded.
type shardSpec struct {
	shape, shard, inner []int64
	codec               string // inner bytes-to-bytes codec: "", "zstd", "gzip", "crc32c"
	atStart             bool
	missing             func(inner int64) bool // inner chunks left out
	fill                int32
}

// writeSharded writes a v3 sharded array of int32 values i*3+1 (C order)
// under dir/name, following the sharding_indexed specification, and
// returns the expected array bytes (missing inner chunks hold fill).
func writeSharded(t testing.TB, dir, name string, sp shardSpec) []byte {
	t.Helper()
	nd := len(sp.shape)
	total := int64(1)
	for _, d := range sp.shape {
		total *= d
	}
	want := make([]byte, 4*total)
	for i := range total {
		binary.LittleEndian.PutUint32(want[4*i:], uint32(i*3+1))
	}
	innerCodecs := `{"name":"bytes","configuration":{"endian":"little"}}`
	switch sp.codec {
	case "zstd":
		innerCodecs += `,{"name":"zstd","configuration":{"level":1,"checksum":false}}`
	case "gzip":
		innerCodecs += `,{"name":"gzip","configuration":{"level":5}}`
	case "crc32c":
		innerCodecs += `,{"name":"crc32c"}`
	}
	loc := "end"
	if sp.atStart {
		loc = "start"
	}
	js := func(v []int64) string { return strings.Join(strings.Fields(fmt.Sprint(v)), ",") }
	meta := fmt.Sprintf(`{"zarr_format":3,"node_type":"array","shape":%s,"data_type":"int32",
"chunk_grid":{"name":"regular","configuration":{"chunk_shape":%s}},
"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},
"fill_value":%d,"attributes":{"writer":"zarr package tests"},
"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":%s,
"codecs":[%s],"index_codecs":[{"name":"bytes","configuration":{"endian":"little"}},{"name":"crc32c"}],
"index_location":%q}}]}`, js(sp.shape), js(sp.shard), sp.fill, js(sp.inner), innerCodecs, loc)
	base := filepath.Join(dir, name)
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "zarr.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	per := make([]int64, nd)
	nshards := make([]int64, nd)
	nInner := int64(1)
	totalShards := int64(1)
	for d := range nd {
		per[d] = sp.shard[d] / sp.inner[d]
		nInner *= per[d]
		nshards[d] = (sp.shape[d] + sp.shard[d] - 1) / sp.shard[d]
		totalShards *= nshards[d]
	}
	unravel := func(i int64, dims []int64) []int64 {
		c := make([]int64, len(dims))
		for d := len(dims) - 1; d >= 0; d-- {
			c[d] = i % dims[d]
			i /= dims[d]
		}
		return c
	}
	enc, _ := zstd.NewWriter(nil)
	for si := range totalShards {
		sc := unravel(si, nshards)
		index := make([]byte, 16*nInner)
		var body []byte
		for ii := range nInner {
			ic := unravel(ii, per)
			// Inner chunk values (full inner chunk; outside the array: fill).
			n := int64(1)
			for _, d := range sp.inner {
				n *= d
			}
			chunk := make([]byte, 4*n)
			for k := range n {
				e := unravel(k, sp.inner)
				v := uint32(sp.fill)
				inside := true
				var lin int64
				for d := range nd {
					g := sc[d]*sp.shard[d] + ic[d]*sp.inner[d] + e[d]
					if g >= sp.shape[d] {
						inside = false
					}
					lin = lin*sp.shape[d] + g
				}
				if inside {
					v = uint32(lin*3 + 1)
				}
				binary.LittleEndian.PutUint32(chunk[4*k:], v)
			}
			if sp.missing != nil && sp.missing(si*nInner+ii) {
				binary.LittleEndian.PutUint64(index[16*ii:], math.MaxUint64)
				binary.LittleEndian.PutUint64(index[16*ii+8:], math.MaxUint64)
				// The expected array holds the fill value there.
				for k := range n {
					e := unravel(k, sp.inner)
					var lin int64
					inside := true
					for d := range nd {
						g := sc[d]*sp.shard[d] + ic[d]*sp.inner[d] + e[d]
						if g >= sp.shape[d] {
							inside = false
						}
						lin = lin*sp.shape[d] + g
					}
					if inside {
						binary.LittleEndian.PutUint32(want[4*lin:], uint32(sp.fill))
					}
				}
				continue
			}
			switch sp.codec {
			case "zstd":
				chunk = enc.EncodeAll(chunk, nil)
			case "gzip":
				var b bytes.Buffer
				w := gzip.NewWriter(&b)
				w.Write(chunk)
				w.Close()
				chunk = b.Bytes()
			case "crc32c":
				chunk = binary.LittleEndian.AppendUint32(chunk, crc32.Checksum(chunk, castagnoli()))
			}
			off := int64(len(body))
			if sp.atStart {
				off += int64(len(index)) + 4
			}
			binary.LittleEndian.PutUint64(index[16*ii:], uint64(off))
			binary.LittleEndian.PutUint64(index[16*ii+8:], uint64(len(chunk)))
			body = append(body, chunk...)
		}
		index = binary.LittleEndian.AppendUint32(index, crc32.Checksum(index, castagnoli()))
		var obj []byte
		if sp.atStart {
			obj = append(index, body...)
		} else {
			obj = append(body, index...)
		}
		parts := []string{base, "c"}
		for _, c := range sc {
			parts = append(parts, fmt.Sprint(c))
		}
		p := filepath.Join(parts...)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, obj, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

var shardCases = map[string]shardSpec{
	"end_zstd":      {shape: []int64{50, 37}, shard: []int64{20, 16}, inner: []int64{5, 4}, codec: "zstd", missing: func(i int64) bool { return i%7 == 3 }, fill: -9},
	"start_gzip":    {shape: []int64{30, 30}, shard: []int64{10, 30}, inner: []int64{5, 6}, codec: "gzip", atStart: true},
	"crc_3d":        {shape: []int64{9, 10, 11}, shard: []int64{4, 4, 4}, inner: []int64{2, 2, 4}, codec: "crc32c", missing: func(i int64) bool { return i%5 == 0 }},
	"bytes_1d":      {shape: []int64{1000}, shard: []int64{256}, inner: []int64{32}},
	"one_inner":     {shape: []int64{7, 7}, shard: []int64{8, 8}, inner: []int64{8, 8}, codec: "zstd"},
	"all_missing_0": {shape: []int64{12}, shard: []int64{6}, inner: []int64{3}, missing: func(i int64) bool { return true }, fill: 5},
}

// TestSharded reads sharded arrays written by writeSharded.
func TestSharded(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, sp := range shardCases {
		t.Run(name, func(t *testing.T) {
			data := writeSharded(t, dir, name, sp)
			a, err := Open(s, name, cache.New[pack.BlockKey](8<<20))
			if err != nil {
				t.Fatal(err)
			}
			want := append(npy.Header("'<i4'", sp.shape), data...)
			got := make([]byte, a.Size())
			if _, err := a.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("sharded array differs from what was written")
			}
			if sp.atStart {
				return // zarrita 0.7.5 reads every index from the end of its shard
			}
			if z := crossCheck(t, dir, name); z != nil && !bytes.Equal(z, data) {
				t.Fatal("zarrita reads the sharded array differently")
			}
		})
	}
}

// zarritaDir returns the directory holding zarrita's node_modules, or "".
func zarritaDir() string {
	if d := os.Getenv("BLOSCFS_ZARRITA"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	d := filepath.Join(home, ".cache", "bloscfs-tools", "zarrita")
	if _, err := os.Stat(filepath.Join(d, "node_modules", "zarrita")); err == nil {
		return d
	}
	return ""
}

// crossCheck reads an array with zarrita; nil when zarrita is not
// installed (in CI, where make deps installs it, that fails the test).
func crossCheck(t *testing.T, store, name string) []byte {
	t.Helper()
	zd := zarritaDir()
	if zd == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("zarrita is not installed (make deps)")
		}
		return nil
	}
	script, err := os.ReadFile("../testdata/zarr/read_v3.mjs")
	if err != nil {
		t.Fatal(err)
	}
	sp := filepath.Join(zd, "read_v3.mjs")
	if err := os.WriteFile(sp, script, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", sp, store, name)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("zarrita: %v: %s", err, stderr.String())
	}
	return out
}

// TestShardHostile checks broken shards: an index pointing past the
// object, a bad index checksum, a truncated shard.
func TestShardHostile(t *testing.T) {
	dir := t.TempDir()
	sp := shardSpec{shape: []int64{16}, shard: []int64{8}, inner: []int64{4}}
	writeSharded(t, dir, "a", sp)
	s, err := OpenDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	shard := filepath.Join(dir, "a", "c", "0")
	orig, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	read := func() error {
		a, err := Open(s, "a", nil)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, a.Size())
		_, err = a.ReadAt(b, 0)
		return err
	}
	// Inner chunk 1 at a huge offset, checksum recomputed.
	b := bytes.Clone(orig)
	idx := b[len(b)-2*16-4:]
	binary.LittleEndian.PutUint64(idx[16:], 1<<40)
	binary.LittleEndian.PutUint32(idx[32:], crc32.Checksum(idx[:32], castagnoli()))
	os.WriteFile(shard, b, 0o644)
	if err := read(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("index past the object: %v, want ErrCorrupt", err)
	}
	// A huge size.
	binary.LittleEndian.PutUint64(idx[16:], 0)
	binary.LittleEndian.PutUint64(idx[24:], 1<<62)
	binary.LittleEndian.PutUint32(idx[32:], crc32.Checksum(idx[:32], castagnoli()))
	os.WriteFile(shard, b, 0o644)
	if err := read(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("huge inner chunk: %v, want ErrCorrupt", err)
	}
	// Index checksum wrong.
	b = bytes.Clone(orig)
	b[len(b)-1] ^= 1
	os.WriteFile(shard, b, 0o644)
	if err := read(); !errors.Is(err, ErrChecksum) {
		t.Fatalf("bad index crc: %v, want ErrChecksum", err)
	}
	// Truncated below the index size.
	os.WriteFile(shard, orig[:10], 0o644)
	if err := read(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated shard: %v, want ErrCorrupt", err)
	}
	// An inner chunk that decodes to the wrong size.
	b = bytes.Clone(orig)
	idx = b[len(b)-2*16-4:]
	binary.LittleEndian.PutUint64(idx[8:], 12)
	binary.LittleEndian.PutUint32(idx[32:], crc32.Checksum(idx[:32], castagnoli()))
	os.WriteFile(shard, b, 0o644)
	if err := read(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short inner chunk: %v, want ErrCorrupt", err)
	}
}

// TestShardReadCost counts the store reads of small reads of a sharded
// array: the first costs the shard index and one ranged read of one inner
// chunk; another read in the same shard costs one ranged read; the index
// is read once even when a read touches many inner chunks at once.
func TestShardReadCost(t *testing.T) {
	dir := t.TempDir()
	sp := shardSpec{shape: []int64{256, 256}, shard: []int64{128, 256}, inner: []int64{16, 256}, codec: "zstd"}
	writeSharded(t, dir, "a", sp)
	m := &memStore{m: map[string][]byte{}}
	filepath.Walk(filepath.Join(dir, "a"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			rel, _ := filepath.Rel(filepath.Join(dir, "a"), p)
			b, _ := os.ReadFile(p)
			m.m[filepath.ToSlash(rel)] = b
		}
		return nil
	})
	a, err := Open(m, "", cache.New[pack.BlockKey](64<<20))
	if err != nil {
		t.Fatal(err)
	}
	m.gets.Store(0)
	b := make([]byte, 4096)
	hdr := int64(len(a.Header()))
	if _, err := a.ReadAt(b, hdr+4*256*40); err != nil {
		t.Fatal(err)
	}
	if g := m.gets.Load(); g != 2 {
		t.Fatalf("first 4 KiB read: %d reads, want 2 (index, inner chunk)", g)
	}
	if _, err := a.ReadAt(b, hdr+4*256*70); err != nil {
		t.Fatal(err)
	}
	if g := m.gets.Load(); g != 3 {
		t.Fatalf("second 4 KiB read: %d reads in all, want 3", g)
	}
	// A read of the whole second shard: its index once, 8 inner chunks.
	m.gets.Store(0)
	big := make([]byte, 4*256*128)
	if _, err := a.ReadAt(big, hdr+4*256*128); err != nil {
		t.Fatal(err)
	}
	if g := m.gets.Load(); g != 9 {
		t.Fatalf("whole-shard read: %d reads, want 9", g)
	}
}
