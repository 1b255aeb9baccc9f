// Package frame reads and writes Blosc2 frames (FORMATS §5–§7):
// contiguous frames (.b2frame, .b2f, .b2), sparse frame directories
// (chunks.b2frame plus one XXXXXXXX.chunk file per chunk) and .b2nd
// N-dimensional arrays stored in either.
//
// A Frame is an io.ReaderAt over the raw super-chunk bytes (all chunks in
// logical order, b2nd padding included), served block by block through a
// pack.ChunkReader and a shared pack.BlockCache. For .b2nd frames COrder
// and NPY add two more views: the array in C order with the padding
// removed, and the same preceded by an NPY header.
//
// Opening checks every header field and every index entry against the
// file size and hard limits before anything is allocated from them, so a
// crafted file yields an error, never a panic or a huge allocation.
//
// Writer streams a new contiguous frame that c-blosc2 2.x and 3.x read;
// Frame.NewSink builds one with the parameters and metadata of an existing
// frame, for pack.Rewrite.
package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/npy"
	"github.com/bloscfs/bloscfs/pack"
)

// Layout constants of frame format versions 2 and 3 (FORMATS §5.1, §5.5).
const (
	// FixedHeaderLen is the size of the fixed part of a frame header.
	FixedHeaderLen = 87
	// Magic is the frame magic: a msgpack fixarray(14), a fixstr(8) marker
	// and "b2frame\x00".
	Magic = "\x9e\xa8b2frame\x00"

	trailerTailLen = 23 // CE len32 D8 type fingerprint[16]
	minTrailerLen  = 25 // c-blosc2's lower bound

	// Hard limits, checked before allocating.
	maxChunkNbytes  = 1<<31 - 1 - blosc.ExtHeaderLen // c-blosc2 BLOSC2_MAX_BUFFERSIZE
	maxChunks       = 1 << 24                        // index entries (128 MiB of offsets)
	maxMetaBytes    = 64 << 20                       // header_len and trailer_len
	maxMetalayers   = 16                             // BLOSC2_MAX_METALAYERS
	maxVLMetalayers = 8 * 1024                       // BLOSC2_MAX_VLMETALAYERS
	maxVLMetaValue  = 64 << 20                       // decompressed vlmetalayer
	maxIndexFile    = 256 << 20                      // chunks.b2frame of a sparse frame
	maxNameLen      = 31                             // BLOSC2_METALAYER_NAME_MAXLEN

	// Special values of index entries: the top byte of the int64.
	specialOffsetZero   = 0x81
	specialOffsetNaN    = 0x82
	specialOffsetUninit = 0x84

	flagVariable = 0x40 // general_flags: chunks have variable sizes
	flagVLBlocks = 0x80 // general_flags: all chunks are VL-block chunks
	flagOffsets  = 0x10 // general_flags: 64-bit offsets (offset-size code 1)
)

// Header field offsets in the fixed part.
const (
	offHeaderLen   = 11
	offFrameLen    = 16
	offFlags       = 25
	offFrameType   = 26
	offCodecFlags  = 27
	offOtherFlags  = 28
	offNbytes      = 30
	offCbytes      = 39
	offTypesize    = 48
	offBlocksize   = 53
	offChunksize   = 58
	offNthreadsC   = 63
	offNthreadsD   = 66
	offHasVLMeta   = 68
	offNfilters    = 70
	offFilters     = 71
	offUDCodec     = 77
	offCompMeta    = 78
	offFiltersMeta = 79
	offOtherFlags2 = 85
)

// markers lists the fixed msgpack markers of the header (offset, byte).
var markers = [...]struct {
	off  int
	b    byte
	name string
}{
	{10, 0xD2, "header_len int32"}, {15, 0xCF, "frame_len uint64"}, {24, 0xA4, "flags fixstr(4)"},
	{29, 0xD3, "nbytes int64"}, {38, 0xD3, "cbytes int64"}, {47, 0xD2, "typesize int32"},
	{52, 0xD2, "blocksize int32"}, {57, 0xD2, "chunksize int32"}, {62, 0xD1, "nthreads int16"},
	{65, 0xD1, "nthreads int16"}, {69, 0xD8, "fixext16 filters"},
}

// header holds the fixed header fields.
type header struct {
	raw       [FixedHeaderLen]byte
	headerLen int64
	frameLen  int64
	version   int
	flags     byte // general_flags
	frameType byte
	nbytes    int64
	cbytes    int64
	typesize  int32
	blocksize int32
	chunksize int32
}

// Codec returns the default compcode of the header's codec_flags.
func (h *header) codec() int {
	c := int(h.raw[offCodecFlags] & 0x0F)
	if c == 6 {
		c = int(h.raw[offUDCodec])
	}
	return c
}

func (h *header) clevel() int { return int(h.raw[offCodecFlags] >> 4) }

// variable reports whether chunk sizes must be read from the chunks:
// chunksize ≤ 0 (0 for variable chunks, -1 in empty frames written by
// c-blosc2 2.x) or the variable-size flag.
func (h *header) variable() bool { return h.chunksize <= 0 || h.flags&flagVariable != 0 }

