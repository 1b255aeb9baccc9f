package blosc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// The canary tests decode into a window of a larger buffer whose other
// bytes hold a guard pattern (testkit.Canary): the bytes in front of the
// window and its spare capacity behind. No codec, filter or special path
// may write outside dst[:len(dst)]: callers decode neighbouring blocks and
// chunks into windows of one buffer at the same time (View.WriteTo, the
// no-cache ReadAt), and a write past a window's end lands in the next one
// after it was written. Such a write is silent: the race detector does not
// see stores made in assembly.

// decodeCanary decodes chunk c whole, then block by block, each into a
// canaried window, and compares with want.
func decodeCanary(t *testing.T, name string, c *Chunk, want []byte) {
	t.Helper()
	cn := testkit.NewCanary(int(c.Nbytes))
	if err := c.Decode(cn.Dst()); err != nil {
		t.Fatalf("%s: Decode: %v", name, err)
	}
	if err := cn.Check(); err != nil {
		t.Fatalf("%s: Decode %s", name, err)
	}
	if !bytes.Equal(cn.Dst(), want) {
		t.Fatalf("%s: Decode gives wrong bytes", name)
	}
	for i := 0; i < c.NumBlocks(); i++ {
		bl, off := c.BlockLen(i), c.BlockOffset(i)
		cb := testkit.NewCanary(bl)
		if err := c.DecodeBlock(cb.Dst(), i); err != nil {
			t.Fatalf("%s: DecodeBlock(%d): %v", name, i, err)
		}
		if err := cb.Check(); err != nil {
			t.Fatalf("%s: DecodeBlock(%d of %d, %d bytes) %s", name, i, c.NumBlocks(), bl, err)
		}
		if !bytes.Equal(cb.Dst(), want[off:off+int64(bl)]) {
			t.Fatalf("%s: DecodeBlock(%d) gives wrong bytes", name, i)
		}
		for _, w := range rangeWindows(bl, i) {
			cr := testkit.NewCanary(w[1])
			if err := c.DecodeBlockRange(cr.Dst(), i, w[0]); err != nil {
				t.Fatalf("%s: DecodeBlockRange(block %d, [%d,+%d)): %v", name, i, w[0], w[1], err)
			}
			if err := cr.Check(); err != nil {
				t.Fatalf("%s: DecodeBlockRange(block %d, [%d,+%d)) %s", name, i, w[0], w[1], err)
			}
			if !bytes.Equal(cr.Dst(), want[off+int64(w[0]):off+int64(w[0]+w[1])]) {
				t.Fatalf("%s: DecodeBlockRange(block %d, [%d,+%d)) gives wrong bytes", name, i, w[0], w[1])
			}
			// The same bytes as a range and the rest after it.
			k := w[1] - w[1]/7
			cd, ce := testkit.NewCanary(k), testkit.NewCanary(w[1]-k)
			if err := c.DecodeBlockRangeRest(cd.Dst(), ce.Dst(), i, w[0]); err != nil {
				t.Fatalf("%s: DecodeBlockRangeRest(block %d, [%d,+%d), +%d): %v", name, i, w[0], k, w[1]-k, err)
			}
			if err := cd.Check(); err != nil {
				t.Fatalf("%s: DecodeBlockRangeRest(block %d, [%d,+%d)) %s", name, i, w[0], k, err)
			}
			if err := ce.Check(); err != nil {
				t.Fatalf("%s: DecodeBlockRangeRest(block %d, [%d,+%d)) rest %s", name, i, w[0], k, err)
			}
			if !bytes.Equal(append(cd.Dst(), ce.Dst()...), want[off+int64(w[0]):off+int64(w[0]+w[1])]) {
				t.Fatalf("%s: DecodeBlockRangeRest(block %d, [%d,+%d), +%d) gives wrong bytes", name, i, w[0], k, w[1]-k)
			}
		}
		decodeWindowsCanary(t, name, c, i, want[off:off+int64(bl)])
		decodePlanesCanary(t, name, c, i, want[off:off+int64(bl)])
	}
}

