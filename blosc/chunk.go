package blosc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/bloscfs/bloscfs/shuffle"
)

// Chunk is a parsed Blosc chunk that decodes its blocks on demand. It keeps
// the header, the block starts and the dictionary; block bytes are read
// from the underlying io.ReaderAt only when a block is decoded. A Chunk is
// safe for concurrent use.
type Chunk struct {
	Header
	r    io.ReaderAt
	data []byte // the whole chunk, when it is in memory
	head []byte // while parsing: the chunk's first bytes, already read

	blocksize int     // uncompressed bytes per block (all but the last)
	nblocks   int     // number of blocks
	bstarts   []int32 // compressed start of each block
	bends     []int32 // compressed end of each block
	dict      []byte
	vlOff     []int64 // VL blocks: uncompressed offset of block i (len nblocks+1)
	value     []byte  // special VALUE / NaN pattern
	decode    Decompressor
}

// Effective block size used for memcpyed and special chunks whose header
// block size is tiny: they have no streams, so any granularity works.
const virtualBlocksize = 256 << 10

// HeadRead is how many bytes NewChunk reads first: the header and the
// block starts of chunks of up to 500 blocks (and the whole chunk when it
// is no longer), so that opening a chunk costs one read, not two in a
// row, which over a network is one round trip instead of two. A chunk
// whose starts do not fit costs a second read.
const HeadRead = 2 << 10

// NewChunk parses the chunk at the start of r, which holds size bytes (the
// chunk may be shorter than size; its header's cbytes is authoritative).
// It reads the header, the block starts and the dictionary, in one read
// of HeadRead bytes when they fit, and checks every size against size
// before allocating. A chunk that fits in that first read is kept in
// memory whole.
func NewChunk(r io.ReaderAt, size int64) (*Chunk, error) {
	hp := getBuf(int(max(0, min(size, HeadRead))))
	defer putBuf(hp)
	head := *hp
	got, err := r.ReadAt(head, 0)
	if err != nil && !(errors.Is(err, io.EOF) && got > 0) {
		return nil, fmt.Errorf("%w: reading header: %w: %w", ErrCorrupt, errRead, err)
	}
	head = head[:got]
	h, err := ParseHeader(head)
	if err != nil {
		return nil, err
	}
	if int64(h.Cbytes) > size {
		return nil, fmt.Errorf("%w: chunk truncated: cbytes %d, only %d bytes available", ErrCorrupt, h.Cbytes, size)
	}
	c := &Chunk{Header: h, r: r}
	if int64(h.Cbytes) <= int64(len(head)) {
		c.data = slices.Clone(head[:h.Cbytes])
	} else {
		c.head = head // for parse only
	}
	err = c.parse()
	c.head = nil
	if err != nil {
		return nil, err
	}
	return c, nil
}

// NewChunkBytes parses a chunk held in memory. b must hold at least the
// chunk's cbytes; later bytes are ignored. The Chunk keeps b.
func NewChunkBytes(b []byte) (*Chunk, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if int64(h.Cbytes) > int64(len(b)) {
		return nil, fmt.Errorf("%w: chunk truncated: cbytes %d, only %d bytes available", ErrCorrupt, h.Cbytes, len(b))
	}
	c := &Chunk{Header: h, data: b[:h.Cbytes]}
	if err := c.parse(); err != nil {
		return nil, err
	}
	return c, nil
}

// readAt reads exactly len(p) bytes of the chunk at off.
func (c *Chunk) readAt(p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > int64(c.Cbytes) {
		return fmt.Errorf("%w: read [%d,%d) outside the %d-byte chunk", ErrCorrupt, off, off+int64(len(p)), c.Cbytes)
	}
	if c.data != nil {
		copy(p, c.data[off:])
		return nil
	}
	if off+int64(len(p)) <= int64(len(c.head)) {
		copy(p, c.head[off:])
		return nil
	}
	return readFull(c.r, p, off)
}

// readFull reads len(p) bytes at off of r: a short read is an error
// that wraps ErrCorrupt and says the read failed (ReadFailed).
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: reading %d bytes at %d: %w: %w", ErrCorrupt, len(p), off, errRead, err)
}

