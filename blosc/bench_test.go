package blosc

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

// benchFloat64 is a float64 series like a sensor record: smooth, with the
// low mantissa bits of measured data.
func benchFloat64(n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		x := float64(i / 8)
		v := math.Round((math.Sin(x*0.0007)*800+math.Cos(x*0.013)*30)*1024) / 1024
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
	}
	return b
}

// benchText is log-like text.
func benchText(n int) []byte {
	b := make([]byte, 0, n+100)
	for i := 0; len(b) < n; i++ {
		b = fmt.Appendf(b, "2026-11-22T12:%02d:%02d.%03dZ INFO worker-%d processed block %d of chunk %d in %d us\n",
			i/60%60, i%60, i*7%1000, i%8, i, i/16, 100+i*37%900)
	}
	return b[:n]
}

var benchCases = []struct {
	name   string
	data   func(int) []byte
	codec  int
	filter uint8
	ts     int
}{
	{"f64/lz4/shuffle", benchFloat64, CodecLZ4, FilterShuffle, 8},
	{"f64/blosclz/shuffle", benchFloat64, CodecBloscLZ, FilterShuffle, 8},
	{"f64/zstd/shuffle", benchFloat64, CodecZstd, FilterShuffle, 8},
	{"f64/zlib/shuffle", benchFloat64, CodecZlib, FilterShuffle, 8},
	{"f64/lz4/bitshuffle", benchFloat64, CodecLZ4, FilterBitShuffle, 8},
	{"f64/lz4hc/shuffle", benchFloat64, CodecLZ4HC, FilterShuffle, 8},
	{"text/lz4/none", benchText, CodecLZ4, FilterNone, 1},
	{"text/blosclz/none", benchText, CodecBloscLZ, FilterNone, 1},
	{"text/zstd/none", benchText, CodecZstd, FilterNone, 1},
}

const benchChunk = 4 << 20

// BenchmarkCopy is the baseline: copying a chunk-sized buffer.
func BenchmarkCopy(b *testing.B) {
	src := benchFloat64(benchChunk)
	dst := make([]byte, len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		copy(dst, src)
	}
}

// BenchmarkDecode decodes a whole 4 MiB chunk on one goroutine (GB/s of
// plain output); the ratio is reported as a metric.
func BenchmarkDecode(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			src := bc.data(benchChunk)
			p := Params{Codec: bc.codec, Clevel: 5, Typesize: bc.ts, Split: SplitAuto}
			p.Filters[5] = bc.filter
			chunk, err := Compress(nil, src, p)
			if err != nil {
				b.Fatal(err)
			}
			c, err := NewChunkBytes(chunk)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]byte, len(src))
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if err := c.Decode(dst); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(src))/float64(len(chunk)), "ratio")
		})
	}
}

// BenchmarkDecodeBlock decodes one block through an io.ReaderAt, as a
// random read does.
func BenchmarkDecodeBlock(b *testing.B) {
	src := benchFloat64(benchChunk)
	p := Params{Codec: CodecLZ4, Clevel: 5, Typesize: 8, Split: SplitAuto}
	p.Filters[5] = FilterShuffle
	chunk, _ := Compress(nil, src, p)
	c, err := NewChunk(&recordingReaderNoLog{chunk}, int64(len(chunk)))
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, c.BlockSize())
	b.SetBytes(int64(c.BlockSize()))
	i := 0
	for b.Loop() {
		if err := c.DecodeBlock(dst, i%(c.NumBlocks()-1)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

type recordingReaderNoLog struct{ b []byte }

func (r *recordingReaderNoLog) ReadAt(p []byte, off int64) (int, error) {
	return copy(p, r.b[off:]), nil
}

// BenchmarkCompress encodes a 4 MiB chunk (MB/s of plain input).
func BenchmarkCompress(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			src := bc.data(benchChunk)
			p := Params{Codec: bc.codec, Clevel: 5, Typesize: bc.ts, Split: SplitAuto}
			p.Filters[5] = bc.filter
			dst := make([]byte, 0, len(src)+MaxOverhead)
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := Compress(dst[:0], src, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCompressParallel compresses 1 MiB chunks on every core at
// once, as `pack` and a commit through the mount do: run with -cpu 1,2
// to see that the codecs scale (zstd's shared encoder once ran one
// block at a time).
func BenchmarkCompressParallel(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			src := bc.data(1 << 20)
			p := Params{Codec: bc.codec, Clevel: 5, Typesize: bc.ts, Split: SplitAuto}
			p.Filters[5] = bc.filter
			b.SetBytes(int64(len(src)))
			b.RunParallel(func(pb *testing.PB) {
				dst := make([]byte, 0, len(src)+MaxOverhead)
				for pb.Next() {
					if _, err := Compress(dst[:0], src, p); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
