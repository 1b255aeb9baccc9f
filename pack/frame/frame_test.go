package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/pack"
)

// iotestLimit is the largest view iotest.TestReader runs over whole: it
// reads everything 1–3 bytes at a time and then byte by byte, which takes
// minutes for all fixtures under the race detector. There (and with
// -short) larger views are tested over a window centred on a chunk
// boundary; the whole content is still compared by one big ReadAt.
func iotestLimit() int64 {
	if testkit.RaceEnabled || testing.Short() {
		return 16 << 10
	}
	return 1 << 62
}

// testReader runs iotest.TestReader over r (content want), or over a
// window of it around center when it is large.
func testReader(t *testing.T, r io.ReaderAt, want []byte, center int64) {
	t.Helper()
	size := int64(len(want))
	off, n := int64(0), size
	if lim := iotestLimit(); size > lim {
		off, n = min(max(center-lim/2, 0), size-lim), lim
	}
	if err := iotest.TestReader(io.NewSectionReader(r, off, n), want[off:off+n]); err != nil {
		msg := err.Error()
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		t.Fatalf("iotest.TestReader [%d,%d): %s", off, off+n, msg)
	}
}

// TestFixtures reads every valid b2frame and sframe fixture bit-exact.
func TestFixtures(t *testing.T) {
	for _, fx := range frameFixtures(t, "b2frame", "sframe") {
		t.Run(fx.Name, func(t *testing.T) {
			t.Parallel()
			f := openFixture(t, fx.Path, newCache())
			if f.Size() != fx.PlainSize {
				t.Fatalf("Size %d, manifest %d", f.Size(), fx.PlainSize)
			}
			got := readAll(t, f, f.Size())
			if sha(got) != fx.PlainSHA {
				t.Fatalf("sha256 %s, manifest %s", sha(got), fx.PlainSHA)
			}
			testReader(t, f, got, f.ChunkOffset(min(1, f.NumChunks())))
			in := f.Info()
			if in.Size != fx.PlainSize || in.Chunks != f.NumChunks() || in.Typesize != f.Typesize() {
				t.Errorf("Info %+v", in)
			}
			wantFmt := "b2frame"
			if fx.IsDir {
				wantFmt = "sframe"
			}
			if in.Format != wantFmt {
				t.Errorf("Info.Format %q, want %q", in.Format, wantFmt)
			}
			if n := fx.Params["nchunks"]; n != "" && n != strconv.Itoa(f.NumChunks()) {
				t.Errorf("%d chunks, manifest params say %s", f.NumChunks(), n)
			}
			if c := fx.Params["codec"]; c != "" && in.Codec != c && !(c == "lz4hc" && in.Codec == "lz4") && f.NumChunks() > 0 && !allSpecial(f) {
				t.Errorf("Info.Codec %q, manifest %q", in.Codec, c)
			}
		})
	}
}

func allSpecial(f *Frame) bool {
	for i := 0; i < f.NumChunks(); i++ {
		if f.entry(i) >= 0 {
			return false
		}
	}
	return true
}

// TestRandomReads compares random ReadAt calls with the full decode.
func TestRandomReads(t *testing.T) {
	for _, fx := range frameFixtures(t, "b2frame", "sframe", "b2nd") {
		t.Run(fx.Name, func(t *testing.T) {
			t.Parallel()
			f := openFixture(t, fx.Path, pack.NoCache{})
			full := readAll(t, f, f.Size())
			rng := rand.New(rand.NewPCG(1, uint64(len(fx.Name))))
			size := f.Size()
			for k := 0; k < 40; k++ {
				off := rng.Int64N(size + 10)
				n := rng.IntN(70000)
				if k%3 == 0 {
					n = rng.IntN(100)
				}
				buf := make([]byte, n)
				got, err := f.ReadAt(buf, off)
				want := 0
				if off < size {
					want = int(min(int64(n), size-off))
				}
				if got != want {
					t.Fatalf("ReadAt(%d, %d) = %d, %v; want %d", n, off, got, err, want)
				}
				if want < n && err != io.EOF {
					t.Fatalf("ReadAt(%d, %d) short without io.EOF: %v", n, off, err)
				}
				if want == n && err != nil {
					t.Fatalf("ReadAt(%d, %d): %v", n, off, err)
				}
				if got > 0 && !bytes.Equal(buf[:got], full[off:off+int64(got)]) {
					t.Fatalf("ReadAt(%d, %d) differs from the full decode", n, off)
				}
			}
			if _, err := f.ReadAt(make([]byte, 1), -1); err == nil {
				t.Fatal("ReadAt at -1 succeeded")
			}
		})
	}
}