// decodeWindowsCanary decodes rows of block i (pieces with gaps between
// them, as a gather of an N-D array's rows takes) with
// DecodeBlockWindows, each into a canaried window, and compares them
// with want, the block's bytes.
func decodeWindowsCanary(t *testing.T, name string, c *Chunk, i int, want []byte) {
	t.Helper()
	bl := len(want)
	r := rand.New(rand.NewPCG(uint64(bl), uint64(i)+1))
	for _, rows := range []int{1, 3, 17} {
		var ws [][2]int
		at := r.IntN(bl)
		for range rows {
			if at >= bl {
				break
			}
			n := 1 + r.IntN(min(bl-at, 9000))
			ws = append(ws, [2]int{at, n})
			at += n + r.IntN(5000)
		}
		cs := make([]*testkit.Canary, len(ws))
		bws := make([]Window, len(ws))
		for k, w := range ws {
			cs[k] = testkit.NewCanary(w[1])
			bws[k] = Window{From: w[0], Dst: cs[k].Dst()}
		}
		if err := c.DecodeBlockWindows(i, bws); err != nil {
			t.Fatalf("%s: DecodeBlockWindows(block %d, %v): %v", name, i, ws, err)
		}
		for k, w := range ws {
			if err := cs[k].Check(); err != nil {
				t.Fatalf("%s: DecodeBlockWindows(block %d, %v): window %d %s", name, i, ws, k, err)
			}
			if !bytes.Equal(cs[k].Dst(), want[w[0]:w[0]+w[1]]) {
				t.Fatalf("%s: DecodeBlockWindows(block %d, %v): window %d gives wrong bytes", name, i, ws, k)
			}
		}
	}
	decodeRowsCanary(t, name, c, i, want, r)
}

// decodeRowsCanary decodes windows of rows of block i (Window.Rows: a
// chunk's rows of an N-D view, whole items and not, with gaps between
// them in the block and in dst) with DecodeBlockWindows, each window
// into one canaried buffer whose gaps between rows must stay as they
// were, and compares the rows with want, the block's bytes.
func decodeRowsCanary(t *testing.T, name string, c *Chunk, i int, want []byte, r *rand.Rand) {
	t.Helper()
	bl := len(want)
	ts := max(int(c.Typesize), 1)
	for range 4 {
		var ws []Window
		var cs []*testkit.Canary
		at := r.IntN(bl)
		for range 1 + r.IntN(3) {
			n := 1 + r.IntN(min(bl, 3000))
			if r.IntN(2) == 0 {
				n = ts * (32 + r.IntN(200)) // whole items, a kernel's group and more
				at -= at % ts
			}
			skip := n + r.IntN(2)*ts*r.IntN(400)
			if at > bl-n {
				break
			}
			rows := 1 + min((bl-n-at)/skip, r.IntN(60))
			stride := n + r.IntN(3)*r.IntN(300)
			cs = append(cs, testkit.NewCanary((rows-1)*stride+n))
			d := cs[len(cs)-1].Dst()
			for k := range d {
				d[k] = byte(k*7 + 1)
			}
			ws = append(ws, Window{From: at, Dst: d, Rows: rows, N: n, Skip: skip, Stride: stride})
			at += (rows-1)*skip + n + r.IntN(3000)
		}
		if len(ws) == 0 {
			continue
		}
		if err := c.DecodeBlockWindows(i, ws); err != nil {
			t.Fatalf("%s: DecodeBlockWindows(block %d, rows %+v): %v", name, i, ws, err)
		}
		for k, w := range ws {
			if err := cs[k].Check(); err != nil {
				t.Fatalf("%s: DecodeBlockWindows(block %d): rows window %d %s", name, i, k, err)
			}
			d := cs[k].Dst()
			for p := range d {
				row, in := p/w.Stride, p%w.Stride
				if w.Rows <= 1 {
					row, in = 0, p
				}
				if in < w.N || w.Rows <= 1 {
					if d[p] != want[w.From+row*w.Skip+in] {
						t.Fatalf("%s: DecodeBlockWindows(block %d): rows window %d (%d rows of %d, skip %d, stride %d): row %d byte %d wrong",
							name, i, k, w.Rows, w.N, w.Skip, w.Stride, row, in)
					}
				} else if d[p] != byte(p*7+1) {
					t.Fatalf("%s: DecodeBlockWindows(block %d): rows window %d: byte %d between rows written", name, i, k, p)
				}
			}
		}
	}
}

