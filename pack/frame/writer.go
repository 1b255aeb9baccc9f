package frame

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack"
)

// Metalayer is a named metadata value of a frame.
type Metalayer struct {
	Name string // at most 31 bytes
	// Value is the content. Header metalayers are stored as given. For
	// vlmetalayers Value is the plain content, which the writer compresses
	// into a Blosc2 chunk, unless Compressed is set.
	Value []byte
	// Compressed says that a vlmetalayer's Value already is a Blosc2
	// chunk (as RawVLMeta returns it), to be stored verbatim.
	Compressed bool
}

// Params are the parameters of a new frame.
type Params struct {
	// Chunk are the compression parameters of new chunks: codec, clevel,
	// typesize (≤ 255), blocksize (0 = automatic; it is also the header's
	// blocksize field), filters and split mode. The header's codec_flags,
	// other_flags (split mode) and filter pipeline record them.
	Chunk blosc.Params
	// Typesize is the element size recorded in the frame header; it may
	// exceed 255, in which case chunks are compressed with typesize 1 (as
	// c-blosc2 does). 0 means Chunk.Typesize. When Chunk.Typesize is 0 it
	// is derived from Typesize.
	Typesize int
	// ChunkSize is the nominal plain chunk size. A frame whose chunks all
	// have this size but the last (which may be shorter) is written as
	// format version 2, which every c-blosc2 2.x and 3.x reads; otherwise
	// it is version 3 with variable chunk sizes (c-blosc2 ≥ 3.0 only).
	// 0 takes the size of the first chunk.
	ChunkSize int
	// Metalayers go into the header, in this order, at most 16.
	Metalayers []Metalayer
	// VLMetalayers go into the trailer, in this order.
	VLMetalayers []Metalayer

	// tmpl, when set, supplies the header bytes that only record the
	// writer's defaults (codec and split flags, nthreads, filters,
	// udcodec, other_flags2), copied from a source frame.
	tmpl *[FixedHeaderLen]byte
}

// entry is one chunk of a frame being written.
type entry struct {
	off     int64 // offset from the end of the header; -1 for a pending special
	nbytes  int64
	special int // blosc special kind for an index-only chunk
	vl      bool
}

// Writer streams a contiguous frame: the header (with placeholders), the
// chunks as they are added, then at Close the index chunk and the trailer,
// and finally the header again with the sizes. Output goes through a
// 1 MiB buffer, chunks of 64 KiB or more straight to w; besides it the
// Writer keeps only a small index entry per chunk. A Writer is not safe
// for concurrent use.
type Writer struct {
	w       io.WriteSeeker
	bw      *bufio.Writer
	start   int64 // position of the frame in w
	p       Params
	cp      blosc.Params // chunk compression parameters
	hdr     []byte       // header including metalayers
	vlmeta  []metaEntry  // trailer vlmetalayers, compressed
	pos     int64        // bytes written after the header
	entries []entry
	buf     []byte
	closed  bool
	err     error
}

// Special kinds accepted by AddSpecial.
const (
	SpecialZero   = blosc.SpecialZero
	SpecialNaN    = blosc.SpecialNaN
	SpecialUninit = blosc.SpecialUninit
)

