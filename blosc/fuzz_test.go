package blosc

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/pierrec/lz4/v4"
)

// fuzzSeeds returns every chunk of the fixtures (bare and inside frames)
// and a few of our own.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, fx := range loadFixtures(f) {
		switch {
		case fx.Kind == "blosc1chunk" || (fx.IsInvalid && bytes.HasSuffix([]byte(fx.Name), []byte(".blosc"))):
			b, err := os.ReadFile(fx.Path)
			if err != nil {
				f.Fatal(err)
			}
			seeds = append(seeds, b)
		case !fx.IsInvalid && (fx.Kind == "b2frame" || fx.Kind == "sframe" || fx.Kind == "b2nd"):
			chunks, _ := walkFrame(f, fx.Path)
			for i, c := range chunks {
				if c.data != nil && i < 3 {
					seeds = append(seeds, c.data)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20; i++ {
		p := randomParams(r)
		c, err := Compress(nil, testData(r, i, 3000+i*97), p)
		if err == nil {
			seeds = append(seeds, c)
		}
	}
	return seeds
}

// FuzzParseHeader checks that header parsing never panics and that an
// accepted header is self-consistent.
func FuzzParseHeader(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s[:min(len(s), 32)])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			return
		}
		if h.Nbytes < 0 || h.Cbytes < int32(h.Len()) || h.Typesize == 0 {
			t.Fatalf("accepted inconsistent header %v", h)
		}
	})
}

// maxFuzzOutput bounds what one fuzz input may decode to, so that special
// chunks claiming 2 GiB of zeros do not exhaust memory.
const maxFuzzOutput = 16 << 20

// FuzzDecode decodes arbitrary chunks whole and block by block, through
// memory and through an io.ReaderAt, each into a window of a larger
// buffer whose front and spare capacity hold a guard pattern
// (testkit.Canary); it must never panic, never write outside the window
// (whether the chunk decodes or not), and both paths must agree.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		mem := testkit.StartAlloc()
		c, err := NewChunkBytes(b)
		if err != nil {
			mem.Check(t, len(b), 0)
			return
		}
		if c.Nbytes > maxFuzzOutput {
			mem.Check(t, len(b), 0)
			return
		}
		// The target's own: the whole chunk and every block, each in a
		// canaried window, and the guard pattern.
		// (And each block's byte planes twice: through the reader, in a
		// canaried window, and from memory.)
		own := 4*uint64(c.Nbytes) + uint64(2*c.NumBlocks()+1)*(testkit.CanaryFront+testkit.CanaryBack) + 1<<20 + uint64(c.Nbytes)
		defer mem.Check(t, len(b), own)
		cf := testkit.NewCanary(int(c.Nbytes))
		full := cf.Dst()
		fullErr := c.Decode(full)
		if err := cf.Check(); err != nil {
			t.Fatalf("Decode (err %v) %s", fullErr, err)
		}
		rc, err := NewChunk(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("NewChunkBytes accepted what NewChunk refused: %v", err)
		}
		var total int
		for i := 0; i < rc.NumBlocks(); i++ {
			cb := testkit.NewCanary(rc.BlockLen(i))
			dst := cb.Dst()
			total += len(dst)
			err := rc.DecodeBlock(dst, i)
			if cerr := cb.Check(); cerr != nil {
				t.Fatalf("DecodeBlock(%d) (err %v) %s", i, err, cerr)
			}
			if fullErr == nil {
				if err != nil {
					t.Fatalf("block %d: %v, but the whole chunk decoded", i, err)
				}
				off := rc.BlockOffset(i)
				if !bytes.Equal(dst, full[off:off+int64(len(dst))]) {
					t.Fatalf("block %d differs from the whole decode", i)
				}
			}
			fuzzPlanes(t, c, rc, i, fullErr == nil, dst)
		}
		if rc.NumBlocks() > 0 && total != int(c.Nbytes) {
			t.Fatalf("blocks add up to %d, nbytes %d", total, c.Nbytes)
		}
		if c.Codec() == CodecZstd && libzstdLoaded() {
			// The other zstd decoder (libzstd and klauspost's, whichever
			// did not run above) stays in the window too, and agrees on
			// the bytes where both decode.
			old := useLibzstd.Load()
			useLibzstd.Store(!old)
			defer useLibzstd.Store(old)
			co := testkit.NewCanary(int(c.Nbytes))
			otherErr := c.Decode(co.Dst())
			if err := co.Check(); err != nil {
				t.Fatalf("Decode with the other zstd decoder (err %v) %s", otherErr, err)
			}
			if fullErr == nil && otherErr == nil && !bytes.Equal(co.Dst(), full) {
				t.Fatal("the two zstd decoders decode different bytes")
			}
		}
	})
}

// fuzzPlanes decodes block i as byte planes through the reader of rc
// (a stored stream read straight into its plane, readPlanes) into a
// canaried window, and from memory (c): both stay in their windows,
// fail or succeed together and agree; where the chunk decoded (ok), the
// planes unshuffle to the block's bytes, plain.
func fuzzPlanes(t *testing.T, c, rc *Chunk, i int, ok bool, plain []byte) {
	t.Helper()
	if i > 0 && rc.NeedsBlock0() {
		return
	}
	bl := rc.BlockLen(i)
	cp := testkit.NewCanary(bl)
	rerr := rc.DecodeBlockPlanes(cp.Dst(), i)
	if cerr := cp.Check(); cerr != nil {
		t.Fatalf("DecodeBlockPlanes(%d) through a reader (err %v) %s", i, rerr, cerr)
	}
	mp := make([]byte, bl)
	merr := c.DecodeBlockPlanes(mp, i)
	if (rerr == nil) != (merr == nil) {
		t.Fatalf("DecodeBlockPlanes(%d): through a reader %v, from memory %v", i, rerr, merr)
	}
	if rerr != nil {
		if ok {
			t.Fatalf("DecodeBlockPlanes(%d): %v, but the whole chunk decoded", i, rerr)
		}
		return
	}
	if !bytes.Equal(cp.Dst(), mp) {
		t.Fatalf("DecodeBlockPlanes(%d): through a reader and from memory differ", i)
	}
	if ts := rc.PlanesTypesize(i); ok && ts > 1 {
		back := make([]byte, bl)
		UnshufflePlanes(back, mp, ts, 0)
		if !bytes.Equal(back, plain) {
			t.Fatalf("DecodeBlockPlanes(%d): the planes do not unshuffle to the block", i)
		}
	}
}

