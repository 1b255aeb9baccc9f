// Package lz4fast is an LZ4 block encoder that writes what lz4's
// LZ4_compress_fast (lz4 1.10) writes with acceleration 1, byte for byte:
// the call c-blosc2 makes for every LZ4 stream at every clevel. It exists
// for speed: the same algorithm as pierrec/lz4's port of that function,
// laid out so that Go keeps the match search in registers (see
// docs/PERFORMANCE.md, "Our LZ4 compressor"). Streams are decoded by any
// LZ4 block decoder.
package lz4fast

import (
	"math/bits"
	"sync"
)

// Constants and their names as in lz4.c.
const (
	minMatch     = 4           // MINMATCH
	mfLimit      = 12          // MFLIMIT: the last match starts this far before the end
	lastLiterals = 5           // LASTLITERALS: the last bytes are always literals
	minLength    = mfLimit + 1 // LZ4_minLength: shorter inputs are all literals
	skipTrigger  = 6           // LZ4_skipTrigger: the search speeds up every 64 misses
	distanceMax  = 65535       // LZ4_DISTANCE_MAX
	limit64K     = 64<<10 + mfLimit - 1
	// MaxInputSize is LZ4_MAX_INPUT_SIZE: Compress returns 0 past it.
	MaxInputSize = 0x7E000000

	// Inputs below limit64K use a table of 2^13 16-bit positions hashed
	// from 4 bytes (lz4.c's byU16), larger ones 2^12 32-bit positions
	// hashed from 5 bytes (byU32): 16 KiB either way, LZ4_MEMORY_USAGE 14.
	hashLog16 = 13
	hashLog32 = 12
	prime4    = 2654435761
	prime5    = 889523592379

	mlMask  = 15 // ML_MASK
	runMask = 15 // RUN_MASK
)

// CompressBound is LZ4_compressBound: the largest output of an input of n
// bytes. With a dst at least this long, Compress never returns 0.
func CompressBound(n int) int { return n + n/255 + 16 }

type tables struct {
	t16 [1 << hashLog16]uint16
	t32 [1 << hashLog32]uint32
}

var tablePool = sync.Pool{New: func() any { return new(tables) }}

// Compress encodes src as one LZ4 block into dst and returns its length,
// or 0 when it does not fit in len(dst) (then dst holds garbage) or src
// is longer than MaxInputSize. It writes nothing outside dst[:len(dst)]
// and reads nothing outside src. The output is LZ4_compress_fast's with
// acceleration 1 for the same input, so c-blosc2 and c-blosc would write
// the same streams. Compress is safe for concurrent use; its hash table
// comes from a sync.Pool.
func Compress(dst, src []byte) int {
	n := len(src)
	if n > MaxInputSize {
		return 0
	}
	if n == 0 {
		if len(dst) == 0 {
			return 0
		}
		dst[0] = 0
		return 1
	}
	t := tablePool.Get().(*tables)
	var r int
	if n < limit64K {
		clear(t.t16[:])
		r = compress16(&t.t16, dst, src)
	} else {
		clear(t.t32[:])
		r = compress32(&t.t32, dst, src)
	}
	tablePool.Put(t)
	return r
}

func hash4(seq uint32) uint32 { return seq * prime4 >> (32 - hashLog16) }

func hash5(seq uint64) uint32 { return uint32(seq << 24 * prime5 >> (64 - hashLog32)) }

// search16 is the match search of lz4.c for the byU16 table: from ip on,
// it hashes each position, remembers it and tries the position the table
// held before, stepping one byte at a time and one more every 64 misses.
// It returns the position and its earlier occurrence of at least 4 bytes,
// or ok false when the search passes limit (mflimitPlusOne). A function of
// its own, so that its loop has the registers to itself.
//
// Loads: ip < limit = len(src)-11, so 4-byte loads at ip end 7 bytes
// before the end of src; table entries are earlier positions.
func search16(t *[1 << hashLog16]uint16, src []byte, ip, limit int) (pos, match int, ok bool) {
	fip := ip
	fv := load32(src, fip)
	fh := hash4(fv)
	step, nb := 1, 1<<skipTrigger
	for {
		v, h := fv, fh
		cur := fip
		fip += step
		step = nb >> skipTrigger
		nb++
		if fip > limit {
			return 0, 0, false
		}
		m := int(t[h&(1<<hashLog16-1)])
		fv = load32(src, fip)
		fh = hash4(fv)
		t[h&(1<<hashLog16-1)] = uint16(cur)
		if load32(src, m) == v {
			return cur, m, true
		}
	}
}

