package blosc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// tallyReader is an io.ReaderAt over b that counts its reads, the bytes
// they return and the range of offsets they touch, and fails every read
// past fail (when fail > 0).
type tallyReader struct {
	b      []byte
	reads  int
	bytes  int
	lo, hi int64 // the offsets read, [lo, hi), since the last reset
	fail   int64
}

func (r *tallyReader) reset() { r.lo, r.hi = math.MaxInt64, -1 }

func (r *tallyReader) ReadAt(p []byte, off int64) (int, error) {
	r.reads++
	if len(p) > 0 {
		r.lo, r.hi = min(r.lo, off), max(r.hi, off+int64(len(p)))
	}
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

// heldReader is a tallyReader that a decode can hold open (Holder), as
// a Zarr store's chunk file: reads through the held reader count, reads
// without it are an error.
type heldReader struct {
	t     *tallyReader
	holds int
	open  int
}

func (h *heldReader) ReadAt(p []byte, off int64) (int, error) {
	if h.open == 0 {
		return 0, errors.New("read without holding the file")
	}
	return h.t.ReadAt(p, off)
}

func (h *heldReader) Hold() (io.ReaderAt, func(), error) {
	h.holds++
	h.open++
	return h, func() { h.open-- }, nil
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

// runData returns n items of ts bytes: random low half, then a byte of
// 7 and zeros, so that a Blosc2 chunk's split block has stored streams, a
// run stream and zero streams.
func runData(n, ts int) []byte {
	rng := rand.New(rand.NewPCG(5, uint64(ts)))
	b := make([]byte, n*ts)
	for i := range n {
		for j := range ts / 2 {
			b[i*ts+j] = byte(rng.Uint32())
		}
		b[i*ts+ts/2] = 7
	}
	return b
}

// streamSizes returns the csize of each of the n streams of block i of
// chunk raw.
func streamSizes(c *Chunk, raw []byte, i, n int) []int {
	pos := int(c.bstarts[i])
	var cs []int
	for range n {
		s := int(int32(binary.LittleEndian.Uint32(raw[pos:])))
		cs = append(cs, s)
		pos += 4 + max(s, 0)
		if s < 0 {
			pos++ // a run's token
		}
	}
	return cs
}

// TestReadPlanes decodes the blocks of LZ4, zstd and BloscLZ chunks of
// split, shuffled streams (stored, compressed, and for Blosc2 run and
// zero streams) as byte planes through a plain io.ReaderAt (readPlanes)
// and compares them with the planes decoded from memory, and with the
// plain bytes.
func TestReadPlanes(t *testing.T) {
	kinds := []struct {
		name string
		data func(n, ts int) []byte
	}{{"walk", walkData}, {"runs", runData}}
	for _, kind := range kinds {
		for _, codec := range []int{CodecLZ4, CodecZstd, CodecBloscLZ} {
			for _, ts := range []int{4, 8} {
				for _, blosc1 := range []bool{true, false} {
					name := kind.name + "/" + CodecName(codec)
					p := Params{Codec: codec, Clevel: 5, Typesize: ts, Blocksize: 64 << 10, Split: SplitAlways, Blosc1: blosc1}
					p.Filters[5] = FilterShuffle
					plain := kind.data(3*(64<<10)/ts+1000, ts) // a short last block
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
					stored, special := 0, 0
					for i := range rc.NumBlocks() {
						bl := rc.BlockLen(i)
						pts := rc.PlanesTypesize(i)
						want := make([]byte, bl)
						if err := mem.DecodeBlockPlanes(want, i); err != nil {
							t.Fatalf("%s ts %d blosc1 %v: block %d from memory: %v", name, ts, blosc1, i, err)
						}
						got := make([]byte, bl)
						r0, b0 := cr.reads, cr.bytes
						cr.reset()
						if err := rc.DecodeBlockPlanes(got, i); err != nil {
							t.Fatalf("%s ts %d blosc1 %v: block %d through a reader: %v", name, ts, blosc1, i, err)
						}
						if !bytes.Equal(got, want) {
							t.Fatalf("%s ts %d blosc1 %v: block %d: planes read stream by stream differ", name, ts, blosc1, i)
						}
						back := make([]byte, bl)
						UnshufflePlanes(back, got, pts, 0)
						if pts > 1 && !bytes.Equal(back, plain[rc.BlockOffset(i):rc.BlockOffset(i)+int64(bl)]) {
							t.Fatalf("%s ts %d blosc1 %v: block %d: planes do not unshuffle to the plain bytes", name, ts, blosc1, i)
						}
						if cr.lo < int64(rc.bstarts[i]) || cr.hi > int64(rc.bends[i]) {
							t.Fatalf("%s ts %d: block %d [%d,%d): read [%d,%d)", name, ts, i, rc.bstarts[i], rc.bends[i], cr.lo, cr.hi)
						}
						cb := int(rc.bends[i] - rc.bstarts[i])
						lay, _ := rc.rangeLayout(i)
						if !rc.readsStreams(i, lay.nstreams) {
							continue
						}
						// A header and its peek, then a stream's rest: at
						// most two reads a stream, each byte read at most
						// once but for the peeks.
						if n := cr.reads - r0; n > 2*lay.nstreams {
							t.Errorf("%s ts %d: block %d: %d reads for %d streams", name, ts, i, n, lay.nstreams)
						}
						if n := cr.bytes - b0; n < cb || n > cb+lay.nstreams*planesPeek {
							t.Errorf("%s ts %d: block %d: %d bytes read of %d", name, ts, i, n, cb)
						}
						for _, cs := range streamSizes(rc, raw, i, lay.nstreams) {
							switch {
							case cs == bl/lay.nstreams:
								stored++
							case cs <= 0:
								special++
							}
						}
					}
					if codec == CodecLZ4 && stored == 0 {
						t.Errorf("%s ts %d blosc1 %v: no block read stream by stream with a stored stream", name, ts, blosc1)
					}
					if kind.name == "runs" && !blosc1 && codec == CodecLZ4 && special == 0 {
						t.Errorf("%s ts %d: no block read stream by stream with a run or zero stream", name, ts)
					}
				}
			}
		}
	}
}

// TestReadPlanesHolds: a reader that can be held open (a Zarr store's
// chunk file) is held once for a block's reads, and every read goes
// through the held reader.
func TestReadPlanesHolds(t *testing.T) {
	p := Params{Codec: CodecLZ4, Clevel: 5, Typesize: 4, Blocksize: 64 << 10, Split: SplitAlways, Blosc1: true}
	p.Filters[5] = FilterShuffle
	raw, err := Compress(nil, walkData(2*(16<<10), 4), p)
	if err != nil {
		t.Fatal(err)
	}
	h := &heldReader{t: &tallyReader{b: raw}}
	h.open++ // NewChunk's reads of the header
	c, err := NewChunk(h, int64(len(raw)))
	h.open--
	if err != nil {
		t.Fatal(err)
	}
	if !c.readsStreams(1, 4) {
		t.Fatal("block 1 is not read stream by stream")
	}
	r0 := h.t.reads
	if err := c.DecodeBlockPlanes(make([]byte, c.BlockLen(1)), 1); err != nil {
		t.Fatal(err)
	}
	if h.holds != 1 || h.open != 0 || h.t.reads-r0 < 2 {
		t.Fatalf("%d holds, %d still open, %d reads", h.holds, h.open, h.t.reads-r0)
	}
}

// TestReadPlanesAllocs: decoding a block as planes through a reader
// allocates nothing once its scratch is pooled, as the whole-block read
// did (a header buffer on the heap per block made FuzzDecode's inputs of
// many small blocks allocate past their bound).
func TestReadPlanesAllocs(t *testing.T) {
	if testkit.RaceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector; make test runs this without it")
	}
	p := Params{Codec: CodecLZ4, Clevel: 5, Typesize: 4, Blocksize: 64 << 10, Split: SplitAlways, Blosc1: true}
	p.Filters[5] = FilterShuffle
	raw, err := Compress(nil, walkData(4*(16<<10), 4), p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewChunk(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if !c.readsStreams(1, 4) {
		t.Fatal("block 1 is not read stream by stream")
	}
	dst := make([]byte, c.BlockLen(1))
	if n := testing.AllocsPerRun(50, func() {
		if err := c.DecodeBlockPlanes(dst, 1); err != nil {
			t.Fatal(err)
		}
	}); n > 0.1 {
		t.Fatalf("%.2f allocations per block", n)
	}
}

// TestReadPlanesFailures: a read that fails in the middle of a block's
// streams is a read failure (ReadFailed: not remembered as a bad block),
// and false stream sizes and run tokens fail as the whole-block decode
// from memory fails (ErrCorrupt or ErrUnsupported), never a panic or a
// read outside the block.
func TestReadPlanesFailures(t *testing.T) {
	for _, blosc1 := range []bool{true, false} {
		p := Params{Codec: CodecLZ4, Clevel: 5, Typesize: 4, Blocksize: 64 << 10, Split: SplitAlways, Blosc1: blosc1}
		p.Filters[5] = FilterShuffle
		data := walkData(2*(16<<10), 4)
		if !blosc1 {
			data = runData(2*(16<<10), 4)
		}
		raw, err := Compress(nil, data, p)
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
			t.Fatalf("blosc1 %v: a failed read: %v, want a read failure", blosc1, err)
		}

		// Each stream size of block 1 made false in turn: the whole
		// block's bytes, negative (for Blosc1: corrupt; for Blosc2: a run
		// whose token may be anything), zero, one byte short of stored,
		// the largest; then, for a run stream, its token with bit 0 clear.
		ne := c0.BlockLen(1) / 4
		pos := int(start)
		sizes := streamSizes(c0, raw, 1, 4)
		for s, cs := range sizes {
			type lie struct {
				at  int
				val []byte
			}
			var lies []lie
			for _, bad := range []int32{int32(end - start), -5, 0, int32(ne - 1), math.MaxInt32} {
				if int(bad) != cs {
					lies = append(lies, lie{pos, binary.LittleEndian.AppendUint32(nil, uint32(bad))})
				}
			}
			if cs < 0 {
				lies = append(lies, lie{pos + 4, []byte{raw[pos+4] &^ 1}})
			}
			for _, l := range lies {
				evil := bytes.Clone(raw)
				copy(evil[l.at:], l.val)
				cr := &tallyReader{b: evil}
				rc, err := NewChunk(cr, int64(len(evil)))
				if err != nil {
					t.Fatal(err)
				}
				cr.reset()
				got := make([]byte, rc.BlockLen(1))
				rerr := rc.DecodeBlockPlanes(got, 1)
				if cr.lo < start || cr.hi > end {
					t.Errorf("blosc1 %v: stream %d lie %x at %d: read [%d,%d) outside the block [%d,%d)", blosc1, s, l.val, l.at, cr.lo, cr.hi, start, end)
				}
				mc, err := NewChunkBytes(evil)
				if err != nil {
					t.Fatal(err)
				}
				want := make([]byte, mc.BlockLen(1))
				merr := mc.DecodeBlockPlanes(want, 1)
				switch {
				case merr == nil && rerr == nil:
					if !bytes.Equal(got, want) {
						t.Errorf("blosc1 %v: stream %d lie %x: decodes, differently from memory", blosc1, s, l.val)
					}
				case merr == nil || rerr == nil:
					t.Errorf("blosc1 %v: stream %d lie %x: through a reader %v, from memory %v", blosc1, s, l.val, rerr, merr)
				case !errors.Is(rerr, ErrCorrupt) && !errors.Is(rerr, ErrUnsupported):
					t.Errorf("blosc1 %v: stream %d lie %x: %v, want ErrCorrupt or ErrUnsupported", blosc1, s, l.val, rerr)
				case errors.Is(rerr, ErrUnsupported) != errors.Is(merr, ErrUnsupported):
					t.Errorf("blosc1 %v: stream %d lie %x: through a reader %v, from memory %v", blosc1, s, l.val, rerr, merr)
				}
			}
			pos += 4 + max(cs, 0)
			if cs < 0 {
				pos++
			}
		}
		if !blosc1 && !slicesHasNeg(sizes) {
			t.Errorf("Blosc2 block 1 has no run stream: %v", sizes)
		}
	}
}

func slicesHasNeg(xs []int) bool {
	for _, x := range xs {
		if x < 0 {
			return true
		}
	}
	return false
}