// decodePlanesCanary decodes block i as its byte planes into a canaried
// window, and unshuffles ranges of it (rangeWindows) into canaried
// windows, comparing them with want, the block's bytes.
func decodePlanesCanary(t *testing.T, name string, c *Chunk, i int, want []byte) {
	t.Helper()
	if i > 0 && c.NeedsBlock0() {
		return // not decoded as planes, and not without block 0
	}
	bl := len(want)
	cp := testkit.NewCanary(bl)
	if err := c.DecodeBlockPlanes(cp.Dst(), i); err != nil {
		t.Fatalf("%s: DecodeBlockPlanes(%d): %v", name, i, err)
	}
	if err := cp.Check(); err != nil {
		t.Fatalf("%s: DecodeBlockPlanes(%d) %s", name, i, err)
	}
	ts := c.PlanesTypesize(i)
	if ts == 1 {
		if !bytes.Equal(cp.Dst(), want) {
			t.Fatalf("%s: DecodeBlockPlanes(%d), not as planes, gives wrong bytes", name, i)
		}
		return
	}
	for _, w := range rangeWindows(bl, i) {
		cr := testkit.NewCanary(w[1])
		UnshufflePlanes(cr.Dst(), cp.Dst(), ts, w[0])
		if err := cr.Check(); err != nil {
			t.Fatalf("%s: UnshufflePlanes(block %d of %d-byte items, [%d,+%d)) %s", name, i, ts, w[0], w[1], err)
		}
		if !bytes.Equal(cr.Dst(), want[w[0]:w[0]+w[1]]) {
			t.Fatalf("%s: UnshufflePlanes(block %d of %d-byte items, [%d,+%d)) gives wrong bytes", name, i, ts, w[0], w[1])
		}
	}
}

// rangeWindows returns byte ranges [from, from+n) of a block of bl bytes
// to decode with DecodeBlockRange: the edges, single bytes, ranges that
// cut elements of any typesize, 4 KiB reads, most of the block, and a few
// picked by seed.
func rangeWindows(bl, seed int) [][2]int {
	if bl == 0 {
		return nil
	}
	ws := [][2]int{{0, 1}, {bl - 1, 1}, {0, bl - 1}, {1, bl - 1}, {bl / 2, 1}, {bl / 3, min(13, bl-bl/3)},
		{bl / 2, min(4096, bl-bl/2)}, {max(bl-4096-3, 0), min(4096, bl)}, {min(7, bl-1), min(bl-min(7, bl-1), 4099)},
		{bl / 5, bl / 2}, {0, bl}}
	r := rand.New(rand.NewPCG(uint64(bl), uint64(seed)))
	for range 4 {
		from := r.IntN(bl)
		ws = append(ws, [2]int{from, 1 + r.IntN(bl-from)})
	}
	return ws
}

// canaryData returns n bytes of a kind that the codecs compress (so that
// their decoders, not the stored-stream copy, do the work): text, a
// smooth float series, a counter, runs, and incompressible noise.
func canaryData(r *rand.Rand, kind, n int) []byte {
	b := make([]byte, n)
	switch kind % 5 {
	case 0: // CSV-like text, the shape of the original report
		var w bytes.Buffer
		for w.Len() < n {
			fmt.Fprintf(&w, "%d,%.3f,%.2f,%s\n", w.Len(), 20+5*math.Sin(float64(w.Len())/900), r.Float64()*100, []string{"ok", "warn", "fail"}[r.IntN(3)])
		}
		copy(b, w.Bytes())
	case 1:
		for i := 0; i+8 <= n; i += 8 {
			v := math.Round(math.Sin(float64(i)*0.0003)*4000*16) / 16
			binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
		}
	case 2:
		for i := 0; i+4 <= n; i += 4 {
			binary.LittleEndian.PutUint32(b[i:], uint32(i/4*3))
		}
	case 3:
		v := byte(9)
		for i := range b {
			if r.IntN(300) == 0 {
				v = byte(r.Uint32())
			}
			b[i] = v
		}
	case 4:
		for i := range b {
			b[i] = byte(r.Uint32())
		}
	}
	return b
}

