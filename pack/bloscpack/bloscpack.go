// Package bloscpack reads and writes Bloscpack files (.blp): a sequence of
// Blosc1 chunks with an optional offsets table, per-chunk checksums and a
// JSON metadata section (FORMATS §9). Format versions 1, 2 and 3 are read;
// version 3, the only one bloscpack has written since 2013, is written.
//
// Importing the package registers the format with pack.Open.
package bloscpack

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/adler32"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/klauspost/compress/zlib"
)

// Magic starts every Bloscpack file.
const Magic = "blpk"

const (
	headerLen     = 32
	headerLenV1   = 16
	metaHeaderLen = 32
	optOffsets    = 0x01
	optMetadata   = 0x02
	// maxMetaSize bounds the metadata section we read into memory.
	maxMetaSize = 64 << 20
)

// Checksums are the checksum kinds by id, as bloscpack numbers them.
var Checksums = []struct {
	Name string
	Size int
	New  func() hash.Hash
}{
	{"None", 0, nil},
	{"adler32", 4, func() hash.Hash { return adler32.New() }},
	{"crc32", 4, func() hash.Hash { return crc32.NewIEEE() }},
	{"md5", 16, md5.New},
	{"sha1", 20, sha1.New},
	{"sha224", 28, sha256.New224},
	{"sha256", 32, sha256.New},
	{"sha384", 48, sha512.New384},
	{"sha512", 64, sha512.New},
}

// ChecksumID returns the id of a checksum name ("None", "adler32", …).
func ChecksumID(name string) (int, bool) {
	for i, c := range Checksums {
		if c.Name == name {
			return i, true
		}
	}
	return 0, false
}

// digest returns the stored form of a checksum: 4-byte LE for adler32
// and crc32, the raw digest otherwise.
func digest(id int, data []byte) []byte {
	c := Checksums[id]
	if c.New == nil {
		return nil
	}
	h := c.New()
	h.Write(data)
	sum := h.Sum(nil)
	if c.Size == 4 {
		// hash.Hash32 sums are big-endian; bloscpack stores little-endian.
		slices.Reverse(sum)
	}
	return sum
}

// Header is a parsed Bloscpack header.
type Header struct {
	Version      int
	Options      uint8
	Checksum     int // index into Checksums
	Typesize     int
	ChunkSize    int64 // -1 = unknown
	LastChunk    int64 // -1 = unknown
	Nchunks      int64 // -1 = unknown
	MaxAppChunks int64
}

// MetaHeader is the header of the metadata section.
type MetaHeader struct {
	Format       string // "JSON"
	Options      uint8
	Checksum     int
	Codec        int // 0 none, 1 zlib
	Level        int
	Size         int64 // uncompressed
	MaxSize      int64 // reserved space
	CompSize     int64 // stored bytes
	UserCodec    [8]byte
	sectionBytes int64
}

// File is an opened Bloscpack file: an io.ReaderAt over its plain bytes.
type File struct {
	*pack.ChunkReader
	Header Header
	// Meta is the metadata section's header; nil when the file has none.
	// Metadata decodes its content.
	Meta *MetaHeader

	metaPos int64 // where the stored metadata starts

	r          io.ReaderAt
	size       int64
	name       string
	chunkStart int64   // where the chunk area begins
	offsets    []int64 // file offset of each chunk
	plainOffs  []int64 // plain offset of each chunk, len n+1
	verify     bool
	first      *blosc.Header
	firstOnce  sync.Once
}

// Options change how Open reads a file.
type Options struct {
	// SkipChecksums turns off verifying each chunk's checksum when it is
	// first loaded.
	SkipChecksums bool
}

func init() {
	pack.RegisterFormat(pack.Format{
		Name:  "bloscpack",
		Match: func(head []byte) bool { return bytes.HasPrefix(head, []byte(Magic)) },
		Open: func(r io.ReaderAt, size int64, name string, cache pack.BlockCache) (pack.Container, error) {
			return Open(r, size, name, cache, Options{})
		},
		Head: Head,
	})
}

