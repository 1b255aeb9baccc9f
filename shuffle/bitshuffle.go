package shuffle

import "sync"

// A flavour is one implementation of the transforms (AVX2, SSE2, portable).
// Bit shuffle is built from two flavour-specific parts: the byte shuffle,
// which gathers byte j of every element into row j, and bitTrans, which
// turns a row of bytes into 8 bit planes (bit k of byte 8q+m goes to bit m
// of byte q of plane k). bitUntrans is the inverse of bitTrans.
type flavour struct {
	name      string
	available bool
	shuffle   func(dst, src []byte, t int)
	unshuffle func(dst, src []byte, t int)
	// bitTrans reads row (len a multiple of 8) and writes plane k to
	// planes[k*stride : k*stride+len(row)/8].
	bitTrans func(planes, row []byte, stride int)
	// bitUntrans reads the planes and writes row.
	bitUntrans func(row, planes []byte, stride int)
}

// blockBytes is the size of the scratch buffer that holds a block of
// byte-shuffled rows between the two steps of a bit shuffle; it stays in L1.
const blockBytes = 16 << 10

var blockPool = sync.Pool{New: func() any { return new([blockBytes]byte) }}

// blockElems returns how many elements of size t one block holds: a multiple
// of 256 when possible, so the vector kernels cover whole rows.
func blockElems(t int) int {
	e := blockBytes / t
	if e >= 256 {
		return e &^ 255
	}
	return max(8, e&^7)
}

func (f *flavour) bitShuffle(dst, src []byte, t int) {
	n := len(src) / t
	nb := n / 8
	if t == 1 {
		f.bitTrans(dst, src, nb)
		return
	}
	e := blockElems(t)
	var buf []byte
	if e*t <= blockBytes {
		p := blockPool.Get().(*[blockBytes]byte)
		defer blockPool.Put(p)
		buf = p[:]
	} else {
		buf = make([]byte, e*t)
	}
	for e0 := 0; e0 < n; e0 += e {
		m := min(e, n-e0)
		tmp := buf[:m*t]
		f.shuffle(tmp, src[e0*t:(e0+m)*t], t)
		for j := 0; j < t; j++ {
			f.bitTrans(dst[8*j*nb+e0/8:], tmp[j*m:(j+1)*m], nb)
		}
	}
}

func (f *flavour) bitUnshuffle(dst, src []byte, t int) {
	n := len(src) / t
	nb := n / 8
	if t == 1 {
		f.bitUntrans(dst, src, nb)
		return
	}
	e := blockElems(t)
	var buf []byte
	if e*t <= blockBytes {
		p := blockPool.Get().(*[blockBytes]byte)
		defer blockPool.Put(p)
		buf = p[:]
	} else {
		buf = make([]byte, e*t)
	}
	for e0 := 0; e0 < n; e0 += e {
		m := min(e, n-e0)
		tmp := buf[:m*t]
		for j := 0; j < t; j++ {
			f.bitUntrans(tmp[j*m:(j+1)*m], src[8*j*nb+e0/8:], nb)
		}
		f.unshuffle(dst[e0*t:(e0+m)*t], tmp, t)
	}
}

// bitslice8 transposes the 8x8 bit matrix held, in every byte position, by
// bit k of word m: afterwards bit m of word k is the old bit k of word m.
func bitslice8(x0, x1, x2, x3, x4, x5, x6, x7 uint64) (uint64, uint64, uint64, uint64, uint64, uint64, uint64, uint64) {
	const m1, m2, m4 = 0x5555555555555555, 0x3333333333333333, 0x0f0f0f0f0f0f0f0f
	t := (x0>>1 ^ x1) & m1
	x1, x0 = x1^t, x0^t<<1
	t = (x2>>1 ^ x3) & m1
	x3, x2 = x3^t, x2^t<<1
	t = (x4>>1 ^ x5) & m1
	x5, x4 = x5^t, x4^t<<1
	t = (x6>>1 ^ x7) & m1
	x7, x6 = x7^t, x6^t<<1

	t = (x0>>2 ^ x2) & m2
	x2, x0 = x2^t, x0^t<<2
	t = (x1>>2 ^ x3) & m2
	x3, x1 = x3^t, x1^t<<2
	t = (x4>>2 ^ x6) & m2
	x6, x4 = x6^t, x4^t<<2
	t = (x5>>2 ^ x7) & m2
	x7, x5 = x7^t, x5^t<<2

	t = (x0>>4 ^ x4) & m4
	x4, x0 = x4^t, x0^t<<4
	t = (x1>>4 ^ x5) & m4
	x5, x1 = x5^t, x1^t<<4
	t = (x2>>4 ^ x6) & m4
	x6, x2 = x6^t, x2^t<<4
	t = (x3>>4 ^ x7) & m4
	x7, x3 = x7^t, x3^t<<4
	return x0, x1, x2, x3, x4, x5, x6, x7
}