// TestModifiedChunksIndex checks that the fixture whose chunks were
// updated, inserted and deleted really has an index out of file order.
func TestModifiedChunksIndex(t *testing.T) {
	f := openFixture(t, filepath.Join(fixtures.Dir(), "modified_chunks.b2frame"), nil)
	monotonic := true
	prev := int64(-1)
	for i := 0; i < f.NumChunks(); i++ {
		v := f.entry(i)
		if v < 0 {
			continue
		}
		if v < prev {
			monotonic = false
		}
		prev = v
	}
	if monotonic {
		t.Fatal("index of modified_chunks.b2frame is in file order; the fixture does not test reordering")
	}
}

// TestMetalayers checks metalayer and vlmetalayer contents of fixtures.
func TestMetalayers(t *testing.T) {
	dir := fixtures.Dir()
	cases := []struct {
		file   string
		meta   map[string]string
		vlmeta map[string]string
	}{
		{"metalayers.b2frame", map[string]string{"calib": "v1-abcdef", "units": "meters"},
			map[string]string{"author": "fixture-generator", "description": "int32 counter with meta"}},
		{"nd_f64_2d_bitshuffle.b2nd", nil, map[string]string{"attrs": "units=K"}},
		{"codec_zstd_l5.b2frame", map[string]string{}, map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			f := openFixture(t, filepath.Join(dir, c.file), nil)
			info := f.Info()
			for k, v := range c.meta {
				got, ok := f.Meta(k)
				if !ok || string(got) != v {
					t.Errorf("Meta(%q) = %q, %v; want %q", k, got, ok, v)
				}
				if string(info.Meta[k]) != v {
					t.Errorf("Info.Meta[%q] = %q", k, info.Meta[k])
				}
			}
			for k, v := range c.vlmeta {
				got, err := f.VLMeta(k)
				if err != nil || string(got) != v {
					t.Errorf("VLMeta(%q) = %q, %v; want %q", k, got, err, v)
				}
				if string(info.Meta[k]) != v {
					t.Errorf("Info.Meta[%q] = %q", k, info.Meta[k])
				}
			}
			if c.meta != nil && len(f.MetaNames()) != len(c.meta) {
				t.Errorf("MetaNames %v", f.MetaNames())
			}
			if len(f.VLMetaNames()) != len(c.vlmeta) {
				t.Errorf("VLMetaNames %v", f.VLMetaNames())
			}
			if _, err := f.VLMeta("nope"); !errors.Is(err, ErrNoMeta) {
				t.Errorf("VLMeta(nope): %v", err)
			}
		})
	}
	// v3_lz4_bitshuffle_meta has one of each; check they are non-empty.
	f := openFixture(t, filepath.Join(dir, "v3_lz4_bitshuffle_meta.b2frame"), nil)
	if len(f.MetaNames()) != 1 || len(f.VLMetaNames()) != 1 {
		t.Fatalf("v3_lz4_bitshuffle_meta: metalayers %v vlmetalayers %v", f.MetaNames(), f.VLMetaNames())
	}
	if v, err := f.VLMeta(f.VLMetaNames()[0]); err != nil || len(v) == 0 {
		t.Fatalf("vlmeta: %q, %v", v, err)
	}
}

// TestInvalidFixtures checks the error of every invalid frame fixture.
func TestInvalidFixtures(t *testing.T) {
	want := map[string]struct {
		is  error
		sub string
	}{
		"invalid_bad_magic.b2frame":           {pack.ErrFormat, "bad magic"},
		"invalid_frame_size_past_eof.b2frame": {pack.ErrFormat, "frame_len 1099511667170 past the end of the 39394-byte file"},
		"invalid_huge_chunksize.b2frame":      {pack.ErrFormat, "chunksize 2147483647 exceeds"},
		"invalid_huge_nbytes.b2frame":         {pack.ErrFormat, "nbytes 1152921504606846976 in chunks of 65536"},
		"invalid_truncated_frame.b2frame":     {pack.ErrFormat, "frame_len 39394 past the end of the 19697-byte file"},
	}
	seen := 0
	for _, fx := range loadFixtures(t) {
		if !fx.IsInvalid || !strings.HasSuffix(fx.Name, ".b2frame") {
			continue
		}
		seen++
		w, ok := want[fx.Name]
		if !ok {
			t.Errorf("no expectation for invalid fixture %s (notes: %s)", fx.Name, fx.Notes)
			continue
		}
		t.Run(fx.Name, func(t *testing.T) {
			_, err := openPath(fx.Path, nil)
			if err == nil {
				t.Fatal("opened without error")
			}
			if !errors.Is(err, w.is) || !strings.Contains(err.Error(), w.sub) {
				t.Fatalf("error %q, want %v containing %q", err, w.is, w.sub)
			}
		})
	}
	if seen != len(want) {
		t.Errorf("%d invalid frame fixtures, %d expectations", seen, len(want))
	}
}

