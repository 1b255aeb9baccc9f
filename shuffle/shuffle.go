// Package shuffle implements the byte shuffle and bit shuffle transforms
// used by Blosc filters.
//
// Byte shuffle groups byte j of every element together: for a buffer of
// n = len/typesize whole elements, Shuffle writes dst[j*n+i] = src[i*typesize+j];
// the len%typesize trailing bytes are copied unchanged. Unshuffle is its
// inverse.
//
// Bit shuffle transposes bits: for n elements (n a multiple of 8) of
// typesize bytes, the output is 8*typesize bit planes of n/8 bytes each,
// ordered by element byte j then bit k (0 = least significant); bit m of
// byte q of plane (j,k) is bit k of byte j of element 8*q+m. BitShuffle and
// BitUnshuffle require len(src) to be a multiple of 8*typesize; callers
// handle trailing bytes according to the chunk format's rules.
//
// On amd64 the kernels use AVX2 or SSE2, chosen at run time; the purego
// build tag and other architectures use portable Go.
package shuffle

// Shuffle byte-shuffles src into dst with element size typesize.
// dst and src must have the same length and must not overlap.
func Shuffle(dst, src []byte, typesize int) {
	checkArgs(dst, src, typesize)
	shuffle(dst, src, typesize)
}

// Unshuffle reverses Shuffle. dst and src must have the same length and must
// not overlap.
func Unshuffle(dst, src []byte, typesize int) {
	checkArgs(dst, src, typesize)
	unshuffle(dst, src, typesize)
}

// BitShuffle bit-shuffles src into dst with element size typesize.
// len(src) must be a multiple of 8*typesize; dst must have the same length
// and must not overlap src.
func BitShuffle(dst, src []byte, typesize int) {
	checkBitArgs(dst, src, typesize)
	bitShuffle(dst, src, typesize)
}

// BitUnshuffle reverses BitShuffle, with the same requirements.
func BitUnshuffle(dst, src []byte, typesize int) {
	checkBitArgs(dst, src, typesize)
	bitUnshuffle(dst, src, typesize)
}

func checkArgs(dst, src []byte, typesize int) {
	if len(dst) != len(src) {
		panic("shuffle: dst and src lengths differ")
	}
	if typesize < 1 {
		panic("shuffle: typesize < 1")
	}
}

func checkBitArgs(dst, src []byte, typesize int) {
	checkArgs(dst, src, typesize)
	if len(src)%(8*typesize) != 0 {
		panic("shuffle: bitshuffle length is not a multiple of 8*typesize")
	}
}

// shuffleRef is the scalar reference for Shuffle.
func shuffleRef(dst, src []byte, t int) {
	n := len(src) / t
	for j := 0; j < t; j++ {
		d := dst[j*n : (j+1)*n]
		for i := range d {
			d[i] = src[i*t+j]
		}
	}
	copy(dst[n*t:], src[n*t:])
}

// unshuffleRef is the scalar reference for Unshuffle.
func unshuffleRef(dst, src []byte, t int) {
	n := len(src) / t
	for j := 0; j < t; j++ {
		s := src[j*n : (j+1)*n]
		for i, b := range s {
			dst[i*t+j] = b
		}
	}
	copy(dst[n*t:], src[n*t:])
}

// bitShuffleRef is the scalar reference for BitShuffle.
func bitShuffleRef(dst, src []byte, t int) {
	n := len(src) / t
	nb := n / 8
	clear(dst)
	for e := 0; e < n; e++ {
		for j := 0; j < t; j++ {
			b := src[e*t+j]
			for k := 0; k < 8; k++ {
				if b>>k&1 != 0 {
					dst[(8*j+k)*nb+e/8] |= 1 << (e % 8)
				}
			}
		}
	}
}

// bitUnshuffleRef is the scalar reference for BitUnshuffle.
func bitUnshuffleRef(dst, src []byte, t int) {
	n := len(src) / t
	nb := n / 8
	clear(dst)
	for e := 0; e < n; e++ {
		for j := 0; j < t; j++ {
			var b byte
			for k := 0; k < 8; k++ {
				b |= (src[(8*j+k)*nb+e/8] >> (e % 8) & 1) << k
			}
			dst[e*t+j] = b
		}
	}
}
