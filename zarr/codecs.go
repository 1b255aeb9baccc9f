package zarr

import (
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// A compressor decodes one bytes-to-bytes step. Every decode has a
// bound: src decodes to exactly max bytes (exact), or to at most max
// bytes (a stage in the middle of a v3 chain, whose output the next
// stage reads: see chain). A stream that decodes to more is refused at
// the first byte past max, and nothing a header claims beyond max is
// allocated.
type compressor interface {
	decompress(src []byte, max int64, exact bool) ([]byte, error)
	// maxEncoded is the largest encoding of n bytes: the largest input
	// that decodes to n bytes and that a writer can have made.
	maxEncoded(n int64) int64
	name() string
	// bloscChunk reports a Blosc compressor, whose chunks can be decoded
	// block by block.
	bloscChunk() bool
}

// streamSlack bounds what a stream compressor (deflate, zstd, bzip2,
// LZMA) adds to incompressible input: a few bytes per block, a header and
// a trailer, far below n/16 + 64 KiB.
func streamSlack(n int64) int64 { return satAdd(n, n/16+64<<10) }

// satAdd adds sizes, saturating at MaxObject+1 (past any object read).
func satAdd(a, b int64) int64 {
	if a > MaxObject || b > MaxObject || a+b > MaxObject {
		return MaxObject + 1
	}
	return a + b
}

// tooMuch is the error of an output past its bound.
func tooMuch(what string, max int64, exact bool) error {
	if exact {
		return fmt.Errorf("%w: %s decodes to more than the chunk's %d bytes", ErrCorrupt, what, max)
	}
	return fmt.Errorf("%w: %s decodes to more than the %d bytes the next codec can take", ErrCorrupt, what, max)
}

type codecConf struct {
	ID     string `json:"id"`
	Format *int   `json:"format"`
}

// parseV2Compressor parses a .zarray "compressor" (numcodecs config).
func parseV2Compressor(raw json.RawMessage) (compressor, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c codecConf
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%w: compressor %.80s", ErrFormat, raw)
	}
	switch c.ID {
	case "blosc":
		return bloscCodec{}, nil
	case "zlib":
		return streamCodec{"zlib", func(src []byte, _ int64) (io.Reader, error) { return zlib.NewReader(bytes.NewReader(src)) }}, nil
	case "gzip":
		return streamCodec{"gzip", newGzipReader}, nil
	case "bz2":
		return streamCodec{"bz2", func(src []byte, _ int64) (io.Reader, error) { return bzip2.NewReader(bytes.NewReader(src)), nil }}, nil
	case "lzma":
		// numcodecs LZMA: format 1 (xz, the default) or 2 (lzma "alone").
		switch {
		case c.Format == nil || *c.Format == 1 || *c.Format == 0:
			return streamCodec{"lzma", newXZReader}, nil
		case *c.Format == 2:
			return streamCodec{"lzma", newLZMAReader}, nil
		}
		return nil, fmt.Errorf("%w: lzma format %d (raw streams)", ErrUnsupported, *c.Format)
	case "zstd":
		return zstdCodec{}, nil
	case "lz4":
		return lz4Codec{}, nil
	}
	return nil, fmt.Errorf("%w: compressor %q", ErrUnsupported, c.ID)
}

// newGzipReader reads a v2 "gzip" chunk: a gzip stream, or, found by
// its header, a zlib stream (z5py writes those under "gzip"; numcodecs
// would refuse them).
func newGzipReader(src []byte, _ int64) (io.Reader, error) {
	if isZlib(src) {
		return zlib.NewReader(bytes.NewReader(src))
	}
	return gzip.NewReader(bytes.NewReader(src))
}

// isZlib reports whether b starts with a zlib header (RFC 1950): method
// deflate with a window of at most 32 KiB, and a check that makes the
// first two bytes a multiple of 31. A gzip stream starts 1f 8b, which
// is not one.
func isZlib(b []byte) bool {
	return len(b) >= 2 && b[0]&0x0f == 8 && b[0]>>4 <= 7 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
}

// bloscCodec decodes one Blosc chunk (any cname, shuffle, blocksize).
type bloscCodec struct{}

func (bloscCodec) name() string     { return "blosc" }
func (bloscCodec) bloscChunk() bool { return true }

// maxBloscOverhead is the most a Blosc chunk adds to its plain bytes (a
// chunk that does not compress is stored as it is, behind an extended
// header), with room for a special chunk's value.
const maxBloscOverhead = blosc.ExtHeaderLen + 256

func (bloscCodec) maxEncoded(n int64) int64 { return satAdd(n, maxBloscOverhead) }

func (bloscCodec) decompress(src []byte, max int64, exact bool) ([]byte, error) {
	h, err := blosc.ParseHeader(src)
	if err != nil {
		return nil, fmt.Errorf("%w: blosc: %w", ErrCorrupt, err)
	}
	n := int64(h.Nbytes)
	switch {
	case exact && n != max:
		return nil, fmt.Errorf("%w: blosc chunk holds %d bytes, want %d", ErrCorrupt, n, max)
	case n > max:
		return nil, fmt.Errorf("%w: blosc chunk holds %d bytes, more than the %d the next codec can take", ErrCorrupt, n, max)
	case int64(h.Cbytes) > satAdd(n, maxBloscOverhead):
		return nil, fmt.Errorf("%w: blosc chunk of %d bytes holds only %d", ErrCorrupt, h.Cbytes, n)
	}
	c, err := blosc.NewChunkBytes(src)
	if err != nil {
		return nil, fmt.Errorf("%w: blosc: %w", ErrCorrupt, err)
	}
	out := make([]byte, c.Nbytes)
	if err := c.Decode(out); err != nil {
		return nil, fmt.Errorf("%w: blosc: %w", ErrCorrupt, err)
	}
	return out, nil
}

