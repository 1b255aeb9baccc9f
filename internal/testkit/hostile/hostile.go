// Package hostile makes crafted container files for the tests of bounded
// memory and time: small files whose headers claim huge sizes or counts.
// Each is valid as far as the format goes, or nearly; a reader must give
// the right bytes within bounded memory and time, or a clear error.
package hostile

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// MaxChunkNbytes is the largest plain chunk size Blosc2 allows.
const MaxChunkNbytes = 1<<31 - 1 - blosc.ExtHeaderLen

// SpecialHugeBlock returns a 32-byte bare chunk of special zeros whose
// header claims one block of nbytes = 2^31-33 bytes.
func SpecialHugeBlock() []byte {
	b := make([]byte, blosc.ExtHeaderLen)
	b[0], b[1], b[2], b[3] = blosc.VersionStable, 1, 0x05, 1
	binary.LittleEndian.PutUint32(b[4:], MaxChunkNbytes)
	binary.LittleEndian.PutUint32(b[8:], MaxChunkNbytes)
	binary.LittleEndian.PutUint32(b[12:], blosc.ExtHeaderLen)
	b[31] = byte(blosc.SpecialZero) << 4
	return b
}

// BigBlock returns a bare zstd chunk of one block of size bytes (a
// repeating pattern, so that it is stored small but not as a special
// chunk).
func BigBlock(size int) ([]byte, error) {
	plain := make([]byte, size)
	for i := range plain {
		plain[i] = byte(i % 251)
	}
	p := blosc.Params{Codec: blosc.CodecZstd, Clevel: 1, Typesize: 1, Blocksize: size, Split: blosc.SplitNever}
	return blosc.Compress(nil, plain, p)
}

// writeFrame writes a frame with the given parameters and chunks (each
// added with add) to a byte slice.
func writeFrame(p frame.Params, add func(w *frame.Writer) error) ([]byte, error) {
	m := &memFile{}
	w, err := frame.NewWriter(m, p)
	if err != nil {
		return nil, err
	}
	if err := add(w); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return m.b, nil
}

// FrameBytes returns a contiguous frame of the chunks, written with p
// in memory.
func FrameBytes(p frame.Params, chunks ...[]byte) ([]byte, error) {
	return writeFrame(p, func(w *frame.Writer) error {
		for _, c := range chunks {
			if err := w.AddChunk(c); err != nil {
				return err
			}
		}
		return nil
	})
}

// indexChunk returns the offset of a contiguous frame's index chunk.
func indexChunk(b []byte) int {
	be := binary.BigEndian
	headerLen := int(int32(be.Uint32(b[11:])))
	cbytes := int(be.Uint64(b[39:]))
	return headerLen + cbytes
}

// setUniformIndex rewrites a contiguous frame's index chunk in place as
// a special chunk whose n entries all hold value, and patches the header's
// nbytes to n chunks of chunksize bytes.
func setUniformIndex(b []byte, value, n, chunksize int64) error {
	ic := indexChunk(b)
	h, err := blosc.ParseHeader(b[ic:])
	if err != nil {
		return err
	}
	need := blosc.ExtHeaderLen
	if value != 0 {
		need += 8
	}
	if int(h.Cbytes) < need {
		return fmt.Errorf("hostile: index chunk of %d bytes, need %d", h.Cbytes, need)
	}
	ix := b[ic : ic+int(h.Cbytes)]
	clear(ix)
	ix[0], ix[1], ix[2], ix[3] = blosc.VersionStable, 1, 0x05, 8
	binary.LittleEndian.PutUint32(ix[4:], uint32(8*n))
	binary.LittleEndian.PutUint32(ix[8:], uint32(min(8*n, 1<<18)))
	binary.LittleEndian.PutUint32(ix[12:], uint32(need))
	if value == 0 {
		ix[31] = byte(blosc.SpecialZero) << 4
	} else {
		ix[31] = byte(blosc.SpecialValue) << 4
		binary.LittleEndian.PutUint64(ix[32:], uint64(value))
	}
	binary.BigEndian.PutUint64(b[30:], uint64(n*chunksize))
	return nil
}