// Head is pack.OpenHead for a Bloscpack file: head holds the first bytes
// of a size-byte file. The plain size is (nchunks-1)·chunk_size +
// last_chunk, from the header alone, which is checked as Open checks it
// (and the offsets section, when there is one, against the file size);
// the metadata, offsets and chunks are not read. A file that does not
// record those three (format version 1, or a header that says
// "unknown") gives pack.ErrNoHead: its size is known only from its
// chunks' headers.
func Head(head []byte, size int64, name string) (pack.Head, error) {
	need := min(max(size, 0), headerLen)
	if int64(len(head)) < need {
		return pack.Head{}, &pack.HeadShortError{Name: name, N: need}
	}
	f := &File{r: bytes.NewReader(head[:need]), size: size, name: name}
	pos, err := f.parseHeader()
	if err != nil {
		return pack.Head{}, err
	}
	h := &f.Header
	if h.ChunkSize < 0 || h.LastChunk < 0 || h.Nchunks < 0 {
		return pack.Head{}, fmt.Errorf("%s: format version %d, chunk_size %d, last_chunk %d, nchunks %d: %w", name, h.Version, h.ChunkSize, h.LastChunk, h.Nchunks, pack.ErrNoHead)
	}
	if h.Options&optOffsets != 0 && pos+8*(h.Nchunks+h.MaxAppChunks) > size {
		return pack.Head{}, errf(name, pack.ErrFormat, "offsets section of %d entries past the end of the %d-byte file", h.Nchunks+h.MaxAppChunks, size)
	}
	if h.Nchunks == 0 {
		return pack.Head{Format: "bloscpack"}, nil
	}
	hi, lo := bits.Mul64(uint64(h.Nchunks-1), uint64(h.ChunkSize))
	if hi != 0 || lo > math.MaxInt64-uint64(h.LastChunk) {
		return pack.Head{}, errf(name, pack.ErrFormat, "%d chunks of %d bytes overflow", h.Nchunks, h.ChunkSize)
	}
	return pack.Head{Format: "bloscpack", Size: int64(lo) + h.LastChunk}, nil
}

func errf(name string, base error, format string, args ...any) error {
	return fmt.Errorf("%s: %w: "+format, append([]any{name, base}, args...)...)
}

// Open parses the Bloscpack file in r (size bytes). name prefixes errors.
func Open(r io.ReaderAt, size int64, name string, cache pack.BlockCache, opt Options) (*File, error) {
	f := &File{r: r, size: size, name: name, verify: !opt.SkipChecksums}
	if err := f.parse(); err != nil {
		return nil, err
	}
	f.ChunkReader = pack.NewChunkReader(name, f, cache)
	return f, nil
}

func (f *File) readAt(p []byte, off int64, what string) error {
	if off < 0 || off+int64(len(p)) > f.size {
		return errf(f.name, pack.ErrFormat, "%s [%d,%d) past the end of the %d-byte file", what, off, off+int64(len(p)), f.size)
	}
	n, err := f.r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	return fmt.Errorf("%s: reading %s at %d: %w", f.name, what, off, err)
}

// parseHeader reads and checks the header, and returns where the
// sections after it begin.
func (f *File) parseHeader() (int64, error) {
	var hb [headerLen]byte
	if f.size < headerLenV1 {
		return 0, errf(f.name, pack.ErrFormat, "file of %d bytes is too short for a header", f.size)
	}
	if err := f.readAt(hb[:min(headerLen, f.size)], 0, "header"); err != nil {
		return 0, err
	}
	if string(hb[:4]) != Magic {
		return 0, errf(f.name, pack.ErrFormat, "bad magic %q, want %q", hb[:4], Magic)
	}
	h := &f.Header
	h.Version = int(hb[4])
	le := binary.LittleEndian
	pos := int64(headerLen)
	switch h.Version {
	case 1:
		h.Nchunks = int64(le.Uint64(hb[8:]))
		h.ChunkSize, h.LastChunk = -1, -1
		pos = headerLenV1
	case 2, 3:
		if f.size < headerLen {
			return 0, errf(f.name, pack.ErrFormat, "file of %d bytes is too short for a header", f.size)
		}
		h.Options = hb[5]
		h.Checksum = int(hb[6])
		h.Typesize = int(hb[7])
		h.ChunkSize = int64(int32(le.Uint32(hb[8:])))
		h.LastChunk = int64(int32(le.Uint32(hb[12:])))
		h.Nchunks = int64(le.Uint64(hb[16:]))
		if h.Version == 3 {
			h.MaxAppChunks = int64(le.Uint64(hb[24:]))
		}
		valid := uint8(optOffsets | optMetadata)
		if h.Version == 2 {
			valid = optOffsets
		}
		if h.Options&^valid != 0 {
			return 0, errf(f.name, pack.ErrFormat, "options %#02x has reserved bits set", h.Options)
		}
		if h.Checksum >= len(Checksums) {
			return 0, errf(f.name, pack.ErrFormat, "checksum id %d", h.Checksum)
		}
	default:
		return 0, errf(f.name, pack.ErrUnsupported, "format version %d (1, 2 and 3 exist)", h.Version)
	}
	// Every chunk takes at least a 16-byte Blosc header.
	maxChunks := (f.size - pos) / blosc.MinHeaderLen
	if h.Nchunks < -1 || h.Nchunks > maxChunks {
		return 0, errf(f.name, pack.ErrFormat, "nchunks %d impossible in a %d-byte file", h.Nchunks, f.size)
	}
	if h.MaxAppChunks < 0 || h.MaxAppChunks > (f.size-pos)/8 {
		return 0, errf(f.name, pack.ErrFormat, "max_app_chunks %d impossible in a %d-byte file", h.MaxAppChunks, f.size)
	}
	if h.ChunkSize < -1 || h.LastChunk < -1 || (h.ChunkSize >= 0 && h.LastChunk > h.ChunkSize) {
		return 0, errf(f.name, pack.ErrFormat, "chunk_size %d, last_chunk %d", h.ChunkSize, h.LastChunk)
	}
	return pos, nil
}

