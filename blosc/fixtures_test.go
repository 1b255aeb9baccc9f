package blosc

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
)

func loadFixtures(t testing.TB) []fixtures.Fixture {
	t.Helper()
	fx, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestBlosc1ChunkFixtures decodes every bare chunk of the manifest.
func TestBlosc1ChunkFixtures(t *testing.T) {
	n := 0
	for _, fx := range loadFixtures(t) {
		if fx.Kind != "blosc1chunk" {
			continue
		}
		n++
		t.Run(fx.Name, func(t *testing.T) {
			src, err := os.ReadFile(fx.Path)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Decompress(src)
			if err != nil {
				t.Fatalf("Decompress: %v", err)
			}
			if int64(len(out)) != fx.PlainSize || sha(out) != fx.PlainSHA {
				t.Fatalf("decoded %d bytes sha %s, want %d bytes sha %s", len(out), sha(out), fx.PlainSize, fx.PlainSHA)
			}
			checkBlocks(t, src, out)
		})
	}
	if n < 30 {
		t.Fatalf("only %d blosc1chunk fixtures found", n)
	}
}

// frameChunk is one logical chunk of a frame: its bytes, or a special kind.
type frameChunk struct {
	data    []byte
	special int
	nbytes  int
}

// walkFrame is a minimal test-only reader of a contiguous or sparse frame
// (FORMATS §5, §6): enough to reach every chunk of the fixtures.
func walkFrame(t testing.TB, path string) (chunks []frameChunk, typesize int) {
	t.Helper()
	dir := ""
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		dir = path
		path = filepath.Join(path, "chunks.b2frame")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	be := binary.BigEndian
	hlen := int(be.Uint32(b[11:]))
	flen := int(be.Uint64(b[16:]))
	nbytes := int64(be.Uint64(b[30:]))
	cbytes := int64(be.Uint64(b[39:]))
	typesize = int(be.Uint32(b[48:]))
	chunksize := int64(be.Uint32(b[58:]))
	if nbytes == 0 {
		return nil, typesize
	}
	idxPos := int64(hlen) + cbytes
	if dir != "" {
		idxPos = int64(hlen)
	}
	trailer := int(be.Uint32(b[flen-22:]))
	idx, err := Decompress(b[idxPos : flen-trailer])
	if err != nil {
		t.Fatalf("index chunk: %v", err)
	}
	n := len(idx) / 8
	var total int64
	for i := 0; i < n; i++ {
		off := int64(binary.LittleEndian.Uint64(idx[8*i:]))
		if off < 0 {
			kind := int(byte(uint64(off)>>56) & 0x7f)
			sp := map[int]int{1: SpecialZero, 2: SpecialNaN, 4: SpecialUninit}[kind]
			sz := chunksize
			if i == n-1 && nbytes%chunksize != 0 {
				sz = nbytes % chunksize
			}
			chunks = append(chunks, frameChunk{special: sp, nbytes: int(sz)})
			total += sz
			continue
		}
		var cb []byte
		if dir != "" {
			cb, err = os.ReadFile(filepath.Join(dir, fmt.Sprintf("%08X.chunk", off)))
			if err != nil {
				t.Fatal(err)
			}
		} else {
			cb = b[int64(hlen)+off:]
		}
		h, err := ParseHeader(cb)
		if err != nil {
			t.Fatalf("chunk %d header: %v", i, err)
		}
		chunks = append(chunks, frameChunk{data: cb[:h.Cbytes], nbytes: int(h.Nbytes)})
		total += int64(h.Nbytes)
	}
	if total != nbytes {
		t.Fatalf("chunks add up to %d bytes, header says %d", total, nbytes)
	}
	return chunks, typesize
}

func decodeFrameChunk(t testing.TB, fc frameChunk, typesize int) []byte {
	out := make([]byte, fc.nbytes)
	switch fc.special {
	case SpecialZero, SpecialUninit:
		return out
	case SpecialNaN:
		pat := map[int][]byte{4: {0, 0, 0xC0, 0x7F}, 8: {0, 0, 0, 0, 0, 0, 0xF8, 0x7F}}[typesize]
		fillPattern(out, pat, 0)
		return out
	}
	got, err := Decompress(fc.data)
	if err != nil {
		t.Fatalf("chunk: %v", err)
	}
	return got
}

// TestFrameChunkFixtures decodes every chunk of every frame fixture and
// compares the concatenation with the manifest.
func TestFrameChunkFixtures(t *testing.T) {
	n := 0
	for _, fx := range loadFixtures(t) {
		if fx.IsInvalid || (fx.Kind != "b2frame" && fx.Kind != "sframe" && fx.Kind != "b2nd") {
			continue
		}
		n++
		t.Run(fx.Name, func(t *testing.T) {
			chunks, ts := walkFrame(t, fx.Path)
			var all bytes.Buffer
			for i, fc := range chunks {
				got := decodeFrameChunk(t, fc, ts)
				all.Write(got)
				if fc.data != nil {
					t.Run(fmt.Sprint("chunk", i), func(t *testing.T) { checkBlocks(t, fc.data, got) })
				}
			}
			wantSize, wantSHA := fx.PlainSize, fx.PlainSHA
			if fx.Kind == "b2nd" {
				wantSize, wantSHA = fx.RawSize, fx.RawSHA
			}
			if int64(all.Len()) != wantSize || sha(all.Bytes()) != wantSHA {
				t.Fatalf("decoded %d bytes sha %s, want %d sha %s", all.Len(), sha(all.Bytes()), wantSize, wantSHA)
			}
		})
	}
	if n < 60 {
		t.Fatalf("only %d frame fixtures found", n)
	}
}

// recordingReader is an io.ReaderAt that remembers which ranges were read.
type recordingReader struct {
	b     []byte
	mu    sync.Mutex
	reads [][2]int64
}

func (r *recordingReader) ReadAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	r.reads = append(r.reads, [2]int64{off, off + int64(len(p))})
	r.mu.Unlock()
	if off >= int64(len(r.b)) {
		return 0, errors.New("read past end")
	}
	n := copy(p, r.b[off:])
	if n < len(p) {
		return n, errors.New("short read")
	}
	return n, nil
}