func (c *Chunk) parse() error {
	h := &c.Header
	hdr := int64(h.Len())
	nbytes := int64(h.Nbytes)
	if nbytes == 0 {
		return nil
	}
	switch {
	case h.Special() != SpecialNone:
		return c.parseSpecial()
	case h.Memcpyed():
		if hdr+nbytes > int64(h.Cbytes) {
			return fmt.Errorf("%w: memcpyed chunk of %d bytes but cbytes %d", ErrCorrupt, nbytes, h.Cbytes)
		}
		c.setVirtualBlocks()
		return nil
	}
	if err := h.checkFilters(); err != nil {
		return err
	}
	code := h.Codec()
	c.decode = decompressor(code)
	if c.decode == nil {
		if code < 0 {
			return fmt.Errorf("%w: codec format %d in flags %#02x", ErrUnsupported, -1-code, h.Flags)
		}
		return fmt.Errorf("%w: codec %s (id %d)", ErrUnsupported, CodecName(code), code)
	}
	if h.VLBlocks() {
		c.nblocks = int(h.Blocksize)
	} else {
		c.blocksize = int(h.Blocksize)
		c.nblocks = int((nbytes + int64(c.blocksize) - 1) / int64(c.blocksize))
	}
	streams := hdr + 4*int64(c.nblocks)
	if streams > int64(h.Cbytes) {
		return fmt.Errorf("%w: %d block starts do not fit in cbytes %d", ErrCorrupt, c.nblocks, h.Cbytes)
	}
	raw := make([]byte, 4*c.nblocks)
	if err := c.readAt(raw, hdr); err != nil {
		return err
	}
	if h.HasDict() {
		var db [4]byte
		if err := c.readAt(db[:], streams); err != nil {
			return err
		}
		dsize := int64(int32(binary.LittleEndian.Uint32(db[:])))
		if dsize <= 0 || dsize > maxDictSize || streams+4+dsize > int64(h.Cbytes) {
			return fmt.Errorf("%w: dictionary size %d", ErrCorrupt, dsize)
		}
		c.dict = make([]byte, dsize)
		if err := c.readAt(c.dict, streams+4); err != nil {
			return err
		}
		streams += 4 + dsize
	}
	c.bstarts = make([]int32, c.nblocks)
	for i := range c.bstarts {
		s := int32(binary.LittleEndian.Uint32(raw[4*i:]))
		if int64(s) < streams || int64(s)+4 > int64(h.Cbytes) {
			return fmt.Errorf("%w: block %d starts at %d, outside [%d,%d)", ErrCorrupt, i, s, streams, h.Cbytes)
		}
		c.bstarts[i] = s
	}
	// Blocks may be stored in any order (multi-threaded writers); each ends
	// at the next larger start, the last at cbytes.
	sorted := slices.Clone(c.bstarts)
	slices.Sort(sorted)
	c.bends = make([]int32, c.nblocks)
	for i, s := range c.bstarts {
		j, _ := slices.BinarySearch(sorted, s+1)
		if j < len(sorted) {
			c.bends[i] = sorted[j]
		} else {
			c.bends[i] = h.Cbytes
		}
	}
	if h.VLBlocks() {
		return c.parseVL()
	}
	return nil
}

func (c *Chunk) parseVL() error {
	c.vlOff = make([]int64, c.nblocks+1)
	var b [4]byte
	for i, s := range c.bstarts {
		if c.bends[i]-s < 4 {
			return fmt.Errorf("%w: VL block %d has %d bytes, less than its size field", ErrCorrupt, i, c.bends[i]-s)
		}
		if err := c.readAt(b[:], int64(s)); err != nil {
			return err
		}
		n := int32(binary.LittleEndian.Uint32(b[:]))
		if n < 0 || int64(n) > int64(c.Nbytes) {
			return fmt.Errorf("%w: VL block %d has size %d", ErrCorrupt, i, n)
		}
		c.vlOff[i+1] = c.vlOff[i] + int64(n)
	}
	if c.vlOff[c.nblocks] != int64(c.Nbytes) {
		return fmt.Errorf("%w: VL block sizes add up to %d, not nbytes %d", ErrCorrupt, c.vlOff[c.nblocks], c.Nbytes)
	}
	return nil
}

