package blosclz

import (
	"errors"
	"testing"
)

// maxFuzzSize bounds the declared output size of FuzzDecompress.
const maxFuzzSize = 1 << 20

// fuzzSeeds returns a sample of the C-written fixture streams (every
// seventh, to keep the seed corpus quick) with their decoded sizes.
func fuzzSeeds(f *testing.F) []cStream {
	var out []cStream
	for i, s := range fixtureStreams(f) {
		if i%7 == 0 {
			out = append(out, s)
		}
	}
	return out
}

// FuzzDecompress feeds arbitrary streams and declared sizes (up to 1 MiB)
// to Decompress. It must not panic, must only fail with ErrCorrupt, and
// must agree with the plain reference decoder; streams it accepts that end
// with a literal run must also decode identically in the c-blosc2
// emulation.
func FuzzDecompress(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.data, uint32(s.size))
	}
	for _, g := range generators {
		src := g.gen(3000, 1)
		dst := make([]byte, len(src))
		if c := Compress(dst, src, 9); c > 0 {
			f.Add(dst[:c], uint32(len(src)))
		}
	}
	f.Add([]byte{0x20, 'a', 0x40, 0}, uint32(5))
	f.Add([]byte{0x23, 'a', 'b', 'c', 'd', 0x3f, 255, 0, 0, 0, 'x'}, uint32(8198))
	f.Add([]byte{0x20, 'z', 0xe0, 255, 0, 0, 0, '.'}, uint32(266))
	f.Fuzz(func(t *testing.T, data []byte, size uint32) {
		n := int(size % (maxFuzzSize + 1))
		dst := make([]byte, n)
		got, err := Decompress(dst, data)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("unexpected error %v", err)
		}
		ref := make([]byte, n)
		_, rerr := refDecompress(ref, data)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("Decompress err=%v, reference err=%v", err, rerr)
		}
		if err != nil {
			return
		}
		if got != n || string(dst) != string(ref) {
			t.Fatalf("Decompress returned %d bytes differing from the reference at %d", got, firstDiff(dst, ref))
		}
		if st, err := analyzeStream(data); err == nil && st.lastIsLiteral {
			c := make([]byte, n)
			if cn := cblosc2Decompress(c, data); cn != n || string(c) != string(dst) {
				t.Fatalf("c-blosc2 emulation: %d bytes, want %d", cn, n)
			}
		}
	})
}

// FuzzRoundTrip compresses arbitrary data at every clevel and budget, with
// and without the entropy probe (which otherwise keeps most random inputs
// away from the encoder), and checks that the stream is valid for the C
// decoders and decodes back.
func FuzzRoundTrip(f *testing.F) {
	for i, s := range fuzzSeeds(f) {
		if i%4 != 0 {
			continue
		}
		plain := make([]byte, s.size)
		if _, err := Decompress(plain, s.data); err != nil {
			f.Fatal(err)
		}
		f.Add(plain[:min(len(plain), 20000)], uint8(i), uint16(0))
	}
	for i, g := range generators {
		f.Add(g.gen(1000+i*777, uint64(i)), uint8(i), uint16(i*10))
	}
	f.Add(genZeros(67, 0), uint8(8), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, clevel uint8, shrink uint16) {
		cl := 1 + int(clevel)%9
		budget := max(len(data)-int(shrink), 0)
		for _, probing := range []bool{true, false} {
			dst := make([]byte, budget)
			c := compress(dst, data, cl, probing)
			if c == 0 {
				continue
			}
			if c > budget || c >= len(data) {
				t.Fatalf("wrote %d bytes for %d input bytes, budget %d", c, len(data), budget)
			}
			checkStream(t, dst[:c], data)
		}
	})
}