// FuzzDecodeRange decodes byte ranges of the blocks of arbitrary chunks,
// through memory and through an io.ReaderAt, each into a canaried window:
// DecodeBlockRange must never panic nor write outside the window, and
// where the whole block decodes the range must equal its bytes.
func FuzzDecodeRange(f *testing.F) {
	for i, s := range fuzzSeeds(f) {
		f.Add(s, uint32(i*7919), uint16(4096))
	}
	f.Fuzz(func(t *testing.T, b []byte, at uint32, n uint16) {
		c, err := NewChunkBytes(b)
		if err != nil || c.Nbytes > maxFuzzOutput || c.NumBlocks() == 0 {
			return
		}
		rc, err := NewChunk(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("NewChunkBytes accepted what NewChunk refused: %v", err)
		}
		i := int(at % uint32(c.NumBlocks()))
		bl := c.BlockLen(i)
		if bl == 0 {
			return
		}
		from := int(at/uint32(c.NumBlocks())) % bl
		ln := min(int(n), bl-from)
		whole := make([]byte, bl)
		wholeErr := c.DecodeBlock(whole, i)
		for _, cc := range []*Chunk{c, rc} {
			cn := testkit.NewCanary(ln)
			err := cc.DecodeBlockRange(cn.Dst(), i, from)
			if cerr := cn.Check(); cerr != nil {
				t.Fatalf("DecodeBlockRange(block %d, [%d,+%d)) (err %v) %s", i, from, ln, err, cerr)
			}
			if wholeErr == nil {
				if err != nil {
					t.Fatalf("DecodeBlockRange(block %d, [%d,+%d)): %v, but the block decoded", i, from, ln, err)
				}
				if !bytes.Equal(cn.Dst(), whole[from:from+ln]) {
					t.Fatalf("DecodeBlockRange(block %d, [%d,+%d)) differs from the block", i, from, ln)
				}
			}
		}
	})
}

// FuzzLZ4Prefix checks the early stop of LZ4 streams: a prefix decode of
// an LZ4 block (compressed from the input, or the input itself as a
// block), and a decode of a range far into it (decodeLZ4Range, which may
// resolve it from the literals), write nothing outside the block's
// output, and where the whole block decodes, they equal its bytes.
func FuzzLZ4Prefix(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 12 {
		f.Add(testData(r, i, 1000+i*4099), uint32(i*333), false)
	}
	f.Add([]byte{0x1f, 'a', 0x01, 0x00, 0xff, 0x10, 'b'}, uint32(3), true)
	f.Fuzz(func(t *testing.T, data []byte, need uint32, raw bool) {
		if len(data) > 1<<20 {
			return
		}
		src, size := data, 4*len(data)+64
		if !raw {
			dst := make([]byte, len(data)+len(data)/255+16)
			k, err := encodeLZ4(dst, data, 5)
			if err != nil || k == 0 {
				return
			}
			src, size = dst[:k], len(data)
		}
		if size == 0 || len(src) == 0 {
			return
		}
		whole := make([]byte, size)
		wn, wholeErr := lz4.UncompressBlock(src, whole)
		nd := int(need) % (size + 1)
		cn := testkit.NewCanary(size)
		err := decodeLZ4Prefix(cn.Dst(), src, nil, nd)
		if cerr := cn.Check(); cerr != nil {
			t.Fatalf("decodeLZ4Prefix(need %d of %d) (err %v) %s", nd, size, err, cerr)
		}
		if wholeErr == nil && wn == size {
			if err != nil {
				t.Fatalf("decodeLZ4Prefix(need %d of %d): %v, but the block decodes", nd, size, err)
			}
			if !bytes.Equal(cn.Dst()[:nd], whole[:nd]) {
				t.Fatalf("decodeLZ4Prefix(need %d of %d) differs from the whole block", nd, size)
			}
			if !raw && !bytes.Equal(whole, data) {
				t.Fatal("the LZ4 round trip differs")
			}
		}
		// A range far into the output (resolved from the literals where
		// that pays): the same bytes, nothing written outside.
		from := nd - 1 - nd/9
		if from < 0 {
			return
		}
		cr := testkit.NewCanary(size)
		err = decodeLZ4Range(cr.Dst(), src, nil, from, nd)
		if cerr := cr.Check(); cerr != nil {
			t.Fatalf("decodeLZ4Range([%d,%d) of %d) (err %v) %s", from, nd, size, err, cerr)
		}
		if wholeErr == nil && wn == size {
			if err != nil {
				t.Fatalf("decodeLZ4Range([%d,%d) of %d): %v, but the block decodes", from, nd, size, err)
			}
			if !bytes.Equal(cr.Dst()[from:nd], whole[from:nd]) {
				t.Fatalf("decodeLZ4Range([%d,%d) of %d) differs from the whole block", from, nd, size)
			}
		}
	})
}
