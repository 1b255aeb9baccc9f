package bloscpack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/klauspost/compress/zlib"
)

// Params are the parameters of a new Bloscpack file. The zero value of
// the optional fields gives bloscpack's defaults.
type Params struct {
	// Blosc are the chunk parameters; chunks are always written as Blosc1
	// (version 2), which is what bloscpack reads.
	Blosc blosc.Params
	// ChunkSize is the plain size of every chunk but the last (bloscpack's
	// default is 1 MiB).
	ChunkSize int64
	// Checksum is the checksum id (see Checksums; 1 = adler32, the default
	// of bloscpack, 0 = none).
	Checksum int
	// NoOffsets leaves out the offsets section (bloscpack's -o).
	NoOffsets bool
	// MaxAppChunks is the number of extra offset slots; -1 chooses
	// bloscpack's default of 10 × nchunks.
	MaxAppChunks int64
	// Metadata is JSON stored in the metadata section (nil for none),
	// compressed with zlib level 6 when that is smaller, with room for
	// 10 × its size and an adler32 checksum, as bloscpack does.
	Metadata []byte

	// KeepChunkSize records ChunkSize in the header even when the data
	// are smaller (bloscpack itself shrinks it to the data), so that a
	// file that grows later keeps its chunk size.
	KeepChunkSize bool

	rawMeta []byte // a metadata section copied verbatim
}

// DefaultParams returns the parameters of bloscpack's command line:
// blosclz, clevel 7, byte shuffle, typesize 8, 1 MiB chunks, adler32.
func DefaultParams() Params {
	p := Params{
		Blosc:        blosc.Params{Codec: blosc.CodecBloscLZ, Clevel: 7, Typesize: 8, Blosc1: true},
		ChunkSize:    1 << 20,
		Checksum:     1,
		MaxAppChunks: -1,
	}
	p.Blosc.Filters[5] = blosc.FilterShuffle
	return p
}

// Writer writes a Bloscpack file of a size known in advance.
type Writer struct {
	w          io.WriteSeeker
	p          Params
	start      int64 // position of the header in w
	offsetsPos int64
	pos        int64 // current position (relative to w's start)
	nchunks    int64
	chunkSize  int64
	lastChunk  int64
	offsets    []int64
	size       int64 // plain bytes promised
	written    int64
	buf        []byte
	closed     bool
}

// maxChunkSize is bloscpack's limit: BLOSC_MAX_BUFFERSIZE.
const maxChunkSize = 1<<31 - 1 - 16

// NewWriter starts a file of size plain bytes.
func NewWriter(w io.WriteSeeker, size int64, p Params) (*Writer, error) {
	p.Blosc.Blosc1 = true
	if p.ChunkSize <= 0 || p.ChunkSize > maxChunkSize {
		return nil, fmt.Errorf("%w: bloscpack chunk size %d", pack.ErrUnsupported, p.ChunkSize)
	}
	if p.Checksum < 0 || p.Checksum >= len(Checksums) {
		return nil, fmt.Errorf("%w: checksum id %d", pack.ErrUnsupported, p.Checksum)
	}
	if size < 0 {
		return nil, fmt.Errorf("%w: negative size %d", pack.ErrUnsupported, size)
	}
	// bloscpack's calculate_nchunks, which shrinks the chunk size to the
	// data; a rewrite keeps the file's chunk size instead.
	cs := min(p.ChunkSize, size)
	if p.KeepChunkSize {
		cs = p.ChunkSize
	}
	var n, last int64
	if size == 0 {
		n, last = 1, 0
		if !p.KeepChunkSize {
			cs = 0
		}
	} else {
		n = (size + cs - 1) / cs
		last = size - (n-1)*cs
	}
	start, err := w.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	wr := &Writer{w: w, p: p, start: start, nchunks: n, chunkSize: cs, lastChunk: last, size: size}
	if err := wr.writeHead(); err != nil {
		return nil, err
	}
	return wr, nil
}

func (wr *Writer) write(b []byte) error {
	_, err := wr.w.Write(b)
	wr.pos += int64(len(b))
	return err
}

