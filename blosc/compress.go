package blosc

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// SplitMode says when blocks are split into one stream per byte of the
// element type before compression.
type SplitMode uint8

// Split modes, numbered as in c-blosc2's cparams.splitmode.
const (
	// SplitForwardCompat is c-blosc2's default (identical to SplitAuto in
	// c-blosc2; for Blosc1 chunks it is c-blosc ≥ 1.14's default rule).
	SplitForwardCompat SplitMode = 0
	SplitAlways        SplitMode = 1
	SplitNever         SplitMode = 2
	SplitAuto          SplitMode = 3
)

// Params are the compression parameters of one chunk.
type Params struct {
	Codec       int // compcode: CodecBloscLZ, CodecLZ4, CodecLZ4HC, CodecZlib, CodecZstd
	Clevel      int // 0 (store) … 9
	Typesize    int // 1 … 255
	Blocksize   int // 0 chooses automatically
	Filters     [MaxFilters]uint8
	FiltersMeta [MaxFilters]uint8
	Split       SplitMode
	// Blosc1 writes a version-2 chunk with the 16-byte header, readable by
	// c-blosc 1.x and Bloscpack. It allows one shuffle or bitshuffle filter.
	Blosc1 bool
}

// DefaultParams returns the parameters of new frames for a typesize:
// zstd, clevel 5, byte shuffle, automatic block size (python-blosc2's
// codec and filter with c-blosc2's default level; python-blosc2's is 1).
func DefaultParams(typesize int) Params {
	p := Params{Codec: CodecZstd, Clevel: 5, Typesize: typesize, Split: SplitAuto}
	p.Filters[5] = FilterShuffle
	return p
}

// MaxOverhead is the most that Compress adds to the input size.
const MaxOverhead = ExtHeaderLen

// ValidateParams reports whether Compress accepts p, and why not.
func ValidateParams(p Params) error { return p.validate() }

func (p *Params) validate() error {
	if p.Clevel < 0 || p.Clevel > 9 {
		return fmt.Errorf("%w: clevel %d not in 0…9", ErrUnsupported, p.Clevel)
	}
	if p.Typesize < 1 || p.Typesize > 255 {
		return fmt.Errorf("%w: typesize %d not in 1…255", ErrUnsupported, p.Typesize)
	}
	if p.Blocksize < 0 || p.Blocksize > maxBlocksize {
		return fmt.Errorf("%w: blocksize %d", ErrUnsupported, p.Blocksize)
	}
	if p.Split > SplitAuto {
		return fmt.Errorf("%w: split mode %d", ErrUnsupported, p.Split)
	}
	if p.Codec == CodecSnappy || compressor(p.Codec) == nil {
		return fmt.Errorf("%w: no encoder for codec %s", ErrUnsupported, CodecName(p.Codec))
	}
	if _, ok := codecFormat[p.Codec]; !ok {
		return fmt.Errorf("%w: codec %s has no chunk format number", ErrUnsupported, CodecName(p.Codec))
	}
	nf := 0
	for i, f := range p.Filters {
		switch f {
		case FilterNone:
			continue
		case FilterShuffle, FilterBitShuffle:
		case FilterDelta, FilterTruncPrec, FilterByteDelta:
			if p.Blosc1 {
				return fmt.Errorf("%w: filter %d in a Blosc1 chunk", ErrUnsupported, f)
			}
			if f == FilterTruncPrec && p.Typesize != 4 && p.Typesize != 8 {
				return fmt.Errorf("%w: trunc_prec needs typesize 4 or 8, not %d", ErrUnsupported, p.Typesize)
			}
		default:
			return fmt.Errorf("%w: no encoder for filter %d in slot %d", ErrUnsupported, f, i)
		}
		nf++
	}
	for i, f := range p.Filters {
		if f == FilterDelta {
			for _, g := range p.Filters[:i] {
				if g != FilterNone {
					// c-blosc2 references the raw block 0, which only
					// matches when delta sees raw data (its issues #760, #762).
					return fmt.Errorf("%w: delta must be the first filter, found filter %d before it", ErrUnsupported, g)
				}
			}
		}
	}
	if p.Blosc1 && nf > 1 {
		return fmt.Errorf("%w: Blosc1 chunks hold one shuffle or bitshuffle filter, not %d filters", ErrUnsupported, nf)
	}
	return nil
}

