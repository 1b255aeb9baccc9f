package lz4fast

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/pierrec/lz4/v4"
)

// inputs are the kinds of data Blosc hands the encoder: shuffled float64
// streams, text, runs, noise, and mixtures, in sizes around the byU16 /
// byU32 boundary and Blosc's stream sizes.
func inputs() []struct {
	name string
	data []byte
} {
	var out []struct {
		name string
		data []byte
	}
	add := func(name string, b []byte) {
		out = append(out, struct {
			name string
			data []byte
		}{name, b})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	walk := make([]byte, 256<<10)
	x := 0.0
	for i := 0; i+8 <= len(walk); i += 8 {
		x += rng.NormFloat64()
		binary.LittleEndian.PutUint64(walk[i:], math.Float64bits(x))
	}
	var text []byte
	for i := 0; len(text) < 300<<10; i++ {
		text = strconv.AppendInt(text, int64(i), 10)
		text = append(text, ',')
		text = strconv.AppendFloat(text, 20+rng.NormFloat64()*3, 'f', 3, 64)
		text = append(text, ",station-"...)
		text = strconv.AppendInt(text, int64(i%37), 10)
		text = append(text, '\n')
	}
	noise := make([]byte, 200<<10)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	runs := make([]byte, 150<<10)
	for i := range runs {
		runs[i] = byte(i / 1000)
	}
	mixed := append(append(append([]byte{}, noise[:70000]...), runs[:70000]...), text[:70000]...)
	for _, n := range []int{0, 1, 5, 12, 13, 14, 20, 100, 1000, 4096, 32 << 10, 65535, 65546, 65547, 65548, 100000, 128 << 10, 200000} {
		for _, s := range []struct {
			name string
			b    []byte
		}{{"walk", walk}, {"text", text}, {"noise", noise}, {"runs", runs}, {"mixed", mixed}} {
			if n <= len(s.b) {
				add(fmt.Sprintf("%s/%d", s.name, n), s.b[:n])
			}
		}
	}
	// The bytes of one position of the shuffled walk: a stream of a
	// split Blosc block.
	for _, k := range []int{0, 5, 6, 7} {
		st := make([]byte, 0, len(walk)/8)
		for i := k; i < len(walk); i += 8 {
			st = append(st, walk[i])
		}
		add(fmt.Sprintf("walkbyte%d", k), st)
	}
	return out
}

// reference compresses with pierrec's port of LZ4_compress_fast, which
// its tests check against lz4 1.10's own output.
func reference(src []byte, budget int) []byte {
	c := lz4.CompressorCCompat{Acceleration: 1}
	dst := make([]byte, budget)
	n, err := c.CompressBlock(src, dst)
	if err != nil || n == 0 {
		return nil
	}
	return dst[:n]
}

// TestAsLZ4CompressFast wants, for every input and for output budgets
// from the bound down to below what fits, the bytes of the reference, or
// 0 where the reference does not fit, and a round trip through pierrec's
// decoder (the one Blosc's decoder uses).
func TestAsLZ4CompressFast(t *testing.T) {
	for _, in := range inputs() {
		full := reference(in.data, CompressBound(len(in.data)))
		budgets := []int{CompressBound(len(in.data)), len(in.data), len(in.data) - 1, len(full), len(full) - 1, len(full) / 2, 0}
		for _, budget := range budgets {
			if budget < 0 {
				continue
			}
			want := reference(in.data, budget)
			dst := make([]byte, budget)
			n := Compress(dst, in.data)
			if !bytes.Equal(dst[:n], want) {
				t.Fatalf("%s, budget %d: %d bytes, the reference %d", in.name, budget, n, len(want))
			}
			if n == 0 {
				continue
			}
			back := make([]byte, len(in.data))
			k, err := lz4.UncompressBlock(dst[:n], back)
			if err != nil || k != len(in.data) || !bytes.Equal(back, in.data) {
				t.Fatalf("%s, budget %d: round trip: %d bytes, %v", in.name, budget, k, err)
			}
		}
	}
}

// TestStaysInDst compresses into dst cut from a larger buffer for every
// budget from nothing to the bound, and wants the bytes past dst
// untouched: the encoder copies literals 8 bytes at a time and (without
// the purego tag) stores without bounds checks.
func TestStaysInDst(t *testing.T) {
	const canary = 0xA5
	for _, in := range inputs() {
		if len(in.data) > 70000 || len(in.data) < 12 {
			continue
		}
		full := len(reference(in.data, CompressBound(len(in.data))))
		step := max(1, full/50)
		for budget := 0; budget <= CompressBound(len(in.data)); budget += step {
			if budget > full+step && budget < CompressBound(len(in.data))-step {
				budget = CompressBound(len(in.data)) - step
			}
			buf := bytes.Repeat([]byte{canary}, budget+64)
			n := Compress(buf[:budget:budget], in.data)
			if n > budget {
				t.Fatalf("%s, budget %d: returned %d", in.name, budget, n)
			}
			for i := budget; i < len(buf); i++ {
				if buf[i] != canary {
					t.Fatalf("%s, budget %d: byte %d past dst overwritten", in.name, budget, i-budget)
				}
			}
		}
	}
}

func TestTooLarge(t *testing.T) {
	// Not allocated: a slice header claiming MaxInputSize+1 bytes is
	// enough, Compress must refuse before reading.
	var b [1]byte
	src := b[:]
	if Compress(make([]byte, 16), src[:0]) != 1 {
		t.Fatal("empty input: want one token")
	}
	if Compress(nil, src[:0]) != 0 {
		t.Fatal("empty input, no room: want 0")
	}
}
