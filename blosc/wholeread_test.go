package blosc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
)

// countingReader is an io.ReaderAt that counts its calls.
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

// decodeCounting compresses plain with p, decodes it with Decode through
// a countingReader, checks the bytes, and returns how many reads Decode
// made and how many blocks the chunk has.
func decodeCounting(t *testing.T, plain []byte, p Params) (comp []byte, reads int64, blocks int) {
	t.Helper()
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
	return comp, r.calls.Load() - before, c.NumBlocks()
}

// TestDecodeWholeRead checks that Decode of a chunk behind a reader reads
// its blocks in one call when they fit wholeReadMax, and decodes the same
// bytes, for every codec, with and without split streams and the delta
// filter, at typesizes 4 and 8, with a short last block or none; and
// that a truncated chunk is an error.
func TestDecodeWholeRead(t *testing.T) {
	for _, size := range []int{1 << 20, 1<<20 + 1000} {
		plain := benchWalk(size)
		for _, ts := range []int{4, 8} {
			for _, codec := range []int{CodecBloscLZ, CodecLZ4, CodecZlib, CodecZstd} {
				for _, split := range []SplitMode{SplitAlways, SplitNever} {
					for _, delta := range []bool{false, true} {
						p := Params{Codec: codec, Clevel: 5, Typesize: ts, Blocksize: 32 << 10, Split: split}
						p.Filters[5] = FilterShuffle
						if delta {
							p.Filters[4] = FilterDelta
						}
						t.Run(fmt.Sprintf("%d-ts%d-%s-split%d-delta%v", size, ts, CodecName(codec), split, delta), func(t *testing.T) {
							comp, reads, blocks := decodeCounting(t, plain, p)
							if blocks < 2 {
								t.Fatalf("%d blocks: the test needs several", blocks)
							}
							if reads != 1 {
								t.Errorf("Decode made %d reads of %d blocks, want 1", reads, blocks)
							}
							short := &countingReader{b: comp[:len(comp)-100]}
							c, err := NewChunk(short, int64(len(comp)))
							if err != nil {
								t.Fatal(err)
							}
							if err := c.Decode(make([]byte, len(plain))); !errors.Is(err, ErrCorrupt) {
								t.Errorf("Decode of a truncated chunk: %v, want ErrCorrupt", err)
							}
						})
					}
				}
			}
		}
	}
}

// TestDecodeLargeChunkPerBlock checks that a chunk whose blocks span more
// than wholeReadMax is read block by block, and decodes right.
func TestDecodeLargeChunkPerBlock(t *testing.T) {
	p := Params{Codec: CodecLZ4, Clevel: 1, Typesize: 8, Blocksize: 256 << 10, Split: SplitNever}
	p.Filters[5] = FilterShuffle
	_, reads, blocks := decodeCounting(t, benchWalk(2*wholeReadMax), p)
	if reads != int64(blocks) {
		t.Errorf("Decode made %d reads of %d blocks, want one per block", reads, blocks)
	}
}

// TestZeroStreamsLent decodes split blocks whose high-byte streams are
// all zeros (small integers: stored as zero runs), at typesizes with a
// lending unshuffle kernel (4, 8) and one without (2), with streams
// shorter than zeroStream (lent from it) and longer (cleared in place),
// right after decoding blocks of the same size whose streams are all
// noise, so that the pooled scratch they decode through holds garbage:
// every byte must come out right, and zeroStream must stay zeros.
func TestZeroStreamsLent(t *testing.T) {
	noise := make([]byte, 2<<20)
	for i := range noise {
		noise[i] = byte(i*2654435761>>13) | 1
	}
	for _, ts := range []int{2, 4, 8} {
		for _, bsize := range []int{64 << 10, 2 * len(zeroStream) * 8} {
			for _, codec := range []int{CodecZstd, CodecLZ4} {
				plain := make([]byte, 2<<20)
				for i := 0; i < len(plain); i += ts {
					plain[i] = byte(i / ts * 7 % 251) // only the low byte varies
				}
				p := Params{Codec: codec, Clevel: 5, Typesize: ts, Blocksize: bsize, Split: SplitAlways}
				p.Filters[5] = FilterShuffle
				for _, src := range [][]byte{noise, plain} {
					comp, err := Compress(nil, src, p)
					if err != nil {
						t.Fatal(err)
					}
					c, err := NewChunkBytes(comp)
					if err != nil {
						t.Fatal(err)
					}
					got := bytes.Repeat([]byte{0xaa}, len(src))
					if err := c.Decode(got); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, src) {
						t.Errorf("typesize %d, block %d, %s: decoded bytes differ", ts, bsize, CodecName(codec))
					}
				}
			}
		}
	}
	for i, b := range zeroStream {
		if b != 0 {
			t.Fatalf("zeroStream[%d] = %#x: something wrote into the lent zeros", i, b)
		}
	}
}

// inPlaceReader is a countingReader that also lends its bytes in place,
// as a memory-mapped file does, counting the loans.
type inPlaceReader struct {
	countingReader
	loans atomic.Int64
}

func (r *inPlaceReader) ReadInPlace(off, n int64, fn func([]byte) error) (bool, error) {
	r.loans.Add(1)
	return true, fn(r.b[off : off+n : off+n])
}

// TestDecodeInPlaceReader checks Decode behind a reader that lends its
// bytes in place (BLOSCFS_MMAP=1): codecs decode from the loan, block by
// block, with no read; zstd with libzstd, which must never decode from a
// mapping (a fault inside C code cannot become an error), reads the
// chunk instead, in one read.
func TestDecodeInPlaceReader(t *testing.T) {
	plain := benchWalk(1 << 20)
	for _, codec := range []int{CodecLZ4, CodecZstd} {
		p := Params{Codec: codec, Clevel: 5, Typesize: 8, Blocksize: 64 << 10, Split: SplitAlways}
		p.Filters[5] = FilterShuffle
		comp, err := Compress(nil, plain, p)
		if err != nil {
			t.Fatal(err)
		}
		r := &inPlaceReader{countingReader: countingReader{b: comp}}
		c, err := NewChunk(r, int64(len(comp)))
		if err != nil {
			t.Fatal(err)
		}
		reads, loans := r.calls.Load(), r.loans.Load()
		got := make([]byte, len(plain))
		if err := c.Decode(got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, plain) {
			t.Fatalf("%s: decoded bytes differ", CodecName(codec))
		}
		reads, loans = r.calls.Load()-reads, r.loans.Load()-loans
		if codec == CodecZstd && libzstd() != nil {
			if loans != 0 || reads != 1 {
				t.Errorf("zstd with libzstd: %d loans and %d reads, want none and one", loans, reads)
			}
		} else if reads != 0 || loans != int64(c.NumBlocks()) {
			t.Errorf("%s: %d loans and %d reads of %d blocks, want a loan per block and no read", CodecName(codec), loans, reads, c.NumBlocks())
		}
	}
}
