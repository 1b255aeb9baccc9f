package zarr

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"sync"

	"github.com/ulikunitz/xz/lzma"
)

// LZMA chunks (numcodecs' LZMA, xz or "alone" format) name the size of
// the dictionary their decoder must keep, and the decoder allocates it
// at once: a 17-byte chunk could ask for 4 GiB. No distance of a chunk of
// n bytes reaches further back than n, so the dictionary is cut to the
// chunk's bound (at least lzma.MinDictCap): a sound chunk decodes as
// before, and a stream that reaches further back is an error.

// dictFor returns the dictionary size for a stream that the header says
// needs want bytes and that decodes to at most bound bytes.
func dictFor(want, bound int64) int {
	return int(max(lzma.MinDictCap, min(want, bound, lzma.MaxDictCap)))
}

// newLZMAReader reads an LZMA "alone" stream (13-byte header: properties,
// dictionary size, uncompressed size) with its dictionary cut to max.
func newLZMAReader(src []byte, max int64) (io.Reader, error) {
	if len(src) < lzma.HeaderLen {
		return nil, fmt.Errorf("%w: lzma stream of %d bytes", ErrCorrupt, len(src))
	}
	hdr := bytes.Clone(src[:lzma.HeaderLen])
	if size := int64(binary.LittleEndian.Uint64(hdr[5:])); size >= 0 && size > max {
		return nil, fmt.Errorf("%w: lzma stream of %d bytes, more than %d", ErrCorrupt, size, max)
	}
	dict := dictFor(int64(binary.LittleEndian.Uint32(hdr[1:])), max)
	binary.LittleEndian.PutUint32(hdr[1:], uint32(dict))
	return lzma.ReaderConfig{DictCap: dict}.NewReader(io.MultiReader(bytes.NewReader(hdr), bytes.NewReader(src[lzma.HeaderLen:])))
}

// xzReader decodes an xz stream whose blocks hold one LZMA2 filter (what
// numcodecs writes), block by block through lzma.Reader2 with the
// dictionary cut to the output's bound, and checks each block's check
// (CRC32, CRC64 or SHA-256). The stream's index and footer, after the
// blocks, are not read.
type xzReader struct {
	src   *bytes.Reader
	max   int64
	check byte
	block io.Reader // the current block's data, nil between blocks
	sum   hash.Hash // of the current block's output
	begin int64     // where the current block's compressed data start
	done  bool
}

var crc64Table = sync.OnceValue(func() *crc64.Table { return crc64.MakeTable(crc64.ECMA) })

// xzCheckLen gives the size of each xz check type's field.
var xzCheckLen = [16]int{0, 4, 4, 4, 8, 8, 8, 16, 16, 16, 32, 32, 32, 64, 64, 64}

func newXZReader(src []byte, max int64) (io.Reader, error) {
	if len(src) < 12 || !bytes.Equal(src[:6], []byte{0xFD, '7', 'z', 'X', 'Z', 0}) {
		return nil, fmt.Errorf("%w: not an xz stream", ErrCorrupt)
	}
	if crc32.ChecksumIEEE(src[6:8]) != binary.LittleEndian.Uint32(src[8:]) || src[6] != 0 || src[7] > 15 {
		return nil, fmt.Errorf("%w: xz stream header", ErrCorrupt)
	}
	x := &xzReader{src: bytes.NewReader(src[12:]), max: max, check: src[7]}
	switch x.check {
	case 0, 1, 4, 10:
	default:
		return nil, fmt.Errorf("%w: xz check type %d", ErrUnsupported, x.check)
	}
	return x, nil
}

// Read reads the decoded bytes of the blocks in turn.
func (x *xzReader) Read(p []byte) (int, error) {
	for {
		if x.done {
			return 0, io.EOF
		}
		if x.block == nil {
			if err := x.next(); err != nil {
				return 0, err
			}
			continue
		}
		n, err := x.block.Read(p)
		x.sum.Write(p[:n])
		if err == io.EOF {
			err = x.end()
			if n > 0 || err != nil {
				return n, err
			}
			continue
		}
		if err != nil {
			err = fmt.Errorf("%w: xz: %w", ErrCorrupt, err)
		}
		return n, err
	}
}