// TestCanaryGrid writes chunks over a grid of parameters with our
// encoder (every codec × no shuffle, shuffle, bitshuffle, delta,
// bytedelta and trunc_prec ×
// typesize 1, 2, 4, 8, 3 × block sizes from 1 KiB to the whole chunk ×
// split and unsplit, as Blosc2 chunks and, where the format allows, as
// Blosc1 chunks) and decodes each whole and block by block, from memory
// and through an io.ReaderAt, into canaried windows.
func TestCanaryGrid(t *testing.T) {
	canaryGrid(t, []int{CodecBloscLZ, CodecLZ4, CodecLZ4HC, CodecZlib, CodecZstd})
}

// canaryCase is one chunk of the canary grid: its parameters, and the
// kind and seed of its plain data.
type canaryCase struct {
	name  string
	p     Params
	kind  int
	seed  uint64
	trunc bool // trunc_prec: compare with a truncated copy
}

// canaryGrid runs TestCanaryGrid's grid for the given codecs. The cases
// are listed first, in a fixed order, each with its own data seed; each
// codec × filter set is then a parallel subtest, so that the grid takes
// every core (it is the longest test of the codec packages).
func canaryGrid(t *testing.T, codecs []int) {
	type fset struct {
		name   string
		f      [MaxFilters]uint8
		blosc1 bool // also as a Blosc1 chunk
	}
	filters := []fset{
		{"noshuffle", [MaxFilters]uint8{}, true},
		{"shuffle", [MaxFilters]uint8{5: FilterShuffle}, true},
		{"bitshuffle", [MaxFilters]uint8{5: FilterBitShuffle}, true},
		{"delta", [MaxFilters]uint8{5: FilterDelta}, false},
		{"delta+shuffle", [MaxFilters]uint8{4: FilterDelta, 5: FilterShuffle}, false},
		{"shuffle+bytedelta", [MaxFilters]uint8{0: FilterShuffle, 1: FilterByteDelta}, false},
		{"truncprec+shuffle", [MaxFilters]uint8{4: FilterTruncPrec, 5: FilterShuffle}, false},
	}
	typesizes := []int{1, 2, 4, 8, 3}
	const n = 3*16384 + 1237 // not a power of two, nor a multiple of 2, 4 or 8
	blocksizes := []int{1 << 10, 4 << 10, 16 << 10, 0, n}
	splits := []SplitMode{SplitAlways, SplitNever}
	if testing.Short() {
		typesizes = []int{1, 8, 3}
		blocksizes = []int{1 << 10, 16 << 10, n}
	}
	if testkit.RaceEnabled {
		// Go code runs an order of magnitude slower under the detector,
		// which does not see the assembly stores this test is about; the
		// whole grid runs without it (make test's simd step).
		typesizes = []int{1, 3}
		blocksizes = []int{1 << 10, n}
		splits = splits[1:]
	}
	count := 0
	total := 0
	for _, codec := range codecs {
		for _, fs := range filters {
			var cases []canaryCase
			for _, ts := range typesizes {
				for _, bs := range blocksizes {
					for _, sp := range splits {
						for _, b1 := range []bool{false, true} {
							if b1 && !fs.blosc1 {
								continue
							}
							p := Params{Codec: codec, Clevel: 1 + count%9, Typesize: ts, Blocksize: bs, Filters: fs.f, Split: sp, Blosc1: b1}
							switch fs.name {
							case "shuffle+bytedelta":
								p.FiltersMeta[1] = byte(ts)
							case "truncprec+shuffle":
								if ts != 4 && ts != 8 {
									continue // trunc_prec takes floats only
								}
								p.FiltersMeta[4] = 20 // keep 20 mantissa bits: lossy, so compare with a truncated copy
							}
							if codec == CodecZstd && p.Clevel > 6 {
								p.Clevel = 9 // the report's level, once in a while (slow)
								if count%3 != 0 {
									p.Clevel = 4
								}
							}
							name := fmt.Sprintf("ts%d/bs%d/split%d/blosc1=%v/clevel%d", ts, bs, sp, b1, p.Clevel)
							cases = append(cases, canaryCase{name: name, p: p, kind: count, seed: uint64(count), trunc: fs.name == "truncprec+shuffle"})
							count++
						}
					}
				}
			}
			total += len(cases)
			t.Run(CodecName(codec)+"/"+fs.name, func(t *testing.T) {
				t.Parallel()
				for _, c := range cases {
					runCanaryCase(t, c, n)
				}
			})
		}
	}
	t.Logf("%d chunks decoded into canaried windows", total)
}

