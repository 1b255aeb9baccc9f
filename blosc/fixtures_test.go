package blosc

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/bloscfs/bloscfs/internal/fixtures"
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
	}
	if total != int64(len(full)) {
		t.Fatalf("blocks add up to %d, want %d", total, len(full))
	}
}
