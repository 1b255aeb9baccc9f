package zarr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"

	"github.com/bloscfs/bloscfs/npy"
)

// npTranspose is numpy.transpose(a, order) of a C-order int32 array.
func npTranspose(a []int32, shape []int64, order []int) ([]int32, []int64) {
	nd := len(shape)
	ts := make([]int64, nd)
	for k, o := range order {
		ts[k] = shape[o]
	}
	out := make([]int32, len(a))
	j := make([]int64, nd)
	for n := range out {
		// out[j] = a[idx], idx[order[k]] = j[k]
		var lin int64
		idx := make([]int64, nd)
		for k, o := range order {
			idx[o] = j[k]
		}
		for d := range nd {
			lin = lin*shape[d] + idx[d]
		}
		out[n] = a[lin]
		for d := nd - 1; d >= 0; d-- {
			if j[d]++; j[d] < ts[d] {
				break
			}
			j[d] = 0
		}
	}
	return out, ts
}

// TestTranspose writes chunks transposed as numpy.transpose does (the v3
// spec's transpose codec) and reads them back.
func TestTranspose(t *testing.T) {
	for _, order := range [][]int{{1, 0}, {2, 0, 1}, {1, 2, 0}, {0, 2, 1}, {0, 1, 2}} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			nd := len(order)
			shape := []int64{5, 7, 3}[:nd]
			if nd == 2 {
				shape = []int64{9, 4}
			}
			chunk := make([]int64, nd)
			for d := range nd {
				chunk[d] = shape[d]
			}
			dir := t.TempDir()
			js := strings.Join(strings.Fields(fmt.Sprint(shape)), ",")
			meta := fmt.Sprintf(`{"zarr_format":3,"node_type":"array","shape":%s,"data_type":"int32",
"chunk_grid":{"name":"regular","configuration":{"chunk_shape":%s}},
"chunk_key_encoding":{"name":"v2","configuration":{"separator":"."}},"fill_value":0,
"codecs":[{"name":"transpose","configuration":{"order":%s}},{"name":"bytes","configuration":{"endian":"big"}}]}`,
				js, js, strings.Join(strings.Fields(fmt.Sprint(order)), ","))
			os.WriteFile(filepath.Join(dir, "zarr.json"), []byte(meta), 0o644)
			n := int64(1)
			for _, d := range shape {
				n *= d
			}
			a := make([]int32, n)
			for i := range a {
				a[i] = int32(i*11 - 3)
			}
			tr, _ := npTranspose(a, shape, order)
			raw := make([]byte, 0, 4*n)
			for _, v := range tr {
				raw = binary.BigEndian.AppendUint32(raw, uint32(v))
			}
			key := strings.Repeat("0.", nd)
			os.WriteFile(filepath.Join(dir, key[:len(key)-1]), raw, 0o644)
			s, _ := OpenDirStore(dir)
			defer s.Close()
			arr, err := Open(s, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			want := npy.Header("'<i4'", shape)
			for _, v := range a {
				want = binary.LittleEndian.AppendUint32(want, uint32(v))
			}
			got := make([]byte, arr.Size())
			if _, err := arr.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("transposed chunk read back wrong")
			}
		})
	}
}