// NewWriter starts a frame at the current position of w. It writes the
// header at once; Close completes it. If w has a Truncate(int64) error
// method (as *os.File), Close truncates it after the frame.
func NewWriter(w io.WriteSeeker, p Params) (*Writer, error) {
	cp := p.Chunk
	if p.Typesize == 0 {
		p.Typesize = cp.Typesize
	}
	if p.Typesize <= 0 {
		p.Typesize = 1
	}
	if p.Typesize > 1<<31-1 {
		return nil, fmt.Errorf("%w: typesize %d", pack.ErrUnsupported, p.Typesize)
	}
	if cp.Typesize == 0 {
		cp.Typesize = p.Typesize
		if cp.Typesize > 255 {
			cp.Typesize = 1
		}
	}
	if cp.Blosc1 {
		return nil, fmt.Errorf("%w: frames hold Blosc2 chunks, not Blosc1 ones", pack.ErrUnsupported)
	}
	if cp.Typesize < 1 || cp.Typesize > 255 {
		return nil, fmt.Errorf("%w: chunk typesize %d not in 1…255", pack.ErrUnsupported, cp.Typesize)
	}
	if cp.Clevel < 0 || cp.Clevel > 9 {
		return nil, fmt.Errorf("%w: clevel %d not in 0…9", pack.ErrUnsupported, cp.Clevel)
	}
	if cp.Codec < 0 || cp.Codec > 255 {
		return nil, fmt.Errorf("%w: codec %d", pack.ErrUnsupported, cp.Codec)
	}
	if cp.Blocksize < 0 || cp.Blocksize > maxChunkNbytes {
		return nil, fmt.Errorf("%w: blocksize %d", pack.ErrUnsupported, cp.Blocksize)
	}
	if p.ChunkSize < 0 || p.ChunkSize > maxChunkNbytes {
		return nil, fmt.Errorf("%w: chunk size %d not in 0…%d", pack.ErrUnsupported, p.ChunkSize, maxChunkNbytes)
	}
	if len(p.Metalayers) > maxMetalayers {
		return nil, fmt.Errorf("%w: %d metalayers, at most %d", pack.ErrUnsupported, len(p.Metalayers), maxMetalayers)
	}
	if len(p.VLMetalayers) > maxVLMetalayers {
		return nil, fmt.Errorf("%w: %d vlmetalayers, at most %d", pack.ErrUnsupported, len(p.VLMetalayers), maxVLMetalayers)
	}
	meta, err := checkMeta(p.Metalayers, "metalayer")
	if err != nil {
		return nil, err
	}
	if _, err := checkMeta(p.VLMetalayers, "vlmetalayer"); err != nil {
		return nil, err
	}
	fw := &Writer{w: w, p: p, cp: cp}
	for _, m := range p.VLMetalayers {
		v := m.Value
		if m.Compressed {
			if _, err := blosc.ParseHeader(v); err != nil {
				return nil, fmt.Errorf("%w: vlmetalayer %q is not a Blosc2 chunk: %w", pack.ErrFormat, m.Name, err)
			}
		} else {
			if v, err = compressVLMeta(v); err != nil {
				return nil, fmt.Errorf("vlmetalayer %q: %w", m.Name, err)
			}
		}
		fw.vlmeta = append(fw.vlmeta, metaEntry{m.Name, v})
	}
	tsize := 2 + 10 + trailerTailLen
	for _, m := range fw.vlmeta {
		tsize += 1 + len(m.name) + 5 + 5 + len(m.value)
	}
	if tsize > maxMetaBytes {
		return nil, fmt.Errorf("%w: trailer of %d bytes exceeds the %d-byte limit", pack.ErrUnsupported, tsize, maxMetaBytes)
	}
	hdr := make([]byte, FixedHeaderLen, FixedHeaderLen+64)
	hdr = appendMetaSection(hdr, meta, FixedHeaderLen, true)
	if len(hdr) > maxMetaBytes {
		return nil, fmt.Errorf("%w: header of %d bytes exceeds the %d-byte limit", pack.ErrUnsupported, len(hdr), maxMetaBytes)
	}
	fw.hdr = hdr
	fw.fillHeader(0, 0, 0, 0)
	if fw.start, err = w.Seek(0, io.SeekCurrent); err != nil {
		return nil, err
	}
	fw.bw = bufio.NewWriterSize(w, 1<<20)
	if _, err := fw.bw.Write(hdr); err != nil {
		return nil, err
	}
	return fw, nil
}