func (f *File) parse() error {
	pos, err := f.parseHeader()
	if err != nil {
		return err
	}
	h := &f.Header
	if h.Options&optMetadata != 0 {
		n, err := f.parseMeta(pos)
		if err != nil {
			return err
		}
		pos += n
	}
	if h.Options&optOffsets != 0 {
		if h.Nchunks < 0 {
			return errf(f.name, pack.ErrFormat, "offsets section with unknown nchunks")
		}
		slots := h.Nchunks + h.MaxAppChunks
		if pos+8*slots > f.size {
			return errf(f.name, pack.ErrFormat, "offsets section of %d entries past the end of the %d-byte file", slots, f.size)
		}
		raw := make([]byte, 8*h.Nchunks)
		if err := f.readAt(raw, pos, "offsets"); err != nil {
			return err
		}
		f.chunkStart = pos + 8*slots
		f.offsets = make([]int64, h.Nchunks)
		for i := range f.offsets {
			o := int64(binary.LittleEndian.Uint64(raw[8*i:]))
			switch {
			case o >= f.size:
				return errf(f.name, pack.ErrFormat, "offsets[%d]=%d points past the end of the %d-byte file", i, o, f.size)
			case o+blosc.MinHeaderLen > f.size:
				return errf(f.name, pack.ErrFormat, "chunk %d at offset %d is truncated: the %d-byte file ends inside its header", i, o, f.size)
			case o < f.chunkStart:
				return errf(f.name, pack.ErrFormat, "offsets[%d]=%d points before the chunk area at %d", i, o, f.chunkStart)
			}
			f.offsets[i] = o
		}
	} else {
		f.chunkStart = pos
		if err := f.walk(); err != nil {
			return err
		}
	}
	return f.plainLayout()
}

// walk finds the chunks by following each chunk's cbytes (files without
// offsets, and format 1).
func (f *File) walk() error {
	cs := int64(Checksums[f.Header.Checksum].Size)
	pos := f.chunkStart
	var hb [blosc.MinHeaderLen]byte
	for i := int64(0); f.Header.Nchunks < 0 || i < f.Header.Nchunks; i++ {
		if f.Header.Nchunks < 0 && pos >= f.size {
			break
		}
		if err := f.readAt(hb[:], pos, fmt.Sprintf("chunk %d header", i)); err != nil {
			return err
		}
		cb := int64(binary.LittleEndian.Uint32(hb[12:]))
		if cb < blosc.MinHeaderLen || pos+cb+cs > f.size {
			return errf(f.name, pack.ErrFormat, "chunk %d at %d: cbytes %d (+%d checksum) past the end of the %d-byte file (truncated)", i, pos, cb, cs, f.size)
		}
		f.offsets = append(f.offsets, pos)
		pos += cb + cs
	}
	f.Header.Nchunks = int64(len(f.offsets))
	return nil
}

