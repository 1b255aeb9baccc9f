package blosclz

import (
	"encoding/binary"
	"math/bits"
	"sync"
)

// Encoder limits and tuning.
const (
	// MinInputSize is the shortest input Compress tries to compress.
	MinInputSize = 16
	// MinOutputSize is the smallest output budget Compress works with.
	MinOutputSize = 66

	maxInputSize = 1<<31 - 1 // Blosc's own limit; positions are 32-bit

	maxCopy     = 32               // longest literal run
	maxDistance = 8191             // biased distances below this use the short form
	maxFar      = 65535 + 8191 - 1 // real distances must stay below this (73725)
	hashLogMax  = 14
	hashMask    = 1<<hashLogMax - 1
	hashMul     = 2654435761

	// ipShift is how far the encoder backs off from one past the first
	// mismatch: a match of M equal bytes is coded with the biased length
	// M-2, which the decoder expands to all M bytes. c-blosc 1.21 uses 3
	// for unsplit and low-ratio blocks, c-blosc2 3.x always 4 (coding only
	// M-1 of the M bytes); 3 compresses better on every data set we tried.
	ipShift = 3
	// minLen is the shortest biased length coded as a match (a match of
	// 5 bytes; far matches need 8). Shorter ones cost the decoder more
	// than the literals they replace.
	minLen = 3
	// probeWindows is how many windows the entropy probe samples.
	probeWindows = 4
)

// probeRatio holds, per clevel, the smallest estimated compression ratio
// at which the encoder tries at all (Blosc stores the block raw
// otherwise): BloscLZ streams of low ratio decode slower than a copy.
var probeRatio = [10]float64{0, 2, 1.5, 1.2, 1.2, 1.2, 1.2, 1.15, 1.1, 1.0}

// hashLogs is the hash table size (log2) per clevel.
var hashLogs = [10]uint{0, hashLogMax - 2, hashLogMax - 1, hashLogMax, hashLogMax,
	hashLogMax, hashLogMax, hashLogMax, hashLogMax, hashLogMax}

// encoderTable is a reusable hash table. Instead of being cleared for
// every call, entries hold base+position, and every call (and every probe)
// starts from a base more than maxFar above anything stored before: an
// entry of an earlier call then yields a candidate at least maxFar back,
// which the match finder rejects like any too distant one.
type encoderTable struct {
	t    [1 << hashLogMax]uint64
	base uint32
}

var tablePool = sync.Pool{New: func() any { return &encoderTable{base: maxFar} }}

// reserve returns a base under which the positions of an n-byte input can
// be stored, clearing the table when the 32-bit base would wrap around.
func (e *encoderTable) reserve(n int) uint32 {
	if uint64(e.base)+uint64(n)+maxFar >= 1<<32 {
		clear(e.t[:])
		e.base = maxFar
	}
	b := e.base
	e.base += uint32(n) + maxFar
	return b
}

func load32(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[i : i+4]) }

// entry is the table entry for the 4-byte sequence seq at position ip:
// the sequence itself, so that a candidate needs no second look at the
// input, and base+ip.
func entry(seq, base uint32, ip int) uint64 {
	return uint64(seq)<<32 | uint64(base+uint32(ip))
}

// hashIndex is the table slot of the 4-byte sequence seq; shift is
// 32-hashLog.
func hashIndex(seq uint32, shift uint) uint32 {
	return (seq * hashMul) >> (shift & 31) & hashMask
}

// Compress encodes src as a BloscLZ stream into dst and returns the number
// of bytes written. The length of dst is the output budget. Compress
// returns 0, leaving the contents of dst unspecified, when it does not
// compress: src shorter than MinInputSize (or of 2 GiB or more), a budget
// below MinOutputSize,
// clevel below 1, data that the entropy probe judges not worth it at this
// clevel, or output that would not fit in dst or would not be shorter than
// src. Blosc stores such blocks raw. clevel is 1 (fastest) to 9 (best);
// larger values act as 9.
//
// The levels follow the reference encoder: the hash table has 2^12, 2^13
// or 2^14 entries (clevel 1, 2, 3 and up), clevel 9 also indexes the
// position after each match, and before compressing, a dry run over part
// of the input (the last 1/8, 1/4 or 1/2, or all of it from clevel 7, at
// most 2^hashlog bytes sampled in four windows) estimates the ratio and
// gives up below 2, 1.5, 1.2 (clevel 3 to 6), 1.15, 1.1 or 1.0.
//
// Every stream written starts with a literal run and ends with a literal
// run of at least 2 bytes, uses matches of at least 5 bytes and distances
// below 73725, so both c-blosc 1.x and c-blosc2 decoders read it back.
// Compress is safe for concurrent use and does not allocate in the steady
// state (its hash table comes from a sync.Pool).
func Compress(dst, src []byte, clevel int) int {
	return compress(dst, src, clevel, true)
}