func checkMeta(ms []Metalayer, what string) ([]metaEntry, error) {
	seen := map[string]bool{}
	out := make([]metaEntry, 0, len(ms))
	for _, m := range ms {
		if m.Name == "" || len(m.Name) > maxNameLen {
			return nil, fmt.Errorf("%w: %s name %q must have 1…%d bytes", pack.ErrUnsupported, what, m.Name, maxNameLen)
		}
		if seen[m.Name] {
			return nil, fmt.Errorf("%w: duplicate %s %q", pack.ErrUnsupported, what, m.Name)
		}
		seen[m.Name] = true
		if int64(len(m.Value)) > maxMetaBytes {
			return nil, fmt.Errorf("%w: %s %q of %d bytes", pack.ErrUnsupported, what, m.Name, len(m.Value))
		}
		out = append(out, metaEntry{m.Name, m.Value})
	}
	return out, nil
}

// compressVLMeta stores a vlmetalayer value as a Blosc2 chunk, as
// c-blosc2 does (blosclz, clevel 5, shuffle).
func compressVLMeta(v []byte) ([]byte, error) {
	p := blosc.Params{Codec: blosc.CodecBloscLZ, Clevel: 5, Typesize: 1}
	p.Filters[5] = blosc.FilterShuffle
	return blosc.Compress(nil, v, p)
}

// fillHeader writes the fixed header fields into w.hdr.
func (w *Writer) fillHeader(frameLen, nbytes, cbytes int64, chunksize int32) {
	b := w.hdr
	be := binary.BigEndian
	copy(b, Magic)
	b[10] = 0xD2
	be.PutUint32(b[offHeaderLen:], uint32(len(w.hdr)))
	b[15] = 0xCF
	be.PutUint64(b[offFrameLen:], uint64(frameLen))
	b[24] = 0xA4
	b[offFlags] = 2 | flagOffsets
	b[offFrameType] = 0
	codec := w.cp.Codec
	nib := byte(codec)
	if codec >= 6 {
		nib = 6
	}
	b[offCodecFlags] = nib | byte(w.cp.Clevel)<<4
	b[offOtherFlags] = splitToHeader(w.cp.Split)
	b[29] = 0xD3
	be.PutUint64(b[offNbytes:], uint64(nbytes))
	b[38] = 0xD3
	be.PutUint64(b[offCbytes:], uint64(cbytes))
	b[47] = 0xD2
	be.PutUint32(b[offTypesize:], uint32(w.p.Typesize))
	b[52] = 0xD2
	be.PutUint32(b[offBlocksize:], uint32(w.cp.Blocksize))
	b[57] = 0xD2
	be.PutUint32(b[offChunksize:], uint32(chunksize))
	b[62] = 0xD1
	be.PutUint16(b[offNthreadsC:], 1)
	b[65] = 0xD1
	be.PutUint16(b[offNthreadsD:], 1)
	b[offHasVLMeta] = 0xC2
	if len(w.vlmeta) > 0 {
		b[offHasVLMeta] = 0xC3
	}
	b[69] = 0xD8
	b[offNfilters] = 6
	copy(b[offFilters:], w.cp.Filters[:])
	b[offUDCodec] = byte(codec)
	b[offCompMeta] = 0
	copy(b[offFiltersMeta:], w.cp.FiltersMeta[:])
	b[offOtherFlags2] = 0
	b[86] = 0
	if t := w.p.tmpl; t != nil {
		b[offCodecFlags], b[offOtherFlags] = t[offCodecFlags], t[offOtherFlags]
		copy(b[offNthreadsC:offNthreadsC+2], t[offNthreadsC:])
		copy(b[offNthreadsD:offNthreadsD+2], t[offNthreadsD:])
		copy(b[offNfilters:FixedHeaderLen], t[offNfilters:])
	}
}

// splitToHeader maps a split mode to other_flags (splitmode − 1 in
// c-blosc2's numbering: ALWAYS 1, NEVER 2, AUTO 3, FORWARD_COMPAT 4).
func splitToHeader(s blosc.SplitMode) byte {
	switch s {
	case blosc.SplitAlways:
		return 0
	case blosc.SplitNever:
		return 1
	case blosc.SplitAuto:
		return 2
	}
	return 3
}