// fixtureBytes reads a fixture file.
func fixtureBytes(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures.Dir(), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openBytes(b []byte) (*Frame, error) {
	return Open(bytes.NewReader(b), int64(len(b)), "test", nil)
}

// TestCraftedHeaders mutates header fields of a fixture.
func TestCraftedHeaders(t *testing.T) {
	base := fixtureBytes(t, "codec_zstd_l5.b2frame")
	be := binary.BigEndian
	cases := []struct {
		name string
		mut  func(b []byte) []byte
		is   error
		sub  string
	}{
		{"version1", func(b []byte) []byte { b[offFlags] = 0x11; return b }, pack.ErrUnsupported, "frame format version 1"},
		{"version4", func(b []byte) []byte { b[offFlags] = 0x14; return b }, pack.ErrUnsupported, "frame format version 4"},
		{"version0", func(b []byte) []byte { b[offFlags] = 0x10; return b }, pack.ErrUnsupported, "frame format version 0"},
		{"sparse type", func(b []byte) []byte { b[offFrameType] = 1; return b }, pack.ErrFormat, "sparse frame"},
		{"user type", func(b []byte) []byte { b[offFrameType] = 0x10; return b }, pack.ErrUnsupported, "frame_type 0x10"},
		{"marker", func(b []byte) []byte { b[29] = 0xD2; return b }, pack.ErrFormat, "nbytes int64 marker"},
		{"vlmeta bool", func(b []byte) []byte { b[offHasVLMeta] = 0; return b }, pack.ErrFormat, "boolean"},
		{"header_len small", func(b []byte) []byte { be.PutUint32(b[offHeaderLen:], 80); return b }, pack.ErrFormat, "header_len 80"},
		{"header_len huge", func(b []byte) []byte { be.PutUint32(b[offHeaderLen:], 1<<31-1); return b }, pack.ErrFormat, "header_len 2147483647"},
		{"negative nbytes", func(b []byte) []byte { be.PutUint64(b[offNbytes:], 1<<63); return b }, pack.ErrFormat, "nbytes -9223372036854775808 is negative"},
		{"cbytes past trailer", func(b []byte) []byte { be.PutUint64(b[offCbytes:], 1<<40); return b }, pack.ErrFormat, "cbytes 1099511627776"},
		{"negative cbytes", func(b []byte) []byte { be.PutUint64(b[offCbytes:], 1<<63); return b }, pack.ErrFormat, "cbytes -9223372036854775808"},
		{"typesize 0", func(b []byte) []byte { be.PutUint32(b[offTypesize:], 0); return b }, pack.ErrFormat, "typesize 0"},
		{"chunksize smaller", func(b []byte) []byte { be.PutUint32(b[offChunksize:], 65535); return b }, pack.ErrFormat, "header says 65536 bytes, index 65535"},
		{"trailer len", func(b []byte) []byte { be.PutUint32(b[len(b)-22:], 1<<30); return b }, pack.ErrFormat, "trailer_len 1073741824"},
		{"trailer marker", func(b []byte) []byte { b[len(b)-23] = 0; return b }, pack.ErrFormat, "trailer end markers"},
		{"short", func(b []byte) []byte { return b[:50] }, pack.ErrFormat, "too short"},
		{"nbytes larger", func(b []byte) []byte { be.PutUint64(b[offNbytes:], 200001); return b }, pack.ErrFormat, "chunk 3: invalid container: header says 3392 bytes, index 3393"},
		{"nbytes one chunk more", func(b []byte) []byte { be.PutUint64(b[offNbytes:], 4*65536+1); return b }, pack.ErrFormat, "needs 5 chunks, but the index has 4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.mut(bytes.Clone(base))
			f, err := openBytes(b)
			if err == nil {
				// Some mutations only show when reading.
				_, err = f.ReadAt(make([]byte, f.Size()), 0)
			}
			if err == nil || !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.sub) {
				t.Fatalf("error %v, want %v containing %q", err, c.is, c.sub)
			}
		})
	}
}