func (c *Chunk) parseSpecial() error {
	h := &c.Header
	switch h.Special() {
	case SpecialValue:
		vs := int(h.Cbytes) - ExtHeaderLen
		if vs <= 0 || int(h.Nbytes)%vs != 0 {
			return fmt.Errorf("%w: special value of %d bytes for nbytes %d", ErrCorrupt, vs, h.Nbytes)
		}
		c.value = make([]byte, vs)
		if err := c.readAt(c.value, ExtHeaderLen); err != nil {
			return err
		}
	case SpecialNaN:
		switch h.Typesize {
		case 4:
			c.value = []byte{0, 0, 0xC0, 0x7F} // C nanf("")
		case 8:
			c.value = []byte{0, 0, 0, 0, 0, 0, 0xF8, 0x7F} // C nan("")
		default:
			return fmt.Errorf("%w: NaN special chunk with typesize %d", ErrCorrupt, h.Typesize)
		}
		if int(h.Nbytes)%int(h.Typesize) != 0 {
			return fmt.Errorf("%w: NaN special chunk nbytes %d not a multiple of typesize %d", ErrCorrupt, h.Nbytes, h.Typesize)
		}
	}
	c.setVirtualBlocks()
	return nil
}

// setVirtualBlocks picks a block geometry for chunks without streams.
// The header's block size is kept when it is reasonable; a huge one (a
// special chunk of 2 GiB claiming one block) would make every read of a
// few bytes decode it whole, so blocks are at most virtualBlocksize.
func (c *Chunk) setVirtualBlocks() {
	bs := int(c.Header.Blocksize)
	if bs < 16<<10 || bs > int(c.Nbytes) || bs > virtualBlocksize {
		bs = min(int(c.Nbytes), virtualBlocksize)
	}
	c.blocksize = bs
	c.nblocks = (int(c.Nbytes) + bs - 1) / bs
}

// MemSize returns about how many bytes the parsed chunk holds in memory
// (block starts and ends, dictionary, block offsets, the chunk itself
// when it was parsed from memory), for caches that count it.
func (c *Chunk) MemSize() int64 {
	return 256 + 4*int64(len(c.bstarts)+len(c.bends)) + int64(len(c.dict)) + 8*int64(len(c.vlOff)) +
		int64(len(c.value)) + int64(len(c.data))
}

// NumBlocks returns the number of blocks.
func (c *Chunk) NumBlocks() int { return c.nblocks }

// BlockSize returns the uncompressed size of every block but the last
// (for VL-block chunks, of block 0).
func (c *Chunk) BlockSize() int {
	if c.vlOff != nil {
		return c.BlockLen(0)
	}
	return c.blocksize
}

// BlockOffset returns the uncompressed offset of block i in the chunk.
func (c *Chunk) BlockOffset(i int) int64 {
	if c.vlOff != nil {
		return c.vlOff[i]
	}
	return int64(i) * int64(c.blocksize)
}

// BlockLen returns the uncompressed size of block i.
func (c *Chunk) BlockLen(i int) int {
	if c.vlOff != nil {
		return int(c.vlOff[i+1] - c.vlOff[i])
	}
	return int(min(int64(c.blocksize), int64(c.Nbytes)-int64(i)*int64(c.blocksize)))
}

// BlockAt returns the index of the block holding uncompressed offset off.
func (c *Chunk) BlockAt(off int64) int {
	if c.vlOff != nil {
		// The block whose range [vlOff[i], vlOff[i+1]) holds off; empty
		// blocks hold nothing and are skipped.
		i := sort.Search(c.nblocks, func(i int) bool { return c.vlOff[i+1] > off })
		return min(i, c.nblocks-1)
	}
	return int(off / int64(c.blocksize))
}

// CompressedExtent returns the byte range [start, end) of block i's
// streams within the chunk, or (0, 0) for blocks with no stored streams.
func (c *Chunk) CompressedExtent(i int) (start, end int64) {
	if c.bstarts == nil {
		if c.Memcpyed() && c.Special() == SpecialNone {
			o := int64(c.Len()) + c.BlockOffset(i)
			return o, o + int64(c.BlockLen(i))
		}
		return 0, 0
	}
	return int64(c.bstarts[i]), int64(c.bends[i])
}

// NeedsBlock0 reports whether decoding a block other than 0 needs the
// decoded block 0 (the delta filter).
func (c *Chunk) NeedsBlock0() bool { return c.hasDelta() }

// Dict returns the chunk's dictionary, or nil.
func (c *Chunk) Dict() []byte { return c.dict }

