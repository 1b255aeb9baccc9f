package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/pack"
)

// writeFrame writes chunks with p into a new in-memory file.
func writeFrame(t testing.TB, p Params, chunks [][]byte) *memFile {
	t.Helper()
	m := &memFile{}
	w, err := NewWriter(m, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if err := w.AddChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return m
}

// split cuts data into chunks of cs bytes.
func split(data []byte, cs int) [][]byte {
	var out [][]byte
	for off := 0; off < len(data); off += cs {
		out = append(out, data[off:min(off+cs, len(data))])
	}
	return out
}

// testData returns n bytes of a given kind.
func testData(kind string, n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 99))
	b := make([]byte, n)
	switch kind {
	case "f64":
		for i := 0; i+8 <= n; i += 8 {
			binary.LittleEndian.PutUint64(b[i:], math.Float64bits(math.Sin(float64(i)/800)*1000))
		}
	case "random":
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	case "text":
		words := []string{"alpha", "beta", "gamma", "42", "3.14", "\n", ",", "delta"}
		var s []byte
		for len(s) < n {
			s = append(s, words[rng.IntN(len(words))]...)
		}
		copy(b, s)
	case "zeros":
	}
	return b
}

func params(codec, clevel, ts int, filters ...uint8) blosc.Params {
	p := blosc.Params{Codec: codec, Clevel: clevel, Typesize: ts, Split: blosc.SplitForwardCompat}
	copy(p.Filters[6-len(filters):], filters)
	return p
}

// TestWriterRoundTrip writes frames with several codecs, filters, type
// and chunk sizes, reopens them and compares.
func TestWriterRoundTrip(t *testing.T) {
	sh, bit, delta, bd, tp := uint8(blosc.FilterShuffle), uint8(blosc.FilterBitShuffle), uint8(blosc.FilterDelta), uint8(blosc.FilterByteDelta), uint8(blosc.FilterTruncPrec)
	cases := []struct {
		name  string
		p     blosc.Params
		ts    int
		cs    int
		size  int
		data  string
		split blosc.SplitMode
	}{
		{"blosclz-shuffle", params(blosc.CodecBloscLZ, 5, 8, sh), 8, 65536, 200000, "f64", blosc.SplitForwardCompat},
		{"lz4-shuffle-exact", params(blosc.CodecLZ4, 5, 8, sh), 8, 32768, 131072, "f64", blosc.SplitAlways},
		{"lz4hc-bitshuffle", params(blosc.CodecLZ4HC, 9, 4, bit), 4, 50000, 120001, "f64", blosc.SplitNever},
		{"zlib-noshuffle", params(blosc.CodecZlib, 6, 1), 1, 40000, 99999, "text", blosc.SplitAuto},
		{"zstd-delta-shuffle", params(blosc.CodecZstd, 3, 8, delta, sh), 8, 65536, 150000, "f64", blosc.SplitForwardCompat},
		{"zstd-bytedelta", params(blosc.CodecZstd, 5, 4, sh, bd), 4, 65536, 70000, "f64", blosc.SplitForwardCompat},
		{"lz4-truncprec", params(blosc.CodecLZ4, 5, 8, tp, sh), 8, 65536, 80000, "zeros", blosc.SplitForwardCompat},
		{"random-memcpy", params(blosc.CodecLZ4, 5, 1, sh), 1, 10000, 30000, "random", blosc.SplitForwardCompat},
		{"clevel0", params(blosc.CodecZstd, 0, 2, sh), 2, 4096, 10000, "f64", blosc.SplitForwardCompat},
		{"typesize300", params(blosc.CodecZstd, 5, 0, sh), 300, 3000, 9000, "f64", blosc.SplitForwardCompat},
		{"zeros-special", params(blosc.CodecZstd, 5, 8, sh), 8, 65536, 300000, "zeros", blosc.SplitForwardCompat},
		{"one-byte", params(blosc.CodecZstd, 5, 1, sh), 1, 65536, 1, "text", blosc.SplitForwardCompat},
		{"empty", params(blosc.CodecZstd, 5, 8, sh), 8, 65536, 0, "f64", blosc.SplitForwardCompat},
		{"tiny-chunks", params(blosc.CodecBloscLZ, 5, 4, sh), 4, 256, 100000, "f64", blosc.SplitForwardCompat},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.data == "zeros" && c.p.Filters[4] == tp {
				c.p.FiltersMeta[4] = 20
			}
			c.p.Split = c.split
			data := testData(c.data, c.size, uint64(i))
			p := Params{Chunk: c.p, Typesize: c.ts, ChunkSize: c.cs,
				Metalayers:   []Metalayer{{Name: "m", Value: []byte{1, 2, 3}}, {Name: strings.Repeat("n", 31), Value: nil}},
				VLMetalayers: []Metalayer{{Name: "v", Value: []byte("hello vlmeta")}}}
			m := writeFrame(t, p, split(data, c.cs))
			f := reopen(t, m, newCache())
			if got := readAll(t, f, f.Size()); !bytes.Equal(got, data) {
				t.Fatal("content differs")
			}
			if f.Version() != 2 || f.ChunkSize() != int64(c.cs) || f.Typesize() != c.ts {
				t.Fatalf("version %d chunksize %d typesize %d", f.Version(), f.ChunkSize(), f.Typesize())
			}
			in := f.Info()
			if in.Clevel != c.p.Clevel || in.Size != int64(c.size) || int64(len(m.b)) != in.StoredSize {
				t.Fatalf("Info %+v (file %d bytes)", in, len(m.b))
			}
			if v, _ := f.Meta("m"); !bytes.Equal(v, []byte{1, 2, 3}) {
				t.Fatalf("Meta m = %v", v)
			}
			if v, err := f.VLMeta("v"); err != nil || string(v) != "hello vlmeta" {
				t.Fatalf("VLMeta v = %q %v", v, err)
			}
			got := f.Params()
			if got.Chunk.Codec != c.p.Codec || got.Chunk.Filters != c.p.Filters || got.Chunk.FiltersMeta != c.p.FiltersMeta || got.Chunk.Split != c.split {
				t.Fatalf("Params %+v, wrote %+v", got.Chunk, c.p)
			}
			if c.data == "zeros" && c.size > 0 {
				if _, k, _ := f.RawChunk(0); k != blosc.SpecialZero {
					t.Fatalf("all-zero chunk stored as kind %d, want a special zero entry", k)
				}
			}
		})
	}
}

