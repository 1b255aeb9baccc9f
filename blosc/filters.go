package blosc

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/bloscfs/bloscfs/shuffle"
)

func shuffleInto(dst, src []byte, ts int) { shuffle.Shuffle(dst, src, ts) }

// checkFilters verifies that every filter in the pipeline can be undone.
func (h *Header) checkFilters() error {
	for i, f := range h.Filters {
		switch f {
		case FilterNone, FilterShuffle, FilterBitShuffle, FilterDelta, FilterTruncPrec,
			FilterByteDeltaOld, FilterByteDelta, FilterIntTrunc:
		case FilterNDCell, FilterNDMean:
			return fmt.Errorf("%w: filter %d (ndcell/ndmean) in slot %d needs the b2nd plugin", ErrUnsupported, f, i)
		default:
			return fmt.Errorf("%w: filter id %d in slot %d", ErrUnsupported, f, i)
		}
	}
	return nil
}

// hasDelta reports whether decoding a block needs block 0 of the chunk.
func (h *Header) hasDelta() bool {
	if h.Memcpyed() || h.Special() != SpecialNone {
		return false
	}
	for _, f := range h.Filters {
		if f == FilterDelta {
			return true
		}
	}
	return false
}

// activeFilters reports whether any filter changes bytes on decode.
func (h *Header) activeFilters() bool {
	for _, f := range h.Filters {
		switch f {
		case FilterNone, FilterTruncPrec, FilterIntTrunc:
		default:
			return true
		}
	}
	return false
}