// uvarint reads an xz multibyte integer.
func (x *xzReader) uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n > 9 {
		return 0, nil, fmt.Errorf("%w: xz block header", ErrCorrupt)
	}
	return v, b[n:], nil
}

// next starts the next block, or ends the stream at its index.
func (x *xzReader) next() error {
	size, err := x.src.ReadByte()
	if err != nil {
		return fmt.Errorf("%w: xz stream ends without an index", ErrCorrupt)
	}
	if size == 0 { // the index
		x.done = true
		return nil
	}
	hdr := make([]byte, 4*(int(size)+1))
	hdr[0] = size
	if _, err := io.ReadFull(x.src, hdr[1:]); err != nil {
		return fmt.Errorf("%w: xz block header: %w", ErrCorrupt, err)
	}
	body := hdr[:len(hdr)-4]
	if crc32.ChecksumIEEE(body) != binary.LittleEndian.Uint32(hdr[len(body):]) {
		return fmt.Errorf("%w: xz block header checksum", ErrCorrupt)
	}
	flags := body[1]
	if flags&0x3C != 0 {
		return fmt.Errorf("%w: xz block flags %#x", ErrCorrupt, flags)
	}
	if flags&3 != 0 {
		return fmt.Errorf("%w: xz filters other than LZMA2", ErrUnsupported)
	}
	b := body[2:]
	if flags&0x40 != 0 { // compressed size
		if _, b, err = x.uvarint(b); err != nil {
			return err
		}
	}
	if flags&0x80 != 0 { // uncompressed size
		var n uint64
		if n, b, err = x.uvarint(b); err != nil {
			return err
		}
		if n > uint64(x.max) {
			return tooMuch("xz", x.max, false)
		}
	}
	var id, psize uint64
	if id, b, err = x.uvarint(b); err != nil {
		return err
	}
	if psize, b, err = x.uvarint(b); err != nil {
		return err
	}
	if id != 0x21 || psize != 1 || len(b) < 1 {
		return fmt.Errorf("%w: xz filter %#x", ErrUnsupported, id)
	}
	want, err := lzma.DecodeDictCap(b[0])
	if err != nil {
		return fmt.Errorf("%w: xz: %w", ErrCorrupt, err)
	}
	for _, c := range b[1:] {
		if c != 0 {
			return fmt.Errorf("%w: xz block header padding", ErrCorrupt)
		}
	}
	x.begin = x.src.Size() - int64(x.src.Len())
	r, err := lzma.Reader2Config{DictCap: dictFor(want, x.max)}.NewReader2(x.src)
	if err != nil {
		return fmt.Errorf("%w: xz: %w", ErrCorrupt, err)
	}
	x.block = r
	switch x.check {
	case 0:
		x.sum = nullHash{}
	case 1:
		x.sum = crc32.NewIEEE()
	case 4:
		x.sum = crc64.New(crc64Table())
	case 10:
		x.sum = sha256.New()
	}
	return nil
}

// end checks the block's padding and check.
func (x *xzReader) end() error {
	x.block = nil
	n := x.src.Size() - int64(x.src.Len()) - x.begin
	pad := make([]byte, (4-n%4)%4)
	chk := make([]byte, xzCheckLen[x.check])
	if _, err := io.ReadFull(x.src, pad); err != nil || !bytes.Equal(pad, make([]byte, len(pad))) {
		return fmt.Errorf("%w: xz block padding", ErrCorrupt)
	}
	if _, err := io.ReadFull(x.src, chk); err != nil {
		return fmt.Errorf("%w: xz block check: %w", ErrCorrupt, err)
	}
	got := x.sum.Sum(nil)
	if x.check == 4 || x.check == 1 {
		slicesReverse(got) // CRC32 and CRC64 are stored little-endian
	}
	if !bytes.Equal(got, chk) {
		return fmt.Errorf("%w: xz block check", ErrChecksum)
	}
	return nil
}

func slicesReverse(b []byte) {
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
}

// nullHash is the check of a stream without one.
type nullHash struct{}

func (nullHash) Write(p []byte) (int, error) { return len(p), nil }
func (nullHash) Sum(b []byte) []byte         { return b }
func (nullHash) Reset()                      {}
func (nullHash) Size() int                   { return 0 }
func (nullHash) BlockSize() int              { return 1 }