// TestFrameAtOffset opens a frame embedded in a larger file, followed by
// other bytes, as .b2z members are.
func TestFrameAtOffset(t *testing.T) {
	fb := fixtureBytes(t, "metalayers.b2frame")
	file := append(append(bytes.Repeat([]byte{0xAB}, 1000), fb...), bytes.Repeat([]byte{0xCD}, 777)...)
	r := io.NewSectionReader(bytes.NewReader(file), 1000, int64(len(file)-1000))
	f, err := Open(r, r.Size(), "embedded", nil)
	if err != nil {
		t.Fatal(err)
	}
	f0 := openFixture(t, filepath.Join(fixtures.Dir(), "metalayers.b2frame"), nil)
	if !bytes.Equal(readAll(t, f, f.Size()), readAll(t, f0, f0.Size())) {
		t.Fatal("embedded frame reads differently")
	}
	if v, err := f.VLMeta("author"); err != nil || string(v) != "fixture-generator" {
		t.Fatalf("VLMeta: %q %v", v, err)
	}
}

// TestSpecialChunks checks the special fixtures chunk by chunk.
func TestSpecialChunks(t *testing.T) {
	dir := fixtures.Dir()
	nan64 := []byte{0, 0, 0, 0, 0, 0, 0xF8, 0x7F}
	cases := []struct {
		file  string
		kinds []int
	}{
		{"special_mixed_all.b2frame", []int{blosc.SpecialZero, 0, blosc.SpecialNaN, blosc.SpecialUninit, 0, 0}},
		{"special_uninit.b2frame", []int{blosc.SpecialUninit, blosc.SpecialUninit, blosc.SpecialUninit}},
		{"special_nans_f32.b2frame", []int{blosc.SpecialNaN, blosc.SpecialNaN}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			f := openFixture(t, filepath.Join(dir, c.file), nil)
			if f.NumChunks() != len(c.kinds) {
				t.Fatalf("%d chunks", f.NumChunks())
			}
			for i, k := range c.kinds {
				raw, kind, err := f.RawChunk(i)
				if err != nil {
					t.Fatal(err)
				}
				if kind != k || (k == 0) != (raw != nil) {
					t.Errorf("chunk %d: kind %d (raw %d bytes), want %d", i, kind, len(raw), k)
				}
			}
		})
	}
	f := openFixture(t, filepath.Join(dir, "special_mixed_all.b2frame"), nil)
	b := make([]byte, 16)
	if _, err := f.ReadAt(b, 2*65536+64); err != nil || !bytes.Equal(b, append(bytes.Clone(nan64), nan64...)) {
		t.Fatalf("NaN chunk reads %x, %v", b, err)
	}
	if _, err := f.ReadAt(b, 3*65536+8); err != nil || !bytes.Equal(b, make([]byte, 16)) {
		t.Fatalf("uninit chunk reads %x, %v", b, err)
	}
}

// TestEmptyFrame checks the frame with no chunks (and chunksize -1).
func TestEmptyFrame(t *testing.T) {
	f := openFixture(t, filepath.Join(fixtures.Dir(), "empty_0bytes.b2frame"), nil)
	if f.Size() != 0 || f.NumChunks() != 0 || f.ChunkSize() != 0 {
		t.Fatalf("size %d chunks %d chunksize %d", f.Size(), f.NumChunks(), f.ChunkSize())
	}
	if n, err := f.ReadAt(make([]byte, 4), 0); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if n, err := f.ReadAt(nil, 0); n != 0 || err != nil {
		t.Fatalf("ReadAt(nil) = %d, %v", n, err)
	}
}