// bytesFiltered reports whether the filters change any byte on decode:
// activeFilters, but for a byte shuffle of items of one byte (text
// written with c-blosc2's default shuffle), which leaves them as they
// are.
func (h *Header) bytesFiltered() bool {
	for i, f := range h.Filters {
		switch f {
		case FilterNone, FilterTruncPrec, FilterIntTrunc:
		case FilterShuffle:
			ts := int(h.FiltersMeta[i])
			if ts == 0 || !h.Extended() {
				ts = int(h.Typesize)
			}
			if ts > 1 {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// shuffleOnly returns the typesize of the pipeline's byte shuffle when
// that is the only filter with work to undo.
func (h *Header) shuffleOnly() (int, bool) {
	ts := 0
	for i, f := range h.Filters {
		switch f {
		case FilterNone, FilterTruncPrec, FilterIntTrunc:
		case FilterShuffle:
			if ts != 0 {
				return 0, false
			}
			ts = int(h.FiltersMeta[i])
			if ts == 0 || !h.Extended() {
				ts = int(h.Typesize)
			}
		default:
			return 0, false
		}
	}
	return ts, ts > 1
}

// unfilter undoes the pipeline on one block. src holds the block as the
// streams produced it and may be clobbered; the result ends up in dst.
// ref is the fully decoded block 0 of the chunk (nil for block 0 itself,
// whose own output is used).
func (h *Header) unfilter(dst, src, ref []byte, block int) {
	cur, other := src, dst
	inDst := false
	for i := MaxFilters - 1; i >= 0; i-- {
		f := h.Filters[i]
		switch f {
		case FilterShuffle:
			ts := int(h.FiltersMeta[i])
			if ts == 0 || !h.Extended() {
				ts = int(h.Typesize)
			}
			if ts > 1 {
				shuffle.Unshuffle(other, cur, ts)
				cur, other = other, cur
				inDst = !inDst
			}
		case FilterBitShuffle:
			h.bitUnshuffle(other, cur)
			cur, other = other, cur
			inDst = !inDst
		case FilterDelta:
			if block == 0 {
				deltaDecode0(cur, int(h.Typesize))
			} else {
				deltaDecode(cur, ref, int(h.Typesize))
			}
		case FilterByteDelta, FilterByteDeltaOld:
			ts := int(h.FiltersMeta[i])
			if ts == 0 {
				ts = int(h.Typesize)
			}
			byteDeltaDecode(cur, ts, f == FilterByteDeltaOld)
		}
	}
	if !inDst {
		copy(dst, cur)
	}
}

// bitshuffled returns how many leading bytes of a block of size bytes
// are bit-shuffled, by the rule of the chunk's format version (FORMATS
// §4.2, pitfall P6); the rest is stored as is. c-blosc2 (version ≥ 3)
// transforms the elements up to a multiple of 8; c-blosc 1.x transforms
// all whole elements when their count is a multiple of 8, else nothing.
func bitshuffled(size, typesize int, version uint8) int {
	n := size / typesize
	if version <= VersionBlosc1 {
		if n%8 != 0 {
			return 0
		}
		return n * typesize
	}
	return (n - n%8) * typesize
}

// bitUnshuffle applies the bitshuffle inverse to one block.
func (h *Header) bitUnshuffle(dst, src []byte) {
	t := int(h.Typesize)
	m := bitshuffled(len(src), t, h.Version)
	shuffle.BitUnshuffle(dst[:m], src[:m], t)
	copy(dst[m:], src[m:])
}

// bitShuffleBlock is the forward transform matching bitUnshuffle.
func bitShuffleBlock(dst, src []byte, t int, version uint8) {
	m := bitshuffled(len(src), t, version)
	shuffle.BitShuffle(dst[:m], src[:m], t)
	copy(dst[m:], src[m:])
}

// deltaWord returns the word size of the delta filter for a typesize.
func deltaWord(typesize int) int {
	switch {
	case typesize == 1 || typesize == 2 || typesize == 4 || typesize == 8:
		return typesize
	case typesize%8 == 0:
		return 8
	}
	return 1
}

// deltaDecode0 undoes delta on block 0: a running XOR of words.
func deltaDecode0(b []byte, typesize int) {
	w := deltaWord(typesize)
	nw := len(b) / w
	if nw < 2 {
		return // no word to undo (a block shorter than a word is untouched)
	}
	switch w {
	case 8:
		prev := binary.LittleEndian.Uint64(b)
		for i := 1; i < nw; i++ {
			prev ^= binary.LittleEndian.Uint64(b[i*8:])
			binary.LittleEndian.PutUint64(b[i*8:], prev)
		}
	case 4:
		prev := binary.LittleEndian.Uint32(b)
		for i := 1; i < nw; i++ {
			prev ^= binary.LittleEndian.Uint32(b[i*4:])
			binary.LittleEndian.PutUint32(b[i*4:], prev)
		}
	case 2:
		prev := binary.LittleEndian.Uint16(b)
		for i := 1; i < nw; i++ {
			prev ^= binary.LittleEndian.Uint16(b[i*2:])
			binary.LittleEndian.PutUint16(b[i*2:], prev)
		}
	default:
		for i := 1; i < nw; i++ {
			b[i] ^= b[i-1]
		}
	}
}

// deltaDecode undoes delta on a block other than 0: XOR with block 0's
// decoded words. Trailing len%w bytes are left untouched.
func deltaDecode(b, ref []byte, typesize int) {
	w := deltaWord(typesize)
	n := len(b) / w * w
	if n > len(ref) {
		n = len(ref) / w * w
	}
	xorBytes(b[:n], ref[:n])
}

func xorBytes(dst, src []byte) {
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(dst[i:])^binary.LittleEndian.Uint64(src[i:]))
	}
	for ; i < len(dst); i++ {
		dst[i] ^= src[i]
	}
}

// deltaEncode applies the forward delta to block b of a chunk whose raw
// block 0 is ref (for block 0, ref is the block itself, unmodified).
func deltaEncode(dst, src, ref []byte, typesize int, block int) {
	w := deltaWord(typesize)
	nw := len(src) / w
	n := nw * w
	if block == 0 {
		copy(dst[:w], src[:w])
		for i := w; i < n; i++ {
			dst[i] = src[i] ^ ref[i-w]
		}
	} else {
		for i := 0; i < n; i++ {
			dst[i] = src[i] ^ ref[i]
		}
	}
	copy(dst[n:], src[n:])
}

// byteDeltaDecode undoes bytedelta: a running sum within each of the
// typesize streams of len/typesize bytes. With buggy set (filter id 34),
// the sum restarts at zero for the part of each stream past its last whole
// 16 bytes, as the SIMD encoder of c-blosc2 < 2.8 wrote it (FORMATS §4.5).
func byteDeltaDecode(b []byte, typesize int, buggy bool) {
	l := len(b) / typesize
	for s := 0; s < typesize; s++ {
		stream := b[s*l : (s+1)*l]
		var acc byte
		tail := l
		if buggy {
			tail = l / 16 * 16
		}
		for i := 0; i < tail; i++ {
			acc += stream[i]
			stream[i] = acc
		}
		acc = 0
		for i := tail; i < l; i++ {
			acc += stream[i]
			stream[i] = acc
		}
	}
}

// byteDeltaEncode is the forward bytedelta (id 35).
func byteDeltaEncode(dst, src []byte, typesize int) {
	l := len(src) / typesize
	for s := 0; s < typesize; s++ {
		in := src[s*l : (s+1)*l]
		out := dst[s*l : (s+1)*l]
		var prev byte
		for i, v := range in {
			out[i] = v - prev
			prev = v
		}
	}
	copy(dst[l*typesize:], src[l*typesize:])
}

// truncPrec zeroes low mantissa bits in place (FORMATS §4.4).
func truncPrec(b []byte, typesize int, meta uint8) error {
	p := int(int8(meta))
	var bits int
	switch typesize {
	case 4:
		bits = 23
	case 8:
		bits = 52
	default:
		return fmt.Errorf("%w: trunc_prec needs typesize 4 or 8, not %d", ErrUnsupported, typesize)
	}
	zero := bits - p
	if p < 0 {
		zero = -p
	}
	if zero <= 0 {
		return nil
	}
	if zero > bits {
		return fmt.Errorf("%w: trunc_prec precision %d out of range", ErrUnsupported, p)
	}
	n := len(b) / typesize * typesize
	if typesize == 4 {
		mask := ^uint32(0) << zero
		for i := 0; i < n; i += 4 {
			binary.LittleEndian.PutUint32(b[i:], binary.LittleEndian.Uint32(b[i:])&mask)
		}
	} else {
		mask := ^uint64(0) << zero
		for i := 0; i < n; i += 8 {
			binary.LittleEndian.PutUint64(b[i:], binary.LittleEndian.Uint64(b[i:])&mask)
		}
	}
	return nil
}

var filterNames = map[uint8]string{
	FilterShuffle: "shuffle", FilterBitShuffle: "bitshuffle", FilterDelta: "delta",
	FilterTruncPrec: "truncprec", FilterByteDelta: "bytedelta", FilterByteDeltaOld: "bytedelta-old",
	FilterNDCell: "ndcell", FilterNDMean: "ndmean", FilterIntTrunc: "inttrunc",
}

// FilterString renders a pipeline in slot order, as the command line
// takes it: "shuffle", "delta,shuffle", "truncprec:20,shuffle", "none".
// A filter's parameter is shown where it is one (not for shuffle and
// bitshuffle, whose meta is an element size).
func FilterString(filters, meta [MaxFilters]uint8) string {
	var parts []string
	for i, id := range filters {
		if id == FilterNone {
			continue
		}
		n, ok := filterNames[id]
		if !ok {
			n = fmt.Sprintf("filter-%d", id)
		}
		if id == FilterTruncPrec {
			n += fmt.Sprintf(":%d", int8(meta[i]))
		}
		parts = append(parts, n)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}
