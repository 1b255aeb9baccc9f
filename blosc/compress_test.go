package blosc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// testData returns n bytes of one of several realistic shapes.
func testData(r *rand.Rand, kind, n int) []byte {
	b := make([]byte, n)
	switch kind % 6 {
	case 0: // smooth float64 series, quantized like measured data
		for i := 0; i+8 <= n; i += 8 {
			v := math.Round(math.Sin(float64(i)*0.0005)*1000*64) / 64
			binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
		}
	case 1: // text
		words := []string{"blosc ", "chunk ", "the ", "block ", "shuffle ", "of ", "data\n", "2026-11-22 "}
		for i := 0; i < n; {
			i += copy(b[i:], words[r.IntN(len(words))])
		}
	case 2: // random
		for i := range b {
			b[i] = byte(r.Uint32())
		}
	case 3: // zeros
	case 4: // counter int32
		for i := 0; i+4 <= n; i += 4 {
			binary.LittleEndian.PutUint32(b[i:], uint32(i/4))
		}
	case 5: // runs of a few values
		v := byte(7)
		for i := range b {
			if r.IntN(500) == 0 {
				v = byte(r.Uint32())
			}
			b[i] = v
		}
	}
	return b
}

func randomParams(r *rand.Rand) Params {
	codecs := []int{CodecBloscLZ, CodecLZ4, CodecLZ4HC, CodecZlib, CodecZstd}
	p := Params{
		Codec:    codecs[r.IntN(len(codecs))],
		Clevel:   r.IntN(10),
		Typesize: []int{1, 2, 3, 4, 7, 8, 12, 16, 17, 24, 33, 255}[r.IntN(12)],
		Split:    SplitMode(r.IntN(4)),
		Blosc1:   r.IntN(3) == 0,
	}
	if r.IntN(3) == 0 {
		p.Blocksize = []int{1, 100, 128, 1000, 4096, 16384, 65536}[r.IntN(7)]
	}
	switch r.IntN(6) {
	case 0:
	case 1:
		p.Filters[5] = FilterShuffle
	case 2:
		p.Filters[5] = FilterBitShuffle
	case 3:
		if !p.Blosc1 {
			p.Filters[4], p.Filters[5] = FilterDelta, FilterShuffle
		}
	case 4:
		if !p.Blosc1 {
			p.Filters[0], p.Filters[1] = FilterShuffle, FilterByteDelta
			p.FiltersMeta[1] = byte(p.Typesize)
		}
	case 5:
		if !p.Blosc1 {
			p.Filters[3], p.Filters[5] = FilterDelta, FilterBitShuffle
		}
	}
	return p
}

// TestRoundTripProperty compresses random data with random parameters and
// checks that decoding returns it, whole and block by block.
func TestRoundTripProperty(t *testing.T) {
	seed := uint64(20261122)
	r := rand.New(rand.NewPCG(seed, 1))
	iters := 600
	if testing.Short() {
		iters = 100
	}
	for it := 0; it < iters; it++ {
		p := randomParams(r)
		n := []int{0, 1, 31, 32, 127, 128, 129, 1000, 4097, 65536, 100003, 300000}[r.IntN(12)]
		kind := r.IntN(6)
		src := testData(r, kind, n)
		name := fmt.Sprintf("it%d/%+v/n=%d/kind=%d", it, p, n, kind)
		chunk, err := Compress(nil, src, p)
		if err != nil {
			t.Fatalf("%s: Compress: %v", name, err)
		}
		if len(chunk) > n+MaxOverhead {
			t.Fatalf("%s: chunk of %d bytes for %d", name, len(chunk), n)
		}
		h, err := ParseHeader(chunk)
		if err != nil {
			t.Fatalf("%s: header: %v", name, err)
		}
		if p.Blosc1 != (h.Version == VersionBlosc1) || int(h.Cbytes) != len(chunk) {
			t.Fatalf("%s: header %v", name, h)
		}
		got, err := Decompress(chunk)
		if err != nil {
			t.Fatalf("%s: Decompress: %v (header %v)", name, err, h)
		}
		if !bytes.Equal(got, src) {
			t.Fatalf("%s: round trip differs (header %v)", name, h)
		}
		checkBlocks(t, chunk, src)
	}
}