// splitFromHeader is the inverse of splitToHeader.
func splitFromHeader(b byte) blosc.SplitMode {
	switch b & 3 {
	case 0:
		return blosc.SplitAlways
	case 1:
		return blosc.SplitNever
	case 2:
		return blosc.SplitAuto
	}
	return blosc.SplitForwardCompat
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return err
}

func (w *Writer) usable() error {
	if w.closed {
		return errors.New("frame: writer is closed")
	}
	return w.err
}

// directWrite is the size from which a chunk goes to the underlying
// writer directly, after what is buffered, instead of through the
// buffer: copying whole chunks into it cost 6 % of `pack`'s CPU.
const directWrite = 64 << 10

// write appends bytes to the chunks section.
func (w *Writer) write(b []byte) error {
	var err error
	if len(b) >= directWrite {
		if err = w.bw.Flush(); err == nil {
			_, err = w.w.Write(b)
		}
	} else {
		_, err = w.bw.Write(b)
	}
	if err != nil {
		return w.fail(err)
	}
	w.pos += int64(len(b))
	return nil
}

// AddChunk compresses plain as the next chunk. A chunk that compresses to
// a special zero chunk is recorded in the index only, as c-blosc2 does.
func (w *Writer) AddChunk(plain []byte) error {
	if err := w.usable(); err != nil {
		return err
	}
	if len(plain) > maxChunkNbytes {
		return fmt.Errorf("%w: chunk of %d bytes exceeds the limit %d", pack.ErrUnsupported, len(plain), maxChunkNbytes)
	}
	var err error
	w.buf, err = blosc.Compress(w.buf[:0], plain, w.cp)
	if err != nil {
		return err
	}
	return w.AddCompressed(w.buf, len(plain))
}

// Compress compresses plain with the frame's chunk parameters, as
// AddChunk does; it is safe for concurrent use, so that chunks can be
// compressed in parallel and then added in order with AddCompressed.
func (w *Writer) Compress(plain []byte) ([]byte, error) {
	if len(plain) > maxChunkNbytes {
		return nil, fmt.Errorf("%w: chunk of %d bytes exceeds the limit %d", pack.ErrUnsupported, len(plain), maxChunkNbytes)
	}
	return blosc.Compress(nil, plain, w.cp)
}

// CompressFrom is Compress of the n bytes of r, read one block at a time
// (blosc.CompressReaderAt): its memory does not grow with the chunk size.
func (w *Writer) CompressFrom(r io.ReaderAt, n int) ([]byte, error) {
	if n > maxChunkNbytes {
		return nil, fmt.Errorf("%w: chunk of %d bytes exceeds the limit %d", pack.ErrUnsupported, n, maxChunkNbytes)
	}
	return blosc.CompressReaderAt(nil, r, n, w.cp)
}

// AddCompressed appends a chunk that Compress made from plainLen bytes
// (a special zero chunk is recorded in the index only).
func (w *Writer) AddCompressed(chunk []byte, plainLen int) error {
	if err := w.usable(); err != nil {
		return err
	}
	h, err := blosc.ParseHeader(chunk)
	if err != nil {
		return w.fail(fmt.Errorf("frame: compressed chunk: %w", err))
	}
	if int(h.Nbytes) != plainLen || int(h.Cbytes) > len(chunk) {
		return fmt.Errorf("%w: compressed chunk of %d bytes for %d", pack.ErrFormat, h.Nbytes, plainLen)
	}
	if h.Special() == blosc.SpecialZero && plainLen > 0 {
		return w.addSpecial(blosc.SpecialZero, int64(plainLen))
	}
	return w.addStored(chunk[:h.Cbytes], h)
}