// TestBadMetadata checks that broken or hostile metadata is refused
// with the right error, never a panic or a huge allocation.
func TestBadMetadata(t *testing.T) {
	v2 := func(shape, chunks, dtype, extra string) string {
		return fmt.Sprintf(`{"zarr_format":2,"shape":%s,"chunks":%s,"dtype":%s,"compressor":null,"fill_value":0,"order":"C","filters":null%s}`, shape, chunks, dtype, extra)
	}
	cases := []struct {
		name, doc string
		want      error
	}{
		{"overflow", v2("[4294967296,4294967296,4294967296]", "[1,1,1]", `"<f8"`, ""), ErrUnsupported},
		{"huge chunk", v2("[10]", "[4611686018427387904]", `"<f8"`, ""), ErrUnsupported},
		{"negative", v2("[-1]", "[1]", `"<f8"`, ""), ErrFormat},
		{"zero chunk", v2("[10]", "[0]", `"<f8"`, ""), ErrFormat},
		{"dims mismatch", v2("[10,10]", "[1]", `"<f8"`, ""), ErrFormat},
		{"object dtype", v2("[10]", "[5]", `"|O"`, ""), ErrFormat},
		{"unknown compressor", v2("[10]", "[5]", `"<f8"`, `,"compressor":{"id":"nope"}`), ErrUnsupported},
		{"unknown filter", v2("[10]", "[5]", `"<f8"`, `,"filters":[{"id":"categorize"}]`), ErrUnsupported},
		{"bad separator", v2("[10]", "[5]", `"<f8"`, `,"dimension_separator":"../"`), ErrFormat},
		{"deep", strings.Repeat("[", 100) + strings.Repeat("]", 100), ErrFormat},
		{"not json", `{"zarr_format":2,`, ErrFormat},
		{"bad fill", v2("[10]", "[5]", `"<f8"`, `,"fill_value":"nope"`), ErrFormat},
		{"bad base64", v2("[10]", "[5]", `"|S3"`, `,"fill_value":"!!"`), ErrFormat},
		{"v3 unknown codec", `{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"int8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes"},{"name":"nope"}]}`, ErrUnsupported},
		{"v3 shard not dividing", `{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"int8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[3],"codecs":[{"name":"bytes"}],"index_codecs":[{"name":"bytes"}]}}]}`, ErrFormat},
		{"v3 huge shard index", `{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"int8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[1073741824]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[1],"codecs":[{"name":"bytes"}],"index_codecs":[{"name":"bytes"}]}}]}`, ErrUnsupported},
		{"v3 grid", `{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"int8","chunk_grid":{"name":"rectilinear"},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes"}]}`, ErrUnsupported},
		{"v3 dtype", `{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"string","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes"}]}`, ErrUnsupported},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if strings.Contains(c.doc, `"zarr_format":3`) {
				_, err = OpenV3Meta(nil, "x", []byte(c.doc), nil)
			} else {
				_, err = OpenV2Meta(nil, "x", []byte(c.doc), nil, nil)
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// TestBadChunks checks chunks that decode to the wrong size, and keys.
func TestBadChunks(t *testing.T) {
	dir := t.TempDir()
	for _, comp := range []string{"null", `{"id":"zlib"}`, `{"id":"blosc"}`, `{"id":"lz4"}`, `{"id":"zstd"}`} {
		sub := filepath.Join(dir, strings.Trim(strings.ReplaceAll(comp, `"`, ""), "{}:"))
		os.MkdirAll(sub, 0o755)
		os.WriteFile(filepath.Join(sub, ".zarray"), fmt.Appendf(nil, `{"zarr_format":2,"shape":[10],"chunks":[5],"dtype":"<i4","compressor":%s,"fill_value":0,"order":"C","filters":null}`, comp), 0o644)
		os.WriteFile(filepath.Join(sub, "0"), []byte("short chunk, not what anyone wrote"), 0o644)
	}
	s, _ := OpenDirStore(dir)
	defer s.Close()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		a, err := Open(s, e.Name(), nil)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, a.Size())
		if _, err := a.ReadAt(b, 0); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), e.Name()+"/0") {
			t.Errorf("%s: %v, want ErrCorrupt naming the key", e.Name(), err)
		}
	}
	for _, k := range []string{"../x", "/etc/passwd", "a/../../b", "a//b", "", "a/./b", `a\b`} {
		if ValidKey(k) {
			t.Errorf("ValidKey(%q)", k)
		}
		if _, err := s.Get(k, MaxObject); err == nil {
			t.Errorf("Get(%q) succeeded", k)
		}
	}
	// A symlink out of the store is not followed.
	os.Symlink("/etc/hostname", filepath.Join(dir, "link"))
	if _, err := s.Get("link", MaxObject); err == nil {
		t.Error("Get followed a symlink out of the store")
	}
}

// TestCorruptBloscStream reads a Blosc chunk whose header and block
// starts are sound and whose compressed stream is not: the read fails
// with ErrCorrupt naming the chunk's key, sequential reader or not, and
// the other chunk still reads.
func TestCorruptBloscStream(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".zarray"), []byte(`{"zarr_format":2,"shape":[2,65536],"chunks":[1,65536],"dtype":"<i4","compressor":{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1},"fill_value":0,"order":"C","filters":null}`), 0o644)
	plain := make([]byte, 65536*4)
	for i := range 65536 {
		binary.LittleEndian.PutUint32(plain[4*i:], uint32(i/7))
	}
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 4, Blocksize: 64 << 10, Blosc1: true}
	p.Filters[5] = blosc.FilterShuffle
	c, err := blosc.Compress(nil, plain, p)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "0.0"), c, 0o644)
	bad := slices.Clone(c)
	for i := len(bad) - 200; i < len(bad); i++ {
		bad[i] = 0xff // the last block's stream: its LZ4 tokens ask for more than it holds
	}
	os.WriteFile(filepath.Join(dir, "1.0"), bad, 0o644)
	s, err := OpenDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, once := range []bool{false, true} {
		a, err := Open(s, "", cache.New[pack.BlockKey](16<<20))
		if err != nil {
			t.Fatal(err)
		}
		read := a.ReadAt
		if once {
			read = a.ReadAtOnce
		}
		h := int64(len(a.Header()))
		b := make([]byte, len(plain))
		if _, err := read(b, h); err != nil || !bytes.Equal(b, plain) {
			t.Fatalf("the sound chunk: %v", err)
		}
		_, err = read(b, h+int64(len(plain)))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "1.0") {
			t.Errorf("once %v: %v, want ErrCorrupt naming the key 1.0", once, err)
		}
	}
}