// Decode decodes the whole chunk into dst, which must hold Nbytes bytes.
// With libzstd, the zstd streams of a chunk whose filters change no byte
// go to it in one call (decodeZstdChunk).
func (c *Chunk) Decode(dst []byte) error {
	if len(dst) < int(c.Nbytes) {
		return fmt.Errorf("blosc: Decode: destination of %d bytes for %d", len(dst), c.Nbytes)
	}
	if c.data == nil && c.Special() == SpecialNone && c.Memcpyed() && c.nblocks > 1 {
		// Stored as is, block after block: one read straight into dst.
		return c.readAt(dst[:c.Nbytes], int64(c.Len()))
	}
	// The blocks' compressed bytes, read at once (whole, from lo), or
	// block by block (whole nil).
	var whole []byte
	var lo int64
	if c.data == nil && c.Special() == SpecialNone && !c.Memcpyed() && c.nblocks > 1 && c.bstarts != nil {
		if l, hi, ok := c.wholeSpan(); ok {
			sp := getBuf(int(hi - l))
			defer putBuf(sp)
			if err := c.readAt(*sp, l); err != nil {
				return err
			}
			whole, lo = *sp, l
		}
	}
	if c.zstdOneCall() {
		switch {
		case whole != nil:
			return c.decodeZstdChunk(dst, whole, lo)
		case c.data != nil:
			return c.decodeZstdChunk(dst, c.data, 0)
		}
	}
	var ref []byte
	for i := 0; i < c.nblocks; i++ {
		off, end := c.BlockOffset(i), c.BlockOffset(i)+int64(c.BlockLen(i))
		b := dst[off:end:end]
		if whole != nil {
			if err := c.decodeFrom(b, i, ref, whole[int64(c.bstarts[i])-lo:int64(c.bends[i])-lo], 0); err != nil {
				return fmt.Errorf("block %d: %w", i, err)
			}
		} else if err := c.DecodeBlockRef(b, i, ref); err != nil {
			return err
		}
		if i == 0 {
			ref = b
		}
	}
	return nil
}

// wholeReadMax bounds the compressed bytes Decode reads in one call.
//
// Decode reads all of a chunk's blocks in one read rather than one per
// block: on a frame of 32 KiB blocks, a read per block made `unpack` cost
// 1.2× the CPU of one read per 1 MiB chunk (docs/PERFORMANCE.md, "Tried
// and dropped"), and on 256 KiB blocks one read per chunk is still a
// little cheaper. Beyond this size the chunk is read block by block, so
// that a huge chunk needs no huge buffer.
const wholeReadMax = 4 << 20

// wholeSpan returns the compressed span [lo, hi) of all blocks, and
// whether Decode should read it in one call: not when the reader lends
// its bytes in place (a memory-mapped file, BLOSCFS_MMAP=1), which needs
// no read at all, except for libzstd, which never decodes from a mapping.
func (c *Chunk) wholeSpan() (lo, hi int64, ok bool) {
	if _, _, _, ok := inPlace(c.r); ok && !(c.Codec() == CodecZstd && libzstd() != nil) {
		return 0, 0, false
	}
	lo, hi = int64(c.Cbytes), 0
	for i := range c.bstarts {
		lo = min(lo, int64(c.bstarts[i]))
		hi = max(hi, int64(c.bends[i]))
	}
	if hi <= lo || hi-lo > wholeReadMax {
		return 0, 0, false
	}
	return lo, hi, true
}

// DecodeBlock decodes block i into dst[:BlockLen(i)]. When the chunk needs
// block 0 as a delta reference, it is decoded too; callers that cache
// blocks use DecodeBlockRef instead.
func (c *Chunk) DecodeBlock(dst []byte, i int) error {
	var ref []byte
	if i > 0 && c.NeedsBlock0() {
		bp := getBuf(c.BlockLen(0))
		defer putBuf(bp)
		if err := c.DecodeBlockRef(*bp, 0, nil); err != nil {
			return err
		}
		ref = *bp
	}
	return c.DecodeBlockRef(dst, i, ref)
}

// DecodeBlockRef decodes block i into dst[:BlockLen(i)], given the decoded
// block 0 as ref when NeedsBlock0 reports true and i > 0 (ref is ignored
// otherwise).
func (c *Chunk) DecodeBlockRef(dst []byte, i int, ref []byte) error {
	if i < 0 || i >= c.nblocks {
		return fmt.Errorf("blosc: block %d out of range [0,%d)", i, c.nblocks)
	}
	bl := c.BlockLen(i)
	if len(dst) < bl {
		return fmt.Errorf("blosc: destination of %d bytes for block %d of %d", len(dst), i, bl)
	}
	// Capped at its length: whatever a codec, filter or special path does,
	// it cannot reach the bytes behind dst, which may be the next block or
	// chunk of a buffer that other goroutines are decoding into.
	dst = dst[:bl:bl]
	if i > 0 && c.NeedsBlock0() && len(ref) < c.BlockLen(0) {
		return fmt.Errorf("blosc: block %d needs the decoded block 0 as delta reference", i)
	}
	off := c.BlockOffset(i)
	switch {
	case c.Special() != SpecialNone:
		if c.value != nil {
			fillPattern(dst, c.value, off)
		} else {
			clear(dst)
		}
		return nil
	case c.Memcpyed():
		return c.readAt(dst, int64(c.Len())+off)
	}
	if err := c.decodeStreams(dst, i, ref, 0); err != nil {
		return fmt.Errorf("block %d: %w", i, err)
	}
	return nil
}