// checkBlocks decodes every block of the chunk on its own, through a
// ReaderAt that records reads, and checks that the block equals the
// matching slice of the full decode and that only the block's own bytes
// (and block 0's, for delta) were read. Opening the chunk must read its
// header and block starts in one read when they fit in HeadRead bytes,
// and a chunk that fits there whole is read once and never again.
func checkBlocks(t *testing.T, chunk, full []byte) {
	t.Helper()
	rr := &recordingReader{b: chunk}
	c, err := NewChunk(rr, int64(len(chunk)))
	if err != nil {
		t.Fatalf("NewChunk: %v", err)
	}
	inMemory := int(c.Cbytes) <= HeadRead
	if c.Header.Len()+4*c.NumBlocks() <= HeadRead && !c.HasDict() && c.vlOff == nil && len(rr.reads) != 1 {
		t.Fatalf("opening the chunk took %d reads: %v", len(rr.reads), rr.reads)
	}
	if int(c.Nbytes) != len(full) {
		t.Fatalf("Nbytes %d, full decode %d", c.Nbytes, len(full))
	}
	var total int64
	for i := 0; i < c.NumBlocks(); i++ {
		rr.reads = nil
		bl := c.BlockLen(i)
		off := c.BlockOffset(i)
		if off != total {
			t.Fatalf("block %d offset %d, want %d", i, off, total)
		}
		total += int64(bl)
		dst := make([]byte, bl+7)
		if err := c.DecodeBlock(dst, i); err != nil {
			t.Fatalf("DecodeBlock(%d): %v", i, err)
		}
		if !bytes.Equal(dst[:bl], full[off:off+int64(bl)]) {
			t.Fatalf("block %d differs from the full decode", i)
		}
		s, e := c.CompressedExtent(i)
		s0, e0 := c.CompressedExtent(0)
		for _, rd := range rr.reads {
			inBlock := rd[0] >= s && rd[1] <= e
			inBlock0 := c.NeedsBlock0() && rd[0] >= s0 && rd[1] <= e0
			if !inBlock && !inBlock0 {
				t.Fatalf("block %d [%d,%d) read [%d,%d)", i, s, e, rd[0], rd[1])
			}
		}
		if inMemory && len(rr.reads) > 0 {
			t.Fatalf("block %d of a chunk in memory read %v", i, rr.reads)
		}
		if !inMemory && len(rr.reads) == 0 && s != e {
			t.Fatalf("block %d decoded without reading its bytes", i)
		}
		for _, w := range rangeWindows(bl, i) {
			rr.reads = nil
			got := make([]byte, w[1], w[1]+7)
			if err := c.DecodeBlockRange(got, i, w[0]); err != nil {
				t.Fatalf("DecodeBlockRange(block %d, [%d,+%d)): %v", i, w[0], w[1], err)
			}
			if want := full[off+int64(w[0]) : off+int64(w[0]+w[1])]; !bytes.Equal(got, want) {
				t.Fatalf("DecodeBlockRange(block %d, [%d,+%d)) differs from the full decode", i, w[0], w[1])
			}
			k := w[1] / 3
			head, rest := make([]byte, k), make([]byte, w[1]-k)
			if err := c.DecodeBlockRangeRest(head, rest, i, w[0]); err != nil {
				t.Fatalf("DecodeBlockRangeRest(block %d, [%d,+%d), +%d): %v", i, w[0], k, w[1]-k, err)
			}
			if !bytes.Equal(append(head, rest...), got) {
				t.Fatalf("DecodeBlockRangeRest(block %d, [%d,+%d), +%d) differs from the full decode", i, w[0], k, w[1]-k)
			}
			for _, rd := range rr.reads {
				inBlock := rd[0] >= s && rd[1] <= e
				inBlock0 := c.NeedsBlock0() && rd[0] >= s0 && rd[1] <= e0
				inData := c.Memcpyed() && rd[0] >= int64(c.Len()) && rd[1] <= int64(c.Cbytes)
				if !inBlock && !inBlock0 && !inData {
					t.Fatalf("range of block %d [%d,%d) read [%d,%d)", i, s, e, rd[0], rd[1])
				}
			}
		}
	}
	if total != int64(len(full)) {
		t.Fatalf("blocks add up to %d, want %d", total, len(full))
	}
}