func TestCompressRejects(t *testing.T) {
	base := DefaultParams(8)
	for name, mod := range map[string]func(*Params){
		"snappy":          func(p *Params) { p.Codec = CodecSnappy },
		"codec 99":        func(p *Params) { p.Codec = 99 },
		"clevel 10":       func(p *Params) { p.Clevel = 10 },
		"typesize 0":      func(p *Params) { p.Typesize = 0 },
		"typesize 256":    func(p *Params) { p.Typesize = 256 },
		"filter 200":      func(p *Params) { p.Filters[2] = 200 },
		"delta in blosc1": func(p *Params) { p.Blosc1 = true; p.Filters[4] = FilterDelta },
		"delta after shuffle": func(p *Params) {
			p.Filters[0], p.Filters[1] = FilterShuffle, FilterDelta
		},
		"truncprec ts 2": func(p *Params) { p.Typesize = 2; p.Filters[0] = FilterTruncPrec },
	} {
		p := base
		mod(&p)
		if _, err := Compress(nil, make([]byte, 1000), p); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: err = %v, want ErrUnsupported", name, err)
		}
	}
}

// TestTruncPrec checks the lossy filter against a direct computation.
func TestTruncPrec(t *testing.T) {
	src := testData(rand.New(rand.NewPCG(1, 2)), 0, 80000)
	p := DefaultParams(8)
	p.Filters = [6]uint8{FilterTruncPrec, 0, 0, 0, 0, FilterShuffle}
	p.FiltersMeta[0] = 20
	chunk, err := Compress(nil, src, p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decompress(chunk)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(src); i += 8 {
		want := binary.LittleEndian.Uint64(src[i:]) &^ (1<<32 - 1)
		if g := binary.LittleEndian.Uint64(got[i:]); g != want {
			t.Fatalf("word %d = %#x, want %#x", i/8, g, want)
		}
	}
}

// TestSpecialZeroEncoding checks that all-zero input becomes a 32-byte
// special chunk, as c-blosc2 writes it.
func TestSpecialZeroEncoding(t *testing.T) {
	chunk, err := Compress(nil, make([]byte, 1<<20), DefaultParams(8))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := ParseHeader(chunk)
	if len(chunk) != 32 || h.Special() != SpecialZero {
		t.Fatalf("got %d-byte chunk, header %v", len(chunk), h)
	}
}

// zeroReader reads as n zero bytes.
type zeroReader int64

func (z zeroReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(z) {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), int64(z)-off))
	clear(p[:n])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestCompressReaderAt checks that compressing from an io.ReaderAt block