// TestPackOpen checks that the format registers with pack.Open.
func TestPackOpen(t *testing.T) {
	b := fixtureBytes(t, "codec_lz4_l5.b2frame")
	c, err := pack.Open(bytes.NewReader(b), int64(len(b)), "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*Frame); !ok {
		t.Fatalf("pack.Open returned %T", c)
	}
	c, closer, err := pack.OpenPath(filepath.Join(fixtures.Dir(), "sparse_frame.b2frame"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if c.Info().Format != "sframe" {
		t.Fatalf("OpenPath of a sparse frame: %+v", c.Info())
	}
}

// TestSparseMissingChunk checks the error for a missing chunk file.
func TestSparseMissingChunk(t *testing.T) {
	src := filepath.Join(fixtures.Dir(), "sparse_frame.b2frame")
	dir := t.TempDir()
	for _, n := range []string{IndexFile, "00000000.chunk", "00000001.chunk", "00000003.chunk"} {
		b, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := OpenDir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 10), 0); err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(make([]byte, 10), 2*65536)
	if !errors.Is(err, pack.ErrFormat) || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "00000002.chunk") {
		t.Fatalf("missing chunk: %v", err)
	}
}

// TestIndexClaims replaces the index chunk of a fixture with small chunks
// that claim more entries than the file can hold.
func TestIndexClaims(t *testing.T) {
	base := fixtureBytes(t, "codec_zstd_l5.b2frame")
	f, err := openBytes(base)
	if err != nil {
		t.Fatal(err)
	}
	idxPos := f.hdr.headerLen + f.hdr.cbytes
	// valueIndex is a special VALUE chunk: n entries equal to v.
	valueIndex := func(b []byte, n int64, v int64) []byte {
		b = bytes.Clone(b)
		c := b[idxPos : idxPos+40]
		clear(c)
		c[0], c[1], c[2], c[3] = 5, 1, 0x05, 8
		binary.LittleEndian.PutUint32(c[4:], uint32(8*n))
		binary.LittleEndian.PutUint32(c[8:], uint32(min(8*n, 1<<18)))
		binary.LittleEndian.PutUint32(c[12:], 40)
		c[31] = blosc.SpecialValue << 4
		binary.LittleEndian.PutUint64(c[32:], uint64(v))
		return b
	}
	setNbytes := func(b []byte, n int64) []byte {
		binary.BigEndian.PutUint64(b[offNbytes:], uint64(n))
		return b
	}
	cases := []struct {
		name string
		b    []byte
		is   error
		sub  string
	}{
		{"too many", setNbytes(valueIndex(base, 1<<24+1, 0), (1<<24+1)*65536), pack.ErrUnsupported, "index of 16777217 chunks exceeds the limit"},
		{"stored past section", setNbytes(valueIndex(base, 1<<20, 0), 1<<20*65536), pack.ErrFormat, "index lists 1048576 stored chunks"},
		{"count vs nbytes", valueIndex(base, 5, 0), pack.ErrFormat, "needs 4 chunks, but the index has 5"},
	}
	vb := valueIndex(base, 5000, 0)
	binary.BigEndian.PutUint32(vb[offChunksize:], 0)
	cases = append(cases, struct {
		name string
		b    []byte
		is   error
		sub  string
	}{"variable", vb, pack.ErrFormat, "index of 5000 chunks; a variable-size frame"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := openBytes(c.b)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.sub) {
				t.Fatalf("error %v, want %v containing %q", err, c.is, c.sub)
			}
		})
	}
	// A huge all-special frame opens without allocating an index table.
	b := setNbytes(valueIndex(base, 1<<24, special(0x81)), 1<<24*65536)
	g, err := openBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	if g.offsets != nil || g.NumChunks() != 1<<24 || g.Size() != 1<<40 {
		t.Fatalf("all-zero frame: %d chunks, size %d", g.NumChunks(), g.Size())
	}
	buf := make([]byte, 100)
	if _, err := g.ReadAt(buf, 1<<39+12345); err != nil || !bytes.Equal(buf, make([]byte, 100)) {
		t.Fatalf("ReadAt in a 1 TiB zero frame: %v", err)
	}
}

