package blosc

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/bloscfs/bloscfs/shuffle"
	"github.com/pierrec/lz4/v4"
)

// extHeader builds a 32-byte Blosc2 header.
func extHeader(version, flags, typesize byte, nbytes, blocksize int, filters [6]byte, flags2, b2flags byte) []byte {
	h := make([]byte, 32)
	h[0], h[1], h[2], h[3] = version, 1, flags|flagShuffle|flagBitshuffle, typesize
	binary.LittleEndian.PutUint32(h[4:], uint32(nbytes))
	binary.LittleEndian.PutUint32(h[8:], uint32(blocksize))
	copy(h[16:], filters[:])
	h[30], h[31] = flags2, b2flags
	return h
}

func finish(c []byte) []byte {
	binary.LittleEndian.PutUint32(c[12:], uint32(len(c)))
	return c
}

// TestVLBlocks decodes a hand-built format-6 chunk with variable-length
// blocks (one compressed with LZ4 after shuffle, one stored raw, one
// compressed), as c-blosc2 3.x's blosc2_vlcompress_ctx writes them.
func TestVLBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	blocks := [][]byte{testData(r, 0, 8000), testData(r, 2, 333), testData(r, 5, 20000)}
	var plain []byte
	for _, b := range blocks {
		plain = append(plain, b...)
	}
	c := extHeader(VersionVLBlocks, flagDontSplit|1<<5, 8, len(plain), len(blocks), [6]byte{0, 0, 0, 0, 0, FilterShuffle}, flags2VLBlocks, 0)
	c = append(c, make([]byte, 4*len(blocks))...)
	for i, b := range blocks {
		binary.LittleEndian.PutUint32(c[32+4*i:], uint32(len(c)))
		c = binary.LittleEndian.AppendUint32(c, uint32(len(b)))
		sh := make([]byte, len(b))
		shuffle.Shuffle(sh, b, 8)
		out := make([]byte, lz4.CompressBlockBound(len(b)))
		n, _ := lz4.CompressBlock(sh, out, nil)
		if i == 1 || n == 0 || n >= len(b) {
			c = append(c, sh...) // stored raw: compressed length == block length
		} else {
			c = append(c, out[:n]...)
		}
	}
	c = finish(c)
	got, err := Decompress(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain) {
		t.Fatal("VL-block chunk decodes wrong")
	}
	ch, _ := NewChunkBytes(c)
	if ch.NumBlocks() != 3 || ch.BlockLen(1) != 333 || ch.BlockOffset(2) != 8333 || ch.BlockAt(8333) != 2 || ch.BlockAt(8332) != 1 {
		t.Fatalf("VL geometry: %d blocks, len(1)=%d, off(2)=%d", ch.NumBlocks(), ch.BlockLen(1), ch.BlockOffset(2))
	}
	checkBlocks(t, c, plain)

	// Block sizes that do not add up to nbytes are corrupt.
	bad := bytes.Clone(c)
	binary.LittleEndian.PutUint32(bad[4:], uint32(len(plain)+1))
	if _, err := Decompress(bad); err == nil {
		t.Fatal("VL chunk with wrong nbytes accepted")
	}
}

// TestLZ4Dict decodes a chunk whose LZ4 stream refers into the chunk's
// prefix dictionary (c-blosc2 ≥ 3.0 with use_dict and lz4).
func TestLZ4Dict(t *testing.T) {
	dict := []byte("a prefix dictionary holds sample bytes that streams refer back into, 0123456789")
	// One LZ4 sequence: no literals, a 50-byte match starting 10 bytes into
	// the dictionary; then the 5 closing literals.
	stream := []byte{0x0F, byte(len(dict) - 10), 0, 50 - 4 - 15, 0x50, 't', 'a', 'i', 'l', '!'}
	want := append(bytes.Clone(dict[10:60]), "tail!"...)
	c := extHeader(VersionStable, flagDontSplit|1<<5, 1, len(want), len(want), [6]byte{}, 0, b2flagDict)
	bstart := 32 + 4 + 4 + len(dict)
	c = binary.LittleEndian.AppendUint32(c, uint32(bstart))
	c = binary.LittleEndian.AppendUint32(c, uint32(len(dict)))
	c = append(c, dict...)
	c = binary.LittleEndian.AppendUint32(c, uint32(len(stream)))
	c = append(c, stream...)
	c = finish(c)
	got, err := Decompress(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	ch, _ := NewChunkBytes(c)
	if !bytes.Equal(ch.Dict(), dict) {
		t.Fatal("Dict() differs")
	}
}

// TestByteDelta34 checks the SIMD-era buggy bytedelta: the running sum
// restarts for the tail of each stream past its last whole 16 bytes.
func TestByteDelta34(t *testing.T) {
	// Two streams of 20 bytes, each all ones: the fixed filter gives
	// 1…20; the buggy one 1…16 then 1…4.
	b := bytes.Repeat([]byte{1}, 40)
	byteDeltaDecode(b, 2, true)
	for s := 0; s < 2; s++ {
		for i := 0; i < 20; i++ {
			want := byte(i + 1)
			if i >= 16 {
				want = byte(i - 15)
			}
			if b[s*20+i] != want {
				t.Fatalf("stream %d byte %d = %d, want %d", s, i, b[s*20+i], want)
			}
		}
	}
	b = bytes.Repeat([]byte{1}, 40)
	byteDeltaDecode(b, 2, false)
	if b[19] != 20 || b[39] != 20 {
		t.Fatalf("bytedelta 35: got %d, %d", b[19], b[39])
	}
}

// TestBlosc1AlwaysSplit decodes a version-2 chunk that c-blosc 1.x in
// ALWAYS split mode writes for typesize > 16 (FORMATS P3): the reference
// rule says one stream, the data are split; we fall back to split.
func TestBlosc1AlwaysSplit(t *testing.T) {
	const ts, n = 32, 4096
	plain := testData(rand.New(rand.NewPCG(1, 1)), 2, n)
	sh := make([]byte, n)
	shuffle.Shuffle(sh, plain, ts)
	c := make([]byte, 16)
	c[0], c[1], c[2], c[3] = VersionBlosc1, 1, flagShuffle, ts // blosclz, split
	binary.LittleEndian.PutUint32(c[4:], n)
	binary.LittleEndian.PutUint32(c[8:], n)
	c = binary.LittleEndian.AppendUint32(c, 20)
	neblock := n / ts
	for s := 0; s < ts; s++ {
		c = binary.LittleEndian.AppendUint32(c, uint32(neblock))
		c = append(c, sh[s*neblock:(s+1)*neblock]...)
	}
	c = finish(c)
	got, err := Decompress(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain) {
		t.Fatal("ALWAYS-split chunk decodes wrong")
	}
}

// TestSpecialValuePhase checks that a VALUE chunk's pattern stays in phase
// for blocks that start at any offset.
func TestSpecialValuePhase(t *testing.T) {
	val := []byte{1, 2, 3, 4, 5, 6, 7}
	n := 7 * 100000
	c := extHeader(VersionStable, 0, 7, n, 0, [6]byte{}, 0, SpecialValue<<4)
	c = finish(append(c, val...))
	got, err := Decompress(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.Repeat(val, 100000)) {
		t.Fatal("VALUE chunk decodes wrong")
	}
	checkBlocks(t, c, got)
}