func (p *Params) hasFilter(f uint8) bool {
	for _, x := range p.Filters {
		if x == f {
			return true
		}
	}
	return false
}

// splitChunk decides the dont_split flag for a chunk (FORMATS §1.7).
func (p *Params) splitChunk(blocksize int) bool {
	ts := p.Typesize
	switch p.Split {
	case SplitAlways:
		return true
	case SplitNever:
		return false
	}
	if p.Blosc1 {
		// c-blosc ≥ 1.14 FORWARD_COMPAT (AUTO restricts to blosclz).
		if p.Split == SplitAuto && p.Codec != CodecBloscLZ {
			return false
		}
		return p.Codec != CodecZstd && ts <= 16 && blocksize/ts >= 128
	}
	codecOK := p.Codec == CodecBloscLZ || p.Codec == CodecLZ4 || (p.Codec == CodecZstd && p.Clevel <= 5)
	return codecOK && p.hasFilter(FilterShuffle) && ts <= 16 && blocksize/ts >= 32
}

// withoutNoOpShuffle returns p without its byte shuffles of typesize 1,
// which change nothing. c-blosc2 leaves them out of the chunks it writes
// (blosc2_compress: shuffle only when typesize > 1), and decodes a chunk
// that records one with a byte-by-byte loop: CSV text packed with
// --typesize 1 decoded 3 times slower in c-blosc2 2.23 than the same
// chunks without the filter.
func (p Params) withoutNoOpShuffle() Params {
	for i, f := range p.Filters {
		if f != FilterShuffle {
			continue
		}
		ts := int(p.FiltersMeta[i])
		if ts == 0 || p.Blosc1 {
			ts = p.Typesize
		}
		if ts <= 1 {
			p.Filters[i], p.FiltersMeta[i] = FilterNone, 0
		}
	}
	return p
}

// AutoBlocksize returns the block size that c-blosc2 (or c-blosc 1.x for
// Blosc1 parameters) chooses for a chunk of nbytes with p's codec, level,
// typesize and filters, whatever p.Blocksize says: what Compress uses
// when p.Blocksize is 0.
func (p Params) AutoBlocksize(nbytes int) int {
	p.Blocksize = 0
	return p.computeBlocksize(nbytes)
}

// computeBlocksize chooses a block size as c-blosc2 (or c-blosc 1.x)
// does, rounded to a multiple of the typesize.
func (p *Params) computeBlocksize(nbytes int) int {
	ts := p.Typesize
	if nbytes < ts {
		return 1
	}
	bs := p.Blocksize
	if bs == 0 {
		bs = nbytes
		const l1 = 32 << 10
		hcr := p.Codec == CodecLZ4HC || p.Codec == CodecZlib || p.Codec == CodecZstd
		if nbytes >= l1 {
			bs = l1
			if hcr {
				bs *= 2
			}
			switch p.Clevel {
			case 0:
				bs /= 4
			case 1:
				bs /= 2
			case 3:
				bs *= 2
			case 4, 5:
				bs *= 4
			case 6, 7, 8:
				bs *= 8
			case 9:
				bs *= 8
				if hcr {
					bs *= 2
				}
			}
		}
		if p.Clevel > 0 && p.splitChunk(bs) {
			if p.Blosc1 {
				bs = min(bs, 256<<10) * ts
				bs = min(max(bs, 64<<10), 1<<20)
			} else {
				per := map[int]int{1: 32, 2: 32, 3: 32, 4: 64, 5: 64, 6: 64, 7: 128, 8: 256, 9: 512}[p.Clevel] << 10
				bs = min(max(per*ts, 32<<10), 4<<20)
			}
		}
	} else if p.Blosc1 && bs < 128 {
		bs = 128
	}
	bs = min(max(bs, ts), nbytes)
	if bs > ts {
		bs = bs / ts * ts
	}
	return bs
}