// TestCraftedMetalayers mutates the metalayer and vlmetalayer sections of
// metalayers.b2frame.
func TestCraftedMetalayers(t *testing.T) {
	base := fixtureBytes(t, "metalayers.b2frame")
	const tr = 1085 // trailer start
	put32 := func(b []byte, off int, v uint32) { binary.BigEndian.PutUint32(b[off:], v) }
	cases := []struct {
		name string
		mut  func(b []byte)
		is   error
		sub  string
	}{
		{"fixarray", func(b []byte) { b[87] = 0x92 }, pack.ErrFormat, "fixarray(3) marker 0x92"},
		{"map16", func(b []byte) { b[91] = 0xDF }, pack.ErrFormat, "map16 marker 0xdf"},
		{"17 entries", func(b []byte) { b[93] = 17 }, pack.ErrFormat, "17 entries, at most 16"},
		{"name marker", func(b []byte) { b[94] = 0xD9 }, pack.ErrFormat, "name marker 0xd9 is not a fixstr"},
		{"duplicate", func(b []byte) { copy(b[106:], "calib") }, pack.ErrFormat, `duplicate name "calib"`},
		{"offset marker", func(b []byte) { b[100] = 0xD3 }, pack.ErrFormat, "int32 offset marker 0xd3"},
		{"offset outside", func(b []byte) { put32(b, 101, 0x200) }, pack.ErrFormat, `value of "calib" at offset 512 outside`},
		{"negative offset", func(b []byte) { put32(b, 101, 0xFFFFFFF0) }, pack.ErrFormat, `value of "calib" at offset -16 outside`},
		{"bin32 marker", func(b []byte) { b[119] = 0xC4 }, pack.ErrFormat, "bin32 value of calib marker 0xc4"},
		{"value length", func(b []byte) { put32(b, 120, 100) }, pack.ErrFormat, `value of "calib": 100 bytes, only 20 left`},
		{"array count", func(b []byte) { b[118] = 3 }, pack.ErrFormat, "array of 3 values for 2 names"},
		{"truncated map", func(b []byte) { binary.BigEndian.PutUint32(b[offHeaderLen:], 100) }, pack.ErrFormat, "need"},
		{"trailer fixarray", func(b []byte) { b[tr] = 0x95 }, pack.ErrFormat, "want fixarray(4) 0x94"},
		{"trailer version", func(b []byte) { b[tr+1] = 2 }, pack.ErrUnsupported, "trailer format version 2"},
		{"trailer section", func(b []byte) { b[tr+2] = 0x92 }, pack.ErrFormat, "trailer vlmetalayers at offset 1087: fixarray(3) marker 0x92"},
		{"vlmeta offset", func(b []byte) { put32(b, tr+17, 0xFFFF) }, pack.ErrFormat, `value of "author" at offset 65535 outside`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(base)
			c.mut(b)
			_, err := openBytes(b)
			if err == nil || !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.sub) {
				t.Fatalf("error %v, want %v containing %q", err, c.is, c.sub)
			}
		})
	}
	// A vlmetalayer whose chunk is broken: VLMeta fails, Info leaves it out.
	b := bytes.Clone(base)
	binary.LittleEndian.PutUint32(b[tr+41+5+12:], 1000) // cbytes of the "author" chunk
	f, err := openBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.VLMeta("author"); !errors.Is(err, pack.ErrFormat) {
		t.Fatalf("VLMeta of a broken chunk: %v", err)
	}
	if _, ok := f.Info().Meta["author"]; ok {
		t.Fatal("Info holds a vlmetalayer that does not decode")
	}
	if v := f.Info().Meta["description"]; string(v) != "int32 counter with meta" {
		t.Fatalf("Info.Meta[description] = %q", v)
	}
}

// TestAddRawChunk builds a contiguous frame from the raw chunks of the
// sparse fixture and stores a special chunk verbatim.
func TestAddRawChunk(t *testing.T) {
	src := openFixture(t, filepath.Join(fixtures.Dir(), "sparse_frame.b2frame"), nil)
	if !src.Sparse() {
		t.Fatal("not sparse")
	}
	m := &memFile{}
	w, err := NewWriter(m, src.Params())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < src.NumChunks(); i++ {
		raw, _, err := src.RawChunk(i)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AddRawChunk(append(raw, 1, 2, 3)); err != nil { // trailing bytes are ignored
			t.Fatal(err)
		}
	}
	if err := w.AddRawChunk(specialChunk(blosc.SpecialZero, 800, 8)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	g := reopen(t, m, nil)
	want := append(readAll(t, src, src.Size()), make([]byte, 800)...)
	if !bytes.Equal(readAll(t, g, g.Size()), want) {
		t.Fatal("content differs")
	}
	if raw, kind, _ := g.RawChunk(src.NumChunks()); kind != 0 || len(raw) != 32 {
		t.Fatalf("special chunk not stored verbatim: kind %d, %d bytes", kind, len(raw))
	}
	if g.Info().Format != "b2frame" || src.Info().Format != "sframe" {
		t.Fatalf("formats %q %q", g.Info().Format, src.Info().Format)
	}
}