// runCanaryCase compresses one case's data with our encoder and decodes
// it whole and block by block, from memory and through an io.ReaderAt,
// into canaried windows.
func runCanaryCase(t *testing.T, c canaryCase, n int) {
	t.Helper()
	plain := canaryData(rand.New(rand.NewPCG(10, c.seed)), c.kind, n)
	if c.trunc {
		truncPrec(plain[:len(plain)/c.p.Typesize*c.p.Typesize], c.p.Typesize, 20)
	}
	chunk, err := Compress(nil, plain, c.p)
	if err != nil {
		t.Fatalf("%s: Compress: %v", c.name, err)
	}
	ch, err := NewChunkBytes(chunk)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	decodeCanary(t, c.name, ch, plain)
	rc, err := NewChunk(bytes.NewReader(chunk), int64(len(chunk)))
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	decodeCanary(t, c.name+"/readerat", rc, plain)
}

// TestCanarySpecial covers the chunks with no streams: memcpyed chunks
// (clevel 0), special zeros, NaN, a repeated value and uninitialized
// chunks, VL blocks, and split streams stored as a run or as zeros.
func TestCanarySpecial(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	plain := canaryData(r, 0, 70001)
	check := func(name string, chunk, want []byte) {
		t.Helper()
		c, err := NewChunkBytes(chunk)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		decodeCanary(t, name, c, want)
	}
	for _, b1 := range []bool{false, true} {
		p := Params{Codec: CodecZstd, Clevel: 0, Typesize: 1, Blosc1: b1}
		c, _ := Compress(nil, plain, p)
		check(fmt.Sprintf("memcpyed/blosc1=%v", b1), c, plain)
	}
	// All-zero input: a special zero chunk (Blosc2), zero streams (Blosc1).
	zeros := make([]byte, 300000)
	for _, b1 := range []bool{false, true} {
		c, _ := Compress(nil, zeros, Params{Codec: CodecLZ4, Clevel: 5, Typesize: 4, Blocksize: 16 << 10, Blosc1: b1})
		check(fmt.Sprintf("zeros/blosc1=%v", b1), c, zeros)
	}
	// Streams of one repeated byte: run tokens.
	runs := bytes.Repeat([]byte{7, 7, 7, 7, 9, 9, 9, 9}, 40000)
	p := Params{Codec: CodecZstd, Clevel: 5, Typesize: 4, Blocksize: 32 << 10, Split: SplitAlways}
	p.Filters[5] = FilterShuffle
	c, _ := Compress(nil, runs, p)
	check("run-streams", c, runs)

	nanChunk := func(ts int, n int) ([]byte, []byte) {
		h := extHeader(VersionStable, 0, byte(ts), n, 0, [6]byte{}, 0, SpecialNaN<<4)
		want := make([]byte, n)
		for i := 0; i+ts <= n; i += ts {
			if ts == 8 {
				binary.LittleEndian.PutUint64(want[i:], 0x7FF8000000000000)
			} else {
				binary.LittleEndian.PutUint32(want[i:], 0x7FC00000)
			}
		}
		return finish(h), want
	}
	for _, ts := range []int{4, 8} {
		c, want := nanChunk(ts, ts*99991)
		check(fmt.Sprintf("nan/ts%d", ts), c, want)
	}
	val := []byte{1, 2, 3, 4, 5, 6, 7}
	vc := finish(append(extHeader(VersionStable, 0, 7, 7*77777, 0, [6]byte{}, 0, SpecialValue<<4), val...))
	check("value", vc, bytes.Repeat(val, 77777))
	zc := finish(extHeader(VersionStable, 0, 8, 8*55555, 0, [6]byte{}, 0, SpecialZero<<4))
	check("special-zero", zc, make([]byte, 8*55555))
	uc := finish(extHeader(VersionStable, 0, 8, 8*55555, 0, [6]byte{}, 0, SpecialUninit<<4))
	check("uninit", uc, make([]byte, 8*55555))

	// VL blocks, one per codec with an encoder, and one stored raw.
	for _, codec := range []int{CodecBloscLZ, CodecLZ4, CodecZlib, CodecZstd} {
		blocks := [][]byte{canaryData(r, 0, 9001), canaryData(r, 4, 333), canaryData(r, 1, 20000), canaryData(r, 2, 4097)}
		var all []byte
		for _, b := range blocks {
			all = append(all, b...)
		}
		c := extHeader(VersionVLBlocks, flagDontSplit|codecFormat[codec]<<5, 1, len(all), len(blocks), [6]byte{}, flags2VLBlocks, 0)
		c = append(c, make([]byte, 4*len(blocks))...)
		for i, b := range blocks {
			binary.LittleEndian.PutUint32(c[32+4*i:], uint32(len(c)))
			c = binary.LittleEndian.AppendUint32(c, uint32(len(b)))
			out := make([]byte, len(b))
			k, err := compressor(codec)(out, b, 5)
			if err != nil {
				t.Fatal(err)
			}
			if k <= 0 || k >= len(b) {
				c = append(c, b...)
			} else {
				c = append(c, out[:k]...)
			}
		}
		check("vl/"+CodecName(codec), finish(c), all)
	}
}