// by block gives the very chunk Compress gives, over random parameters
// and data, and that a chunk of 2 GiB of zeros costs a few blocks of
// memory, not 2 GiB.
func TestCompressReaderAt(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for i := 0; i < 200; i++ {
		p := randomParams(r)
		src := testData(r, i, 1+r.IntN(300000))
		want, werr := Compress(nil, src, p)
		got, gerr := CompressReaderAt(nil, bytes.NewReader(src), len(src), p)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("params %+v, %d bytes: CompressReaderAt (%v) differs from Compress (%v)", p, len(src), gerr, werr)
		}
	}
	// A short reader is an error, not a chunk.
	p := DefaultParams(8)
	if _, err := CompressReaderAt(nil, bytes.NewReader(make([]byte, 1000)), 5000, p); err == nil {
		t.Fatal("a reader shorter than n compressed without error")
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 1<<31 - 1 - ExtHeaderLen
	c, err := CompressReaderAt(nil, zeroReader(n), n, p)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(c) != ExtHeaderLen || c[31]>>4 != SpecialZero {
		t.Fatalf("2 GiB of zeros compressed to %d bytes, flags %#x; want a special zero chunk", len(c), c[31])
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > 64<<20 {
		t.Fatalf("compressing 2 GiB of zeros from a reader allocated %d MiB", a>>20)
	}
}

// TestNoOpShuffleDropped: a byte shuffle of typesize 1 changes nothing
// and is not recorded, as c-blosc2 does not record it (its readers undo a
// recorded one slowly); a bit shuffle of typesize 1 is kept.
func TestNoOpShuffleDropped(t *testing.T) {
	src := []byte(strings.Repeat("time,value\n2026-11-24T03:00:00,1.25\n", 3000))
	for _, tc := range []struct {
		name   string
		filter uint8
		meta   uint8
		ts     int
		blosc1 bool
		kept   bool
	}{
		{"shuffle ts1", FilterShuffle, 0, 1, false, false},
		{"shuffle ts1 blosc1", FilterShuffle, 0, 1, true, false},
		{"shuffle meta 1", FilterShuffle, 1, 8, false, false},
		{"shuffle ts8", FilterShuffle, 0, 8, false, true},
		{"bitshuffle ts1", FilterBitShuffle, 0, 1, false, true},
	} {
		p := Params{Codec: CodecLZ4, Clevel: 5, Typesize: tc.ts, Blosc1: tc.blosc1}
		p.Filters[5], p.FiltersMeta[5] = tc.filter, tc.meta
		c, err := Compress(nil, src, p)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		h, err := ParseHeader(c)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		kept := false
		if tc.blosc1 {
			kept = h.Flags&flagShuffle != 0
		} else {
			kept = slices.Contains(h.Filters[:], tc.filter)
		}
		if kept != tc.kept {
			t.Errorf("%s: filter recorded %v, want %v (filters %v, flags %#x)", tc.name, kept, tc.kept, h.Filters, h.Flags)
		}
		got, err := Decompress(c)
		if err != nil || !bytes.Equal(got, src) {
			t.Errorf("%s: round trip: %v", tc.name, err)
		}
	}
}

// TestCompressAllocs: compressing into a dst with room allocates little
// per chunk, whatever the codec. A fresh LZ4 compressor per stream (136
// KiB of hash table, zeroed) made 4.4 MB of garbage per 4 MiB chunk, and
// a nil dst was grown by appends that copied the chunk over and over.
func TestCompressAllocs(t *testing.T) {
	if testkit.RaceEnabled {
		t.Skip("sync.Pool drops items under the race detector, on purpose")
	}
	src := benchFloat64(4 << 20)
	dst := make([]byte, 0, len(src)+MaxOverhead)
	for _, codec := range []int{CodecBloscLZ, CodecLZ4, CodecLZ4HC, CodecZlib, CodecZstd} {
		p := DefaultParams(8)
		p.Codec = codec
		Compress(dst[:0], src, p) // pools and encoders are made once
		// A garbage collection may empty the pools: a compressor made
		// again is allowed for once per measure, and the best of three
		// measures counts (two collections in one measure emptied them
		// twice on a loaded machine). Per round a stream's worth is never
		// allowed.
		const rounds = 4
		best := uint64(math.MaxUint64)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range rounds {
				if _, err := Compress(dst[:0], src, p); err != nil {
					t.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			best = min(best, (after.TotalAlloc-before.TotalAlloc)/rounds)
		}
		if best > 256<<10 {
			t.Errorf("%s: %d KiB allocated per 4 MiB chunk", CodecName(codec), best>>10)
		}
		got, err := Compress(nil, src, p)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := Decompress(got); err != nil || !bytes.Equal(back, src) {
			t.Errorf("%s: round trip: %v", CodecName(codec), err)
		}
	}
}

// TestLZ4AsCBlosc2 recompresses every LZ4 chunk that c-blosc2 2.23 wrote
// into the frame fixtures, with the parameters its header records, and
// wants the very same bytes back: our LZ4 encoder is lz4's
// LZ4_compress_fast, which c-blosc2 calls with acceleration 1, and the
// chunk layout around it (header, block starts, split streams, filters,
// run streams) is c-blosc2's. Left out: LZ4HC chunks (the same format
// code, another encoder), a shuffle recorded at typesize 1 (c-blosc2's
// cparams keep it, its blosc2_compress drops it as we do:
// withoutNoOpShuffle), and c-blosc2 3.3's chunks (its bitshuffle chunks
// come out larger than 2.23's and ours).
func TestLZ4AsCBlosc2(t *testing.T) {
	n := 0
	for _, fx := range loadFixtures(t) {
		if fx.IsInvalid || fx.Kind != "b2frame" && fx.Kind != "sframe" && fx.Kind != "b2nd" ||
			!strings.HasPrefix(fx.Producer, "c-blosc2 2.") || fx.Params["codec"] != "lz4" {
			continue
		}
		chunks, _ := walkFrame(t, fx.Path)
		for i, fc := range chunks {
			if fc.data == nil {
				continue
			}
			h, err := ParseHeader(fc.data)
			if err != nil || h.Codec() != CodecLZ4 || h.Flags&flagMemcpyed != 0 || h.Special() != 0 || h.VLBlocks() {
				continue
			}
			plain, err := Decompress(fc.data)
			if err != nil {
				t.Fatalf("%s chunk %d: %v", fx.Name, i, err)
			}
			if h.Typesize == 1 && slices.Contains(h.Filters[:], FilterShuffle) {
				continue
			}
			p := Params{Codec: CodecLZ4, Clevel: 5, Typesize: int(h.Typesize), Blocksize: int(h.Blocksize), Split: SplitNever}
			if h.Flags&flagDontSplit == 0 {
				p.Split = SplitAlways
			}
			copy(p.Filters[:], h.Filters[:])
			copy(p.FiltersMeta[:], h.FiltersMeta[:])
			got, err := Compress(nil, plain, p)
			if err != nil {
				t.Errorf("%s chunk %d: %v", fx.Name, i, err)
				continue
			}
			n++
			if !bytes.Equal(got, fc.data[:h.Cbytes]) {
				k := 0
				for k < min(len(got), int(h.Cbytes)) && got[k] == fc.data[k] {
					k++
				}
				t.Errorf("%s chunk %d (%s): %d bytes against c-blosc2's %d, first difference at byte %d", fx.Name, i, fx.Params["filters"], len(got), h.Cbytes, k)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d LZ4 chunks of c-blosc2 compared", n)
	}
	t.Logf("%d LZ4 chunks of c-blosc2 recompressed", n)
}

// TestZeroBlocksShortcut: blocks of zeros, stored as zero runs without
// being filtered (zeroRuns), give the same chunk as the filtered path,
// for every filter pipeline of randomParams, among blocks that are not
// zero, in chunks that are all zeros and at the limit where a chunk is
// stored as is.
func TestZeroBlocksShortcut(t *testing.T) {
	r := rand.New(rand.NewPCG(20261128, 3))
	for it := 0; it < 300; it++ {
		p := randomParams(r)
		n := []int{32, 129, 4097, 65536, 100003, 300000}[r.IntN(6)]
		src := testData(r, r.IntN(6), n)
		bs := []int{64, 1000, 4096, 16384}[r.IntN(4)]
		for off := 0; off < n; off += bs {
			if r.IntN(3) > 0 {
				clear(src[off:min(n, off+bs)])
			}
		}
		if it%10 == 0 {
			clear(src)
		}
		zeroRuns = false
		want, err1 := Compress(nil, src, p)
		zeroRuns = true
		got, err2 := Compress(nil, src, p)
		if err1 != nil || err2 != nil {
			t.Fatalf("it %d %+v: %v, %v", it, p, err1, err2)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("it %d %+v, %d bytes: %d-byte chunk with the shortcut, %d without", it, p, n, len(got), len(want))
		}
	}
}

// TestRunValue: runValue finds a run of one byte value at every length,
// and no run where any byte differs, wherever it is.
func TestRunValue(t *testing.T) {
	if _, ok := runValue(nil); ok {
		t.Fatal("runValue(nil) reports a run")
	}
	for n := 1; n <= 40; n++ {
		for _, v := range []byte{0, 7, 0xff} {
			b := bytes.Repeat([]byte{v}, n)
			if got, ok := runValue(b); !ok || got != v {
				t.Fatalf("%d bytes of %#x: runValue = %#x, %v", n, v, got, ok)
			}
			for i := range n {
				if n == 1 {
					break
				}
				c := bytes.Clone(b)
				c[i] ^= 1
				if got, ok := runValue(c); ok {
					t.Fatalf("%d bytes of %#x, byte %d changed: runValue = %#x, true", n, v, i, got)
				}
			}
		}
	}
}
