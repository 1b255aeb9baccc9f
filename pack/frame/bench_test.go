package frame

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack"
)

var (
	benchOnce  sync.Once
	benchFrame []byte
)

const benchSize = 64 << 20

// benchFrameBytes writes a 64 MiB frame of float64 data (a smooth signal
// plus noise in the low bits) with LZ4 and byte shuffle, in 1 MiB chunks.
func benchFrameBytes(b *testing.B) []byte {
	benchOnce.Do(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		data := make([]byte, benchSize)
		for i := 0; i < benchSize; i += 8 {
			v := math.Sin(float64(i)/1e5)*100 + float64(rng.IntN(1000))/1e6
			binary.LittleEndian.PutUint64(data[i:], math.Float64bits(v))
		}
		p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Split: blosc.SplitForwardCompat}
		p.Filters[5] = blosc.FilterShuffle
		m := &memFile{}
		w, err := NewWriter(m, Params{Chunk: p, ChunkSize: 1 << 20})
		if err != nil {
			panic(err)
		}
		for off := 0; off < benchSize; off += 1 << 20 {
			if err := w.AddChunk(data[off : off+1<<20]); err != nil {
				panic(err)
			}
		}
		if err := w.Close(); err != nil {
			panic(err)
		}
		benchFrame = m.b
	})
	return benchFrame
}

// BenchmarkFrameReadAt reads a 64 MiB LZ4+shuffle float64 frame
// sequentially in 1 MiB requests and randomly in 4 KiB requests, without
// a cache and with every decoded block cached.
func BenchmarkFrameReadAt(b *testing.B) {
	fb := benchFrameBytes(b)
	if f, err := Open(bytes.NewReader(fb), int64(len(fb)), "bench", nil); err == nil {
		b.Logf("frame: %d bytes for %d plain (ratio %.2f), block size %d", len(fb), benchSize, float64(benchSize)/float64(len(fb)), f.Info().Blocksize)
	}
	for _, cached := range []bool{false, true} {
		name := "nocache"
		if cached {
			name = "cached"
		}
		open := func(b *testing.B) *Frame {
			var c pack.BlockCache = pack.NoCache{}
			if cached {
				c = newCache()
			}
			f, err := Open(bytes.NewReader(fb), int64(len(fb)), "bench", c)
			if err != nil {
				b.Fatal(err)
			}
			return f
		}
		b.Run("seq1MiB/"+name, func(b *testing.B) {
			f := open(b)
			buf := make([]byte, 1<<20)
			b.SetBytes(int64(len(buf)))
			off := int64(0)
			for b.Loop() {
				if _, err := f.ReadAt(buf, off); err != nil {
					b.Fatal(err)
				}
				off = (off + int64(len(buf))) % benchSize
			}
		})
		b.Run("rand4KiB/"+name, func(b *testing.B) {
			f := open(b)
			if cached { // warm the cache
				all := make([]byte, benchSize)
				f.ReadAt(all, 0)
			}
			buf := make([]byte, 4096)
			rng := rand.New(rand.NewPCG(3, 4))
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				off := rng.Int64N(benchSize-4096) &^ 4095
				if _, err := f.ReadAt(buf, off); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCOrderReadAt reads a 2-D b2nd array in C order, 1 MiB at a
// time, with every decoded block cached.
func BenchmarkCOrderReadAt(b *testing.B) {
	// A 2-D float64 array of 2048×2048 in 256×256 chunks of 64×64 blocks.
	a := &Array{Shape: []int64{2048, 2048}, ChunkShape: []int32{256, 256}, BlockShape: []int32{64, 64}, Itemsize: 8, Dtype: "<f8"}
	if err := a.derive(); err != nil {
		b.Fatal(err)
	}
	raw := make([]byte, a.nchunks*a.chunkItems*8)
	for i := 0; i+8 <= len(raw); i += 8 {
		binary.LittleEndian.PutUint64(raw[i:], math.Float64bits(float64(i%9973)))
	}
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8}
	p.Filters[5] = blosc.FilterShuffle
	m := writeArray(b, a, raw, p)
	f, err := Open(bytes.NewReader(m.b), int64(len(m.b)), "bench", newCache())
	if err != nil {
		b.Fatal(err)
	}
	cv, _ := f.COrder()
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	off := int64(0)
	for b.Loop() {
		if _, err := cv.ReadAt(buf, off); err != nil {
			b.Fatal(err)
		}
		off = (off + int64(len(buf))) % cv.Size()
	}
}

// BenchmarkWriter streams 16 MiB of float64 data into a new frame with
// LZ4 and byte shuffle in 1 MiB chunks.
func BenchmarkWriter(b *testing.B) {
	data := testData("f64", 16<<20, 1)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Split: blosc.SplitForwardCompat}
	p.Filters[5] = blosc.FilterShuffle
	b.SetBytes(int64(len(data)))
	m := &memFile{}
	for b.Loop() {
		m.b, m.pos = m.b[:0], 0
		w, err := NewWriter(m, Params{Chunk: p, ChunkSize: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range split(data, 1<<20) {
			if err := w.AddChunk(c); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
