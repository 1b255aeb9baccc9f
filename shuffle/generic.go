package shuffle

import "encoding/binary"

// Portable byte shuffle. Blocks of 8 elements are moved as 64-bit words:
// typesizes 2 and 4 spread or gather bytes inside the words, other typesizes
// transpose 8x8-byte tiles (8 elements by 8 bytes of each). Elements that
// fill no whole tile go through shuffleTail/unshuffleTail.

var le = binary.LittleEndian

// transpose8x8 transposes the 8x8 byte matrix whose row r is x_r (byte c of
// x_r is column c): afterwards byte c of x_r is the old byte r of x_c.
func transpose8x8(x0, x1, x2, x3, x4, x5, x6, x7 uint64) (uint64, uint64, uint64, uint64, uint64, uint64, uint64, uint64) {
	// Each round swaps bytes (r, c+s) and (r+s, c) for r&s == c&s == 0.
	const m1, m2, m4 = 0x00ff00ff00ff00ff, 0x0000ffff0000ffff, 0x00000000ffffffff
	t := (x0>>8 ^ x1) & m1
	x1, x0 = x1^t, x0^t<<8
	t = (x2>>8 ^ x3) & m1
	x3, x2 = x3^t, x2^t<<8
	t = (x4>>8 ^ x5) & m1
	x5, x4 = x5^t, x4^t<<8
	t = (x6>>8 ^ x7) & m1
	x7, x6 = x7^t, x6^t<<8

	t = (x0>>16 ^ x2) & m2
	x2, x0 = x2^t, x0^t<<16
	t = (x1>>16 ^ x3) & m2
	x3, x1 = x3^t, x1^t<<16
	t = (x4>>16 ^ x6) & m2
	x6, x4 = x6^t, x4^t<<16
	t = (x5>>16 ^ x7) & m2
	x7, x5 = x7^t, x5^t<<16

	t = (x0>>32 ^ x4) & m4
	x4, x0 = x4^t, x0^t<<32
	t = (x1>>32 ^ x5) & m4
	x5, x1 = x5^t, x1^t<<32
	t = (x2>>32 ^ x6) & m4
	x6, x2 = x6^t, x2^t<<32
	t = (x3>>32 ^ x7) & m4
	x7, x3 = x7^t, x3^t<<32
	return x0, x1, x2, x3, x4, x5, x6, x7
}

// spread8 moves byte k of a 32-bit value to byte 2k.
func spread8(x uint64) uint64 {
	x = (x | x<<16) & 0x0000ffff0000ffff
	return (x | x<<8) & 0x00ff00ff00ff00ff
}

// spread16 moves 16-bit unit k of a 32-bit value to unit 2k.
func spread16(x uint64) uint64 {
	return (x | x<<16) & 0x0000ffff0000ffff
}

// gather8 is the inverse of spread8: even bytes to the low 32 bits.
func gather8(x uint64) uint64 {
	x &= 0x00ff00ff00ff00ff
	x = (x | x>>8) & 0x0000ffff0000ffff
	return (x | x>>16) & 0xffffffff
}

// gather16 moves the even 16-bit units to the low 32 bits.
func gather16(x uint64) uint64 {
	x &= 0x0000ffff0000ffff
	return (x | x>>16) & 0xffffffff
}

// shuffleGeneric is the portable Shuffle.
func shuffleGeneric(dst, src []byte, t int) {
	n := len(src) / t
	i := 0
	switch {
	case t == 1:
		copy(dst, src)
		return
	case t == 2:
		for ; i+8 <= n; i += 8 {
			x0, x1 := le.Uint64(src[2*i:]), le.Uint64(src[2*i+8:])
			le.PutUint64(dst[i:], gather8(x0)|gather8(x1)<<32)
			le.PutUint64(dst[n+i:], gather8(x0>>8)|gather8(x1>>8)<<32)
		}
	case t == 4:
		for ; i+8 <= n; i += 8 {
			s := src[4*i : 4*i+32]
			x0, x1, x2, x3 := le.Uint64(s), le.Uint64(s[8:]), le.Uint64(s[16:]), le.Uint64(s[24:])
			l0, h0 := gather16(x0)|gather16(x1)<<32, gather16(x0>>16)|gather16(x1>>16)<<32
			l1, h1 := gather16(x2)|gather16(x3)<<32, gather16(x2>>16)|gather16(x3>>16)<<32
			le.PutUint64(dst[i:], gather8(l0)|gather8(l1)<<32)
			le.PutUint64(dst[n+i:], gather8(l0>>8)|gather8(l1>>8)<<32)
			le.PutUint64(dst[2*n+i:], gather8(h0)|gather8(h1)<<32)
			le.PutUint64(dst[3*n+i:], gather8(h0>>8)|gather8(h1>>8)<<32)
		}
	case t < 8:
		// Load 8 bytes at each element start (reading into the next
		// element), keep the first t rows of the transpose.
		for ; i+8 <= n && (i+7)*t+8 <= len(src); i += 8 {
			s := src[i*t:]
			var r [8]uint64
			r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7] = transpose8x8(
				le.Uint64(s), le.Uint64(s[t:]), le.Uint64(s[2*t:]), le.Uint64(s[3*t:]),
				le.Uint64(s[4*t:]), le.Uint64(s[5*t:]), le.Uint64(s[6*t:]), le.Uint64(s[7*t:]))
			for j := range r[:t] {
				le.PutUint64(dst[j*n+i:], r[j])
			}
		}
	default:
		for ; i+8 <= n; i += 8 {
			for j0 := 0; j0 < t; j0 += 8 {
				j := min(j0, t-8) // the last tile may overlap the previous one
				s := src[i*t+j:]
				r0, r1, r2, r3, r4, r5, r6, r7 := transpose8x8(
					le.Uint64(s), le.Uint64(s[t:]), le.Uint64(s[2*t:]), le.Uint64(s[3*t:]),
					le.Uint64(s[4*t:]), le.Uint64(s[5*t:]), le.Uint64(s[6*t:]), le.Uint64(s[7*t:]))
				d := dst[j*n+i:]
				le.PutUint64(d, r0)
				le.PutUint64(d[n:], r1)
				le.PutUint64(d[2*n:], r2)
				le.PutUint64(d[3*n:], r3)
				le.PutUint64(d[4*n:], r4)
				le.PutUint64(d[5*n:], r5)
				le.PutUint64(d[6*n:], r6)
				le.PutUint64(d[7*n:], r7)
			}
		}
	}
	shuffleTail(dst, src, t, i)
}