func (wr *Writer) writeHead() error {
	p := &wr.p
	var opts uint8
	if !p.NoOffsets {
		opts |= optOffsets
	}
	meta := p.rawMeta
	if meta == nil && p.Metadata != nil {
		var err error
		if meta, err = metaSection(p.Metadata); err != nil {
			return err
		}
	}
	if meta != nil {
		opts |= optMetadata
	}
	maxApp := int64(0)
	if !p.NoOffsets {
		maxApp = p.MaxAppChunks
		if maxApp < 0 {
			maxApp = 10 * wr.nchunks
		}
	}
	h := make([]byte, headerLen)
	copy(h, Magic)
	h[4], h[5], h[6], h[7] = 3, opts, byte(p.Checksum), byte(p.Blosc.Typesize)
	le := binary.LittleEndian
	le.PutUint32(h[8:], uint32(int32(wr.chunkSize)))
	le.PutUint32(h[12:], uint32(int32(wr.lastChunk)))
	le.PutUint64(h[16:], uint64(wr.nchunks))
	le.PutUint64(h[24:], uint64(maxApp))
	if err := wr.write(h); err != nil {
		return err
	}
	if meta != nil {
		if err := wr.write(meta); err != nil {
			return err
		}
	}
	if !p.NoOffsets {
		wr.offsetsPos = wr.pos
		slots := make([]byte, 8*(wr.nchunks+maxApp))
		for i := range slots {
			slots[i] = 0xFF // -1: unused, as bloscpack leaves them
		}
		if err := wr.write(slots); err != nil {
			return err
		}
	}
	return nil
}

// metaSection builds a metadata section the way bloscpack does.
func metaSection(js []byte) ([]byte, error) {
	codec, stored := 0, js
	var zb bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&zb, 6)
	zw.Write(js)
	zw.Close()
	if zb.Len() < len(js) {
		codec, stored = 1, zb.Bytes()
	}
	maxSize := 10 * int64(len(js))
	if int64(len(stored)) > maxSize {
		maxSize = int64(len(stored))
	}
	if maxSize > maxMetaSize {
		return nil, fmt.Errorf("%w: metadata of %d bytes", pack.ErrUnsupported, len(js))
	}
	m := make([]byte, metaHeaderLen, metaHeaderLen+maxSize+4)
	copy(m, "JSON")
	m[9], m[10], m[11] = 1, byte(codec), 6
	le := binary.LittleEndian
	le.PutUint32(m[12:], uint32(len(js)))
	le.PutUint32(m[16:], uint32(maxSize))
	le.PutUint32(m[20:], uint32(len(stored)))
	m = append(m, stored...)
	m = append(m, make([]byte, maxSize-int64(len(stored)))...)
	return append(m, digest(1, stored)...), nil
}

// expected returns the plain size of the next chunk.
func (wr *Writer) expected() int64 {
	if int64(len(wr.offsets)) == wr.nchunks-1 {
		return wr.lastChunk
	}
	return wr.chunkSize
}

// AddChunk compresses and writes the next chunk.
func (wr *Writer) AddChunk(plain []byte) error {
	if int64(len(wr.offsets)) >= wr.nchunks {
		return fmt.Errorf("bloscpack: more than the %d chunks announced", wr.nchunks)
	}
	if int64(len(plain)) != wr.expected() {
		return fmt.Errorf("bloscpack: chunk %d has %d bytes, want %d", len(wr.offsets), len(plain), wr.expected())
	}
	var err error
	wr.buf, err = blosc.Compress(wr.buf[:0], plain, wr.p.Blosc)
	if err != nil {
		return err
	}
	return wr.addRaw(wr.buf, int64(len(plain)), nil)
}

// AddRawChunk writes a Blosc1 chunk as it is; sum is its stored checksum
// when already known (nil to compute it).
func (wr *Writer) AddRawChunk(chunk []byte, sum []byte) error {
	h, err := blosc.ParseHeader(chunk)
	if err != nil {
		return err
	}
	if int64(len(wr.offsets)) >= wr.nchunks {
		return fmt.Errorf("bloscpack: more than the %d chunks announced", wr.nchunks)
	}
	if int64(h.Nbytes) != wr.expected() || int(h.Cbytes) != len(chunk) {
		return fmt.Errorf("bloscpack: raw chunk %d holds %d bytes, want %d", len(wr.offsets), h.Nbytes, wr.expected())
	}
	return wr.addRaw(chunk, int64(h.Nbytes), sum)
}

func (wr *Writer) addRaw(chunk []byte, nbytes int64, sum []byte) error {
	wr.offsets = append(wr.offsets, wr.start+wr.pos)
	if err := wr.write(chunk); err != nil {
		return err
	}
	if sum == nil {
		sum = digest(wr.p.Checksum, chunk)
	}
	wr.written += nbytes
	return wr.write(sum)
}

// Close writes the offsets. It does not close the underlying writer.
func (wr *Writer) Close() error {
	if wr.closed {
		return nil
	}
	wr.closed = true
	if wr.size == 0 && len(wr.offsets) == 0 {
		// An empty file still holds one empty chunk, as bloscpack writes it.
		if err := wr.AddChunk(nil); err != nil {
			return err
		}
	}
	if int64(len(wr.offsets)) != wr.nchunks || wr.written != wr.size {
		return fmt.Errorf("bloscpack: %d of %d chunks (%d of %d bytes) written", len(wr.offsets), wr.nchunks, wr.written, wr.size)
	}
	if wr.p.NoOffsets {
		return nil
	}
	b := make([]byte, 8*len(wr.offsets))
	for i, o := range wr.offsets {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(o))
	}
	if _, err := wr.w.Seek(wr.start+wr.offsetsPos, io.SeekStart); err != nil {
		return err
	}
	if _, err := wr.w.Write(b); err != nil {
		return err
	}
	_, err := wr.w.Seek(wr.start+wr.pos, io.SeekStart)
	return err
}