// streamCodec decodes a compressed stream (zlib, gzip, bz2, xz, lzma).
// open gets the bound of the output, which the LZMA readers use to
// bound their dictionary.
type streamCodec struct {
	id   string
	open func(src []byte, max int64) (io.Reader, error)
}

func (s streamCodec) name() string           { return s.id }
func (streamCodec) bloscChunk() bool         { return false }
func (streamCodec) maxEncoded(n int64) int64 { return streamSlack(n) }

func (s streamCodec) decompress(src []byte, max int64, exact bool) ([]byte, error) {
	r, err := s.open(src, max)
	if err != nil {
		if errors.Is(err, ErrUnsupported) || errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("%s: %w", s.id, err)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, s.id, err)
	}
	return readBounded(r, max, exact, s.id)
}

// readBounded reads the stream r: exactly max bytes followed by its end
// (exact), or at most max bytes. It stops at the first byte past max.
func readBounded(r io.Reader, max int64, exact bool, what string) ([]byte, error) {
	if !exact {
		b, err := io.ReadAll(io.LimitReader(r, max+1))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err)
		}
		if int64(len(b)) > max {
			return nil, tooMuch(what, max, false)
		}
		return b, nil
	}
	out := make([]byte, max)
	if _, err := io.ReadFull(r, out); err != nil {
		return nil, fmt.Errorf("%w: %s decodes to fewer than %d bytes: %w", ErrCorrupt, what, max, err)
	}
	var one [1]byte
	if n, err := io.ReadFull(r, one[:]); n != 0 || !errors.Is(err, io.EOF) {
		if n != 0 {
			return nil, tooMuch(what, max, true)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err)
	}
	return out, nil
}

// zstdDec is made on the first zstd chunk: a process that reads no Zarr
// zstd chunk (most of them) does not pay for its tables at start. Its
// DecodeAll writes no further than the capacity of the slice it is given,
// which each call sets to the chunk's bound.
var zstdDec = sync.OnceValue(func() *zstd.Decoder {
	d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxObject), zstd.WithDecodeAllCapLimit(true))
	return d
})

// zstdCodec decodes a zstd frame.
type zstdCodec struct{}

func (zstdCodec) name() string             { return "zstd" }
func (zstdCodec) bloscChunk() bool         { return false }
func (zstdCodec) maxEncoded(n int64) int64 { return streamSlack(n) }

func (zstdCodec) decompress(src []byte, max int64, exact bool) ([]byte, error) {
	n := max
	var h zstd.Header
	if h.Decode(src) == nil && h.HasFCS && !exact {
		// A frame that tells its size: that much, if the bound allows
		// it (a second frame past it is refused by the cap).
		if h.FrameContentSize > uint64(max) {
			return nil, tooMuch("zstd", max, exact)
		}
		n = int64(h.FrameContentSize)
	}
	out, err := zstdDec().DecodeAll(src, make([]byte, 0, n))
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return nil, tooMuch("zstd", max, exact)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
	}
	if exact && int64(len(out)) != max {
		return nil, fmt.Errorf("%w: zstd decodes to %d bytes, want %d", ErrCorrupt, len(out), max)
	}
	return out, nil
}

// lz4Codec decodes numcodecs' LZ4: a little-endian uint32 of the decoded
// size, then one LZ4 block.
type lz4Codec struct{}

func (lz4Codec) name() string             { return "lz4" }
func (lz4Codec) bloscChunk() bool         { return false }
func (lz4Codec) maxEncoded(n int64) int64 { return satAdd(4, satAdd(n, n/255+16)) }

func (lz4Codec) decompress(src []byte, max int64, exact bool) ([]byte, error) {
	if len(src) < 4 {
		return nil, fmt.Errorf("%w: lz4 chunk of %d bytes", ErrCorrupt, len(src))
	}
	n := int64(binary.LittleEndian.Uint32(src))
	if (exact && n != max) || n > max {
		return nil, fmt.Errorf("%w: lz4 chunk says %d bytes, want %s%d", ErrCorrupt, n, map[bool]string{true: "", false: "at most "}[exact], max)
	}
	out := make([]byte, n)
	m, err := lz4.UncompressBlock(src[4:], out)
	if err != nil || int64(m) != n {
		return nil, fmt.Errorf("%w: lz4 block decodes to %d of %d bytes: %v", ErrCorrupt, m, n, err)
	}
	return out, nil
}

// castagnoli is built on first use, not at start.
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// crc32cCodec checks and strips the v3 crc32c checksum (4 bytes, little
// endian, at the end).
type crc32cCodec struct{}

func (crc32cCodec) name() string     { return "crc32c" }
func (crc32cCodec) bloscChunk() bool { return false }

func (crc32cCodec) maxEncoded(n int64) int64 { return satAdd(n, 4) }

func (crc32cCodec) decompress(src []byte, max int64, exact bool) ([]byte, error) {
	if len(src) < 4 {
		return nil, fmt.Errorf("%w: crc32c: %d bytes", ErrCorrupt, len(src))
	}
	body := src[:len(src)-4]
	if int64(len(body)) > max {
		return nil, tooMuch("crc32c", max, exact)
	}
	if got, sum := crc32.Checksum(body, castagnoli()), binary.LittleEndian.Uint32(src[len(body):]); got != sum {
		return nil, fmt.Errorf("%w: crc32c %#08x, stored %#08x", ErrChecksum, got, sum)
	}
	if exact && int64(len(body)) != max {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrCorrupt, len(body), max)
	}
	return body, nil
}