// Compress encodes src as one Blosc chunk appended to dst and returns the
// extended slice. The result is never longer than len(src)+MaxOverhead.
func Compress(dst, src []byte, p Params) ([]byte, error) {
	return compress(dst, sliceSource(src), p)
}

// CompressReaderAt is Compress for the n bytes of r: it reads them one
// block at a time, so that its memory is a few blocks and the output,
// not n, whatever n is (a 2 GiB chunk of zeros costs a block of scratch
// and compresses to a header). It gives the same chunk as Compress.
func CompressReaderAt(dst []byte, r io.ReaderAt, n int, p Params) ([]byte, error) {
	return compress(dst, readerSource{r, n}, p)
}

// A blockSource hands the chunk's plain bytes to compress.
type blockSource interface {
	// size is the number of plain bytes.
	size() int
	// block returns [off, off+len(buf)), in buf or in memory of its own.
	block(off int, buf []byte) ([]byte, error)
	// appendAll appends all plain bytes to dst (a memcpyed chunk).
	appendAll(dst []byte) ([]byte, error)
}

type sliceSource []byte

func (s sliceSource) size() int { return len(s) }
func (s sliceSource) block(off int, buf []byte) ([]byte, error) {
	return s[off : off+len(buf)], nil
}
func (s sliceSource) appendAll(dst []byte) ([]byte, error) { return append(dst, s...), nil }

type readerSource struct {
	r io.ReaderAt
	n int
}