// NewChunkSize returns the chunk size new chunks get in a rewrite.
func (f *File) NewChunkSize() int64 {
	if f.Header.ChunkSize > 0 {
		return f.Header.ChunkSize
	}
	if c := f.firstChunk(); c != nil && c.Nbytes > 0 {
		return int64(c.Nbytes)
	}
	return 1 << 20
}

// chunkParams returns the Blosc parameters of the file's chunks, read
// from the first one. Blosc1 chunks do not record their level: bloscpack's
// default 7 is used. LZ4HC chunks cannot be told from LZ4 ones.
func (f *File) chunkParams() blosc.Params {
	p := DefaultParams().Blosc
	p.Typesize = max(f.Header.Typesize, 1)
	c := f.firstChunk()
	if c == nil {
		return p
	}
	if code := c.Codec(); code >= 0 && code != blosc.CodecSnappy {
		p.Codec = code
	}
	p.Typesize = int(c.Typesize)
	p.Filters = [6]uint8{}
	switch {
	case c.Flags&0x01 != 0:
		p.Filters[5] = blosc.FilterShuffle
	case c.Flags&0x04 != 0:
		p.Filters[5] = blosc.FilterBitShuffle
	}
	return p
}

// NewSink starts a rewrite of f: a format-3 file with f's chunk size,
// codec, filters, typesize, checksum kind, offsets choice and metadata
// section (copied byte for byte). The offsets keep f's total number of
// slots when the new chunks fit, else bloscpack's 10 × nchunks extra.
func (f *File) NewSink(w io.WriteSeeker, size int64) (pack.ChunkSink, error) {
	p := Params{
		Blosc:         f.chunkParams(),
		ChunkSize:     f.NewChunkSize(),
		Checksum:      f.Header.Checksum,
		NoOffsets:     f.Header.Options&optOffsets == 0 && f.Header.Version >= 2,
		MaxAppChunks:  -1,
		KeepChunkSize: true,
	}
	if f.Meta != nil {
		raw := make([]byte, f.Meta.sectionBytes)
		if err := f.readAt(raw, headerLen, "metadata section"); err != nil {
			return nil, err
		}
		p.rawMeta = raw
	}
	if !p.NoOffsets && size > 0 {
		n := (size + p.ChunkSize - 1) / p.ChunkSize
		if total := f.Header.Nchunks + f.Header.MaxAppChunks; n <= total && f.Header.Version == 3 {
			p.MaxAppChunks = total - n
		}
	}
	wr, err := NewWriter(w, size, p)
	if err != nil {
		return nil, err
	}
	return &sink{f: f, w: wr}, nil
}

type sink struct {
	f *File
	w *Writer
}

func (s *sink) AddChunk(plain []byte) error { return s.w.AddChunk(plain) }

// Compress compresses a chunk with the file's parameters; it is safe for
// concurrent use (pack.ParallelSink).
func (s *sink) Compress(plain []byte) ([]byte, error) { return blosc.Compress(nil, plain, s.w.p.Blosc) }

// CompressFrom compresses a chunk read from r one block at a time
// (pack.ParallelSink).
func (s *sink) CompressFrom(r io.ReaderAt, n int) ([]byte, error) {
	return blosc.CompressReaderAt(nil, r, n, s.w.p.Blosc)
}

// AddCompressed appends a chunk made by Compress.
func (s *sink) AddCompressed(chunk []byte, plainLen int) error {
	if h, err := blosc.ParseHeader(chunk); err != nil || int(h.Nbytes) != plainLen {
		return fmt.Errorf("bloscpack: compressed chunk does not hold %d bytes", plainLen)
	}
	return s.w.AddRawChunk(chunk, nil)
}
func (s *sink) Close() error { return s.w.Close() }

// CopyChunk copies chunk i and its checksum verbatim.
func (s *sink) CopyChunk(i int) error {
	cb, err := s.f.rawChunk(i)
	if err != nil {
		return err
	}
	cs := int64(Checksums[s.f.Header.Checksum].Size)
	buf := make([]byte, cb+cs)
	if err := s.f.readAt(buf, s.f.offsets[i], "chunk"); err != nil {
		return err
	}
	var sum []byte
	if s.w.p.Checksum == s.f.Header.Checksum {
		sum = buf[cb:]
	}
	return s.w.AddRawChunk(buf[:cb], sum)
}

var _ pack.ParallelSink = (*sink)(nil)