// plainLayout computes each chunk's plain offset: from the header's
// chunk_size and last_chunk when known, else from each chunk's header.
func (f *File) plainLayout() error {
	h := &f.Header
	n := len(f.offsets)
	f.plainOffs = make([]int64, n+1)
	if h.ChunkSize >= 0 && h.LastChunk >= 0 && n > 0 {
		for i := 1; i < n; i++ {
			f.plainOffs[i] = int64(i) * h.ChunkSize
		}
		f.plainOffs[n] = int64(n-1)*h.ChunkSize + h.LastChunk
		return nil
	}
	var hb [blosc.MinHeaderLen]byte
	for i, o := range f.offsets {
		if err := f.readAt(hb[:], o, fmt.Sprintf("chunk %d header", i)); err != nil {
			return err
		}
		nb := int64(int32(binary.LittleEndian.Uint32(hb[4:])))
		if nb < 0 {
			return errf(f.name, pack.ErrFormat, "chunk %d nbytes %d", i, nb)
		}
		f.plainOffs[i+1] = f.plainOffs[i] + nb
	}
	return nil
}

func (f *File) parseMeta(pos int64) (int64, error) {
	var mb [metaHeaderLen]byte
	if err := f.readAt(mb[:], pos, "metadata header"); err != nil {
		return 0, err
	}
	le := binary.LittleEndian
	m := &MetaHeader{
		Format:   string(bytes.TrimRight(mb[:8], "\x00 ")),
		Options:  mb[8],
		Checksum: int(mb[9]),
		Codec:    int(mb[10]),
		Level:    int(mb[11]),
		Size:     int64(le.Uint32(mb[12:])),
		MaxSize:  int64(le.Uint32(mb[16:])),
		CompSize: int64(le.Uint32(mb[20:])),
	}
	copy(m.UserCodec[:], mb[24:32])
	if m.Checksum >= len(Checksums) {
		return 0, errf(f.name, pack.ErrFormat, "metadata checksum id %d", m.Checksum)
	}
	if m.CompSize > m.MaxSize || m.MaxSize > maxMetaSize || m.Size > maxMetaSize {
		return 0, errf(f.name, pack.ErrFormat, "metadata sizes: %d stored, %d reserved, %d plain", m.CompSize, m.MaxSize, m.Size)
	}
	cs := int64(Checksums[m.Checksum].Size)
	m.sectionBytes = metaHeaderLen + m.MaxSize + cs
	if pos+m.sectionBytes > f.size {
		return 0, errf(f.name, pack.ErrFormat, "metadata section of %d bytes past the end of the file", m.sectionBytes)
	}
	stored := make([]byte, m.CompSize)
	if err := f.readAt(stored, pos+metaHeaderLen, "metadata"); err != nil {
		return 0, err
	}
	if cs > 0 {
		want := make([]byte, cs)
		if err := f.readAt(want, pos+metaHeaderLen+m.MaxSize, "metadata checksum"); err != nil {
			return 0, err
		}
		if got := digest(m.Checksum, stored); !bytes.Equal(got, want) {
			return 0, errf(f.name, pack.ErrChecksum, "metadata %s is %x, stored %x", Checksums[m.Checksum].Name, got, want)
		}
	}
	if m.Codec != 0 && m.Codec != 1 {
		return 0, errf(f.name, pack.ErrUnsupported, "metadata codec %d", m.Codec)
	}
	f.metaPos = pos + metaHeaderLen
	f.Meta = m
	return m.sectionBytes, nil
}

// Metadata returns the metadata section's (JSON) content, decompressed,
// or nil when the file has none. It is decoded at each call, not kept:
// a few kilobytes of zlib can claim 64 MiB. Content larger than
// pack.MaxMetaLayer is an error naming the file.
func (f *File) Metadata() ([]byte, error) {
	m := f.Meta
	if m == nil {
		return nil, nil
	}
	if m.Size > pack.MaxMetaLayer {
		return nil, errf(f.name, pack.ErrUnsupported, "metadata of %d bytes exceeds the %d-byte limit", m.Size, pack.MaxMetaLayer)
	}
	stored := make([]byte, m.CompSize)
	if err := f.readAt(stored, f.metaPos, "metadata"); err != nil {
		return nil, err
	}
	if m.Codec == 0 {
		return stored, nil
	}
	zr, err := zlib.NewReader(bytes.NewReader(stored))
	if err != nil {
		return nil, errf(f.name, pack.ErrFormat, "metadata zlib: %v", err)
	}
	plain, err := io.ReadAll(io.LimitReader(zr, m.Size+1))
	if err != nil || int64(len(plain)) != m.Size {
		return nil, errf(f.name, pack.ErrFormat, "metadata zlib: %d bytes (want %d): %v", len(plain), m.Size, err)
	}
	return plain, nil
}