func (s readerSource) size() int { return s.n }
func (s readerSource) block(off int, buf []byte) ([]byte, error) {
	if k, err := s.r.ReadAt(buf, int64(off)); k != len(buf) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("blosc: reading plain bytes [%d,%d): %w", off, off+len(buf), err)
	}
	return buf, nil
}
func (s readerSource) appendAll(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = slices.Grow(dst, s.n)[:start+s.n]
	if _, err := s.block(0, dst[start:]); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

func compress(dst []byte, src blockSource, p Params) ([]byte, error) {
	if err := p.validate(); err != nil {
		return dst, err
	}
	p = p.withoutNoOpShuffle()
	maxNbytes := maxNbytesBlosc2
	if p.Blosc1 {
		maxNbytes = 1<<31 - 1 - MinHeaderLen
	}
	if src.size() > maxNbytes {
		return dst, fmt.Errorf("%w: %d bytes exceed the chunk limit %d", ErrUnsupported, src.size(), maxNbytes)
	}
	hdrLen := ExtHeaderLen
	version := byte(VersionStable)
	if p.Blosc1 {
		hdrLen, version = MinHeaderLen, VersionBlosc1
	}
	nbytes := src.size()
	bs := p.computeBlocksize(nbytes)
	split := p.splitChunk(bs)

	flags := codecFormat[p.Codec] << 5
	if !split {
		flags |= flagDontSplit
	}
	if p.Blosc1 {
		if p.hasFilter(FilterShuffle) {
			flags |= flagShuffle
		} else if p.hasFilter(FilterBitShuffle) {
			flags |= flagBitshuffle
		}
	} else {
		flags |= flagShuffle | flagBitshuffle
		if p.hasFilter(FilterDelta) {
			flags |= flagDelta
		}
	}
	// The chunk is at most the header and nbytes (past that it is stored
	// as is): room for it at once, rather than appends that copy the
	// chunk each time they outgrow dst (a tenth of `pack`'s CPU, with dst
	// nil). Only up to preGrow: a huge chunk may compress to almost
	// nothing, and its memory must not follow nbytes.
	dst = slices.Grow(dst, min(hdrLen+nbytes, preGrow))
	start := len(dst)
	var hdr [ExtHeaderLen]byte
	hdr[0], hdr[1], hdr[2], hdr[3] = version, 1, flags, byte(p.Typesize)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(nbytes))
	binary.LittleEndian.PutUint32(hdr[8:], uint32(bs))
	if !p.Blosc1 {
		copy(hdr[16:22], p.Filters[:])
		hdr[22] = byte(p.Codec)
		copy(hdr[24:30], p.FiltersMeta[:])
	}
	dst = append(dst, hdr[:hdrLen]...)

	memMin := 128
	if !p.Blosc1 {
		memMin = 32
	}
	if p.Clevel == 0 || nbytes < memMin || nbytes < p.Typesize {
		return finishMemcpy(dst, start, src, hdrLen)
	}

	nblocks := (nbytes + bs - 1) / bs
	if hdrLen+4*nblocks >= nbytes {
		return finishMemcpy(dst, start, src, hdrLen)
	}
	bstartsPos := len(dst)
	dst = append(dst, make([]byte, 4*nblocks)...)
	limit := start + hdrLen + nbytes // past this, store uncompressed
	comp := compressor(p.Codec)

	work := getBuf(bs)
	defer putBuf(work)
	tmp := getBuf(bs)
	defer putBuf(tmp)
	out := getBuf(bs)
	defer putBuf(out)
	in := getBuf(bs) // a block read from a reader
	defer putBuf(in)
	var raw0 []byte // the raw block 0, which delta refers to
	if p.hasFilter(FilterDelta) {
		r0 := getBuf(bs)
		defer putBuf(r0)
		b, err := src.block(0, (*r0)[:min(bs, nbytes)])
		if err != nil {
			return dst[:start], err
		}
		raw0 = b
	}

	allZero := true
	for j := 0; j < nblocks; j++ {
		off := j * bs
		bsize := min(bs, nbytes-off)
		block, err := src.block(off, (*in)[:bsize])
		if err != nil {
			return dst[:start], err
		}
		leftover := j == nblocks-1 && nbytes%bs != 0
		nstreams := 1
		if split && !leftover && p.Typesize > 1 {
			if !p.Blosc1 || (p.Typesize <= 16 && bsize/p.Typesize >= 128) {
				nstreams = p.Typesize
			}
		}
		neblock := bsize / nstreams
		binary.LittleEndian.PutUint32(dst[bstartsPos+4*j:], uint32(len(dst)-start))
		if zeroRuns && !p.Blosc1 && !p.hasFilter(FilterDelta) && isZero(block) {
			// Every filter but delta turns zeros into zeros, and a
			// stream of zeros is stored as a zero run (below): the same
			// bytes, without filtering and scanning the block.
			for s := 0; s < nstreams; s++ {
				dst = binary.LittleEndian.AppendUint32(dst, 0)
				if len(dst) >= limit {
					return finishMemcpy(dst[:start+hdrLen], start, src, hdrLen)
				}
			}
			continue
		}
		filtered := p.filterBlock((*work)[:bsize], (*tmp)[:bsize], block, raw0, j, version)
		for s := 0; s < nstreams; s++ {
			stream := filtered[s*neblock : (s+1)*neblock]
			if !p.Blosc1 {
				if v, ok := runValue(stream); ok {
					if v == 0 {
						dst = binary.LittleEndian.AppendUint32(dst, 0)
					} else {
						allZero = false
						dst = binary.LittleEndian.AppendUint32(dst, uint32(-int32(v)))
						dst = append(dst, 1)
					}
					if len(dst) >= limit {
						return finishMemcpy(dst[:start+hdrLen], start, src, hdrLen)
					}
					continue
				}
			}
			allZero = false
			budget := neblock - 1
			if budget > 0 {
				budget = min(budget, limit-len(dst)-4)
			}
			// The stream is encoded in place, after room for its
			// length, when dst has the room (it was grown for the whole
			// chunk up to preGrow): a copy of every encoded stream less,
			// a tenth of the time of LZ4 on a float64 walk. Encoders
			// write only within the slice they get.
			n, pos, inPlace := 0, len(dst)+4, false
			if budget > 0 {
				ob := (*out)[:budget]
				if pos+budget <= cap(dst) {
					ob, inPlace = dst[pos:pos+budget], true
				}
				var err error
				n, err = comp(ob, stream, p.Clevel)
				if err != nil {
					return dst[:start], fmt.Errorf("blosc: %s encoder: %w", CodecName(p.Codec), err)
				}
			}
			if n <= 0 || n >= neblock {
				dst = binary.LittleEndian.AppendUint32(dst, uint32(neblock))
				dst = append(dst, stream...)
			} else {
				dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
				if inPlace {
					dst = dst[:pos+n]
				} else {
					dst = append(dst, (*out)[:n]...)
				}
			}
			if len(dst) >= limit {
				return finishMemcpy(dst[:start+hdrLen], start, src, hdrLen)
			}
		}
	}
	if allZero && !p.Blosc1 {
		// Every stream is zeros: c-blosc2 writes a special zero chunk.
		dst = dst[:start+hdrLen]
		dst[start+31] = SpecialZero << 4
		binary.LittleEndian.PutUint32(dst[start+12:], uint32(hdrLen))
		return dst, nil
	}
	binary.LittleEndian.PutUint32(dst[start+12:], uint32(len(dst)-start))
	return dst, nil
}