// fillPattern fills dst with pattern repeated, phased for chunk offset off.
func fillPattern(dst, pattern []byte, off int64) {
	l := len(pattern)
	p := int(off % int64(l))
	a := copy(dst, pattern[p:]) // dst[a:] starts at phase 0
	rest := dst[a:]
	n := copy(rest, pattern)
	for n < len(rest) {
		n += copy(rest[n:], rest[:n]) // n stays a multiple of l
	}
}

// InPlaceReader is implemented by io.ReaderAts that can lend their bytes
// where they lie, such as a memory-mapped file: a block then decodes from
// them without a copy. ReadInPlace calls fn with the n bytes at off, which
// fn must neither write nor keep, and returns fn's error; ok is false, and
// fn is not called, when the bytes cannot be lent (then they are read
// with ReadAt). A Chunk also finds one behind an *io.SectionReader.
type InPlaceReader interface {
	ReadInPlace(off, n int64, fn func([]byte) error) (ok bool, err error)
}

// inPlace returns the InPlaceReader behind r, the offset of r's byte 0 in
// it and the number of bytes r may read.
func inPlace(r io.ReaderAt) (InPlaceReader, int64, int64, bool) {
	switch r := r.(type) {
	case *io.SectionReader:
		outer, off, n := r.Outer()
		if ip, ok := outer.(InPlaceReader); ok {
			return ip, off, n, true
		}
	case InPlaceReader:
		return r, 0, math.MaxInt64, true
	}
	return nil, 0, 0, false
}

// decodeStreams decodes block i into dst from its compressed bytes, read
// from memory, in place or with a read; with planes > 0, it decodes its
// planes streams and leaves them as they are (see DecodeBlockPlanes).
func (c *Chunk) decodeStreams(dst []byte, i int, ref []byte, planes int) error {
	start, end := int64(c.bstarts[i]), int64(c.bends[i])
	if c.data != nil {
		return c.decodeFrom(dst, i, ref, c.data[start:end], planes)
	}
	// Not for libzstd: a fault on a mapping (the file shrank) inside C
	// code cannot be turned into an error; it would kill the process.
	cZstd := c.Codec() == CodecZstd && libzstd() != nil
	if ip, base, n, ok := inPlace(c.r); ok && !cZstd && end <= n && end <= int64(c.Cbytes) {
		if ok, err := ip.ReadInPlace(base+start, end-start, func(src []byte) error {
			return c.decodeFrom(dst, i, ref, src, planes)
		}); ok {
			return err
		}
	}
	sp := getBuf(int(end - start))
	defer putBuf(sp)
	src := *sp
	if err := c.readAt(src, start); err != nil {
		return err
	}
	return c.decodeFrom(dst, i, ref, src, planes)
}