// AddRawChunk appends a complete Blosc2 chunk verbatim (special chunks
// included: they are stored, not turned into index entries).
func (w *Writer) AddRawChunk(chunk []byte) error {
	if err := w.usable(); err != nil {
		return err
	}
	h, err := blosc.ParseHeader(chunk)
	if err != nil {
		return fmt.Errorf("%w: raw chunk: %w", pack.ErrFormat, err)
	}
	if int(h.Cbytes) > len(chunk) {
		return fmt.Errorf("%w: raw chunk: cbytes %d, only %d bytes given", pack.ErrFormat, h.Cbytes, len(chunk))
	}
	return w.addStored(chunk[:h.Cbytes], h)
}

func (w *Writer) addStored(chunk []byte, h blosc.Header) error {
	if len(w.entries) >= maxChunks {
		return fmt.Errorf("%w: more than %d chunks", pack.ErrUnsupported, maxChunks)
	}
	w.entries = append(w.entries, entry{off: w.pos, nbytes: int64(h.Nbytes), vl: h.VLBlocks()})
	return w.write(chunk)
}

// addStoredFrom copies a stored chunk of n bytes (header h) from r.
func (w *Writer) addStoredFrom(r io.Reader, h blosc.Header) error {
	if len(w.entries) >= maxChunks {
		return fmt.Errorf("%w: more than %d chunks", pack.ErrUnsupported, maxChunks)
	}
	w.entries = append(w.entries, entry{off: w.pos, nbytes: int64(h.Nbytes), vl: h.VLBlocks()})
	n, err := io.CopyN(w.bw, r, int64(h.Cbytes))
	w.pos += n
	if err != nil {
		return w.fail(err)
	}
	return nil
}

// AddSpecial appends a chunk of nbytes that holds only zeros
// (SpecialZero), NaNs (SpecialNaN; the typesize must be 4 or 8) or
// undefined bytes (SpecialUninit, read back as zeros). It takes no space:
// only the index records it. In a frame that ends up with variable chunk
// sizes, where the index cannot record a special chunk's size, Close
// stores it as a 32-byte special chunk instead.
func (w *Writer) AddSpecial(kind int, nbytes int64) error {
	if err := w.usable(); err != nil {
		return err
	}
	return w.addSpecial(kind, nbytes)
}

func (w *Writer) addSpecial(kind int, nbytes int64) error {
	switch kind {
	case blosc.SpecialZero, blosc.SpecialUninit:
	case blosc.SpecialNaN:
		if w.p.Typesize != 4 && w.p.Typesize != 8 {
			return fmt.Errorf("%w: NaN chunk with typesize %d (needs 4 or 8)", pack.ErrUnsupported, w.p.Typesize)
		}
		if nbytes%int64(w.p.Typesize) != 0 {
			return fmt.Errorf("%w: NaN chunk of %d bytes is not a multiple of typesize %d", pack.ErrUnsupported, nbytes, w.p.Typesize)
		}
	default:
		return fmt.Errorf("%w: special kind %d (want zero, NaN or uninit)", pack.ErrUnsupported, kind)
	}
	if nbytes < 0 || nbytes > maxChunkNbytes {
		return fmt.Errorf("%w: special chunk of %d bytes", pack.ErrUnsupported, nbytes)
	}
	if len(w.entries) >= maxChunks {
		return fmt.Errorf("%w: more than %d chunks", pack.ErrUnsupported, maxChunks)
	}
	w.entries = append(w.entries, entry{off: -1, nbytes: nbytes, special: kind})
	return nil
}

// layout decides the chunk size and the frame format version.
func (w *Writer) layout() (chunksize int32, version int, variable, allVL bool) {
	n := len(w.entries)
	cs := int64(w.p.ChunkSize)
	if cs == 0 && n > 0 {
		cs = w.entries[0].nbytes
	}
	fixed := cs > 0
	allVL = n > 0
	for i, e := range w.entries {
		if e.nbytes == 0 || e.nbytes > cs || (i < n-1 && e.nbytes != cs) {
			fixed = false
		}
		if e.special != 0 || !e.vl {
			allVL = false
		}
	}
	if n == 0 {
		return int32(cs), 2, false, false
	}
	if fixed && !allVL {
		return int32(cs), 2, false, false
	}
	return 0, 3, !fixed, allVL
}