// TestCanaryCodecs calls every registered decompressor directly, with and
// without a dictionary where the codec takes one, on streams of many
// lengths, into canaried windows capped at their length, as the chunk
// decoder passes the caller's memory: nothing may reach the guards.
func TestCanaryCodecs(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 12))
	dict := canaryData(r, 0, 8000)
	zenc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	zdenc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderDictRaw(0, dict))
	if err != nil {
		t.Fatal(err)
	}
	type enc struct {
		name  string
		codec int
		dict  []byte
		enc   func(src []byte) []byte
	}
	viaRegistry := func(codec int) func([]byte) []byte {
		return func(src []byte) []byte {
			out := make([]byte, len(src)+1024)
			k, err := compressor(codec)(out, src, 5)
			if err != nil || k <= 0 {
				return nil
			}
			return out[:k]
		}
	}
	encs := []enc{
		{"blosclz", CodecBloscLZ, nil, viaRegistry(CodecBloscLZ)},
		{"lz4", CodecLZ4, nil, viaRegistry(CodecLZ4)},
		{"lz4hc", CodecLZ4, nil, viaRegistry(CodecLZ4HC)},
		{"lz4+dict", CodecLZ4, dict, func(src []byte) []byte { return lz4WithDict(r, dict, src) }},
		{"snappy", CodecSnappy, nil, func(src []byte) []byte { return s2.EncodeSnappy(nil, src) }},
		{"zlib", CodecZlib, nil, viaRegistry(CodecZlib)},
		{"zstd", CodecZstd, nil, func(src []byte) []byte { return zenc.EncodeAll(src, nil) }},
		{"zstd+dict", CodecZstd, dict, func(src []byte) []byte { return zdenc.EncodeAll(src, nil) }},
	}
	sizes := []int{1, 5, 16, 31, 32, 33, 63, 64, 65, 100, 255, 1000, 4095, 4096, 4097, 65535, 65536, 100003, 262144 + 17}
	for _, e := range encs {
		for k, n := range sizes {
			for kind := 0; kind < 5; kind++ {
				var src []byte
				if e.dict != nil && kind == 4 {
					// Mostly copies of the dictionary: matches reach into it.
					src = make([]byte, 0, n)
					for len(src) < n {
						o := r.IntN(len(dict) - 300)
						src = append(src, dict[o:o+min(64+r.IntN(200), n-len(src))]...)
					}
				} else {
					src = canaryData(r, kind+k, n)
				}
				comp := e.enc(src)
				if comp == nil {
					continue // did not compress
				}
				name := fmt.Sprintf("%s/%d/kind%d", e.name, n, kind)
				// As the chunk decoder calls it on the caller's memory:
				// capped at its length (a Decompressor may use spare
				// capacity as scratch).
				cn := testkit.NewCanary(n)
				dst := cn.Dst()
				if err := decompressor(e.codec)(dst[:n:n], comp, e.dict); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if err := cn.Check(); err != nil {
					t.Fatalf("%s: %s", name, err)
				}
				if !bytes.Equal(cn.Dst(), src) {
					t.Fatalf("%s: wrong bytes", name)
				}
			}
		}
	}
}

