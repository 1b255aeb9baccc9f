// Package blosc decodes and encodes single Blosc chunks: the 16-byte
// Blosc1 header (format version 2, c-blosc 1.x) and the 32-byte extended
// Blosc2 header (versions 3–6, c-blosc2 2.x and 3.x), the codec registry,
// the filter pipeline (shuffle, bitshuffle, delta, trunc_prec, bytedelta),
// stream encodings, special-value chunks, dictionaries and
// variable-length blocks.
//
// A chunk is cut into blocks, each decodable on its own. Chunk reads a
// chunk through an io.ReaderAt and decodes any block while reading only
// that block's bytes (plus block 0 when the delta filter needs it), which
// is what random access over large containers builds on.
//
// Decoding follows the reference libraries bit for bit, including their
// differences: version-2 chunks use c-blosc 1.x's split and bitshuffle
// rules, later versions c-blosc2's.
package blosc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Errors returned by this package, wrapped with context; test with errors.Is.
var (
	// ErrCorrupt reports a chunk whose bytes contradict its header or the
	// format: truncation, sizes out of range, streams that do not decode.
	ErrCorrupt = errors.New("corrupt chunk")
	// ErrUnsupported reports a valid-looking chunk that uses a feature this
	// package does not implement: an unknown codec or filter, a format
	// version from before Blosc 1.0 or from the future.
	ErrUnsupported = errors.New("not supported")
)

// errRead marks, beside ErrCorrupt, a failure to read a chunk's bytes
// (a short read, or the reader's own error), which says nothing of the
// bytes themselves.
var errRead = errors.New("read failed")

// ReadFailed reports whether err comes from reading a chunk's bytes (a
// short read, or an error of the io.ReaderAt), rather than from the bytes
// read: readers that remember the blocks that do not decode do not
// remember such a failure, which a retry may not meet.
func ReadFailed(err error) bool { return errors.Is(err, errRead) }

// Header sizes.
const (
	// MinHeaderLen is the size of the Blosc1 header.
	MinHeaderLen = 16
	// ExtHeaderLen is the size of the Blosc2 extended header.
	ExtHeaderLen = 32
)

// Format versions (the first header byte).
const (
	VersionBlosc1    = 2 // c-blosc 1.x
	VersionAlpha     = 3 // c-blosc2 alpha
	VersionBeta1     = 4 // c-blosc2 2.0.0-beta.1 … 2.0.2
	VersionStable    = 5 // c-blosc2 2.0.3 and later
	VersionVLBlocks  = 6 // c-blosc2 ≥ 3.0 chunks with variable-length blocks
	maxKnownVersion  = VersionVLBlocks
	maxBlocksize     = 536866816 // c-blosc2's BLOSC2_MAXBLOCKSIZE
	maxNbytesBlosc2  = 1<<31 - 1 - ExtHeaderLen
	maxDictSize      = 128 * 1024
	flagShuffle      = 0x01
	flagMemcpyed     = 0x02
	flagBitshuffle   = 0x04
	flagDelta        = 0x08
	flagDontSplit    = 0x10
	b2flagDict       = 0x01
	b2flagLazy       = 0x08
	b2flagInstrument = 0x80
	flags2VLBlocks   = 0x01
)

// Special value kinds of Blosc2 chunks (Header.Special).
const (
	SpecialNone   = 0
	SpecialZero   = 1
	SpecialNaN    = 2
	SpecialValue  = 3
	SpecialUninit = 4
)

// Filter ids, as stored in the extended header's filter slots.
const (
	FilterNone          = 0
	FilterShuffle       = 1
	FilterBitShuffle    = 2
	FilterDelta         = 3
	FilterTruncPrec     = 4
	FilterNDCell        = 32
	FilterNDMean        = 33
	FilterByteDeltaOld  = 34
	FilterByteDelta     = 35
	FilterIntTrunc      = 36
	MaxFilters          = 6
	lastBuiltinFilterID = 4
)

