package blosc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/pierrec/lz4/v4"
)

// lz4Chunks returns the LZ4 chunks of the fixtures (bare chunks and the
// chunks of frames), by name.
func lz4Chunks(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, fx := range loadFixtures(t) {
		switch {
		case fx.IsInvalid:
		case fx.Kind == "blosc1chunk":
			b, err := os.ReadFile(fx.Path)
			if err != nil {
				t.Fatal(err)
			}
			out[fx.Name] = b
		case fx.Kind == "b2frame" || fx.Kind == "sframe" || fx.Kind == "b2nd":
			chunks, _ := walkFrame(t, fx.Path)
			for i, fc := range chunks {
				if fc.data != nil {
					out[fmt.Sprintf("%s/chunk%d", fx.Name, i)] = fc.data
				}
			}
		}
	}
	for name, b := range out {
		if h, err := ParseHeader(b); err != nil || h.Codec() != CodecLZ4 {
			delete(out, name)
		}
	}
	return out
}

// TestLZ4PartialStreamReads decodes ranges of every block of the LZ4
// chunks of the fixtures through a reader, with every LZ4 stream read in
// parts (the prefix a range needs, doubled until it holds the cut), and
// compares with the block decoded whole from memory.
func TestLZ4PartialStreamReads(t *testing.T) {
	defer func(n int) { lz4WholeRead = n }(lz4WholeRead)
	lz4WholeRead = 0
	chunks := lz4Chunks(t)
	if len(chunks) < 5 {
		t.Fatalf("only %d LZ4 chunks in the fixtures", len(chunks))
	}
	for name, b := range chunks {
		t.Run(name, func(t *testing.T) {
			mem, err := NewChunkBytes(b)
			if err != nil {
				t.Fatal(err)
			}
			c, err := NewChunk(&recordingReader{b: b}, int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			for i := range c.NumBlocks() {
				bl := c.BlockLen(i)
				whole := make([]byte, bl)
				if err := mem.DecodeBlock(whole, i); err != nil {
					t.Fatal(err)
				}
				for _, w := range rangeWindows(bl, i) {
					got := make([]byte, w[1])
					if err := c.DecodeBlockRange(got, i, w[0]); err != nil {
						t.Fatalf("block %d [%d,+%d): %v", i, w[0], w[1], err)
					}
					if !bytes.Equal(got, whole[w[0]:w[0]+w[1]]) {
						t.Fatalf("block %d [%d,+%d): a decode of streams read in parts differs from the whole block", i, w[0], w[1])
					}
				}
			}
		})
	}
}

// TestLZ4PartialStreamReadsReadLess checks that a 4 KiB range near the
// start of a 1 MiB block of shuffled float64 (as numcodecs writes Zarr
// chunks) reads a prefix of the block's LZ4 streams, not all of them,
// and decodes the same bytes.
func TestLZ4PartialStreamReadsReadLess(t *testing.T) {
	const n = 1 << 20
	plain := make([]byte, n)
	rng := rand.New(rand.NewPCG(1, 2))
	x := 0.0
	for i := 0; i < n; i += 8 {
		x += rng.NormFloat64()
		binary.LittleEndian.PutUint64(plain[i:], math.Float64bits(x))
	}
	p := Params{Codec: CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: n, Blosc1: true}
	p.Filters[5] = FilterShuffle
	b, err := Compress(nil, plain, p)
	if err != nil {
		t.Fatal(err)
	}
	rr := &recordingReader{b: b}
	c, err := NewChunk(rr, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []int{0, 4096, 100_000, n / 2, n - 4096} {
		rr.reads = nil
		got := make([]byte, 4096)
		if err := c.DecodeBlockRange(got, 0, from); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, plain[from:from+4096]) {
			t.Fatalf("[%d,+4096): wrong bytes", from)
		}
		read := 0
		for _, r := range rr.reads {
			read += int(r[1] - r[0])
		}
		if from < n/2 && 2*read > len(b) {
			t.Errorf("[%d,+4096) read %d bytes of a %d-byte chunk in %d reads", from, read, len(b), len(rr.reads))
		}
		t.Logf("[%d,+4096): %d bytes in %d reads, chunk of %d", from, read, len(rr.reads), len(b))
	}
}

// FuzzLZ4Walk checks that a walk of an LZ4 block over growing prefixes
// of it (as read in parts) finds the cut that a walk of the whole block
// finds, the recording walk as the plain one, that the resolver gives
// the prefix's bytes from the records, and that the range of the block's
// output that decodeLZ4Range writes (a prefix, or a range far into it),
// from memory and read in parts, equals the input's, nothing written
// outside the block's output.
func FuzzLZ4Walk(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 8 {
		f.Add(testData(r, i, 2000+i*5003), uint32(i*777), uint16(1+i*100))
	}
	f.Add(literalHeavy(r, 40000), uint32(36000), uint16(100)) // [35299,36000): resolved from its literals
	// The plain bytes of the fixtures' LZ4 chunks (a few, in name order).
	chunks := lz4Chunks(f)
	names := make([]string, 0, len(chunks))
	for name := range chunks {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, name := range names[:min(len(names), 6)] {
		if plain, err := Decompress(chunks[name]); err == nil {
			f.Add(plain[:min(len(plain), 64<<10)], uint32(len(plain)/3+i), uint16(97*i+13))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, need uint32, step uint16) {
		if len(data) > 1<<20 || len(data) == 0 || step == 0 {
			return
		}
		dst := make([]byte, lz4.CompressBlockBound(len(data)))
		k, err := encodeLZ4(dst, data, 5)
		if err != nil || k == 0 {
			return
		}
		src := dst[:k]
		nd := int(need) % (len(data) + 1)
		wcut, wm, wok := lz4Cut(src, nd)
		var w, wr lz4Walker
		rec := getLZ4Rec()
		defer putLZ4Rec(rec)
		for n := min(int(step), len(src)); ; n = min(n+int(step), len(src)) {
			cut, m, found := w.cut(src[:n], nd, n == len(src))
			rcut, rm, rfound := wr.cutRecord(src[:n], nd, n == len(src), rec)
			if rcut != cut || rm != m || rfound != found {
				t.Fatalf("recording walk in steps of %d: cut %d m %d found %d; plain walk: cut %d m %d found %d", step, rcut, rm, rfound, cut, m, found)
			}
			if found == lz4More {
				if n == len(src) {
					t.Fatal("a walk of the whole block asks for more")
				}
				continue
			}
			if (found == lz4Found) != wok || found == lz4Found && (cut != wcut || m != wm) {
				t.Fatalf("walk in steps of %d: cut %d m %d found %d; whole: cut %d m %d ok %v", step, cut, m, found, wcut, wm, wok)
			}
			break
		}
		// The resolver alone, with no budget or share of literals to
		// decline for: every byte of [0, nd) from the records.
		if wok && !rec.full && nd > 0 {
			cn := testkit.NewCanary(len(data))
			r := lz4Resolver{src: src, seqs: rec.seqs[:len(rec.seqs)+1], budget: math.MaxInt}
			if !r.fill(cn.Dst()[:nd], 0, len(rec.seqs)-1) {
				t.Fatal("the resolver ran out of an unbounded budget")
			}
			if err := cn.Check(); err != nil {
				t.Fatalf("resolving [0,%d) of %d %s", nd, len(data), err)
			}
			if !bytes.Equal(cn.Dst()[:nd], data[:nd]) {
				t.Fatalf("resolving [0,%d) of %d differs from the input", nd, len(data))
			}
		}
		from := 0
		if nd > 0 {
			from = nd - 1 - int(step)*7%nd
		}
		for _, fr := range []int{0, from} {
			for _, mem := range []bool{true, false} {
				for _, withPart := range []bool{false, true} {
					cn := testkit.NewCanary(len(data))
					var part []byte
					if withPart {
						part = bytes.Repeat([]byte{0xa5}, len(data))
					}
					s := &blockSrc{mem: src}
					if !mem {
						s = &blockSrc{r: bytes.NewReader(src), buf: make([]byte, len(src))}
					}
					resolved, err := s.decodeLZ4Range(cn.Dst(), part, 0, len(src), nil, fr, nd)
					if err != nil {
						t.Fatalf("decodeLZ4Range([%d,%d) of %d): %v", fr, nd, len(data), err)
					}
					if err := cn.Check(); err != nil {
						t.Fatalf("decodeLZ4Range([%d,%d) of %d) %s", fr, nd, len(data), err)
					}
					got := cn.Dst()
					if resolved {
						if !withPart {
							t.Fatal("resolved into a part it was not given")
						}
						got = part
					}
					if !bytes.Equal(got[fr:nd], data[fr:nd]) {
						t.Fatalf("decodeLZ4Range([%d,%d) of %d, from memory %v, part %v) differs from the input", fr, nd, len(data), mem, withPart)
					}
					if withPart && (bytes.Count(part[:fr], []byte{0xa5}) != fr || bytes.Count(part[nd:], []byte{0xa5}) != len(part)-nd) {
						t.Fatalf("decodeLZ4Range([%d,%d) of %d) wrote its part outside [%d,%d)", fr, nd, len(data), fr, nd)
					}
				}
			}
		}
	})
}

// literalHeavy returns n bytes that LZ4 compresses to long runs of
// literals between short matches, as it does the low mantissa bytes of a
// float64 random walk: random bytes, with a repeat of 12 bytes from up to
// 1000 bytes back every 40 bytes or so.
func literalHeavy(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i++ {
		b[i] = byte(r.Uint32())
		if i > 1000 && r.IntN(40) == 0 {
			i += copy(b[i:min(i+12, n)], b[i-1-r.IntN(1000):]) - 1
		}
	}
	return b
}

// TestResolveLZ4 checks the resolver on the kinds of LZ4 stream a range
// decode meets: mostly literals (the low mantissa bytes of a float64
// walk), runs of one byte, runs of a two-byte pattern (an exponent byte
// that alternates), each resolved, and short matches between short
// literals (text), which may decline. Every range equals the input's
// bytes, and nothing is written outside it.
func TestResolveLZ4(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const n = 128 << 10
	mostlyLiterals := literalHeavy(r, n)
	alternating := make([]byte, n)
	a, b := byte(1), byte(2)
	for i := range alternating {
		if r.IntN(3000) == 0 {
			a, b = byte(r.Uint32()), byte(r.Uint32())
		}
		alternating[i] = a
		if i%2 == 1 {
			alternating[i] = b
		}
	}
	for _, tc := range []struct {
		name     string
		data     []byte
		resolved bool
	}{
		{"mostly literals", mostlyLiterals, true},
		{"runs", testData(r, 5, n), true},
		{"two-byte runs", alternating, true},
		{"text", testData(r, 1, n), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]byte, lz4.CompressBlockBound(n))
			k, err := encodeLZ4(dst, tc.data, 5)
			if err != nil || k == 0 {
				t.Fatalf("encodeLZ4: %d, %v", k, err)
			}
			src := dst[:k]
			for _, from := range []int{1, 4093, n / 3, n / 2, n - 4096} {
				need := from + 512
				if tc.resolved && from > 1 { // [1,513) of mostly literals has no match to cut at
					rec := getLZ4Rec()
					var w lz4Walker
					_, m, found := w.cutRecord(src, need, true, rec)
					cn := testkit.NewCanary(n)
					ok := found == lz4Found && resolveLZ4(cn.Dst(), src, rec, from, need, m)
					putLZ4Rec(rec)
					if !ok {
						t.Fatalf("[%d,%d): not resolved (found %d, m %d)", from, need, found, m)
					}
					if err := cn.Check(); err != nil {
						t.Fatalf("resolving [%d,%d) %s", from, need, err)
					}
					if !bytes.Equal(cn.Dst()[from:need], tc.data[from:need]) {
						t.Fatalf("resolving [%d,%d): wrong bytes", from, need)
					}
				}
				// Through a blockSrc with a compact part, as decodeRange
				// calls it: a range worth resolving lands in the part.
				part := make([]byte, n)
				cs := testkit.NewCanary(n)
				resolved, err := (&blockSrc{mem: src}).decodeLZ4Range(cs.Dst(), part, 0, len(src), nil, from, need)
				if err != nil {
					t.Fatalf("blockSrc.decodeLZ4Range([%d,%d)): %v", from, need, err)
				}
				if want := tc.resolved && wantResolve(nil, from, need); resolved != want {
					t.Fatalf("blockSrc.decodeLZ4Range([%d,%d)): resolved %v, want %v", from, need, resolved, want)
				}
				got := cs.Dst()
				if resolved {
					got = part
				}
				if !bytes.Equal(got[from:need], tc.data[from:need]) {
					t.Fatalf("blockSrc.decodeLZ4Range([%d,%d)): wrong bytes", from, need)
				}
				cn := testkit.NewCanary(n)
				if err := decodeLZ4Range(cn.Dst(), src, nil, from, need); err != nil {
					t.Fatalf("decodeLZ4Range([%d,%d)): %v", from, need, err)
				}
				if err := cn.Check(); err != nil {
					t.Fatalf("decodeLZ4Range([%d,%d)) %s", from, need, err)
				}
				if !bytes.Equal(cn.Dst()[from:need], tc.data[from:need]) {
					t.Fatalf("decodeLZ4Range([%d,%d)): wrong bytes", from, need)
				}
			}
		})
	}
}