// decodeFrom decodes block i from its compressed bytes src; with planes
// > 0, its planes streams only (see DecodeBlockPlanes).
func (c *Chunk) decodeFrom(dst []byte, i int, ref, src []byte, planes int) error {
	if planes > 0 {
		return c.decodeSplit(dst, src, planes, nil, nil)
	}
	// dst is the caller's, capped at its length by DecodeBlockRef: the
	// codec writes nothing behind it. A filtered block decodes into
	// scratch first, whose spare room lets zstd use its fast copies.
	bsize := len(dst)
	out := dst
	filtered := c.activeFilters()
	if filtered {
		slack := 0
		if c.Codec() == CodecZstd {
			slack = zstdSlack
		}
		tp := getBuf(bsize + slack)
		defer putBuf(tp)
		out = (*tp)[:bsize]
	}
	if c.vlOff != nil {
		if err := c.decodeVL(out, src[4:]); err != nil {
			return err
		}
	} else {
		ts, both := c.blockStreams(i, bsize)
		if both {
			// c-blosc 1.x reads these as one stream; c-blosc 1.x in
			// ALWAYS mode wrote them split (FORMATS P3): try both.
			if err := c.decodeSplit(out, src, 1, nil, nil); err == nil {
				goto unfilter
			} else if bsize%ts != 0 {
				return err
			}
		}
		if err := c.checkSplit(bsize, ts); err != nil {
			return err
		}
		if c.lendsStreams(ts) {
			// Stored streams stay where they lie (in the file's mapping,
			// often): the unshuffle reads them there, not from a copy.
			var lent [maxLent][]byte
			if err := c.decodeSplit(out, src, ts, lent[:ts], nil); err != nil {
				return err
			}
			shuffle.UnshuffleStreams(dst, lent[:ts])
			return nil
		}
		if err := c.decodeSplit(out, src, ts, nil, nil); err != nil {
			return err
		}
	}
unfilter:
	if filtered {
		c.unfilter(dst, out, ref, i)
	}
	return nil
}

// blockStreams returns how many streams block i, of bsize bytes, is
// split into (1: not split). both is true for the blocks of c-blosc 1.x
// chunks that may have been written either way (FORMATS P3): one stream
// is tried first, then n.
func (c *Chunk) blockStreams(i, bsize int) (n int, both bool) {
	ts := int(c.Typesize)
	leftover := i == c.nblocks-1 && int(c.Nbytes)%c.blocksize != 0
	split := c.Flags&flagDontSplit == 0 && !leftover
	if !split {
		return 1, false
	}
	if c.Version <= VersionBlosc1 && !(ts <= 16 && bsize/ts >= 128) {
		return ts, true
	}
	return ts, false
}

// checkSplit fails for a block of bsize bytes split into n streams that
// it does not divide.
func (c *Chunk) checkSplit(bsize, n int) error {
	if n > 1 && bsize%n != 0 {
		return fmt.Errorf("%w: split block of %d bytes is not a multiple of typesize %d (c-blosc2 3.x blocksize bug)", ErrCorrupt, bsize, n)
	}
	return nil
}

// lendsStreams reports whether a block split into n streams is unshuffled
// straight from where its streams lie (decodeSplit's lent).
func (c *Chunk) lendsStreams(n int) bool {
	sts, ok := c.shuffleOnly()
	return ok && sts == n && n <= maxLent && shuffle.CanUnshuffleStreams(n)
}

// zstdOneCall reports whether Decode hands libzstd all the zstd streams
// of the chunk in one call (decodeZstdChunk): with libzstd, on a chunk
// whose filters change no byte, so that its blocks decode straight into
// the caller's buffer.
//
// Each call into C is a cgo call, which the Go scheduler treats as a
// system call: at GOMAXPROCS=1 one that outlasts sysmon's 20 µs tick has
// its processor handed to another thread and back, a pair of context
// switches per block of 32 KiB. On 1 MiB chunks of CSV text
// (python-blosc2 writes it with a byte shuffle of 1-byte items, which
// changes nothing) one call per chunk took 0.86× the CPU of a call per
// block into the output, 0.78× of a call per block into scratch.
// Filtered blocks decode into scratch that the unshuffle then reads:
// gathered in groups of 256 KiB they cost as much as a call per block or
// a little more (the scratch leaves the first-level cache), in groups of
// 1 MiB up to 1.2× more (docs/PERFORMANCE.md, "Tried and dropped"); they
// keep a call per block.
func (c *Chunk) zstdOneCall() bool {
	return c.Codec() == CodecZstd && c.dict == nil && c.vlOff == nil && c.Special() == SpecialNone &&
		!c.Memcpyed() && c.bstarts != nil && c.nblocks > 1 && !c.bytesFiltered() && libzstd() != nil
}

// zstdBatch gathers zstd streams for one call into libzstd: per stream,
// four values in jobs (its offset and size in src, its offset and size in
// out) and two in at (its block and stream number, for the error).
type zstdBatch struct {
	jobs []int64 // room for at least n streams
	at   []int32
	n    int // streams gathered
	// The block being gathered, and where its compressed bytes and its
	// output start in the batch's src and out.
	blk, srcOff, outOff int
}

// reserve makes room for n more streams.
func (b *zstdBatch) reserve(n int) {
	if need := 4 * (b.n + n); need > len(b.jobs) {
		b.jobs = append(b.jobs, make([]int64, need-len(b.jobs))...)
		b.at = append(b.at, make([]int32, need/2-len(b.at))...)
	}
}