// Close writes the index chunk, the trailer and the final header. It does
// not close the underlying writer.
func (w *Writer) Close() error {
	if err := w.usable(); err != nil {
		return err
	}
	w.closed = true
	chunksize, version, variable, allVL := w.layout()
	// In a variable-size frame the index cannot say how large a special
	// chunk is: store those as 32-byte special chunks.
	for i := range w.entries {
		e := &w.entries[i]
		if e.special == 0 {
			continue
		}
		if !variable {
			e.off = int64(0x80|e.special) << 56
			continue
		}
		e.off = w.pos
		if err := w.write(specialChunk(e.special, e.nbytes, w.cp.Typesize)); err != nil {
			return err
		}
		e.special = 0
	}
	cbytes := w.pos
	var nbytes int64
	for _, e := range w.entries {
		nbytes += e.nbytes
	}
	if n := len(w.entries); n > 0 {
		idx := make([]byte, 8*n)
		for i, e := range w.entries {
			binary.LittleEndian.PutUint64(idx[8*i:], uint64(e.off))
		}
		ip := blosc.Params{Codec: blosc.CodecBloscLZ, Clevel: 5, Typesize: 8, Split: blosc.SplitNever}
		ip.Filters[5] = blosc.FilterShuffle
		ic, err := blosc.Compress(nil, idx, ip)
		if err != nil {
			return w.fail(fmt.Errorf("frame: index chunk: %w", err))
		}
		if err := w.write(ic); err != nil {
			return err
		}
	}
	// Trailer: 94 01, vlmetalayers, CE trailer_len, D8 00, 16-byte fingerprint.
	tr := []byte{0x94, 0x01}
	tr = appendMetaSection(tr, w.vlmeta, 2, false)
	tlen := len(tr) + trailerTailLen
	tr = append(tr, 0xCE)
	tr = binary.BigEndian.AppendUint32(tr, uint32(tlen))
	tr = append(tr, 0xD8, 0)
	tr = append(tr, make([]byte, 16)...)
	if err := w.write(tr); err != nil {
		return err
	}
	if err := w.bw.Flush(); err != nil {
		return w.fail(err)
	}
	frameLen := int64(len(w.hdr)) + w.pos
	w.fillHeader(frameLen, nbytes, cbytes, chunksize)
	flags := byte(version) | flagOffsets
	if variable {
		flags |= flagVariable
	}
	if allVL {
		flags |= flagVLBlocks
	}
	w.hdr[offFlags] = flags
	if _, err := w.w.Seek(w.start, io.SeekStart); err != nil {
		return w.fail(err)
	}
	if _, err := w.w.Write(w.hdr[:FixedHeaderLen]); err != nil {
		return w.fail(err)
	}
	if _, err := w.w.Seek(w.start+frameLen, io.SeekStart); err != nil {
		return w.fail(err)
	}
	if t, ok := w.w.(interface{ Truncate(int64) error }); ok {
		if err := t.Truncate(w.start + frameLen); err != nil {
			return w.fail(err)
		}
	}
	return nil
}