// preGrow bounds the room compress makes for a chunk before it knows how
// well the chunk compresses: chunks are 1 to 4 MiB as a rule.
const preGrow = 8 << 20

// finishMemcpy turns the header at dst[start:] into a memcpyed chunk.
func finishMemcpy(dst []byte, start int, src blockSource, hdrLen int) ([]byte, error) {
	dst = dst[:start+hdrLen]
	dst[start+2] |= flagMemcpyed
	binary.LittleEndian.PutUint32(dst[start+12:], uint32(hdrLen+src.size()))
	out, err := src.appendAll(dst)
	if err != nil {
		return dst[:start], err
	}
	return out, nil
}

// zeroRuns turns the shortcut for blocks of zeros on (tests compare
// with the filtered path).
var zeroRuns = true

// zeroBlock is what isZero compares with.
var zeroBlock [16 << 10]byte

// isZero reports whether b is all zero bytes, at the speed of the
// runtime's memequal.
func isZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroBlock))
		if string(b[:n]) != string(zeroBlock[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// runValue reports whether all bytes of b are equal, and which. They are
// exactly when each byte equals the next: one comparison of b with itself
// shifted by a byte, at the speed of the runtime's memequal. (A loop of
// 8-byte compares, inlined into compress, spilled its registers on every
// word: 9 % of `pack`'s CPU on a smooth series, where the shuffled
// streams of high bytes are runs for long stretches; c-blosc2's get_run
// took a third of that.)
func runValue(b []byte) (byte, bool) {
	if len(b) == 0 || string(b[1:]) != string(b[:len(b)-1]) {
		return 0, false
	}
	return b[0], true
}

// filterBlock applies the forward pipeline (slots 0→5) to block j and
// returns the filtered bytes, in work or tmp (or block itself when no
// filter changes it). raw0 is the raw block 0 of the chunk.
func (p *Params) filterBlock(work, tmp, block, raw0 []byte, j int, version byte) []byte {
	cur := block
	bufs := [2][]byte{work, tmp}
	next := 0
	take := func() []byte { b := bufs[next]; next ^= 1; return b }
	for i, f := range p.Filters {
		switch f {
		case FilterShuffle:
			ts := int(p.FiltersMeta[i])
			if ts == 0 || p.Blosc1 {
				ts = p.Typesize
			}
			if ts > 1 {
				o := take()
				shuffleInto(o, cur, ts)
				cur = o
			}
		case FilterBitShuffle:
			o := take()
			bitShuffleBlock(o, cur, p.Typesize, version)
			cur = o
		case FilterDelta:
			o := take()
			deltaEncode(o, cur, raw0, p.Typesize, j)
			cur = o
		case FilterTruncPrec:
			o := take()
			copy(o, cur)
			_ = truncPrec(o, p.Typesize, p.FiltersMeta[i])
			cur = o
		case FilterByteDelta:
			ts := int(p.FiltersMeta[i])
			if ts == 0 {
				ts = p.Typesize
			}
			o := take()
			byteDeltaEncode(o, cur, ts)
			cur = o
		}
	}
	return cur
}