// search32 is search16 for the byU32 table, which also rejects
// candidates more than distanceMax back.
func search32(t *[1 << hashLog32]uint32, src []byte, ip, limit int) (pos, match int, ok bool) {
	fip := ip
	fv := load64(src, fip)
	fh := hash5(fv)
	step, nb := 1, 1<<skipTrigger
	for {
		v, h := fv, fh
		cur := fip
		fip += step
		step = nb >> skipTrigger
		nb++
		if fip > limit {
			return 0, 0, false
		}
		m := int(t[h&(1<<hashLog32-1)])
		fv = load64(src, fip)
		fh = hash5(fv)
		t[h&(1<<hashLog32-1)] = uint32(cur)
		if m+distanceMax >= cur && load32(src, m) == uint32(v) {
			return cur, m, true
		}
	}
}

// count is LZ4_count: the length of the common prefix of src[in:limit]
// and src[match:], match < in. Loads end at limit.
func count(src []byte, in, match, limit int) int {
	start := in
	for in+8 <= limit {
		if d := load64(src, match) ^ load64(src, in); d != 0 {
			return in + bits.TrailingZeros64(d)>>3 - start
		}
		in += 8
		match += 8
	}
	if in+4 <= limit && load32(src, match) == load32(src, in) {
		in += 4
		match += 4
	}
	for in < limit && load8(src, match) == load8(src, in) {
		in++
		match++
	}
	return in - start
}

// putLiterals writes the literal run src[anchor:ip] after its token at
// dst[token] (which it sets) and returns the new output position, or -1
// when the run and the offset and last literals after it would not fit in
// olimit bytes. The check is lz4.c's, and it is what keeps the stores in
// dst: the length bytes, and the literals copied 8 bytes at a time
// (up to 7 bytes past them), end at least 8 bytes before olimit.
func putLiterals(dst, src []byte, token, anchor, ip int) int {
	lit := ip - anchor
	di := token + 1
	if di+lit+(2+1+lastLiterals)+lit/255 > len(dst) {
		return -1
	}
	if lit >= runMask {
		store8(dst, token, runMask<<4)
		l := lit - runMask
		for ; l >= 255; l -= 255 {
			store8(dst, di, 255)
			di++
		}
		store8(dst, di, byte(l))
		di++
	} else {
		store8(dst, token, byte(lit<<4))
	}
	// Source loads end before ip+8 < len(src): a match starts at least
	// mfLimit bytes before the end.
	for i := 0; i < lit; i += 8 {
		store64(dst, di+i, load64(src, anchor+i))
	}
	return di + lit
}

// putMatchLength adds the match length code mc to the token at
// dst[token] and writes its extra bytes at di. It returns the new output
// position, or -1 when they and the last literals would not fit.
func putMatchLength(dst []byte, token, di, mc int) int {
	if di+(1+lastLiterals)+(mc+240)/255 > len(dst) {
		return -1
	}
	if mc >= mlMask {
		store8(dst, token, load8(dst, token)+mlMask)
		mc -= mlMask
		for ; mc >= 255; mc -= 255 {
			store8(dst, di, 255)
			di++
		}
		store8(dst, di, byte(mc))
		di++
	} else {
		store8(dst, token, load8(dst, token)+byte(mc))
	}
	return di
}

// putLastLiterals writes src[anchor:] as the final literal run at di and
// returns the length of the block, or 0 when it does not fit.
func putLastLiterals(dst, src []byte, di, anchor int) int {
	lastRun := len(src) - anchor
	if di+lastRun+1+(lastRun+255-runMask)/255 > len(dst) {
		return 0
	}
	if lastRun >= runMask {
		dst[di] = runMask << 4
		di++
		l := lastRun - runMask
		for ; l >= 255; l -= 255 {
			dst[di] = 255
			di++
		}
		dst[di] = byte(l)
		di++
	} else {
		dst[di] = byte(lastRun << 4)
		di++
	}
	return di + copy(dst[di:], src[anchor:])
}