// NewSink returns a pack.ChunkSink writing a contiguous frame with this
// frame's parameters and metadata: codec, clevel, filters and split mode
// from the header (its codec_flags, other_flags, filter pipeline,
// nthreads and other_flags2 bytes are copied), typesize, blocksize,
// chunk size (NewChunkSize), metalayers and vlmetalayers byte for byte.
// CopyChunk copies stored chunk bytes, or a special index entry, verbatim.
// A sparse frame's sink writes a contiguous frame. size is the plain size
// of the new frame; a .b2nd's geometry (its b2nd metalayer, copied
// unchanged) fixes the super-chunk size, so for a .b2nd a size other than
// Size() is refused with pack.ErrUnsupported.
func (f *Frame) NewSink(w io.WriteSeeker, size int64) (pack.ChunkSink, error) {
	if size < 0 {
		return nil, fmt.Errorf("%s: %w: negative size %d", f.name, pack.ErrFormat, size)
	}
	if f.nd != nil && size != f.Size() {
		return nil, f.errf(pack.ErrUnsupported, "resizing a b2nd array's super-chunk from %d to %d bytes would break its shape %v", f.Size(), size, f.nd.Shape)
	}
	p := f.Params()
	fw, err := NewWriter(w, p)
	if err != nil {
		return nil, err
	}
	return &sink{f: f, w: fw}, nil
}

// Params returns writer parameters that reproduce this frame's header:
// see NewSink.
func (f *Frame) Params() Params {
	h := &f.hdr
	ts := int(h.typesize)
	cp := blosc.Params{
		Codec: h.codec(), Clevel: h.clevel(), Typesize: ts,
		Blocksize: max(int(h.blocksize), 0), Split: splitFromHeader(h.raw[offOtherFlags]),
	}
	if ts > 255 {
		cp.Typesize = 1
	}
	copy(cp.Filters[:], h.raw[offFilters:offFilters+6])
	copy(cp.FiltersMeta[:], h.raw[offFiltersMeta:offFiltersMeta+6])
	if cp.Blocksize > maxChunkNbytes {
		cp.Blocksize = 0
	}
	p := Params{Chunk: cp, Typesize: ts, ChunkSize: int(f.NewChunkSize())}
	for _, m := range f.meta {
		p.Metalayers = append(p.Metalayers, Metalayer{Name: m.name, Value: m.value})
	}
	for _, m := range f.vlmeta {
		p.VLMetalayers = append(p.VLMetalayers, Metalayer{Name: m.name, Value: m.value, Compressed: true})
	}
	t := h.raw
	p.tmpl = &t
	return p
}

type sink struct {
	f *Frame
	w *Writer
}

// CopyChunk appends chunk i of the source verbatim.
func (s *sink) CopyChunk(i int) error {
	f := s.f
	if err := s.w.usable(); err != nil {
		return err
	}
	if i < 0 || i >= f.n {
		return fmt.Errorf("%s: %w: chunk %d out of range [0,%d)", f.name, pack.ErrFormat, i, f.n)
	}
	if v := f.entry(i); v < 0 {
		k, _ := specialKind(v)
		return s.w.addSpecial(k, f.chunkLen(i))
	}
	h, err := f.chunkHeader(i)
	if err != nil {
		return err
	}
	if int64(h.Nbytes) != f.chunkLen(i) {
		return f.errf(pack.ErrFormat, "chunk %d: header says %d bytes, index %d", i, h.Nbytes, f.chunkLen(i))
	}
	r, _, err := f.storedChunk(i)
	if err != nil {
		return err
	}
	return s.w.addStoredFrom(io.NewSectionReader(r, 0, int64(h.Cbytes)), h)
}

// AddChunk compresses a new chunk with the source's parameters.
func (s *sink) AddChunk(plain []byte) error { return s.w.AddChunk(plain) }

// Compress compresses a chunk for AddCompressed (pack.ParallelSink).
func (s *sink) Compress(plain []byte) ([]byte, error) { return s.w.Compress(plain) }

// CompressFrom compresses a chunk read from r (pack.ParallelSink).
func (s *sink) CompressFrom(r io.ReaderAt, n int) ([]byte, error) { return s.w.CompressFrom(r, n) }

// AddCompressed appends a chunk made by Compress.
func (s *sink) AddCompressed(chunk []byte, plainLen int) error {
	return s.w.AddCompressed(chunk, plainLen)
}

// Close completes the frame.
func (s *sink) Close() error { return s.w.Close() }

var _ pack.ParallelSink = (*sink)(nil)