// compress is Compress, with the entropy probe optional (for tests).
func compress(dst, src []byte, clevel int, probing bool) int {
	n := len(src)
	if n < MinInputSize || len(dst) < MinOutputSize || clevel < 1 || n > maxInputSize {
		return 0
	}
	if clevel > 9 {
		clevel = 9
	}
	limit := min(len(dst), n-1) // a stream must be shorter than its input
	if limit < MinOutputSize {
		return 0
	}
	hashLog := hashLogs[clevel]
	tab := tablePool.Get().(*encoderTable)
	defer tablePool.Put(tab)

	// Entropy probing: a dry run over the tail of the buffer.
	plen := n
	switch {
	case clevel < 2:
		plen /= 8
	case clevel < 4:
		plen /= 4
	case clevel < 7:
		plen /= 2
	}
	if probing && probe(src, n-plen, tab, hashLog) < probeRatio[clevel] {
		return 0
	}
	return encode(dst[:limit], src, tab, hashLog, clevel == 9)
}

// probe estimates the compression ratio of src[from:] by counting the
// bytes the encoder would emit for at most 2^hashLog of them: all of them
// if that is few enough, else probeWindows evenly spaced windows that
// share one hash table, so the windows see matches into earlier ones.
func probe(src []byte, from int, tab *encoderTable, hashLog uint) float64 {
	n := len(src)
	budget := 1 << hashLog
	windows, wlen := 1, n-from
	if wlen > budget {
		windows, wlen = probeWindows, budget/probeWindows
	}
	if wlen < 16 {
		return 0
	}
	base := tab.reserve(n)
	in, out := 0, 0
	for w := range windows {
		lo := from
		if windows > 1 {
			lo += w * (n - from - wlen) / (windows - 1)
		}
		i, o := probeWindow(src, lo, lo+wlen, &tab.t, base, 32-hashLog)
		in += i
		out += o
	}
	return float64(in) / float64(out)
}

// probeWindow runs the match finder over src[lo:hi] without writing
// anything and returns the bytes covered and the size encode would emit.
func probeWindow(src []byte, lo, hi int, t *[1 << hashLogMax]uint64, base uint32, shift uint) (in, out int) {
	ipBound := hi - 1
	ipLimit := hi - 12
	lit, ip := lo, lo
	for {
		var cand int
		ip, cand = findMatch(src, t, base, shift, ip, ipLimit)
		if ip >= ipLimit {
			break
		}
		e := matchEnd(src, ip+4, cand+4, ipBound) - ipShift
		l, dist := e-ip, ip-cand-1
		if l < minLen || (l <= 5 && dist >= maxDistance) {
			ip++
			continue
		}
		out += literalsSize(ip-lit) + matchSize(l, dist)
		seq := load32(src, e)
		t[hashIndex(seq, shift)] = entry(seq, base, e)
		ip = e + 2
		lit = ip
	}
	return hi - lo, out + literalsSize(hi-lit)
}

// literalsSize is the encoded size of n literals.
func literalsSize(n int) int { return n + (n+maxCopy-1)/maxCopy }

// matchSize is the encoded size of a match of biased length l and biased
// distance dist.
func matchSize(l, dist int) int {
	n := 2 // short form
	if l >= 7 {
		n = 3 + (l-7)/255
	}
	if dist >= maxDistance {
		n += 2
	}
	return n
}

// matchEnd returns one past the first index i in [ip, bound) where
// src[i] != src[ref+i-ip], or bound if there is none (the convention of
// the reference encoder). ref must be below ip.
func matchEnd(src []byte, ip, ref, bound int) int {
	a := src[ip:bound]
	b := src[ref : ref+len(a)]
	for len(a) >= 16 && len(b) >= 16 {
		x := binary.LittleEndian.Uint64(a) ^ binary.LittleEndian.Uint64(b)
		y := binary.LittleEndian.Uint64(a[8:]) ^ binary.LittleEndian.Uint64(b[8:])
		if x|y != 0 {
			i := bound - len(a)
			if x != 0 {
				return i + bits.TrailingZeros64(x)>>3 + 1
			}
			return i + 8 + bits.TrailingZeros64(y)>>3 + 1
		}
		a, b = a[16:], b[16:]
	}
	for i := range a {
		if i < len(b) && a[i] != b[i] {
			return bound - len(a) + i + 1
		}
	}
	return bound
}