// add gathers stream s of the block being gathered: csize bytes at pos of
// the block's bytes, decoding to n bytes at o of its output. The batch
// has room for it (reserve). It writes only numbers, so that a batch on
// the stack stays there.
func (b *zstdBatch) add(s, pos, csize, o, n int) {
	j, a := b.jobs[4*b.n:4*b.n+4], b.at[2*b.n:2*b.n+2]
	j[0], j[1], j[2], j[3] = int64(b.srcOff+pos), int64(csize), int64(b.outOff+o), int64(n)
	a[0], a[1] = int32(b.blk), int32(s)
	b.n++
}

// run decodes the gathered streams from src into out in one call and
// empties the batch. A failure names the first stream that failed, and
// blk is its block.
func (b *zstdBatch) run(c *Chunk, out, src []byte) (blk int, err error) {
	if b.n == 0 {
		return 0, nil
	}
	k, err := libzstdDecodeBatch(out, src, b.jobs[:4*b.n])
	b.n = 0
	if err != nil {
		return int(b.at[2*k]), fmt.Errorf("%w: stream %d (%s, %d→%d bytes): %v", ErrCorrupt, b.at[2*k+1], CodecName(c.Codec()), b.jobs[4*k+1], b.jobs[4*k+3], err)
	}
	return 0, nil
}

// zstdBatches holds decodeZstdChunk's batches, whose slices grow to the
// most streams a chunk has had.
var zstdBatches = sync.Pool{New: func() any { return new(zstdBatch) }}

// decodeZstdChunk decodes every block of the chunk, whose filters change
// no byte, straight into dst from src, which holds the compressed bytes
// of all its blocks (src[0] is the chunk's byte lo): its zstd streams in
// one call into libzstd. A block whose streams cannot be gathered
// (c-blosc 1.x's either-way split) is decoded alone. Errors name the
// block, and a corrupt stream the first one, as a decode block by block
// does.
func (c *Chunk) decodeZstdChunk(dst, src []byte, lo int64) error {
	b := zstdBatches.Get().(*zstdBatch)
	defer func() {
		b.n = 0
		zstdBatches.Put(b)
	}()
	// run decodes the streams gathered so far.
	run := func() error {
		if blk, err := b.run(c, dst, src); err != nil {
			return fmt.Errorf("block %d: %w", blk, err)
		}
		return nil
	}
	for i := 0; i < c.nblocks; i++ {
		off, bl := c.BlockOffset(i), c.BlockLen(i)
		d := dst[off : off+int64(bl) : off+int64(bl)]
		bsrc := src[int64(c.bstarts[i])-lo : int64(c.bends[i])-lo]
		n, both := c.blockStreams(i, bl)
		if both || c.checkSplit(bl, n) != nil {
			// A block gathered before it failing comes first.
			if err := run(); err != nil {
				return err
			}
			if err := c.decodeFrom(d, i, nil, bsrc, 0); err != nil {
				return fmt.Errorf("block %d: %w", i, err)
			}
			continue
		}
		b.blk, b.srcOff, b.outOff = i, int(int64(c.bstarts[i])-lo), int(off)
		b.reserve(n)
		if err := c.splitStreams(d, bsrc, n, nil, b); err != nil {
			if e := run(); e != nil {
				return e
			}
			return fmt.Errorf("block %d: %w", i, err)
		}
	}
	return run()
}

// zstdSlack is the spare room behind a scratch output that lets zstd's
// decoder use its fast, overshooting copies for every block of a frame:
// it needs a block's worth (at most 128 KiB) plus 16 bytes beyond what it
// has written when it starts each block.
const zstdSlack = 128<<10 + 64

// zeroStream is read-only zeros that decodeSplit lends for zero streams
// of at most its length (in the binary's zero-filled data: nothing is
// allocated, and pages never written stay shared).
var zeroStream [128 << 10]byte

// maxBatch is the most streams of a block decoded in one call into
// libzstd when the block is decoded alone; blocks split into more
// streams call it once per stream.
const maxBatch = 16

// maxLent is the largest typesize whose stored streams a block decode
// lends to the unshuffle instead of copying.
const maxLent = 16