// Header is a parsed chunk header. For Blosc1 chunks (16-byte header) the
// filter slots are reconstructed from the flags, as c-blosc2 does.
type Header struct {
	Version      uint8
	VersionLZ    uint8
	Flags        uint8
	Typesize     uint8
	Nbytes       int32 // uncompressed size
	Blocksize    int32 // bytes per block; the block count for VL-block chunks
	Cbytes       int32 // compressed size including the header
	Filters      [MaxFilters]uint8
	FiltersMeta  [MaxFilters]uint8
	UDCodec      uint8
	CompcodeMeta uint8
	Flags2       uint8 // blosc2_flags2 (VL blocks)
	B2Flags      uint8 // blosc2_flags (dictionary, special kind, …)
}

// Len returns the header length: 32 when the extended header is present
// (flags bits 0 and 2 both set), else 16.
func (h *Header) Len() int {
	if h.Extended() {
		return ExtHeaderLen
	}
	return MinHeaderLen
}

// Extended reports whether the 32-byte Blosc2 header is present.
func (h *Header) Extended() bool {
	return h.Flags&(flagShuffle|flagBitshuffle) == flagShuffle|flagBitshuffle
}

// Memcpyed reports whether the payload is stored uncompressed.
func (h *Header) Memcpyed() bool { return h.Flags&flagMemcpyed != 0 }

// Special returns the special-value kind (SpecialNone for ordinary chunks).
func (h *Header) Special() int {
	if !h.Extended() {
		return SpecialNone
	}
	return int(h.B2Flags>>4) & 7
}

// VLBlocks reports whether the chunk has variable-length blocks.
func (h *Header) VLBlocks() bool { return h.Extended() && h.Flags2&flags2VLBlocks != 0 }

// HasDict reports whether a dictionary section follows the bstarts.
func (h *Header) HasDict() bool { return h.Extended() && h.B2Flags&b2flagDict != 0 }

// Codec returns the codec's compcode (API numbering: 0 blosclz, 1 lz4,
// 3 snappy, 4 zlib, 5 zstd, 32 and up registered codecs). LZ4 and LZ4HC
// share a stream format and both report CodecLZ4.
func (h *Header) Codec() int {
	f := int(h.Flags >> 5)
	switch f {
	case 0:
		return CodecBloscLZ
	case 1:
		return CodecLZ4
	case 2:
		return CodecSnappy
	case 3:
		return CodecZlib
	case 4:
		return CodecZstd
	case 6:
		if h.Extended() {
			return int(h.UDCodec)
		}
	}
	return -1 - f // unknown format, reported by the decoder
}