// encode is the compressor proper. dst is already cut to the budget.
func encode(dst, src []byte, tab *encoderTable, hashLog uint, twoHashes bool) int {
	n := len(src)
	base := tab.reserve(n)
	t := &tab.t
	shift := (32 - hashLog) & 31
	ipBound := n - 1
	ipLimit := n - 12
	op := 0
	lit := 0 // first pending literal
	ip := 4  // the first four bytes are always literals
	for {
		// Look for a match of at least 4 bytes.
		var cand int
		ip, cand = findMatch(src, t, base, shift, ip, ipLimit)
		if ip >= ipLimit {
			break
		}
		if src[ip+4] != src[cand+4] {
			ip++ // a 4-byte match is too short: minLen 3 means 5 bytes
			continue
		}
		e := matchEnd(src, ip+5, cand+5, ipBound) - ipShift
		l := e - ip           // biased length: the decoder copies l+2 bytes
		dist := ip - cand - 1 // biased distance
		if l < minLen || (l <= 5 && dist >= maxDistance) {
			ip++
			continue
		}
		if op = emitMatch(dst, op, src[lit:ip], l, dist); op < 0 {
			return 0
		}
		// Update the hash at the match boundary and continue after the
		// bytes the decoder will have produced (e+2).
		seq := load32(src, e)
		t[hashIndex(seq, shift)] = entry(seq, base, e)
		if twoHashes && e+5 <= n {
			seq = load32(src, e+1)
			t[hashIndex(seq, shift)] = entry(seq, base, e+1)
		}
		ip = e + 2
		lit = ip
	}
	// The rest as literals: at least 2 bytes, as e <= n-4.
	op = emitLiterals(dst, op, src[lit:])
	if op <= 0 {
		return 0
	}
	dst[0] |= 1 << 5 // BloscLZ marker
	return op
}

// findMatch hashes the positions from ip on until one has a 4-byte match
// within reach and returns it and the match candidate; if there is none
// before end (at most len(src)-12), it returns a position >= end. Kept
// small so that its loop, where most of the encoding time goes, keeps
// everything in registers.
func findMatch(src []byte, t *[1 << hashLogMax]uint64, base uint32, shift uint, ip, end int) (int, int) {
	shift &= 31
	for ; ip < end; ip++ {
		seq := load32(src, ip)
		h := hashIndex(seq, shift)
		e := t[h]
		t[h] = entry(seq, base, ip)
		// Stale entries give distances >= maxFar (see encoderTable).
		if uint32(e>>32) == seq {
			if cand := int(uint32(e)) - int(base); uint(ip-cand-1) < maxFar-1 {
				return ip, cand
			}
		}
	}
	return ip, 0
}

// emitMatch writes the pending literals lits and then a match of biased
// length l (the decoder copies l+2 bytes) and biased distance dist at
// dst[op:]. It returns the new output position, or -1 if they do not fit.
func emitMatch(dst []byte, op int, lits []byte, l, dist int) int {
	if len(lits) > 0 {
		if op = emitLiterals(dst, op, lits); op < 0 {
			return -1
		}
	}
	need := matchSize(l, dist)
	if op+need > len(dst) {
		return -1
	}
	d := dst[op : op+need]
	i := 0
	hi := byte(31) // far marker
	if dist < maxDistance {
		hi = byte(dist >> 8)
	}
	if l < 7 {
		d[0] = byte(l<<5) + hi
		i = 1
	} else {
		d[0] = 7<<5 + hi
		i = 1
		for l -= 7; l >= 255; l -= 255 {
			d[i] = 255
			i++
		}
		d[i] = byte(l)
		i++
	}
	if dist < maxDistance {
		d[i] = byte(dist)
	} else {
		dist -= maxDistance
		d[i] = 255
		d[i+1] = byte(dist >> 8)
		d[i+2] = byte(dist)
	}
	return op + need
}

// emitLiterals writes lits as literal runs of at most 32 bytes at dst[op:]
// and returns the new output position, or -1 if they do not fit.
func emitLiterals(dst []byte, op int, lits []byte) int {
	if op+literalsSize(len(lits)) > len(dst) {
		return -1
	}
	for len(lits) >= maxCopy {
		d := dst[op : op+1+maxCopy]
		d[0] = maxCopy - 1
		// Two 16-byte copies compile to register moves, 32 to a call.
		*(*[16]byte)(d[1:]) = *(*[16]byte)(lits)
		*(*[16]byte)(d[17:]) = *(*[16]byte)(lits[16:])
		op += maxCopy + 1
		lits = lits[maxCopy:]
	}
	if len(lits) > 0 {
		dst[op] = byte(len(lits) - 1)
		op += 1 + copy(dst[op+1:], lits)
	}
	return op
}
