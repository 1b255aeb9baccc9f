package blosc

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// benchWalk is a float64 random walk (the cumulative sum of normal
// steps): six noisy mantissa bytes that LZ4 stores as they are, and two
// bytes of sign and exponent that compress to runs, as numcodecs'
// Blosc LZ4 chunks of such data hold them.
func benchWalk(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	x := 0.0
	for i := 0; i+8 <= n; i += 8 {
		x += r.NormFloat64()
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(x))
	}
	return b
}

// BenchmarkDecodeRange decodes a 4 KiB range at random offsets of a
// 1 MiB block (a float64 walk, LZ4, shuffle, typesize 8: a Zarr chunk
// as numcodecs writes it) with DecodeBlockRange, against decoding the
// whole block into one reused buffer and into fresh memory for each
// read (what a cold read did before, through the block cache), from
// memory and through an io.ReaderAt.
func BenchmarkDecodeRange(b *testing.B) {
	plain := benchWalk(1 << 20)
	chunk, err := Compress(nil, plain, Params{Codec: CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: 1 << 20, Blosc1: true,
		Filters: [MaxFilters]uint8{5: FilterShuffle}})
	if err != nil {
		b.Fatal(err)
	}
	for _, src := range []string{"mem", "readerat"} {
		c, err := NewChunkBytes(chunk)
		if src == "readerat" {
			c, err = NewChunk(bytes.NewReader(chunk), int64(len(chunk)))
		}
		if err != nil {
			b.Fatal(err)
		}
		bl := c.BlockLen(0)
		r := rand.New(rand.NewPCG(3, 4))
		b.Run(src+"/range4K", func(b *testing.B) {
			dst := make([]byte, 4096)
			b.SetBytes(4096)
			for b.Loop() {
				if err := c.DecodeBlockRange(dst, 0, r.IntN(bl-4096)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(src+"/whole", func(b *testing.B) {
			dst := make([]byte, bl)
			b.SetBytes(4096)
			for b.Loop() {
				if err := c.DecodeBlock(dst, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(src+"/whole-fresh", func(b *testing.B) {
			b.SetBytes(4096)
			for b.Loop() {
				if err := c.DecodeBlock(make([]byte, bl), 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
