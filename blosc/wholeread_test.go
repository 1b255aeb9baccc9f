package blosc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// countingReader is an io.ReaderAt that counts its calls and can end
// early, as a file that shrank does.
type countingReader struct {
	b     []byte
	calls atomic.Int64
}

func (r *countingReader) ReadAt(p []byte, off int64) (int, error) {
	r.calls.Add(1)
	if off >= int64(len(r.b)) {
		return 0, io.EOF
	}
	n := copy(p, r.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestDecodeWholeRead checks that Decode of a chunk behind a reader reads
// its blocks in one call when they fit wholeReadMax, and block by block
// when they do not, and decodes the same bytes either way, for every
// codec, with and without split streams and the delta filter.
func TestDecodeWholeRead(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	plain := walk(rng, 1<<20)
	for _, codec := range []int{CodecBloscLZ, CodecLZ4, CodecZlib, CodecZstd} {
		for _, split := range []SplitMode{SplitAlways, SplitNever} {
			for _, delta := range []bool{false, true} {
				p := Params{Codec: codec, Clevel: 5, Typesize: 8, Blocksize: 32 << 10, Split: split}
				p.Filters[5] = FilterShuffle
				if delta {
					p.Filters[4] = FilterDelta
				}
				t.Run(fmt.Sprintf("codec%d-split%d-delta%v", codec, split, delta), func(t *testing.T) {
					comp, err := Compress(nil, plain, p)
					if err != nil {
						t.Fatal(err)
					}
					r := &countingReader{b: comp}
					c, err := NewChunk(r, int64(len(comp)))
					if err != nil {
						t.Fatal(err)
					}
					if c.NumBlocks() < 2 {
						t.Fatalf("%d blocks: the test needs several", c.NumBlocks())
					}
					before := r.calls.Load()
					got := make([]byte, len(plain))
					if err := c.Decode(got); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, plain) {
						t.Fatal("decoded bytes differ")
					}
					if n := r.calls.Load() - before; n != 1 {
						t.Errorf("Decode made %d reads of %d blocks, want 1", n, c.NumBlocks())
					}
					// Truncated: the whole read fails, and says so.
					short := &countingReader{b: comp[:len(comp)-100]}
					c2, err := NewChunk(short, int64(len(comp)))
					if err != nil {
						t.Fatal(err)
					}
					if err := c2.Decode(got); !errors.Is(err, ErrCorrupt) {
						t.Errorf("Decode of a truncated chunk: %v, want ErrCorrupt", err)
					}
				})
			}
		}
	}
}

// walk returns n bytes of a random walk of float64s.
func walk(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	v := 0.0
	for i := 0; i+8 <= n; i += 8 {
		v += rng.NormFloat64()
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
	}
	return b
}

// TestDecodeLargeChunkPerBlock checks that a chunk whose blocks span more
// than wholeReadMax is read block by block, and decodes right.
func TestDecodeLargeChunkPerBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	plain := walk(rng, 2*wholeReadMax)
	p := Params{Codec: CodecLZ4, Clevel: 1, Typesize: 8, Blocksize: 256 << 10, Split: SplitNever}
	p.Filters[5] = FilterShuffle
	comp, err := Compress(nil, plain, p)
	if err != nil {
		t.Fatal(err)
	}
	r := &countingReader{b: comp}
	c, err := NewChunk(r, int64(len(comp)))
	if err != nil {
		t.Fatal(err)
	}
	before := r.calls.Load()
	got := make([]byte, len(plain))
	if err := c.Decode(got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain) {
		t.Fatal("decoded bytes differ")
	}
	if n := r.calls.Load() - before; n != int64(c.NumBlocks()) {
		t.Errorf("Decode made %d reads of %d blocks, want one per block", n, c.NumBlocks())
	}
}
