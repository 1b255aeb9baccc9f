package lz4fast_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/blosc/lz4fast"
	"github.com/pierrec/lz4/v4"
)

const fixtureDir = "../../testdata/fixtures"

// fixturePlains returns the plain bytes of the LZ4 Blosc1 chunks that
// c-blosc 1.21 wrote into the fixtures (the manifest's lz4 blosc1chunk
// entries), decoded by this module.
func fixturePlains(tb testing.TB) [][]byte {
	f, err := os.Open(filepath.Join(fixtureDir, "MANIFEST.tsv"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) < 4 || cols[1] != "blosc1chunk" || !strings.Contains(cols[3], "codec=lz4 ") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(fixtureDir, cols[0]))
		if err != nil {
			tb.Fatal(err)
		}
		plain, err := blosc.Decompress(raw)
		if err != nil {
			tb.Fatalf("%s: %v", cols[0], err)
		}
		out = append(out, plain)
	}
	if len(out) < 5 {
		tb.Fatalf("only %d LZ4 Blosc1 chunks in the fixtures", len(out))
	}
	return out
}

// FuzzCompress compresses arbitrary input into an output budget cut
// below the bound by an arbitrary amount, cut from a larger buffer. It
// wants nothing written past the budget, the bytes pierrec/lz4's port of
// LZ4_compress_fast writes (or 0 where that does not fit either), and a
// round trip through pierrec's decoder, which Blosc's LZ4 decoding uses.
// Seeded with the plain bytes of the fixtures' LZ4 chunks, whole and cut
// down, at budgets around what they compress to.
func FuzzCompress(f *testing.F) {
	for _, p := range fixturePlains(f) {
		for _, n := range []int{len(p), 70000, 65547, 65546, 4096, 100, 13} {
			if n <= len(p) {
				f.Add(p[:n], uint32(0))
				f.Add(p[:n], uint32(n/3))
			}
		}
	}
	f.Add([]byte{}, uint32(0))
	f.Add(bytes.Repeat([]byte("abcd"), 20000), uint32(79990))
	f.Fuzz(func(t *testing.T, data []byte, cut uint32) {
		if len(data) > 1<<20 {
			return
		}
		budget := max(lz4fast.CompressBound(len(data))-int(cut%uint32(lz4fast.CompressBound(len(data))+1)), 0)
		const canary = 0x5A
		buf := bytes.Repeat([]byte{canary}, budget+32)
		n := lz4fast.Compress(buf[:budget:budget], data)
		for i := budget; i < len(buf); i++ {
			if buf[i] != canary {
				t.Fatalf("budget %d: byte %d past the budget written", budget, i-budget)
			}
		}
		ref := make([]byte, budget)
		c := lz4.CompressorCCompat{Acceleration: 1}
		k, err := c.CompressBlock(data, ref)
		if err != nil {
			k = 0
		}
		if n < 0 || n > budget || !bytes.Equal(buf[:n], ref[:k]) {
			t.Fatalf("%d input bytes, budget %d: %d bytes, pierrec's port of LZ4_compress_fast %d", len(data), budget, n, k)
		}
		if n == 0 {
			return
		}
		back := make([]byte, len(data))
		m, err := lz4.UncompressBlock(buf[:n], back)
		if err != nil || m != len(data) || !bytes.Equal(back, data) {
			t.Fatalf("round trip: %d of %d bytes, %v", m, len(data), err)
		}
	})
}