// decodeSplit decodes nstreams back-to-back streams filling out. With
// lent (len nstreams), a stream stored as is is not copied into out:
// lent[s] is set to where stream s lies, in src or in out. With g, the
// zstd streams are gathered into g, and decoded when the caller runs it;
// without, a block's zstd streams are decoded in one call into libzstd
// where it is loaded.
func (c *Chunk) decodeSplit(out, src []byte, nstreams int, lent [][]byte, g *zstdBatch) error {
	if g == nil && nstreams > 1 && nstreams <= maxBatch && c.Codec() == CodecZstd && c.dict == nil && libzstd() != nil {
		var jobs [4 * maxBatch]int64
		var at [2 * maxBatch]int32
		local := zstdBatch{jobs: jobs[:], at: at[:]}
		err := c.splitStreams(out, src, nstreams, lent, &local)
		// A gathered stream failing comes before a later stream's error.
		if _, e := local.run(c, out, src); e != nil {
			return e
		}
		return err
	}
	return c.splitStreams(out, src, nstreams, lent, g)
}

// splitStreams is decodeSplit: the zstd streams go to g when it is set.
func (c *Chunk) splitStreams(out, src []byte, nstreams int, lent [][]byte, g *zstdBatch) error {
	neblock := len(out) / nstreams
	ext := c.Extended()
	pos := 0
	for s := 0; s < nstreams; s++ {
		o := out[s*neblock : (s+1)*neblock]
		if lent != nil {
			lent[s] = o
		}
		if pos+4 > len(src) {
			return fmt.Errorf("%w: stream %d header past the block end", ErrCorrupt, s)
		}
		csize := int32(binary.LittleEndian.Uint32(src[pos:]))
		pos += 4
		switch {
		case ext && csize == 0:
			if lent != nil && neblock <= len(zeroStream) {
				// A stream of zeros (the high bytes of small integers):
				// the unshuffle reads it from zeroStream, which stays in
				// the cache, rather than from o cleared first.
				lent[s] = zeroStream[:neblock:neblock]
				continue
			}
			clear(o)
		case ext && csize < 0:
			if pos >= len(src) {
				return fmt.Errorf("%w: stream %d run token past the block end", ErrCorrupt, s)
			}
			if src[pos]&1 == 0 {
				return fmt.Errorf("%w: stream %d run token %#02x", ErrUnsupported, s, src[pos])
			}
			pos++
			fillByte(o, byte(-csize))
		case csize <= 0 || int(csize) > len(src)-pos:
			return fmt.Errorf("%w: stream %d csize %d with %d bytes left", ErrCorrupt, s, csize, len(src)-pos)
		case int(csize) == neblock:
			if lent != nil {
				lent[s] = src[pos : pos+neblock : pos+neblock]
				pos += neblock
				continue
			}
			copy(o, src[pos:pos+neblock])
			pos += neblock
		case g != nil:
			g.add(s, pos, int(csize), s*neblock, neblock)
			pos += int(csize)
		default:
			// o's capacity runs to the end of out: the streams after it,
			// which this loop fills afterwards, and the scratch slack.
			if err := c.decode(o, src[pos:pos+int(csize)], c.dict); err != nil {
				return fmt.Errorf("%w: stream %d (%s, %d→%d bytes): %v", ErrCorrupt, s, CodecName(c.Codec()), csize, neblock, err)
			}
			pos += int(csize)
		}
	}
	return nil
}

// fillByte sets every byte of o to v. A byte loop cost 11-19 % of
// decoding a float64 random walk, whose exponent bytes are run streams;
// doubling copies run at memmove's speed.
func fillByte(o []byte, v byte) {
	if v == 0 || len(o) == 0 {
		clear(o)
		return
	}
	o[0] = v
	for n := 1; n < len(o); n *= 2 {
		copy(o[n:], o[:n])
	}
}

// decodeVL decodes one variable-length block: its compressed bytes follow
// the 4-byte uncompressed size.
func (c *Chunk) decodeVL(out, src []byte) error {
	if len(src) == len(out) {
		copy(out, src)
		return nil
	}
	if err := c.decode(out, src, c.dict); err != nil {
		return fmt.Errorf("%w: VL block (%s, %d→%d bytes): %v", ErrCorrupt, CodecName(c.Codec()), len(src), len(out), err)
	}
	return nil
}

// Decompress decodes a whole chunk held in memory and returns a new slice.
func Decompress(src []byte) ([]byte, error) {
	c, err := NewChunkBytes(src)
	if err != nil {
		return nil, err
	}
	out := make([]byte, c.Nbytes)
	if err := c.Decode(out); err != nil {
		return nil, err
	}
	return out, nil
}
