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
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"
)

// A compressor decodes one bytes-to-bytes step: src to exactly want
// bytes (want < 0: whatever it decodes to, bounded by MaxObject).
type compressor interface {
	decompress(src []byte, want int64) ([]byte, error)
	name() string
	// bloscChunk reports a Blosc compressor, whose chunks can be decoded
	// block by block.
	bloscChunk() bool
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
		return streamCodec{"zlib", func(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }}, nil
	case "gzip":
		return streamCodec{"gzip", func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }}, nil
	case "bz2":
		return streamCodec{"bz2", func(r io.Reader) (io.Reader, error) { return bzip2.NewReader(r), nil }}, nil
	case "lzma":
		// numcodecs LZMA: format 1 (xz, the default) or 2 (lzma "alone").
		switch {
		case c.Format == nil || *c.Format == 1 || *c.Format == 0:
			return streamCodec{"lzma", func(r io.Reader) (io.Reader, error) { return xz.NewReader(r) }}, nil
		case *c.Format == 2:
			return streamCodec{"lzma", func(r io.Reader) (io.Reader, error) { return lzma.NewReader(r) }}, nil
		}
		return nil, fmt.Errorf("%w: lzma format %d (raw streams)", ErrUnsupported, *c.Format)
	case "zstd":
		return zstdCodec{}, nil
	case "lz4":
		return lz4Codec{}, nil
	}
	return nil, fmt.Errorf("%w: compressor %q", ErrUnsupported, c.ID)
}

// bloscCodec decodes one Blosc chunk (any cname, shuffle, blocksize).
type bloscCodec struct{}

func (bloscCodec) name() string     { return "blosc" }
func (bloscCodec) bloscChunk() bool { return true }

func (bloscCodec) decompress(src []byte, want int64) ([]byte, error) {
	c, err := blosc.NewChunkBytes(src)
	if err != nil {
		return nil, fmt.Errorf("%w: blosc: %w", ErrCorrupt, err)
	}
	if want >= 0 && int64(c.Nbytes) != want {
		return nil, fmt.Errorf("%w: blosc chunk holds %d bytes, want %d", ErrCorrupt, c.Nbytes, want)
	}
	out := make([]byte, c.Nbytes)
	if err := c.Decode(out); err != nil {
		return nil, fmt.Errorf("%w: blosc: %w", ErrCorrupt, err)
	}
	return out, nil
}

// streamCodec decodes a compressed stream (zlib, gzip, bz2, xz, lzma).
type streamCodec struct {
	id   string
	open func(io.Reader) (io.Reader, error)
}

func (s streamCodec) name() string   { return s.id }
func (streamCodec) bloscChunk() bool { return false }

func (s streamCodec) decompress(src []byte, want int64) ([]byte, error) {
	r, err := s.open(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, s.id, err)
	}
	return readBounded(r, want, s.id)
}

// readBounded reads exactly want bytes and checks the stream ends there
// (want < 0: up to MaxObject bytes).
func readBounded(r io.Reader, want int64, what string) ([]byte, error) {
	if want < 0 {
		b, err := io.ReadAll(io.LimitReader(r, MaxObject+1))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err)
		}
		if len(b) > MaxObject {
			return nil, fmt.Errorf("%w: %s decodes to more than %d bytes", ErrCorrupt, what, MaxObject)
		}
		return b, nil
	}
	out := make([]byte, want)
	if _, err := io.ReadFull(r, out); err != nil {
		return nil, fmt.Errorf("%w: %s decodes to fewer than %d bytes: %w", ErrCorrupt, what, want, err)
	}
	var one [1]byte
	if n, err := io.ReadFull(r, one[:]); n != 0 || !errors.Is(err, io.EOF) {
		if n != 0 {
			return nil, fmt.Errorf("%w: %s decodes to more than %d bytes", ErrCorrupt, what, want)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err)
	}
	return out, nil
}

// zstdDec is made on the first zstd chunk: a process that reads no Zarr
// zstd chunk (most of them) does not pay for its tables at start.
var zstdDec = sync.OnceValue(func() *zstd.Decoder {
	d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxObject))
	return d
})

// zstdCodec decodes a zstd frame.
type zstdCodec struct{}

func (zstdCodec) name() string     { return "zstd" }
func (zstdCodec) bloscChunk() bool { return false }

func (zstdCodec) decompress(src []byte, want int64) ([]byte, error) {
	var dst []byte
	if want >= 0 {
		dst = make([]byte, 0, want)
	}
	out, err := zstdDec().DecodeAll(src, dst)
	if err != nil {
		return nil, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
	}
	if want >= 0 && int64(len(out)) != want {
		return nil, fmt.Errorf("%w: zstd decodes to %d bytes, want %d", ErrCorrupt, len(out), want)
	}
	return out, nil
}

// lz4Codec decodes numcodecs' LZ4: a little-endian uint32 of the decoded
// size, then one LZ4 block.
type lz4Codec struct{}

func (lz4Codec) name() string     { return "lz4" }
func (lz4Codec) bloscChunk() bool { return false }

func (lz4Codec) decompress(src []byte, want int64) ([]byte, error) {
	if len(src) < 4 {
		return nil, fmt.Errorf("%w: lz4 chunk of %d bytes", ErrCorrupt, len(src))
	}
	n := int64(binary.LittleEndian.Uint32(src))
	if (want >= 0 && n != want) || n > MaxObject {
		return nil, fmt.Errorf("%w: lz4 chunk says %d bytes, want %d", ErrCorrupt, n, want)
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

func (crc32cCodec) decompress(src []byte, want int64) ([]byte, error) {
	if len(src) < 4 {
		return nil, fmt.Errorf("%w: crc32c: %d bytes", ErrCorrupt, len(src))
	}
	body := src[:len(src)-4]
	if got, sum := crc32.Checksum(body, castagnoli()), binary.LittleEndian.Uint32(src[len(body):]); got != sum {
		return nil, fmt.Errorf("%w: crc32c %#08x, stored %#08x", ErrChecksum, got, sum)
	}
	if want >= 0 && int64(len(body)) != want {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrCorrupt, len(body), want)
	}
	return body, nil
}