// unshuffleGeneric is the portable Unshuffle.
func unshuffleGeneric(dst, src []byte, t int) {
	n := len(src) / t
	i := 0
	switch {
	case t == 1:
		copy(dst, src)
		return
	case t == 2:
		for ; i+8 <= n; i += 8 {
			a, b := le.Uint64(src[i:]), le.Uint64(src[n+i:])
			le.PutUint64(dst[2*i:], spread8(a&0xffffffff)|spread8(b&0xffffffff)<<8)
			le.PutUint64(dst[2*i+8:], spread8(a>>32)|spread8(b>>32)<<8)
		}
	case t == 4:
		for ; i+8 <= n; i += 8 {
			a, b, c, e := le.Uint64(src[i:]), le.Uint64(src[n+i:]), le.Uint64(src[2*n+i:]), le.Uint64(src[3*n+i:])
			ab0, ab1 := spread8(a&0xffffffff)|spread8(b&0xffffffff)<<8, spread8(a>>32)|spread8(b>>32)<<8
			ce0, ce1 := spread8(c&0xffffffff)|spread8(e&0xffffffff)<<8, spread8(c>>32)|spread8(e>>32)<<8
			d := dst[4*i : 4*i+32]
			le.PutUint64(d, spread16(ab0&0xffffffff)|spread16(ce0&0xffffffff)<<16)
			le.PutUint64(d[8:], spread16(ab0>>32)|spread16(ce0>>32)<<16)
			le.PutUint64(d[16:], spread16(ab1&0xffffffff)|spread16(ce1&0xffffffff)<<16)
			le.PutUint64(d[24:], spread16(ab1>>32)|spread16(ce1>>32)<<16)
		}
	case t < 8:
		// Transpose t rows (the rest zero) and store 8 bytes per element;
		// each store's excess is overwritten by the next one.
		for ; i+8 <= n && (i+7)*t+8 <= len(dst); i += 8 {
			var r [8]uint64
			for j := range r[:t] {
				r[j] = le.Uint64(src[j*n+i:])
			}
			x0, x1, x2, x3, x4, x5, x6, x7 := transpose8x8(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7])
			d := dst[i*t:]
			le.PutUint64(d, x0)
			le.PutUint64(d[t:], x1)
			le.PutUint64(d[2*t:], x2)
			le.PutUint64(d[3*t:], x3)
			le.PutUint64(d[4*t:], x4)
			le.PutUint64(d[5*t:], x5)
			le.PutUint64(d[6*t:], x6)
			le.PutUint64(d[7*t:], x7)
		}
	default:
		for ; i+8 <= n; i += 8 {
			for j0 := 0; j0 < t; j0 += 8 {
				j := min(j0, t-8)
				s := src[j*n+i:]
				x0, x1, x2, x3, x4, x5, x6, x7 := transpose8x8(
					le.Uint64(s), le.Uint64(s[n:]), le.Uint64(s[2*n:]), le.Uint64(s[3*n:]),
					le.Uint64(s[4*n:]), le.Uint64(s[5*n:]), le.Uint64(s[6*n:]), le.Uint64(s[7*n:]))
				d := dst[i*t+j:]
				le.PutUint64(d, x0)
				le.PutUint64(d[t:], x1)
				le.PutUint64(d[2*t:], x2)
				le.PutUint64(d[3*t:], x3)
				le.PutUint64(d[4*t:], x4)
				le.PutUint64(d[5*t:], x5)
				le.PutUint64(d[6*t:], x6)
				le.PutUint64(d[7*t:], x7)
			}
		}
	}
	unshuffleTail(dst, src, t, i)
}

// shuffleTail shuffles elements from..n-1 one byte at a time and copies the
// len%t trailing bytes.
func shuffleTail(dst, src []byte, t, from int) {
	n := len(src) / t
	for j := 0; j < t; j++ {
		d := dst[j*n : (j+1)*n]
		for i := from; i < n; i++ {
			d[i] = src[i*t+j]
		}
	}
	copy(dst[n*t:], src[n*t:])
}

// unshuffleTail is the inverse of shuffleTail.
func unshuffleTail(dst, src []byte, t, from int) {
	n := len(src) / t
	for j := 0; j < t; j++ {
		s := src[j*n : (j+1)*n]
		for i := from; i < n; i++ {
			dst[i*t+j] = s[i]
		}
	}
	copy(dst[n*t:], src[n*t:])
}