// transposeBits8 transposes the 8x8 bit matrix whose row m is byte m of x:
// bit k of byte m moves to bit m of byte k.
func transposeBits8(x uint64) uint64 {
	t := (x ^ x>>7) & 0x00aa00aa00aa00aa
	x ^= t ^ t<<7
	t = (x ^ x>>14) & 0x0000cccc0000cccc
	x ^= t ^ t<<14
	t = (x ^ x>>28) & 0x00000000f0f0f0f0
	return x ^ t ^ t<<28
}

// bitTransGeneric is the portable bitTrans: 64 bytes at a time it
// byte-transposes 8 words (word m = byte m of 8 groups) and bit-slices them
// into 8 plane words.
func bitTransGeneric(planes, row []byte, stride int) {
	q := 0
	for ; 8*q+64 <= len(row); q += 8 {
		s := row[8*q : 8*q+64]
		p0, p1, p2, p3, p4, p5, p6, p7 := bitslice8(transpose8x8(
			le.Uint64(s), le.Uint64(s[8:]), le.Uint64(s[16:]), le.Uint64(s[24:]),
			le.Uint64(s[32:]), le.Uint64(s[40:]), le.Uint64(s[48:]), le.Uint64(s[56:])))
		d := planes[q:]
		le.PutUint64(d, p0)
		le.PutUint64(d[stride:], p1)
		le.PutUint64(d[2*stride:], p2)
		le.PutUint64(d[3*stride:], p3)
		le.PutUint64(d[4*stride:], p4)
		le.PutUint64(d[5*stride:], p5)
		le.PutUint64(d[6*stride:], p6)
		le.PutUint64(d[7*stride:], p7)
	}
	for ; 8*q < len(row); q++ {
		x := transposeBits8(le.Uint64(row[8*q:]))
		for k := 0; k < 8; k++ {
			planes[k*stride+q] = byte(x >> (8 * k))
		}
	}
}

// bitUntransGeneric is the portable bitUntrans.
func bitUntransGeneric(row, planes []byte, stride int) {
	q := 0
	for ; 8*q+64 <= len(row); q += 8 {
		s := planes[q:]
		x0, x1, x2, x3, x4, x5, x6, x7 := transpose8x8(bitslice8(
			le.Uint64(s), le.Uint64(s[stride:]), le.Uint64(s[2*stride:]), le.Uint64(s[3*stride:]),
			le.Uint64(s[4*stride:]), le.Uint64(s[5*stride:]), le.Uint64(s[6*stride:]), le.Uint64(s[7*stride:])))
		d := row[8*q : 8*q+64]
		le.PutUint64(d, x0)
		le.PutUint64(d[8:], x1)
		le.PutUint64(d[16:], x2)
		le.PutUint64(d[24:], x3)
		le.PutUint64(d[32:], x4)
		le.PutUint64(d[40:], x5)
		le.PutUint64(d[48:], x6)
		le.PutUint64(d[56:], x7)
	}
	for ; 8*q < len(row); q++ {
		var x uint64
		for k := 0; k < 8; k++ {
			x |= uint64(planes[k*stride+q]) << (8 * k)
		}
		le.PutUint64(row[8*q:], transposeBits8(x))
	}
}

// flavourGeneric is the portable implementation, used with the purego tag,
// on other architectures, and as the fallback for typesizes without a vector
// kernel.
var flavourGeneric = flavour{
	name:       "generic",
	available:  true,
	shuffle:    shuffleGeneric,
	unshuffle:  unshuffleGeneric,
	bitTrans:   bitTransGeneric,
	bitUntrans: bitUntransGeneric,
}
