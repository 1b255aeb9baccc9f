package blosclz

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

const benchBlockSize = 256 << 10

// benchShuffle is Blosc's byte shuffle (typesize ts), so that benchmark
// data look like what Blosc hands to the codec.
func benchShuffle(src []byte, ts int) []byte {
	out := make([]byte, len(src))
	q := len(src) / ts
	for i := 0; i < q; i++ {
		for j := 0; j < ts; j++ {
			out[j*q+i] = src[i*ts+j]
		}
	}
	copy(out[q*ts:], src[q*ts:])
	return out
}

// benchFloats is a 256 KiB block of the float64 series sin(i*0.001)*1000,
// little-endian and byte-shuffled.
func benchFloats() []byte {
	b := make([]byte, benchBlockSize)
	for i := 0; i < len(b)/8; i++ {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(math.Sin(float64(i)*0.001)*1000))
	}
	return benchShuffle(b, 8)
}

// benchText is a 256 KiB block of log-like text.
func benchText() []byte { return genText(benchBlockSize, 1) }

var benchInputs = []struct {
	name string
	gen  func() []byte
}{
	{"float64-shuffled", benchFloats},
	{"text", benchText},
}

func BenchmarkCompress(b *testing.B) {
	for _, in := range benchInputs {
		src := in.gen()
		for _, clevel := range []int{5, 9} {
			b.Run(fmt.Sprintf("%s/clevel=%d", in.name, clevel), func(b *testing.B) {
				dst := make([]byte, len(src))
				c := Compress(dst, src, clevel)
				if c == 0 {
					b.Fatal("not compressed")
				}
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					Compress(dst, src, clevel)
				}
				b.ReportMetric(float64(len(src))/float64(c), "ratio")
			})
		}
	}
}

func BenchmarkDecompress(b *testing.B) {
	for _, in := range benchInputs {
		src := in.gen()
		for _, clevel := range []int{5, 9} {
			b.Run(fmt.Sprintf("%s/clevel=%d", in.name, clevel), func(b *testing.B) {
				stream := make([]byte, len(src))
				c := Compress(stream, src, clevel)
				if c == 0 {
					b.Fatal("not compressed")
				}
				stream = stream[:c]
				dst := make([]byte, len(src))
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					if _, err := Decompress(dst, stream); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkDecompressFixtures decodes the C-written streams of the
// fixtures (c-blosc 1.21), all of them per iteration.
func BenchmarkDecompressFixtures(b *testing.B) {
	streams := fixtureStreams(b)
	total, largest := 0, 0
	for _, s := range streams {
		total += s.size
		largest = max(largest, s.size)
	}
	dst := make([]byte, largest)
	b.SetBytes(int64(total))
	for b.Loop() {
		for _, s := range streams {
			if _, err := Decompress(dst[:s.size], s.data); err != nil {
				b.Fatal(err)
			}
		}
	}
}