// ParseHeader parses and checks the chunk header at the start of b, which
// must hold at least 16 bytes (32 for an extended header). The checks are
// those of c-blosc2 (FORMATS §10 P20): sizes non-negative, cbytes at least
// the header size, block size within limits, typesize non-zero.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < MinHeaderLen {
		return h, fmt.Errorf("%w: header needs %d bytes, have %d", ErrCorrupt, MinHeaderLen, len(b))
	}
	h.Version = b[0]
	h.VersionLZ = b[1]
	h.Flags = b[2]
	h.Typesize = b[3]
	nbytes := binary.LittleEndian.Uint32(b[4:])
	blocksize := binary.LittleEndian.Uint32(b[8:])
	cbytes := binary.LittleEndian.Uint32(b[12:])
	if h.Version < VersionBlosc1 {
		return h, fmt.Errorf("%w: format version %d (pre-1.0 Blosc)", ErrUnsupported, h.Version)
	}
	if nbytes > 1<<31-1 {
		return h, fmt.Errorf("%w: nbytes %d is negative", ErrCorrupt, int32(nbytes))
	}
	if cbytes > 1<<31-1 {
		return h, fmt.Errorf("%w: cbytes %d is negative", ErrCorrupt, int32(cbytes))
	}
	if blocksize > 1<<31-1 {
		return h, fmt.Errorf("%w: blocksize %d is negative", ErrCorrupt, int32(blocksize))
	}
	h.Nbytes, h.Blocksize, h.Cbytes = int32(nbytes), int32(blocksize), int32(cbytes)
	if h.Typesize == 0 {
		return h, fmt.Errorf("%w: typesize 0", ErrCorrupt)
	}
	if h.Extended() {
		if len(b) < ExtHeaderLen {
			return h, fmt.Errorf("%w: extended header needs %d bytes, have %d", ErrCorrupt, ExtHeaderLen, len(b))
		}
		copy(h.Filters[:], b[16:22])
		h.UDCodec = b[22]
		h.CompcodeMeta = b[23]
		copy(h.FiltersMeta[:], b[24:30])
		h.Flags2 = b[30]
		h.B2Flags = b[31]
		if h.Version == VersionAlpha {
			h.Filters[5], h.FiltersMeta[5] = 0, 0
		}
		if h.Version > maxKnownVersion && h.Flags2&^flags2VLBlocks != 0 {
			return h, fmt.Errorf("%w: format version %d with unknown flags2 %#x", ErrUnsupported, h.Version, h.Flags2)
		}
		if h.B2Flags&b2flagInstrument != 0 {
			return h, fmt.Errorf("%w: instrumented codec output (blosc2_flags %#x)", ErrUnsupported, h.B2Flags)
		}
		if h.B2Flags&b2flagLazy != 0 {
			return h, fmt.Errorf("%w: lazy chunk flag set in stored chunk", ErrCorrupt)
		}
		if s := h.Special(); s > SpecialUninit {
			return h, fmt.Errorf("%w: reserved special value kind %d", ErrCorrupt, s)
		}
		if h.Nbytes > maxNbytesBlosc2 {
			return h, fmt.Errorf("%w: nbytes %d exceeds the Blosc2 limit", ErrCorrupt, h.Nbytes)
		}
	} else {
		if h.Version > maxKnownVersion {
			return h, fmt.Errorf("%w: format version %d", ErrUnsupported, h.Version)
		}
		if h.Flags&flagShuffle != 0 {
			h.Filters[5] = FilterShuffle
		} else if h.Flags&flagBitshuffle != 0 {
			h.Filters[5] = FilterBitShuffle
		}
		if h.Flags&flagDelta != 0 {
			h.Filters[4] = FilterDelta
		}
	}
	if int(h.Cbytes) < h.Len() {
		return h, fmt.Errorf("%w: cbytes %d smaller than the %d-byte header", ErrCorrupt, h.Cbytes, h.Len())
	}
	if h.VLBlocks() {
		if h.Blocksize <= 0 && h.Nbytes > 0 {
			return h, fmt.Errorf("%w: VL-block chunk with %d blocks", ErrCorrupt, h.Blocksize)
		}
		return h, nil
	}
	if h.Nbytes > 0 && h.Special() == SpecialNone {
		if h.Blocksize <= 0 {
			return h, fmt.Errorf("%w: blocksize %d", ErrCorrupt, h.Blocksize)
		}
		if h.Extended() && h.Blocksize > maxBlocksize && !h.Memcpyed() {
			return h, fmt.Errorf("%w: blocksize %d exceeds %d", ErrCorrupt, h.Blocksize, maxBlocksize)
		}
		if h.Blocksize > h.Nbytes {
			h.Blocksize = h.Nbytes
		}
	}
	return h, nil
}

// String describes the header for diagnostics.
func (h Header) String() string {
	return fmt.Sprintf("blosc v%d codec=%s typesize=%d nbytes=%d blocksize=%d cbytes=%d flags=%#02x filters=%v meta=%v",
		h.Version, CodecName(h.Codec()), h.Typesize, h.Nbytes, h.Blocksize, h.Cbytes, h.Flags, h.Filters, h.FiltersMeta)
}