// NumChunks returns the number of chunks.
func (f *File) NumChunks() int { return len(f.offsets) }

// FileOffsets returns where each chunk starts in the file: the offsets
// table, or the chunks found by walking their headers when the file has
// none.
func (f *File) FileOffsets() []int64 { return slices.Clone(f.offsets) }

// ChunkOffset returns the plain offset of chunk i.
func (f *File) ChunkOffset(i int) int64 { return f.plainOffs[i] }

// ChunkFileOffset returns the file offset of chunk i.
func (f *File) ChunkFileOffset(i int) int64 { return f.offsets[i] }

// rawChunk returns the size of chunk i as stored (its cbytes), checked
// against the file.
func (f *File) rawChunk(i int) (int64, error) {
	var hb [blosc.MinHeaderLen]byte
	off := f.offsets[i]
	if err := f.readAt(hb[:], off, "chunk header"); err != nil {
		return 0, err
	}
	cb := int64(binary.LittleEndian.Uint32(hb[12:]))
	cs := int64(Checksums[f.Header.Checksum].Size)
	if cb < blosc.MinHeaderLen || off+cb+cs > f.size {
		return 0, errf(f.name, pack.ErrFormat, "chunk %d at %d: cbytes %d (+%d checksum) past the end of the %d-byte file (truncated)", i, off, cb, cs, f.size)
	}
	return cb, nil
}

// OpenChunk parses chunk i, verifying its checksum.
func (f *File) OpenChunk(i int) (*blosc.Chunk, error) {
	cb, err := f.rawChunk(i)
	if err != nil {
		return nil, err
	}
	off := f.offsets[i]
	if f.verify && f.Header.Checksum != 0 {
		buf := make([]byte, cb+int64(Checksums[f.Header.Checksum].Size))
		if err := f.readAt(buf, off, "chunk"); err != nil {
			return nil, err
		}
		got := digest(f.Header.Checksum, buf[:cb])
		if want := buf[cb:]; !bytes.Equal(got, want) {
			return nil, fmt.Errorf("%w: %s is %x, stored %x", pack.ErrChecksum, Checksums[f.Header.Checksum].Name, got, want)
		}
	}
	return blosc.NewChunk(io.NewSectionReader(f.r, off, cb), cb)
}

// Size returns the plain size.
func (f *File) Size() int64 { return f.plainOffs[len(f.plainOffs)-1] }

// firstChunk returns the header of the first chunk, for Info and new
// chunks; it reads 16 bytes, not the chunk (listing a directory of
// Bloscpack files must not read and hash every first chunk).
func (f *File) firstChunk() *blosc.Header {
	f.firstOnce.Do(func() {
		if len(f.offsets) == 0 {
			return
		}
		var hb [blosc.MinHeaderLen]byte
		if err := f.readAt(hb[:], f.offsets[0], "chunk 0 header"); err != nil {
			return
		}
		if h, err := blosc.ParseHeader(hb[:]); err == nil {
			f.first = &h
		}
	})
	return f.first
}

// Info describes the file.
func (f *File) Info() pack.Info {
	h := f.Header
	in := pack.Info{
		Format: "bloscpack", Version: h.Version, Size: f.Size(), StoredSize: f.size,
		Chunks: f.NumChunks(), ChunkSize: h.ChunkSize, Clevel: -1, Typesize: h.Typesize,
		Checksum: Checksums[h.Checksum].Name,
	}
	if c := f.firstChunk(); c != nil {
		in.Blocksize = int(c.Blocksize)
		in.Codec = blosc.CodecName(c.Codec())
		in.Filters, in.FiltersMeta = c.Filters, c.FiltersMeta
		if in.Typesize == 0 {
			in.Typesize = int(c.Typesize)
		}
	}
	if f.Meta != nil && f.Meta.Size <= pack.InfoMetaMax {
		if md, err := f.Metadata(); err == nil {
			in.Meta = map[string][]byte{"metadata": md}
		}
	}
	return in
}
