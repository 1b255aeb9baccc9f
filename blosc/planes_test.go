package blosc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"testing"
)

// tallyReader is an io.ReaderAt over b that counts its reads and the
// bytes they return, and fails every read past fail (when fail > 0).
type tallyReader struct {
	b     []byte
	reads int
	bytes int
	fail  int64
}

func (r *tallyReader) ReadAt(p []byte, off int64) (int, error) {
	r.reads++
	if r.fail > 0 && off+int64(len(p)) > r.fail {
		return 0, errors.New("injected read error")
	}
	if off >= int64(len(r.b)) {
		return 0, io.EOF
	}
	n := copy(p, r.b[off:])
	r.bytes += n
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// walkData returns n float32 (ts 4) or float64 (ts 8) values of a random
// walk: their low mantissa bytes do not compress, so that a shuffled,
// split block stores those streams as they are.
func walkData(n, ts int) []byte {
	rng := rand.New(rand.NewPCG(3, uint64(ts)))
	b := make([]byte, n*ts)
	x := 0.0
	for i := range n {
		x += rng.NormFloat64()
		if ts == 4 {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(x)))
		} else {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
		}
	}
	return b
}

// storedStreams returns how many of the n streams of block i of chunk
// raw are stored (csize = the plane's size).
func storedStreams(t *testing.T, c *Chunk, raw []byte, i, n int) int {
	t.Helper()
	ne := c.BlockLen(i) / n
	pos, k := int(c.bstarts[i]), 0
	for range n {
		cs := int(int32(binary.LittleEndian.Uint32(raw[pos:])))
		pos += 4
		if cs == ne {
			k++
		}
		pos += max(cs, 0)
	}
	return k
}

// TestReadPlanes decodes the blocks of LZ4 and zstd chunks of split,
// shuffled streams as byte planes through a plain io.ReaderAt (each
// stored stream read straight into its plane, readPlanes) and compares
// them with the planes decoded from memory, and with the plain bytes.
func TestReadPlanes(t *testing.T) {
	for _, codec := range []int{CodecLZ4, CodecZstd, CodecBloscLZ} {
		for _, ts := range []int{4, 8} {
			for _, blosc1 := range []bool{true, false} {
				p := Params{Codec: codec, Clevel: 5, Typesize: ts, Blocksize: 64 << 10, Split: SplitAlways, Blosc1: blosc1}
				p.Filters[5] = FilterShuffle
				plain := walkData(3*(64<<10)/ts+1000, ts) // a short last block
				raw, err := Compress(nil, plain, p)
				if err != nil {
					t.Fatal(err)
				}
				mem, err := NewChunkBytes(raw)
				if err != nil {
					t.Fatal(err)
				}
				cr := &tallyReader{b: raw}
				rc, err := NewChunk(cr, int64(len(raw)))
				if err != nil {
					t.Fatal(err)
				}
				stored := 0
				for i := range rc.NumBlocks() {
					bl := rc.BlockLen(i)
					ts := rc.PlanesTypesize(i)
					want := make([]byte, bl)
					if err := mem.DecodeBlockPlanes(want, i); err != nil {
						t.Fatalf("codec %d ts %d blosc1 %v: block %d from memory: %v", codec, ts, blosc1, i, err)
					}
					got := make([]byte, bl)
					r0, b0 := cr.reads, cr.bytes
					if err := rc.DecodeBlockPlanes(got, i); err != nil {
						t.Fatalf("codec %d ts %d blosc1 %v: block %d through a reader: %v", codec, ts, blosc1, i, err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("codec %d ts %d blosc1 %v: block %d: planes read stream by stream differ", codec, ts, blosc1, i)
					}
					back := make([]byte, bl)
					UnshufflePlanes(back, got, ts, 0)
					if ts > 1 && !bytes.Equal(back, plain[rc.BlockOffset(i):rc.BlockOffset(i)+int64(bl)]) {
						t.Fatalf("codec %d ts %d blosc1 %v: block %d: planes do not unshuffle to the plain bytes", codec, ts, blosc1, i)
					}
					cb := int(rc.bends[i] - rc.bstarts[i])
					lay, _ := rc.rangeLayout(i)
					if rc.readsStreams(i, lay.nstreams) {
						// A header and its peek, then a stored stream's rest:
						// at most two reads a stream, each byte read at most
						// once but for the peeks.
						if n := cr.reads - r0; n > 2*ts {
							t.Errorf("codec %d ts %d: block %d: %d reads for %d streams", codec, ts, i, n, ts)
						}
						if n := cr.bytes - b0; n < cb || n > cb+ts*planesPeek {
							t.Errorf("codec %d ts %d: block %d: %d bytes read of %d", codec, ts, i, n, cb)
						}
						stored += storedStreams(t, rc, raw, i, ts)
					}
				}
				if codec == CodecLZ4 && stored == 0 {
					t.Errorf("ts %d blosc1 %v: no LZ4 block read stream by stream with a stored stream", ts, blosc1)
				}
			}
		}
	}
}

// TestReadPlanesFailures: a read that fails in the middle of a block's
// streams is a read failure (ReadFailed: not remembered as a bad block),
// and false stream sizes are corrupt, never a panic or a read outside
// the block.
func TestReadPlanesFailures(t *testing.T) {
	p := Params{Codec: CodecLZ4, Clevel: 5, Typesize: 4, Blocksize: 64 << 10, Split: SplitAlways, Blosc1: true}
	p.Filters[5] = FilterShuffle
	raw, err := Compress(nil, walkData(2*(16<<10), 4), p)
	if err != nil {
		t.Fatal(err)
	}
	c0, err := NewChunkBytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	if c0.NumBlocks() < 2 || c0.bstarts == nil {
		t.Fatalf("%d blocks", c0.NumBlocks())
	}
	start, end := int64(c0.bstarts[1]), int64(c0.bends[1])

	// A read error inside block 1's streams.
	cr := &tallyReader{b: raw, fail: (start + end) / 2}
	rc, err := NewChunk(cr, int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if !rc.readsStreams(1, 4) {
		t.Fatal("block 1 is not read stream by stream")
	}
	err = rc.DecodeBlockPlanes(make([]byte, rc.BlockLen(1)), 1)
	if err == nil || !ReadFailed(err) {
		t.Fatalf("a failed read: %v, want a read failure", err)
	}

	// Each stream size of block 1 made false in turn: too large, negative,
	// zero (Blosc1: not a zero stream), one byte short of stored.
	ne := c0.BlockLen(1) / 4
	pos := int(start)
	for s := range 4 {
		cs := int(int32(binary.LittleEndian.Uint32(raw[pos:])))
		for _, bad := range []int32{int32(end - start), -5, 0, int32(ne - 1), math.MaxInt32} {
			evil := bytes.Clone(raw)
			binary.LittleEndian.PutUint32(evil[pos:], uint32(bad))
			cr := &tallyReader{b: evil}
			rc, err := NewChunk(cr, int64(len(evil)))
			if err != nil {
				t.Fatal(err)
			}
			err = rc.DecodeBlockPlanes(make([]byte, rc.BlockLen(1)), 1)
			if int(bad) == cs {
				continue
			}
			if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Errorf("stream %d csize %d: %v, want ErrCorrupt", s, bad, err)
			}
			if cr.bytes > len(evil) {
				t.Errorf("stream %d csize %d: read %d bytes of %d", s, bad, cr.bytes, len(evil))
			}
		}
		pos += 4 + max(cs, 0)
	}
}