// holdingReader is a Holder over a chunk in memory that counts the reads
// made through it and through the reader it holds open.
type holdingReader struct {
	b             []byte
	holds, direct int
	held          int
}

func (h *holdingReader) ReadAt(p []byte, off int64) (int, error) {
	h.direct++
	return bytes.NewReader(h.b).ReadAt(p, off)
}

func (h *holdingReader) Hold() (io.ReaderAt, func(), error) {
	h.holds++
	return readerFunc(func(p []byte, off int64) (int, error) {
		h.held++
		return bytes.NewReader(h.b).ReadAt(p, off)
	}), func() {}, nil
}

type readerFunc func(p []byte, off int64) (int, error)

func (f readerFunc) ReadAt(p []byte, off int64) (int, error) { return f(p, off) }

// TestDecodeRangeHolder checks that a range decode reads a block's
// streams through a Holder's held reader, holding it once, and reads
// only parts of a block whose streams are stored: 4 KiB of a block of
// elements whose low six bytes are noise (six stored streams) reads far
// less than the block.
func TestDecodeRangeHolder(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	plain := make([]byte, 1<<20)
	for i := range plain {
		plain[i] = byte(r.Uint32()) // six noisy bytes of eight: stored streams
		if i%8 >= 6 {
			plain[i] = 0x40
		}
	}
	chunk, err := Compress(nil, plain, Params{Codec: CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: 1 << 20, Filters: [MaxFilters]uint8{5: FilterShuffle}})
	if err != nil {
		t.Fatal(err)
	}
	h := &holdingReader{b: chunk}
	c, err := NewChunk(h, int64(len(chunk)))
	if err != nil {
		t.Fatal(err)
	}
	opened := h.direct
	rec := &recordingReader{b: chunk}
	got := make([]byte, 4096)
	bl := c.BlockLen(0)
	from := bl/2 + 1
	if err := c.DecodeBlockRange(got, 0, from); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain[from:from+4096]) {
		t.Fatal("wrong bytes")
	}
	if h.holds != 1 || h.direct != opened || h.held == 0 {
		t.Fatalf("%d holds, %d reads outside them, %d held reads; want 1, 0, >0", h.holds, h.direct-opened, h.held)
	}
	c2, err := NewChunk(rec, int64(len(chunk)))
	if err != nil {
		t.Fatal(err)
	}
	rec.reads = nil
	if err := c2.DecodeBlockRange(got, 0, from); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, rd := range rec.reads {
		total += rd[1] - rd[0]
	}
	if total > int64(bl/4) {
		t.Fatalf("a 4 KiB range of a %d-byte block of stored streams read %d bytes in %d reads", bl, total, len(rec.reads))
	}
}

// lendingReader is an InPlaceReader that never lends (a remote object
// whose range cache does not hold the bytes) and counts its reads.
type lendingReader struct {
	recordingReader
}

func (l *lendingReader) ReadInPlace(off, n int64, fn func([]byte) error) (bool, error) {
	return false, nil
}

// TestDecodeRangeRemote checks that a range decode through a reader that
// can lend bytes but does not (a remote object: each read a round trip)
// reads the block's bytes in one read, not a read per stream part.
func TestDecodeRangeRemote(t *testing.T) {
	plain := benchWalk(1 << 20)
	chunk, err := Compress(nil, plain, Params{Codec: CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: 256 << 10, Filters: [MaxFilters]uint8{5: FilterShuffle}})
	if err != nil {
		t.Fatal(err)
	}
	lr := &lendingReader{recordingReader{b: chunk}}
	c, err := NewChunk(lr, int64(len(chunk)))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		lr.reads = nil
		got := make([]byte, 4096)
		if err := c.DecodeBlockRange(got, i, 100001); err != nil {
			t.Fatal(err)
		}
		off := int(c.BlockOffset(i))
		if !bytes.Equal(got, plain[off+100001:off+100001+4096]) {
			t.Fatal("wrong bytes")
		}
		s, e := c.CompressedExtent(i)
		if len(lr.reads) != 1 || lr.reads[0] != [2]int64{s, e} {
			t.Fatalf("block %d [%d,%d): reads %v, want the block in one", i, s, e, lr.reads)
		}
	}
}