// TestWriterVariable writes chunks of varying sizes, with special chunks
// that must then be stored.
func TestWriterVariable(t *testing.T) {
	data := testData("f64", 300000, 5)
	sizes := []int{10000, 65536, 24464, 100000, 1000}
	m := &memFile{}
	w, err := NewWriter(m, Params{Chunk: params(blosc.CodecZstd, 5, 8, blosc.FilterShuffle), ChunkSize: 65536})
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	off := 0
	for i, s := range sizes {
		if err := w.AddChunk(data[off : off+s]); err != nil {
			t.Fatal(err)
		}
		want = append(want, data[off:off+s]...)
		off += s
		if i == 1 {
			if err := w.AddSpecial(SpecialZero, 4096); err != nil {
				t.Fatal(err)
			}
			want = append(want, make([]byte, 4096)...)
			if err := w.AddSpecial(SpecialNaN, 16); err != nil {
				t.Fatal(err)
			}
			nan := []byte{0, 0, 0, 0, 0, 0, 0xF8, 0x7F}
			want = append(want, append(nan, nan...)...)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if m.b[offFlags] != 0x53 || binary.BigEndian.Uint32(m.b[offChunksize:]) != 0 {
		t.Fatalf("general_flags %#x chunksize %d, want 0x53 and 0", m.b[offFlags], binary.BigEndian.Uint32(m.b[offChunksize:]))
	}
	f := reopen(t, m, newCache())
	if f.Version() != 3 || f.ChunkSize() != 0 || f.NumChunks() != len(sizes)+2 {
		t.Fatalf("version %d chunksize %d chunks %d", f.Version(), f.ChunkSize(), f.NumChunks())
	}
	if got := readAll(t, f, f.Size()); !bytes.Equal(got, want) {
		t.Fatal("content differs")
	}
	if f.NewChunkSize() != 100000 {
		t.Fatalf("NewChunkSize %d", f.NewChunkSize())
	}
	// The specials were stored as 32-byte special chunks.
	raw, kind, err := f.RawChunk(2)
	if err != nil || kind != 0 || len(raw) != 32 || raw[31]>>4 != blosc.SpecialZero {
		t.Fatalf("chunk 2: %x kind %d %v", raw, kind, err)
	}
}

// TestVariableSpecialEntry crafts a variable-size frame with one special
// index entry (its size follows from nbytes) and then two (refused).
func TestVariableSpecialEntry(t *testing.T) {
	data := testData("f64", 30000, 1)
	m := writeFrame(t, Params{Chunk: params(blosc.CodecLZ4, 5, 8, blosc.FilterShuffle), ChunkSize: 10000},
		[][]byte{data[:10000], data[10000:25000], data[25000:]})
	f := reopen(t, m, nil)
	if f.Version() != 3 {
		t.Fatalf("version %d", f.Version())
	}
	idx := f.offsets
	// Rewrite the index: chunk 1 becomes a special zero entry.
	set := func(vals []int64) []byte {
		b := bytes.Clone(m.b)
		raw := make([]byte, 8*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
		}
		p := blosc.Params{Codec: blosc.CodecBloscLZ, Clevel: 0, Typesize: 8}
		ic, _ := blosc.Compress(nil, raw, p)
		pos := f.hdr.headerLen + f.hdr.cbytes
		copy(b[pos:], ic) // same length: memcpyed, 3 entries
		return b
	}
	b := set([]int64{idx[0], special(0x81), idx[2]})
	g, err := openBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(bytes.Clone(data[:10000]), make([]byte, 15000)...), data[25000:]...)
	if got := readAll(t, g, g.Size()); !bytes.Equal(got, want) {
		t.Fatal("content differs")
	}
	b = set([]int64{idx[0], special(0x81), special(0x84)})
	if _, err := openBytes(b); !errors.Is(err, pack.ErrFormat) || !strings.Contains(err.Error(), "2 special chunks") {
		t.Fatalf("two specials: %v", err)
	}
	b = set([]int64{idx[0], special(0x83), idx[2]})
	if _, err := openBytes(b); !errors.Is(err, pack.ErrFormat) || !strings.Contains(err.Error(), "no known special value") {
		t.Fatalf("reserved special: %v", err)
	}
	b = set([]int64{idx[0], idx[1], f.hdr.cbytes})
	if _, err := openBytes(b); !errors.Is(err, pack.ErrFormat) || !strings.Contains(err.Error(), "outside the") {
		t.Fatalf("offset past the section: %v", err)
	}
}

// special returns the index entry with top byte b.
func special(b byte) int64 { return int64(uint64(b) << 56) }

// TestWriterSpecials writes special chunks in a fixed-size frame.
func TestWriterSpecials(t *testing.T) {
	m := &memFile{}
	w, err := NewWriter(m, Params{Chunk: params(blosc.CodecZstd, 5, 4, blosc.FilterShuffle), ChunkSize: 4000})
	if err != nil {
		t.Fatal(err)
	}
	data := testData("f64", 4000, 3)
	for _, err := range []error{
		w.AddSpecial(SpecialZero, 4000), w.AddChunk(data), w.AddSpecial(SpecialNaN, 4000),
		w.AddSpecial(SpecialUninit, 4000), w.AddSpecial(SpecialZero, 1000),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddSpecial(SpecialNaN, 6); err == nil {
		t.Fatal("NaN chunk of 6 bytes with typesize 4 accepted")
	}
	if err := w.AddSpecial(blosc.SpecialValue, 8); err == nil {
		t.Fatal("AddSpecial(SpecialValue) accepted")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.AddChunk(data); err == nil || w.Close() == nil {
		t.Fatal("writer usable after Close")
	}
	f := reopen(t, m, nil)
	if f.Version() != 2 || f.Size() != 17000 || binary.BigEndian.Uint64(m.b[offCbytes:]) == 0 {
		t.Fatalf("version %d size %d", f.Version(), f.Size())
	}
	got := readAll(t, f, f.Size())
	nan := []byte{0, 0, 0xC0, 0x7F}
	want := append(append(make([]byte, 4000), data...), bytes.Repeat(nan, 1000)...)
	want = append(want, make([]byte, 5000)...)
	if !bytes.Equal(got, want) {
		t.Fatal("content differs")
	}
	for i, k := range []int{SpecialZero, 0, SpecialNaN, SpecialUninit, SpecialZero} {
		if _, kind, _ := f.RawChunk(i); kind != k {
			t.Fatalf("chunk %d kind %d, want %d", i, kind, k)
		}
	}
}

// TestWriterErrors checks parameter validation.
func TestWriterErrors(t *testing.T) {
	ok := params(blosc.CodecLZ4, 5, 4, blosc.FilterShuffle)
	many := make([]Metalayer, 17)
	for i := range many {
		many[i] = Metalayer{Name: fmt.Sprint("m", i)}
	}
	bad := map[string]Params{
		"long name":   {Chunk: ok, Metalayers: []Metalayer{{Name: strings.Repeat("x", 32)}}},
		"empty name":  {Chunk: ok, VLMetalayers: []Metalayer{{Name: ""}}},
		"duplicate":   {Chunk: ok, Metalayers: []Metalayer{{Name: "a"}, {Name: "a"}}},
		"17 metas":    {Chunk: ok, Metalayers: many},
		"bad vlchunk": {Chunk: ok, VLMetalayers: []Metalayer{{Name: "a", Value: []byte{1, 2}, Compressed: true}}},
		"blosc1":      {Chunk: blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 4, Blosc1: true}},
		"clevel":      {Chunk: blosc.Params{Codec: blosc.CodecLZ4, Clevel: 10, Typesize: 4}},
		"chunk size":  {Chunk: ok, ChunkSize: -1},
	}
	for name, p := range bad {
		if _, err := NewWriter(&memFile{}, p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	w, err := NewWriter(&memFile{}, Params{Chunk: params(blosc.CodecSnappy, 5, 4)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddChunk(make([]byte, 1000)); !errors.Is(err, blosc.ErrUnsupported) {
		t.Fatalf("snappy chunk: %v", err)
	}
	if err := w.AddRawChunk([]byte{5, 1, 7}); !errors.Is(err, pack.ErrFormat) {
		t.Fatalf("short raw chunk: %v", err)
	}
}

// TestWriterHeaderLikeFixture writes a frame like metalayers.b2frame
// with a fresh Writer and compares the header with the fixture's, byte by
// byte where they must match, and the trailer's structure.
func TestWriterHeaderLikeFixture(t *testing.T) {
	fx := fixtureBytes(t, "metalayers.b2frame")
	src := openFixture(t, filepath.Join(fixtures.Dir(), "metalayers.b2frame"), nil)
	plain := readAll(t, src, src.Size())
	p := Params{
		Chunk:        params(blosc.CodecZstd, 5, 4, blosc.FilterShuffle),
		ChunkSize:    65536,
		Metalayers:   []Metalayer{{Name: "calib", Value: []byte("v1-abcdef")}, {Name: "units", Value: []byte("meters")}},
		VLMetalayers: []Metalayer{{Name: "author", Value: []byte("fixture-generator")}, {Name: "description", Value: []byte("int32 counter with meta")}},
	}
	m := writeFrame(t, p, split(plain, 65536))
	hl := int(binary.BigEndian.Uint32(fx[offHeaderLen:]))
	if got := int(binary.BigEndian.Uint32(m.b[offHeaderLen:])); got != hl {
		t.Fatalf("header_len %d, fixture %d", got, hl)
	}
	variable := map[int]string{}
	for i := offFrameLen; i < offFrameLen+8; i++ {
		variable[i] = "frame_len"
	}
	for i := offCbytes; i < offCbytes+8; i++ {
		variable[i] = "cbytes"
	}
	for i := 0; i < hl; i++ {
		if _, ok := variable[i]; !ok && m.b[i] != fx[i] {
			t.Errorf("header byte %d: %#02x, fixture %#02x", i, m.b[i], fx[i])
		}
	}
	// Trailer: same length and layout; the compressed values may differ
	// in their chunk flags only.
	tl := func(b []byte) []byte { n := binary.BigEndian.Uint32(b[len(b)-22:]); return b[len(b)-int(n):] }
	gt, ft := tl(m.b), tl(fx)
	if len(gt) != len(ft) {
		t.Fatalf("trailer of %d bytes, fixture %d", len(gt), len(ft))
	}
	valuesAt := bytes.Index(ft, []byte{0xDC, 0, 2}) + 3
	if !bytes.Equal(gt[:valuesAt], ft[:valuesAt]) || !bytes.Equal(gt[len(gt)-23:], ft[len(ft)-23:]) {
		t.Fatalf("trailer\n%x\nfixture\n%x", gt, ft)
	}
	f := reopen(t, m, nil)
	for _, n := range []string{"author", "description"} {
		a, _ := f.VLMeta(n)
		b, _ := src.VLMeta(n)
		if !bytes.Equal(a, b) {
			t.Errorf("vlmeta %s: %q vs %q", n, a, b)
		}
	}
}

// TestSinkReproducesFixtures copies every chunk of each contiguous
// fixture through NewSink and compares the result with the fixture: the
// header (all of it, metalayers included), the chunks section and the
// trailer must be identical; the index chunk may be compressed
// differently but must hold the same offsets.
func TestSinkReproducesFixtures(t *testing.T) {
	for _, fx := range frameFixtures(t, "b2frame", "b2nd") {
		t.Run(fx.Name, func(t *testing.T) {
			src := openFixture(t, fx.Path, nil)
			orig := fixtureBytes(t, fx.Name)
			// Only frames whose chunks lie in index order, back to back.
			pos := int64(0)
			for i := 0; i < src.NumChunks(); i++ {
				if v := src.entry(i); v >= 0 {
					if v != pos {
						t.Skip("chunks not stored in index order")
					}
					h, _ := src.chunkHeader(i)
					pos += int64(h.Cbytes)
				}
			}
			m := &memFile{}
			s, err := src.NewSink(m, src.Size())
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < src.NumChunks(); i++ {
				if err := s.CopyChunk(i); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			hl := src.hdr.headerLen
			got, want := m.b[:hl], orig[:hl]
			for i := range want {
				lenField := i >= offFrameLen && i < offFrameLen+8 // the index chunk may compress differently
				if got[i] != want[i] && !lenField && !(src.NumChunks() == 0 && i >= offChunksize && i < offChunksize+4) {
					t.Errorf("header byte %d: %#02x, fixture %#02x", i, got[i], want[i])
				}
			}
			cb := src.hdr.cbytes
			if !bytes.Equal(m.b[hl:hl+cb], orig[hl:hl+cb]) {
				t.Error("chunks section differs")
			}
			tl := func(b []byte) []byte { n := binary.BigEndian.Uint32(b[len(b)-22:]); return b[len(b)-int(n):] }
			if !bytes.Equal(tl(m.b), tl(orig[:src.hdr.frameLen])) {
				t.Error("trailer differs")
			}
			g := reopen(t, m, nil)
			if g.NumChunks() != src.NumChunks() {
				t.Fatalf("%d chunks, want %d", g.NumChunks(), src.NumChunks())
			}
			for i := 0; i < g.NumChunks(); i++ {
				if g.entry(i) != src.entry(i) {
					t.Errorf("index entry %d: %#x, want %#x", i, g.entry(i), src.entry(i))
				}
			}
		})
	}
}

// TestRewriteFixtures runs pack.Rewrite on every valid frame fixture with
// patches inside a chunk and across a chunk boundary, at the same size,
// shorter and longer, and checks the content, that untouched chunks were
// copied verbatim, and that the metadata survived.
func TestRewriteFixtures(t *testing.T) {
	for _, fx := range frameFixtures(t, "b2frame", "sframe", "b2nd") {
		t.Run(fx.Name, func(t *testing.T) {
			t.Parallel()
			src := openFixture(t, fx.Path, newCache())
			old := readAll(t, src, src.Size())
			size := src.Size()
			cs := src.NewChunkSize()
			ts := int64(src.Typesize())
			filters := src.Params().Chunk.Filters
			lossy := slices.Contains(filters[:], blosc.FilterTruncPrec)
			rng := rand.New(rand.NewPCG(3, uint64(size)))
			for _, newSize := range []int64{size, size - size/3, size + cs + 123} {
				t.Run(fmt.Sprint(newSize), func(t *testing.T) {
					content := make([]byte, newSize)
					copy(content, old)
					var dirty []pack.Range
					if newSize > size {
						dirty = append(dirty, pack.Range{Off: size, Len: newSize - size})
					}
					patch := func(off, n int64) {
						off, n = off/ts*ts, (n+ts-1)/ts*ts
						if off < 0 || n <= 0 || off+n > newSize {
							return
						}
						if lossy { // truncation is idempotent on old values
							from := rng.Int64N(max(size-n, 1)) / ts * ts
							if from+n > size {
								return
							}
							copy(content[off:off+n], old[from:from+n])
						} else {
							for i := off; i < off+n; i++ {
								content[i] = byte(rng.Uint32())
							}
						}
						dirty = append(dirty, pack.Range{Off: off, Len: n})
					}
					patch(cs/3, 100)         // inside chunk 0
					patch(cs-50, 100)        // across the boundary of chunks 0 and 1
					patch(newSize-cs/2, 200) // near the end
					m := &memFile{}
					err := pack.Rewrite(m, src, bytes.NewReader(content), newSize, dirty)
					if src.Array() != nil && newSize != size {
						if !errors.Is(err, pack.ErrUnsupported) {
							t.Fatalf("resizing a b2nd: %v", err)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					g := reopen(t, m, newCache())
					if got := readAll(t, g, g.Size()); !bytes.Equal(got, content) {
						t.Fatalf("content of %d bytes differs (got %d bytes)", len(content), len(got))
					}
					// Verbatim copies.
					dirtyAt := func(off, n int64) bool {
						for _, r := range dirty {
							if r.Off < off+n && off < r.Off+r.Len {
								return true
							}
						}
						return false
					}
					copied := 0
					for i := 0; i < g.NumChunks(); i++ {
						off := int64(i) * cs
						n := min(cs, newSize-off)
						if i >= src.NumChunks() || src.ChunkOffset(i) != off || src.ChunkOffset(i+1) != off+n || dirtyAt(off, n) {
							continue
						}
						a, ka, err1 := src.RawChunk(i)
						b, kb, err2 := g.RawChunk(i)
						if err1 != nil || err2 != nil || ka != kb || !bytes.Equal(a, b) {
							t.Fatalf("chunk %d not copied verbatim (kinds %d %d; %v %v)", i, ka, kb, err1, err2)
						}
						copied++
					}
					if src.NumChunks() > 5 && src.ChunkSize() > 0 && copied == 0 {
						t.Error("no chunk was copied verbatim")
					}
					for _, n := range src.MetaNames() {
						a, _ := src.Meta(n)
						b, ok := g.Meta(n)
						if !ok || !bytes.Equal(a, b) {
							t.Errorf("metalayer %s lost", n)
						}
					}
					for _, n := range src.VLMetaNames() {
						a, _ := src.RawVLMeta(n)
						b, ok := g.RawVLMeta(n)
						if !ok || !bytes.Equal(a, b) {
							t.Errorf("vlmetalayer %s lost", n)
						}
					}
					if src.Array() != nil {
						cv, err := g.COrder()
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(readAll(t, cv, cv.Size()), naiveCOrder(g.Array(), content)) {
							t.Fatal("C order of the rewritten array differs")
						}
					}
					if g.Info().Clevel != src.Info().Clevel || g.Typesize() != src.Typesize() {
						t.Errorf("parameters changed: %+v vs %+v", g.Info(), src.Info())
					}
				})
			}
		})
	}
}

// TestWriterOffset writes a frame after other bytes in the file.
func TestWriterOffset(t *testing.T) {
	m := &memFile{}
	m.Write(bytes.Repeat([]byte{0xEE}, 500))
	w, err := NewWriter(m, Params{Chunk: params(blosc.CodecLZ4, 5, 8, blosc.FilterShuffle), ChunkSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	data := testData("f64", 2500, 1)
	for _, c := range split(data, 1000) {
		if err := w.AddChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := io.NewSectionReader(bytes.NewReader(m.b), 500, int64(len(m.b)-500))
	f, err := Open(r, r.Size(), "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f, f.Size()); !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
}