// ZeroFrame returns a frame of about 200 bytes claiming 2^24 special-zero
// chunks of 2^31-33 bytes: 32 PiB of zeros.
func ZeroFrame() ([]byte, error) {
	cs := int64(MaxChunkNbytes)
	p := frame.Params{Chunk: blosc.DefaultParams(1), ChunkSize: int(cs)}
	b, err := writeFrame(p, func(w *frame.Writer) error {
		for i := 0; i < 2; i++ {
			if err := w.AddSpecial(blosc.SpecialZero, cs); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, setUniformIndex(b, -0x7F<<56, 1<<24, cs) // top byte 0x81: special zeros
}

// ManyBlocks returns a frame whose n index entries all point at one
// stored chunk of 2^20 blocks of 1 KiB (every block start the same 4-byte
// zero stream): a 4 MB file whose every chunk costs 8 MB to parse.
func ManyBlocks(n int64) ([]byte, error) {
	const nblocks, bs = 1 << 20, 1 << 10
	hdr := blosc.ExtHeaderLen
	stream := hdr + 4*nblocks
	chunk := make([]byte, stream+4)
	chunk[0], chunk[1], chunk[2], chunk[3] = blosc.VersionStable, 1, 0x05|0x10, 1 // extended, no split
	binary.LittleEndian.PutUint32(chunk[4:], nblocks*bs)
	binary.LittleEndian.PutUint32(chunk[8:], bs)
	binary.LittleEndian.PutUint32(chunk[12:], uint32(len(chunk)))
	for i := 0; i < nblocks; i++ {
		binary.LittleEndian.PutUint32(chunk[hdr+4*i:], uint32(stream))
	}
	// The stream: csize 0, a block of zeros (extended headers).
	p := frame.Params{Chunk: blosc.DefaultParams(1), ChunkSize: nblocks * bs}
	b, err := writeFrame(p, func(w *frame.Writer) error { return w.AddRawChunk(chunk) })
	if err != nil {
		return nil, err
	}
	// Every index entry 0: the one stored chunk.
	return b, setUniformIndex(b, 0, n, nblocks*bs)
}

// VLMetaBomb returns a frame of one small chunk with n vlmetalayers each
// decoding to size bytes.
func VLMetaBomb(n, size int) ([]byte, error) {
	v := make([]byte, size) // zeros: each layer is stored as 32 bytes
	p := frame.Params{Chunk: blosc.DefaultParams(1)}
	for i := 0; i < n; i++ {
		p.VLMetalayers = append(p.VLMetalayers, frame.Metalayer{Name: fmt.Sprintf("m%d", i), Value: v})
	}
	return writeFrame(p, func(w *frame.Writer) error { return w.AddChunk([]byte("hello")) })
}

// TinyChunks writes to path a frame of n one-byte chunks.
func TinyChunks(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w, err := frame.NewWriter(f, frame.Params{Chunk: blosc.DefaultParams(1), ChunkSize: 1})
	if err != nil {
		f.Close()
		return err
	}
	for i := 0; i < n; i++ {
		if err := w.AddChunk([]byte{byte(i)}); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// files are the crafted files of WriteAll, by the names the tests use.
var files = []struct {
	name string
	f    func() ([]byte, error)
}{
	{"special_huge_block.blosc", func() ([]byte, error) { return SpecialHugeBlock(), nil }},
	{"big_block.blosc", func() ([]byte, error) { return BigBlock(16 << 20) }},
	{"zero_32pib.b2frame", ZeroFrame},
	{"many_blocks.b2frame", func() ([]byte, error) { return ManyBlocks(2000) }},
	{"vlmeta_bomb.b2frame", func() ([]byte, error) { return VLMetaBomb(40, 20<<20) }},
}

// Write writes the crafted file of WriteAll called name into dir, and
// returns its path.
func Write(dir, name string) (string, error) {
	for _, m := range files {
		if m.name != name {
			continue
		}
		b, err := m.f()
		if err != nil {
			return "", fmt.Errorf("%s: %w", m.name, err)
		}
		p := filepath.Join(dir, m.name)
		return p, os.WriteFile(p, b, 0o644)
	}
	return "", fmt.Errorf("%s: no such crafted file", name)
}

// WriteAll writes every crafted file into dir under the names the tests
// use, and returns their names. tinyChunks sets the size of the
// one-byte-chunk frame.
func WriteAll(dir string, tinyChunks int) ([]string, error) {
	var names []string
	for _, m := range files {
		if _, err := Write(dir, m.name); err != nil {
			return nil, err
		}
		names = append(names, m.name)
	}
	if tinyChunks > 0 {
		if err := TinyChunks(filepath.Join(dir, "tiny_chunks.b2frame"), tinyChunks); err != nil {
			return nil, err
		}
		names = append(names, "tiny_chunks.b2frame")
	}
	return names, nil
}

// memFile is an in-memory io.WriteSeeker.
type memFile struct {
	b   []byte
	pos int64
}

func (m *memFile) Write(p []byte) (int, error) {
	if end := m.pos + int64(len(p)); end > int64(len(m.b)) {
		m.b = append(m.b, make([]byte, end-int64(len(m.b)))...)
	}
	copy(m.b[m.pos:], p)
	m.pos += int64(len(p))
	return len(p), nil
}

func (m *memFile) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		m.pos = off
	case io.SeekCurrent:
		m.pos += off
	case io.SeekEnd:
		m.pos = int64(len(m.b)) + off
	}
	return m.pos, nil
}