// Frame is an opened Blosc2 frame: contiguous, or a sparse directory. Its
// ReadAt serves the raw super-chunk bytes. A Frame is safe for concurrent
// use and implements pack.Container, pack.ChunkSource, pack.ChunkSizer
// and pack.Rewritable.
type Frame struct {
	name   string
	r      io.ReaderAt // contiguous: the frame; sparse: chunks.b2frame in memory
	dir    string      // sparse: the directory
	sparse bool
	hdr    header

	// chunkFile, when set, opens a sparse frame's chunk files (see
	// OpenSparse); else they are files in dir.
	chunkFile func(id int64) (io.ReaderAt, int64, error)

	meta   []metaEntry // header metalayers, in order
	vlmeta []metaEntry // trailer vlmetalayers (stored Blosc2 chunks), in order

	n       int     // number of chunks
	offsets []int64 // index entries; nil when uniform
	uniform int64   // the single value of a uniform (special) index
	starts  []int64 // variable-size frames: plain offset of each chunk, len n+1

	nd *Array // b2nd geometry, nil for plain frames

	cr *pack.ChunkReader

	infoOnce sync.Once
	info     pack.Info
}

var (
	_ pack.Container  = (*Frame)(nil)
	_ pack.Rewritable = (*Frame)(nil)
	_ pack.ChunkSizer = (*Frame)(nil)
)

func init() {
	pack.RegisterFormat(pack.Format{
		Name: "b2frame",
		Match: func(head []byte) bool {
			return len(head) > offFrameType && string(head[:10]) == Magic && head[offFrameType] == 0
		},
		Open: func(r io.ReaderAt, size int64, name string, cache pack.BlockCache) (pack.Container, error) {
			return Open(r, size, name, cache)
		},
		Head: Head,
		OpenDir: func(dir string, cache pack.BlockCache) (pack.Container, error) {
			return OpenDir(dir, cache)
		},
		MatchDir: func(dir string) bool {
			f, err := openPart(dir, IndexFile)
			if err != nil {
				return false
			}
			defer f.Close()
			var b [FixedHeaderLen]byte
			_, err = io.ReadFull(f, b[:])
			return err == nil && string(b[:10]) == Magic && b[offFrameType] == 1
		},
	})
}

// IndexFile is the name of the index frame inside a sparse frame directory.
const IndexFile = "chunks.b2frame"

func (f *Frame) errf(base error, format string, args ...any) error {
	return fmt.Errorf("%s: %w: "+format, append([]any{f.name, base}, args...)...)
}

// Open opens the contiguous frame that starts at offset 0 of r, which holds
// size bytes. The frame's own frame_len delimits it (later bytes are
// ignored); a frame_len past size is an error. name prefixes errors. A nil
// cache means pack.NoCache.
func Open(r io.ReaderAt, size int64, name string, cache pack.BlockCache) (*Frame, error) {
	f := &Frame{name: name, r: r}
	if err := f.parse(size); err != nil {
		return nil, err
	}
	f.cr = pack.NewChunkReader(name, f, cache)
	return f, nil
}

// Head is pack.OpenHead for a contiguous frame: head holds the first
// bytes of a size-byte file. The plain size is the header's nbytes, and
// for a .b2nd array the view's size follows from the b2nd metalayer in
// the header (shape and dtype), so only the header is read, and checked
// as Open checks it, with what else it can tell alone (the index's
// length, the chunks section and the array's geometry against nbytes);
// the trailer, the index and the chunks are not. A header (metalayers
// included) longer than head gives a *pack.HeadShortError.
func Head(head []byte, size int64, name string) (pack.Head, error) {
	head = head[:min(int64(len(head)), max(size, 0))]
	f := &Frame{name: name, r: bytes.NewReader(head)}
	if err := f.parseHeader(size, int64(len(head))); err != nil {
		return pack.Head{}, err
	}
	h := &f.hdr
	// The chunks section, and the index chunk when there is data, lie
	// between the header and a trailer of at least minTrailerLen bytes.
	room := h.frameLen - h.headerLen - minTrailerLen
	if h.nbytes > 0 {
		room -= blosc.MinHeaderLen
	}
	if h.cbytes > room {
		return pack.Head{}, f.errf(pack.ErrFormat, "cbytes %d: the chunks section does not fit in the %d-byte frame after its %d-byte header", h.cbytes, h.frameLen, h.headerLen)
	}
	if !h.variable() {
		cs := int64(h.chunksize)
		if n := h.nbytes/cs + min(1, h.nbytes%cs); n > maxChunks {
			return pack.Head{}, f.errf(pack.ErrUnsupported, "index of %d chunks exceeds the limit of %d", n, maxChunks)
		}
	}
	a, err := f.arrayMeta()
	if err != nil {
		return pack.Head{}, err
	}
	if a == nil {
		return pack.Head{Format: "b2frame", Size: h.nbytes}, nil
	}
	if a.size != 0 {
		if cb := a.chunkItems * int64(a.Itemsize); h.nbytes != a.nchunks*cb {
			return pack.Head{}, f.errf(pack.ErrFormat, "b2nd super-chunk of %d bytes, the geometry needs %d", h.nbytes, a.nchunks*cb)
		}
	}
	npy := int64(len(npy.Header(a.NPYDescr(), a.Shape))) + a.size*int64(a.Itemsize)
	return pack.Head{Format: "b2nd", Size: npy, NPY: true}, nil
}