// compress16 is LZ4_compress_generic for inputs below limit64K (byU16,
// limitedOutput, noDict), with a cleared table t.
//
// In bounds: positions searched or tested stay below mflimitPlusOne =
// len(src)-11, and their 4- or 8-byte loads end before len(src)-3; match
// lengths are counted up to matchLimit = len(src)-5. Every store in dst
// follows a check of the room left, as in lz4.c: putLiterals leaves room
// for the 2-byte offset and for the token of a match found right after
// (putMatchLength leaves 1+lastLiterals bytes).
func compress16(t *[1 << hashLog16]uint16, dst, src []byte) int {
	n := len(src)
	anchor, di := 0, 0
	if n < minLength {
		return putLastLiterals(dst, src, 0, 0)
	}
	mflimitPlusOne := n - mfLimit + 1
	matchLimit := n - lastLiterals
	t[hash4(load32(src, 0))&(1<<hashLog16-1)] = 0
	ip := 1
	for {
		var match int
		var ok bool
		ip, match, ok = search16(t, src, ip, mflimitPlusOne)
		if !ok {
			break
		}
		// Catch up: extend the match backwards.
		for ip > anchor && match > 0 && load8(src, ip-1) == load8(src, match-1) {
			ip--
			match--
		}
		token := di
		if lit := ip - anchor; lit < runMask && di+1+lit+(2+1+lastLiterals) <= len(dst) {
			// Most runs: a token and one or two 8-byte copies, which end
			// at most 7 bytes past di+1+lit, inside the room checked.
			store8(dst, di, byte(lit<<4))
			store64(dst, di+1, load64(src, anchor))
			if lit > 8 {
				store64(dst, di+9, load64(src, anchor+8))
			}
			di += 1 + lit
		} else if di = putLiterals(dst, src, token, anchor, ip); di < 0 {
			return 0
		}
		for {
			store16(dst, di, uint16(ip-match))
			di += 2
			// Most matches end within 16 bytes past their first 4.
			var mc int
			if ip+minMatch+16 > matchLimit {
				mc = count(src, ip+minMatch, match+minMatch, matchLimit)
			} else if d := load64(src, ip+minMatch) ^ load64(src, match+minMatch); d != 0 {
				mc = bits.TrailingZeros64(d) >> 3
			} else if d := load64(src, ip+minMatch+8) ^ load64(src, match+minMatch+8); d != 0 {
				mc = 8 + bits.TrailingZeros64(d)>>3
			} else {
				mc = 16 + count(src, ip+minMatch+16, match+minMatch+16, matchLimit)
			}
			ip += mc + minMatch
			if mc < mlMask && di+1+lastLiterals <= len(dst) {
				store8(dst, token, load8(dst, token)+byte(mc))
			} else if di = putMatchLength(dst, token, di, mc); di < 0 {
				return 0
			}
			anchor = ip
			if ip >= mflimitPlusOne {
				return putLastLiterals(dst, src, di, anchor)
			}
			// Fill the table, and test the next position: a match there
			// follows with no literals.
			t[hash4(load32(src, ip-2))&(1<<hashLog16-1)] = uint16(ip - 2)
			v := load32(src, ip)
			h := hash4(v) & (1<<hashLog16 - 1)
			m := int(t[h])
			t[h] = uint16(ip)
			if load32(src, m) != v {
				break
			}
			token = di
			store8(dst, di, 0)
			di++
			match = m
		}
		ip++
	}
	return putLastLiterals(dst, src, di, anchor)
}

// compress32 is compress16 for inputs of limit64K bytes or more (byU32),
// with distances capped at distanceMax.
func compress32(t *[1 << hashLog32]uint32, dst, src []byte) int {
	n := len(src)
	anchor, di := 0, 0
	mflimitPlusOne := n - mfLimit + 1
	matchLimit := n - lastLiterals
	t[hash5(load64(src, 0))&(1<<hashLog32-1)] = 0
	ip := 1
	for {
		var match int
		var ok bool
		ip, match, ok = search32(t, src, ip, mflimitPlusOne)
		if !ok {
			break
		}
		for ip > anchor && match > 0 && load8(src, ip-1) == load8(src, match-1) {
			ip--
			match--
		}
		token := di
		if lit := ip - anchor; lit < runMask && di+1+lit+(2+1+lastLiterals) <= len(dst) {
			store8(dst, di, byte(lit<<4))
			store64(dst, di+1, load64(src, anchor))
			if lit > 8 {
				store64(dst, di+9, load64(src, anchor+8))
			}
			di += 1 + lit
		} else if di = putLiterals(dst, src, token, anchor, ip); di < 0 {
			return 0
		}
		for {
			store16(dst, di, uint16(ip-match))
			di += 2
			var mc int
			if ip+minMatch+16 > matchLimit {
				mc = count(src, ip+minMatch, match+minMatch, matchLimit)
			} else if d := load64(src, ip+minMatch) ^ load64(src, match+minMatch); d != 0 {
				mc = bits.TrailingZeros64(d) >> 3
			} else if d := load64(src, ip+minMatch+8) ^ load64(src, match+minMatch+8); d != 0 {
				mc = 8 + bits.TrailingZeros64(d)>>3
			} else {
				mc = 16 + count(src, ip+minMatch+16, match+minMatch+16, matchLimit)
			}
			ip += mc + minMatch
			if mc < mlMask && di+1+lastLiterals <= len(dst) {
				store8(dst, token, load8(dst, token)+byte(mc))
			} else if di = putMatchLength(dst, token, di, mc); di < 0 {
				return 0
			}
			anchor = ip
			if ip >= mflimitPlusOne {
				return putLastLiterals(dst, src, di, anchor)
			}
			t[hash5(load64(src, ip-2))&(1<<hashLog32-1)] = uint32(ip - 2)
			v := load64(src, ip)
			h := hash5(v) & (1<<hashLog32 - 1)
			m := int(t[h])
			t[h] = uint32(ip)
			if m+distanceMax < ip || load32(src, m) != uint32(v) {
				break
			}
			token = di
			store8(dst, di, 0)
			di++
			match = m
		}
		ip++
	}
	return putLastLiterals(dst, src, di, anchor)
}