// lz4WithDict encodes src as one LZ4 block whose matches refer into dict
// (a prefix dictionary, as c-blosc2 writes with use_dict): a greedy
// search for 4-byte matches in dict and in what is already encoded.
func lz4WithDict(r *rand.Rand, dict, src []byte) []byte {
	hist := append(bytes.Clone(dict), src...)
	base := len(dict)
	var out []byte
	lenField := func(n int) {
		for ; n >= 255; n -= 255 {
			out = append(out, 255)
		}
		out = append(out, byte(n))
	}
	emit := func(lits []byte, off, mlen int) {
		tok := byte(min(len(lits), 15)) << 4
		if mlen > 0 {
			tok |= byte(min(mlen-4, 15))
		}
		out = append(out, tok)
		if len(lits) >= 15 {
			lenField(len(lits) - 15)
		}
		out = append(out, lits...)
		if mlen > 0 {
			out = binary.LittleEndian.AppendUint16(out, uint16(off))
			if mlen-4 >= 15 {
				lenField(mlen - 4 - 15)
			}
		}
	}
	table := map[uint32]int{}
	for i := 0; i+4 <= base; i++ {
		table[binary.LittleEndian.Uint32(hist[i:])] = i
	}
	anchor := base
	end := len(hist) - 5 // the last 5 bytes are literals (LZ4's end rule)
	for p := base; p+4 <= end; {
		key := binary.LittleEndian.Uint32(hist[p:])
		cand, ok := table[key]
		table[key] = p
		if !ok || p-cand > 65535 || p-cand == 0 {
			p++
			continue
		}
		m := 4
		for p+m < end && hist[cand+m] == hist[p+m] {
			m++
		}
		emit(hist[anchor:p], p-cand, m)
		p += m
		anchor = p
	}
	emit(hist[anchor:], 0, 0)
	_ = r
	return out
}

// TestCanaryCompressors gives every registered encoder a window of a
// larger buffer, with room for the output and with too little: it may
// write only inside the window.
func TestCanaryCompressors(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	for _, codec := range []int{CodecBloscLZ, CodecLZ4, CodecLZ4HC, CodecZlib, CodecZstd} {
		for kind := 0; kind < 5; kind++ {
			for _, n := range []int{40, 1000, 65536, 100003} {
				src := canaryData(r, kind, n)
				for _, budget := range []int{n / 8, n / 2, n - 1, n + 64} {
					cn := testkit.NewCanary(budget)
					k, err := compressor(codec)(cn.Dst(), src, 1+kind*2)
					if err != nil {
						t.Fatalf("%s: %v", CodecName(codec), err)
					}
					if err := cn.Check(); err != nil {
						t.Fatalf("%s/kind%d/%d bytes into %d: %s", CodecName(codec), kind, n, budget, err)
					}
					if k < 0 || k > budget {
						t.Fatalf("%s: returned %d for a budget of %d", CodecName(codec), k, budget)
					}
				}
			}
		}
	}
}

// TestCanaryZstdDecoders runs the zstd canary tests with the zstd decoder
// that does not run by default, so that both decoders of a cgo build
// (libzstd where it loads, klauspost's pure-Go one) go through them.
// Without cgo only the latter exists, and the other canary tests already
// run it.
func TestCanaryZstdDecoders(t *testing.T) {
	if !libzstdLoaded() {
		t.Skip("built without cgo or libzstd.so.1 missing: only klauspost's decoder exists, covered by the other canary tests")
	}
	// The decoder that runs by default went through TestCanaryGrid and
	// TestCanaryCodecs already; the other one goes through their zstd
	// chunks here. ("grid" returns once its parallel subtests are done,
	// before the decoder is set back.)
	other := !useLibzstd.Load()
	t.Run(map[bool]string{true: "libzstd", false: "klauspost"}[other], func(t *testing.T) {
		defer useLibzstd.Store(useLibzstd.Swap(other))
		t.Run("grid", func(t *testing.T) { canaryGrid(t, []int{CodecZstd}) })
		TestCanaryCodecs(t)
	})
}