// OpenDir opens a sparse frame directory: dir/chunks.b2frame holds the
// header, index and trailer, and every stored chunk is a file named after
// its id in 8 upper-case hex digits plus ".chunk". Chunk files are opened
// only while they are read, so the Frame holds no file descriptors.
func OpenDir(dir string, cache pack.BlockCache) (*Frame, error) {
	f := &Frame{name: dir, dir: dir, sparse: true}
	file, err := openPart(dir, IndexFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if st.Size() > maxIndexFile {
		return nil, f.errf(pack.ErrUnsupported, "%s of %d bytes exceeds the %d-byte limit", IndexFile, st.Size(), maxIndexFile)
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(file, b); err != nil {
		return nil, fmt.Errorf("%s: reading %s: %w", dir, IndexFile, err)
	}
	f.r = bytes.NewReader(b)
	if err := f.parse(int64(len(b))); err != nil {
		return nil, err
	}
	f.cr = pack.NewChunkReader(dir, f, cache)
	return f, nil
}

// readAt reads exactly len(p) bytes at off of the frame (index file for a
// sparse frame), which must lie in [0, limit).
func (f *Frame) readAt(p []byte, off, limit int64, what string) error {
	if off < 0 || off > limit || int64(len(p)) > limit-off {
		return f.errf(pack.ErrFormat, "%s [%d,%d) past the end (%d)", what, off, off+int64(len(p)), limit)
	}
	n, err := f.r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%s: reading %s at %d: %w", f.name, what, off, err)
}

// parseFixed checks the magic and markers of the fixed header and decodes
// its fields. It does not check sizes.
func parseFixed(b []byte) (header, error) {
	var h header
	copy(h.raw[:], b)
	if string(b[:10]) != Magic {
		return h, fmt.Errorf("%w: bad magic %q at offset 0, want %q (not a Blosc2 frame)", pack.ErrFormat, b[:10], Magic)
	}
	for _, m := range markers {
		if b[m.off] != m.b {
			return h, fmt.Errorf("%w: header byte %d is %#02x, want the %s marker %#02x", pack.ErrFormat, m.off, b[m.off], m.name, m.b)
		}
	}
	if v := b[offHasVLMeta]; v != 0xC2 && v != 0xC3 {
		return h, fmt.Errorf("%w: header byte %d is %#02x, want a msgpack boolean", pack.ErrFormat, offHasVLMeta, v)
	}
	be := binary.BigEndian
	h.headerLen = int64(int32(be.Uint32(b[offHeaderLen:])))
	h.frameLen = int64(be.Uint64(b[offFrameLen:]))
	h.flags = b[offFlags]
	h.version = int(h.flags & 0x0F)
	h.frameType = b[offFrameType]
	h.nbytes = int64(be.Uint64(b[offNbytes:]))
	h.cbytes = int64(be.Uint64(b[offCbytes:]))
	h.typesize = int32(be.Uint32(b[offTypesize:]))
	h.blocksize = int32(be.Uint32(b[offBlocksize:]))
	h.chunksize = int32(be.Uint32(b[offChunksize:]))
	return h, nil
}

// parseHeader reads and checks the header of a size-byte frame, of
// which f.r holds the first avail bytes: a header longer than those
// gives a *pack.HeadShortError.
func (f *Frame) parseHeader(size, avail int64) error {
	if size < FixedHeaderLen {
		return f.errf(pack.ErrFormat, "%d bytes is too short for a frame (the fixed header alone is %d)", size, FixedHeaderLen)
	}
	if avail < FixedHeaderLen {
		return &pack.HeadShortError{Name: f.name, N: FixedHeaderLen}
	}
	var fb [FixedHeaderLen]byte
	if err := f.readAt(fb[:], 0, size, "header"); err != nil {
		return err
	}
	h, err := parseFixed(fb[:])
	if err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	f.hdr = h
	switch {
	case h.version == 2 || h.version == 3:
	case h.version == 1:
		return f.errf(pack.ErrUnsupported, "frame format version 1 (c-blosc2 2.0.0 betas, older layout)")
	default:
		return f.errf(pack.ErrUnsupported, "frame format version %d (general_flags %#02x)", h.version, h.flags)
	}
	switch {
	case h.frameType == 0 && f.sparse:
		return f.errf(pack.ErrFormat, "%s has frame_type 0 (contiguous), want 1 (sparse)", IndexFile)
	case h.frameType == 1 && !f.sparse:
		return f.errf(pack.ErrFormat, "frame_type 1: this is the index of a sparse frame; open its directory")
	case h.frameType > 1:
		return f.errf(pack.ErrUnsupported, "frame_type %#02x", h.frameType)
	}
	// Sizes, each against the file and the hard limits.
	if h.frameLen < 0 || h.frameLen > size {
		return f.errf(pack.ErrFormat, "frame_len %d past the end of the %d-byte file (truncated or corrupt frame)", uint64(h.frameLen), size)
	}
	if h.headerLen < FixedHeaderLen || h.headerLen > h.frameLen-minTrailerLen {
		return f.errf(pack.ErrFormat, "header_len %d outside [%d,%d] for frame_len %d", h.headerLen, FixedHeaderLen, h.frameLen-minTrailerLen, h.frameLen)
	}
	if h.headerLen > maxMetaBytes {
		return f.errf(pack.ErrUnsupported, "header_len %d exceeds the %d-byte limit", h.headerLen, maxMetaBytes)
	}
	if h.nbytes < 0 {
		return f.errf(pack.ErrFormat, "nbytes %d is negative", h.nbytes)
	}
	if h.cbytes < 0 {
		return f.errf(pack.ErrFormat, "cbytes %d is negative", h.cbytes)
	}
	if h.chunksize > maxChunkNbytes {
		return f.errf(pack.ErrFormat, "chunksize %d exceeds the Blosc2 chunk limit %d", h.chunksize, maxChunkNbytes)
	}
	if h.typesize <= 0 {
		return f.errf(pack.ErrFormat, "typesize %d (must be at least 1)", h.typesize)
	}

	// Header metalayers.
	if h.headerLen > avail {
		return &pack.HeadShortError{Name: f.name, N: h.headerLen}
	}
	hb := make([]byte, h.headerLen)
	if err := f.readAt(hb, 0, size, "header"); err != nil {
		return err
	}
	if h.headerLen > FixedHeaderLen {
		f.meta, _, err = parseMetaSection(hb, FixedHeaderLen, 0, "header metalayers", maxMetalayers, int(h.headerLen))
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

func (f *Frame) parse(size int64) error {
	if err := f.parseHeader(size, size); err != nil {
		return err
	}
	h := f.hdr
	var err error
	// Trailer.
	var tail [trailerTailLen]byte
	if err := f.readAt(tail[:], h.frameLen-trailerTailLen, h.frameLen, "trailer"); err != nil {
		return err
	}
	if tail[0] != 0xCE || tail[5] != 0xD8 {
		return f.errf(pack.ErrFormat, "trailer end markers %#02x %#02x at offset %d, want 0xce 0xd8", tail[0], tail[5], h.frameLen-trailerTailLen)
	}
	tlen := int64(binary.BigEndian.Uint32(tail[1:]))
	if tlen < minTrailerLen || tlen > h.frameLen-h.headerLen {
		return f.errf(pack.ErrFormat, "trailer_len %d outside [%d,%d]", tlen, minTrailerLen, h.frameLen-h.headerLen)
	}
	if tlen > maxMetaBytes {
		return f.errf(pack.ErrUnsupported, "trailer_len %d exceeds the %d-byte limit", tlen, maxMetaBytes)
	}
	tstart := h.frameLen - tlen
	tb := make([]byte, tlen)
	if err := f.readAt(tb, tstart, h.frameLen, "trailer"); err != nil {
		return err
	}
	if tb[0] != 0x94 {
		return f.errf(pack.ErrFormat, "trailer at offset %d starts with %#02x, want fixarray(4) 0x94", tstart, tb[0])
	}
	if tb[1] > 1 {
		return f.errf(pack.ErrUnsupported, "trailer format version %d", tb[1])
	}
	f.vlmeta, _, err = parseMetaSection(tb, 2, tstart, "trailer vlmetalayers", maxVLMetalayers, len(tb)-trailerTailLen)
	if err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}

	if err := f.parseIndex(tstart); err != nil {
		return err
	}
	return f.parseND()
}

// parseIndex reads and checks the index chunk, which lies between the
// chunks section (empty for sparse frames) and the trailer.
func (f *Frame) parseIndex(tstart int64) error {
	h := &f.hdr
	idxStart := h.headerLen
	if !f.sparse {
		if h.cbytes > tstart-h.headerLen {
			return f.errf(pack.ErrFormat, "cbytes %d: the chunks section would end at %d, past the trailer at %d", h.cbytes, h.headerLen+h.cbytes, tstart)
		}
		idxStart += h.cbytes
	}
	avail := tstart - idxStart
	if avail == 0 {
		if h.nbytes != 0 {
			return f.errf(pack.ErrFormat, "no index chunk, but nbytes is %d", h.nbytes)
		}
		return nil
	}
	ic, err := blosc.NewChunk(io.NewSectionReader(f.r, idxStart, avail), avail)
	if err != nil {
		return f.errf(pack.ErrFormat, "index chunk at offset %d: %w", idxStart, err)
	}
	if ic.Nbytes%8 != 0 {
		return f.errf(pack.ErrFormat, "index chunk holds %d bytes, not a multiple of 8", ic.Nbytes)
	}
	n := int64(ic.Nbytes) / 8
	if n > maxChunks {
		return f.errf(pack.ErrUnsupported, "index of %d chunks exceeds the limit of %d", n, maxChunks)
	}
	// A variable-size frame can hold at most one special chunk, and every
	// stored chunk takes at least a chunk header of the section.
	if h.variable() && !f.sparse && n > h.cbytes/blosc.MinHeaderLen+1 {
		return f.errf(pack.ErrFormat, "index of %d chunks; a variable-size frame whose chunks section has %d bytes holds at most %d", n, h.cbytes, h.cbytes/blosc.MinHeaderLen+1)
	}
	if !h.variable() {
		cs := int64(h.chunksize)
		want := h.nbytes / cs
		if h.nbytes%cs != 0 {
			want++
		}
		if want != n {
			return f.errf(pack.ErrFormat, "nbytes %d in chunks of %d needs %d chunks, but the index has %d", h.nbytes, cs, want, n)
		}
	}
	f.n = int(n)
	if n == 0 {
		if h.nbytes != 0 {
			return f.errf(pack.ErrFormat, "empty index, but nbytes is %d", h.nbytes)
		}
		return nil
	}
	// A special index chunk (all entries equal) needs no table.
	switch s := ic.Special(); {
	case s == blosc.SpecialZero:
		f.uniform = 0
	case s == blosc.SpecialValue && ic.Cbytes == blosc.ExtHeaderLen+8:
		var v [8]byte
		if err := f.readAt(v[:], idxStart+blosc.ExtHeaderLen, tstart, "index value"); err != nil {
			return err
		}
		f.uniform = int64(binary.LittleEndian.Uint64(v[:]))
	default:
		// The table is held in memory: it may not claim more than the
		// index chunk's bytes can justify (a special NaN or uninit
		// "index" of 16M entries is 40 bytes).
		if limit := 64*int64(ic.Cbytes) + 64<<20; int64(ic.Nbytes) > limit {
			return f.errf(pack.ErrUnsupported, "index chunk of %d bytes decodes to %d, over the %d-byte limit", ic.Cbytes, ic.Nbytes, limit)
		}
		raw := make([]byte, ic.Nbytes)
		if err := ic.Decode(raw); err != nil {
			return f.errf(pack.ErrFormat, "index chunk at offset %d: %w", idxStart, err)
		}
		f.offsets = make([]int64, n)
		for i := range f.offsets {
			f.offsets[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
		}
	}
	return f.checkIndex()
}

// entry returns index entry i.
func (f *Frame) entry(i int) int64 {
	if f.offsets == nil {
		return f.uniform
	}
	return f.offsets[i]
}

// specialKind maps a negative index entry to a blosc special kind.
func specialKind(v int64) (int, bool) {
	switch byte(uint64(v) >> 56) {
	case specialOffsetZero:
		return blosc.SpecialZero, true
	case specialOffsetNaN:
		return blosc.SpecialNaN, true
	case specialOffsetUninit:
		return blosc.SpecialUninit, true
	}
	return 0, false
}

// checkIndex validates every entry and, for variable-size frames, reads
// every chunk's size.
func (f *Frame) checkIndex() error {
	h := &f.hdr
	nstored, nspecial := 0, 0
	lastSpecial := -1
	check := func(i int, v int64) error {
		if v < 0 {
			k, ok := specialKind(v)
			if !ok {
				return f.errf(pack.ErrFormat, "chunk %d: index entry %#016x is no known special value", i, uint64(v))
			}
			if k == blosc.SpecialNaN && h.typesize != 4 && h.typesize != 8 {
				return f.errf(pack.ErrFormat, "chunk %d: NaN special chunk with typesize %d (needs 4 or 8)", i, h.typesize)
			}
			nspecial++
			lastSpecial = i
			return nil
		}
		nstored++
		if !f.sparse && v > h.cbytes-blosc.MinHeaderLen {
			return f.errf(pack.ErrFormat, "chunk %d: offset %d outside the %d-byte chunks section", i, v, h.cbytes)
		}
		return nil
	}
	if f.offsets == nil {
		if err := check(0, f.uniform); err != nil {
			return err
		}
		if f.uniform < 0 {
			nspecial, lastSpecial = f.n, f.n-1
		} else {
			nstored = f.n
		}
	} else {
		for i, v := range f.offsets {
			if err := check(i, v); err != nil {
				return err
			}
		}
	}
	// Every stored chunk takes at least a chunk header of the section.
	if !f.sparse && int64(nstored) > h.cbytes/blosc.MinHeaderLen {
		return f.errf(pack.ErrFormat, "index lists %d stored chunks; the %d-byte chunks section holds at most %d", nstored, h.cbytes, h.cbytes/blosc.MinHeaderLen)
	}
	if !h.variable() {
		last := h.nbytes - int64(f.n-1)*int64(h.chunksize)
		if last <= 0 || last > int64(h.chunksize) {
			return f.errf(pack.ErrFormat, "last chunk of %d bytes for chunksize %d", last, h.chunksize)
		}
		return nil
	}
	// Variable sizes: read every stored chunk's header.
	if nspecial > 1 {
		return f.errf(pack.ErrFormat, "variable-size frame with %d special chunks: their sizes are not recorded anywhere", nspecial)
	}
	f.starts = make([]int64, f.n+1)
	sizes := f.starts[1:]
	var sum int64
	for i := 0; i < f.n; i++ {
		if i == lastSpecial {
			continue
		}
		ch, err := f.chunkHeader(i)
		if err != nil {
			return err
		}
		sizes[i] = int64(ch.Nbytes)
		sum += int64(ch.Nbytes)
	}
	if lastSpecial >= 0 {
		rest := h.nbytes - sum
		if rest < 0 || rest > maxChunkNbytes {
			return f.errf(pack.ErrFormat, "special chunk %d of a variable-size frame would hold %d bytes (nbytes %d, stored chunks %d)", lastSpecial, rest, h.nbytes, sum)
		}
		sizes[lastSpecial] = rest
		sum += rest
	}
	if sum != h.nbytes {
		return f.errf(pack.ErrFormat, "chunks hold %d bytes, header nbytes is %d", sum, h.nbytes)
	}
	for i := range sizes {
		f.starts[i+1] += f.starts[i]
	}
	return nil
}

// chunkPath returns the file of a sparse frame's chunk id.
func (f *Frame) chunkPath(id int64) string {
	return filepath.Join(f.dir, chunkName(id))
}

// chunkName returns the file name of a sparse frame's chunk id: hex
// digits only, so never a path.
func chunkName(id int64) string { return fmt.Sprintf("%08X.chunk", id) }

// storedChunk returns a reader over stored chunk i and the number of bytes
// available to it (the rest of the chunks section, or the chunk file).
func (f *Frame) storedChunk(i int) (io.ReaderAt, int64, error) {
	v := f.entry(i)
	if f.sparse && f.chunkFile != nil {
		r, n, err := f.chunkFile(v)
		if err != nil {
			return nil, 0, f.errf(pack.ErrFormat, "chunk %d: %w", i, err)
		}
		return r, n, nil
	}
	if f.sparse {
		name := chunkName(v)
		file, err := openPart(f.dir, name)
		if err != nil {
			if pack.Transient(err) {
				return nil, 0, fmt.Errorf("%s: chunk %d: %w", f.name, i, err)
			}
			return nil, 0, f.errf(pack.ErrFormat, "chunk %d: %w", i, err)
		}
		st, err := file.Stat()
		file.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("%s: chunk %d: %w", f.name, i, err)
		}
		return fileAt{f.dir, name}, st.Size(), nil
	}
	pos := f.hdr.headerLen + v
	avail := f.hdr.headerLen + f.hdr.cbytes - pos
	return io.NewSectionReader(f.r, pos, avail), avail, nil
}

// chunkHeader reads the header of stored chunk i.
func (f *Frame) chunkHeader(i int) (blosc.Header, error) {
	r, avail, err := f.storedChunk(i)
	if err != nil {
		return blosc.Header{}, err
	}
	var b [blosc.ExtHeaderLen]byte
	n := min(avail, int64(len(b)))
	if m, err := r.ReadAt(b[:n], 0); int64(m) != n {
		return blosc.Header{}, f.errf(pack.ErrFormat, "chunk %d header: %v", i, err)
	}
	h, err := blosc.ParseHeader(b[:n])
	if err != nil {
		return h, f.errf(pack.ErrFormat, "chunk %d: %w", i, err)
	}
	if int64(h.Cbytes) > avail {
		return h, f.errf(pack.ErrFormat, "chunk %d: cbytes %d, only %d bytes available", i, h.Cbytes, avail)
	}
	return h, nil
}

// openPart opens a part (the index or a chunk file) of the sparse frame
// in dir. A part must be a regular file in the directory itself: neither
// the directory nor the part may be a symlink, and the name holds no
// slash. The daemon runs as root, and a user who can write the directory
// (through an allow_other mount, say) must not make it read, with its
// rights, a file the user may not read. A FIFO, socket or device is
// refused without being read (pack.ErrNotRegular).
func openPart(dir, name string) (*os.File, error) {
	if strings.ContainsRune(name, '/') || name == ".." || name == "." {
		return nil, fmt.Errorf("%s: %w: part name %q", dir, pack.ErrFormat, name)
	}
	d, err := pack.OpenSourceDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	file, _, err := pack.OpenSourceAt(d, name, filepath.Join(dir, name))
	return file, err
}

// fileAt is an io.ReaderAt over a part of a sparse frame that is opened
// (as openPart does) for each read, so that a sparse frame holds no
// descriptors.
type fileAt struct{ dir, name string }

func (p fileAt) ReadAt(b []byte, off int64) (int, error) {
	file, err := openPart(p.dir, p.name)
	if err != nil {
		return 0, err
	}
	defer file.Close()
	return file.ReadAt(b, off)
}

// NumChunks returns the number of chunks.
func (f *Frame) NumChunks() int { return f.n }

// ChunkOffset returns the plain (raw super-chunk) offset of chunk i;
// ChunkOffset(NumChunks()) is Size().
func (f *Frame) ChunkOffset(i int) int64 {
	if f.starts != nil {
		return f.starts[i]
	}
	return min(int64(i)*int64(f.hdr.chunksize), f.hdr.nbytes)
}

// chunkLen returns the plain size of chunk i.
func (f *Frame) chunkLen(i int) int64 { return f.ChunkOffset(i+1) - f.ChunkOffset(i) }

// ChunkSpecial reports whether chunk i is a special chunk (an index entry
// that says so, or a stored special chunk): it has nothing to decode.
func (f *Frame) ChunkSpecial(i int) bool {
	if i >= 0 && i < f.n && f.entry(i) < 0 {
		return true
	}
	return f.cr.ChunkSpecial(i)
}

// CheckChunk parses chunk i without decoding it.
func (f *Frame) CheckChunk(i int) error { return f.cr.CheckChunk(i) }

// OpenChunk parses chunk i. Special chunks (no stored bytes) get a
// synthesized 32-byte special chunk, so that the ChunkReader serves them
// like any other.
func (f *Frame) OpenChunk(i int) (*blosc.Chunk, error) {
	if i < 0 || i >= f.n {
		return nil, fmt.Errorf("%w: chunk %d out of range [0,%d)", pack.ErrFormat, i, f.n)
	}
	v := f.entry(i)
	if v < 0 {
		kind, _ := specialKind(v)
		c, err := blosc.NewChunkBytes(specialChunk(kind, f.chunkLen(i), int(f.hdr.typesize)))
		if err != nil {
			return nil, fmt.Errorf("%w: special chunk: %w", pack.ErrFormat, err)
		}
		return c, nil
	}
	r, avail, err := f.storedChunk(i)
	if err != nil {
		return nil, err
	}
	c, err := blosc.NewChunk(r, avail)
	if err != nil {
		where := fmt.Sprintf("offset %d", f.hdr.headerLen+v)
		if f.sparse {
			where = filepath.Base(f.chunkPath(v))
		}
		return nil, fmt.Errorf("%w: %s: %w", pack.ErrFormat, where, err)
	}
	return c, nil
}

// specialChunk builds the 32-byte header of a special chunk (FORMATS
// §1.11) as c-blosc2 writes them.
func specialChunk(kind int, nbytes int64, typesize int) []byte {
	b := make([]byte, blosc.ExtHeaderLen)
	ts := 1
	if kind == blosc.SpecialNaN || (typesize <= 255 && nbytes%int64(typesize) == 0) {
		ts = typesize
	}
	bs := min(nbytes, 256<<10)
	if bs > int64(ts) {
		bs -= bs % int64(ts)
	}
	b[0], b[1], b[2], b[3] = blosc.VersionStable, 1, 0x05, byte(ts)
	binary.LittleEndian.PutUint32(b[4:], uint32(nbytes))
	binary.LittleEndian.PutUint32(b[8:], uint32(bs))
	binary.LittleEndian.PutUint32(b[12:], blosc.ExtHeaderLen)
	b[31] = byte(kind) << 4
	return b
}

// ReadAt reads raw super-chunk bytes (for a .b2nd, the padded chunk and
// block layout; see COrder for the array). It is safe for concurrent use.
func (f *Frame) ReadAt(p []byte, off int64) (int, error) { return f.cr.ReadAt(p, off) }

// ReadAtOnce is ReadAt for sequential readers; see pack.ChunkReader.
func (f *Frame) ReadAtOnce(p []byte, off int64) (int, error) { return f.cr.ReadAtOnce(p, off) }

// Prefetch decodes ahead into the cache; see pack.ChunkReader.
func (f *Frame) Prefetch(off, n int64, reader func() int64) error {
	return f.cr.Prefetch(off, n, reader)
}

// Size returns the raw super-chunk size (the header's nbytes).
func (f *Frame) Size() int64 { return f.hdr.nbytes }

// Version returns the frame format version (2 or 3).
func (f *Frame) Version() int { return f.hdr.version }

// Sparse reports whether the frame is a sparse frame directory.
func (f *Frame) Sparse() bool { return f.sparse }

// Typesize returns the element size recorded in the frame header (it may
// exceed 255; chunk headers then say 1).
func (f *Frame) Typesize() int { return int(f.hdr.typesize) }

// ChunkSize returns the nominal plain chunk size, or 0 when chunks vary.
func (f *Frame) ChunkSize() int64 {
	if f.hdr.variable() {
		return 0
	}
	return int64(f.hdr.chunksize)
}

// NewChunkSize returns the plain size of the chunks a rewrite writes: the
// header's chunksize, or for variable-size frames the largest chunk (1 MiB
// rounded to the typesize when the frame has no chunks).
func (f *Frame) NewChunkSize() int64 {
	if cs := f.ChunkSize(); cs > 0 {
		return cs
	}
	var m int64
	for i := 0; i < f.n; i++ {
		m = max(m, f.chunkLen(i))
	}
	if m == 0 {
		ts := int64(f.hdr.typesize)
		m = max(1<<20/ts*ts, ts)
		if m > maxChunkNbytes {
			m = 1 << 20
		}
	}
	return m
}

// Meta returns the content of header metalayer name, as stored.
func (f *Frame) Meta(name string) ([]byte, bool) {
	for _, m := range f.meta {
		if m.name == name {
			return slices.Clone(m.value), true
		}
	}
	return nil, false
}

// MetaNames returns the names of the header metalayers, in file order.
func (f *Frame) MetaNames() []string {
	out := make([]string, len(f.meta))
	for i, m := range f.meta {
		out[i] = m.name
	}
	return out
}

// VLMetaNames returns the names of the trailer vlmetalayers, in file order.
func (f *Frame) VLMetaNames() []string {
	out := make([]string, len(f.vlmeta))
	for i, m := range f.vlmeta {
		out[i] = m.name
	}
	return out
}

// ErrNoMeta reports a metalayer that does not exist.
var ErrNoMeta = errors.New("no such metalayer")

// VLMeta returns the decompressed content of vlmetalayer name (stored as
// a Blosc2 chunk).
func (f *Frame) VLMeta(name string) ([]byte, error) {
	for _, m := range f.vlmeta {
		if m.name == name {
			v, err := decodeVLMeta(m.value, pack.MaxMetaLayer)
			if err != nil {
				return nil, fmt.Errorf("%s: vlmetalayer %q: %w", f.name, name, err)
			}
			return v, nil
		}
	}
	return nil, fmt.Errorf("%s: %w: %q", f.name, ErrNoMeta, name)
}

// RawVLMeta returns vlmetalayer name as stored: a Blosc2 chunk.
func (f *Frame) RawVLMeta(name string) ([]byte, bool) {
	for _, m := range f.vlmeta {
		if m.name == name {
			return slices.Clone(m.value), true
		}
	}
	return nil, false
}

// decodeVLMeta decompresses a stored vlmetalayer of at most limit bytes.
func decodeVLMeta(b []byte, limit int64) ([]byte, error) {
	h, err := blosc.ParseHeader(b)
	if err != nil {
		return nil, fmt.Errorf("%w: vlmetalayer: %w", pack.ErrFormat, err)
	}
	if limit = min(limit, maxVLMetaValue); int64(h.Nbytes) > limit {
		return nil, fmt.Errorf("%w: vlmetalayer of %d bytes exceeds the %d-byte limit", pack.ErrUnsupported, h.Nbytes, limit)
	}
	out, err := blosc.Decompress(b)
	if err != nil {
		return nil, fmt.Errorf("%w: vlmetalayer: %w", pack.ErrFormat, err)
	}
	return out, nil
}

// RawChunk returns the stored bytes of chunk i (a complete Blosc chunk),
// or, for a special index entry, nil and its kind (blosc.SpecialZero,
// SpecialNaN or SpecialUninit).
func (f *Frame) RawChunk(i int) ([]byte, int, error) {
	if i < 0 || i >= f.n {
		return nil, 0, fmt.Errorf("%s: %w: chunk %d out of range [0,%d)", f.name, pack.ErrFormat, i, f.n)
	}
	if v := f.entry(i); v < 0 {
		k, _ := specialKind(v)
		return nil, k, nil
	}
	h, err := f.chunkHeader(i)
	if err != nil {
		return nil, 0, err
	}
	r, _, err := f.storedChunk(i)
	if err != nil {
		return nil, 0, err
	}
	b := make([]byte, h.Cbytes)
	if n, err := r.ReadAt(b, 0); n != len(b) {
		return nil, 0, f.errf(pack.ErrFormat, "chunk %d: reading %d bytes: %v", i, len(b), err)
	}
	return b, blosc.SpecialNone, nil
}

// Info describes the frame. Meta holds the header metalayers as stored
// and the small vlmetalayers decompressed (at most pack.InfoMetaMax
// bytes each, pack.InfoMetaTotal in all; VLMeta reads the others); a vlmetalayer whose name is also a
// metalayer's is keyed "vlmeta:"+name, and one that fails to decode is
// left out.
func (f *Frame) Info() pack.Info {
	f.infoOnce.Do(f.makeInfo)
	in := f.info
	in.Meta = make(map[string][]byte, len(f.info.Meta))
	for k, v := range f.info.Meta {
		in.Meta[k] = slices.Clone(v)
	}
	return in
}

func (f *Frame) makeInfo() {
	h := &f.hdr
	in := pack.Info{
		Format: "b2frame", Version: h.version, Size: h.nbytes, StoredSize: h.frameLen,
		Chunks: f.n, ChunkSize: f.ChunkSize(), Blocksize: int(h.blocksize),
		Codec: blosc.CodecName(h.codec()), Clevel: h.clevel(), Typesize: int(h.typesize),
		Meta: map[string][]byte{},
	}
	copy(in.Filters[:], h.raw[offFilters:offFilters+6])
	copy(in.FiltersMeta[:], h.raw[offFiltersMeta:offFiltersMeta+6])
	if f.sparse {
		in.Format = "sframe"
		in.StoredSize = h.frameLen + h.cbytes
	}
	if f.nd != nil {
		in.Format = "b2nd"
	}
	for i := 0; i < f.n; i++ {
		if f.entry(i) < 0 {
			continue
		}
		if c, err := f.cr.Chunk(i); err == nil {
			in.Blocksize = c.BlockSize()
			// The chunk is the authority, except that its format
			// number cannot tell lz4hc from lz4: the header can.
			if cc := c.Codec(); !c.Memcpyed() && !(cc == blosc.CodecLZ4 && h.codec() == blosc.CodecLZ4HC) {
				in.Codec = blosc.CodecName(cc)
			}
			in.Filters, in.FiltersMeta = c.Filters, c.FiltersMeta
		}
		break
	}
	for _, m := range f.meta {
		in.Meta[m.name] = m.value
	}
	// Only small vlmetalayers, up to a small total: a few kilobytes of
	// file can claim gigabytes of them (read one with VLMeta).
	var total int64
	for _, m := range f.vlmeta {
		if total >= pack.InfoMetaTotal {
			break
		}
		v, err := decodeVLMeta(m.value, min(pack.InfoMetaMax, pack.InfoMetaTotal-total))
		if err != nil {
			continue
		}
		total += int64(len(v))
		k := m.name
		if _, dup := in.Meta[k]; dup {
			k = "vlmeta:" + k
		}
		in.Meta[k] = v
	}
	f.info = in
}
