// Package blosclz implements BloscLZ, the default codec of Blosc and
// Bloscpack: a byte-oriented LZ77 derived from FastLZ level 2.
//
// The stream format has never changed since c-blosc 1.0. A stream starts
// with a literal run whose control byte carries the marker 001 in its top
// three bits; every following token is a literal run (control < 32, copy
// control+1 bytes) or a match (length in the top three bits, extended by
// 255-runs when they are all set; distance in the low five bits plus one
// byte, or a 16-bit big-endian far distance after the 31/255 marker).
//
// Decompress reads any stream the C libraries write; Compress writes
// streams that both c-blosc 1.x and c-blosc2 read back. Neither keeps
// state between calls, and both are safe for concurrent use.
package blosclz

import (
	"encoding/binary"
	"errors"
)

// ErrCorrupt reports a BloscLZ stream that does not decode to the expected
// number of bytes: truncated input, a run past the end of the output or a
// match before its start.
var ErrCorrupt = errors.New("corrupt BloscLZ stream")

// farBase is the distance that a far match's 16-bit field counts from.
const farBase = 8192

// Decompress decodes src into dst, which must have exactly the length of the
// uncompressed data. It returns the number of bytes written, which is
// len(dst) on success. A stream that does not fill dst exactly, or that
// would write past it or refer before its start, gives ErrCorrupt; dst
// then holds unspecified bytes. Decompress never reads outside src and
// never writes outside dst, whatever the input.
//
// Unlike the current c-blosc2 decoder, which drops a match that is the
// last token of a stream, Decompress executes it (as c-blosc 1.x did).
// No encoder writes such streams.
func Decompress(dst, src []byte) (int, error) {
	n := len(src)
	if n == 0 {
		if len(dst) == 0 {
			return 0, nil
		}
		return 0, ErrCorrupt
	}
	ip := 1
	op := 0
	ctrl := uint(src[0] & 31)
	for {
		if ctrl < 32 {
			// Literal run of ctrl+1 bytes.
			run := int(ctrl) + 1
			if ip+32 <= n && op+32 <= len(dst) {
				// Copy a fixed 16 or 32 bytes; the excess is overwritten
				// later (a valid stream fills dst exactly). Two 16-byte
				// copies compile to register moves, 32 to a call.
				d, s := dst[op:op+32], src[ip:ip+32]
				*(*[16]byte)(d) = *(*[16]byte)(s)
				if run > 16 {
					*(*[16]byte)(d[16:]) = *(*[16]byte)(s[16:])
				}
			} else {
				if op+run > len(dst) || ip+run > n {
					return op, ErrCorrupt
				}
				copy(dst[op:op+run], src[ip:ip+run])
			}
			op += run
			ip += run
		} else {
			length := int(ctrl>>5) - 1
			if length == 7-1 {
				for {
					if ip >= n {
						return op, ErrCorrupt
					}
					c := src[ip]
					ip++
					length += int(c)
					if c != 255 {
						break
					}
				}
			}
			if ip >= n {
				return op, ErrCorrupt
			}
			code := uint(src[ip])
			ip++
			length += 3
			dist := int((ctrl&31)<<8+code) + 1
			if code == 255 && ctrl&31 == 31 {
				if ip+2 > n {
					return op, ErrCorrupt
				}
				dist = int(binary.BigEndian.Uint16(src[ip:])) + farBase
				ip += 2
			}
			ref := op - dist
			if ref < 0 || length > len(dst)-op {
				return op, ErrCorrupt
			}
			copyMatch(dst, op, ref, length)
			op += length
		}
		if ip >= n {
			break
		}
		ctrl = uint(src[ip])
		ip++
	}
	if op != len(dst) {
		return op, ErrCorrupt
	}
	return op, nil
}

// copyMatch copies length bytes from dst[ref:] to dst[op:], byte after
// byte in effect (the ranges may overlap: a distance of 1 repeats a
// byte). The caller guarantees 0 <= ref < op and op+length <= len(dst).
func copyMatch(dst []byte, op, ref, length int) {
	dist := op - ref
	if length <= 8 && dist >= 8 && op+8 <= len(dst) {
		// The most common match: one 8-byte move (which store-forwards
		// better than a 16-byte one from just-written bytes).
		binary.LittleEndian.PutUint64(dst[op:], binary.LittleEndian.Uint64(dst[ref:]))
		return
	}
	if dist >= 16 {
		if length <= 16 && op+16 <= len(dst) {
			// The common short match: one fixed 16-byte copy, whose source
			// lies entirely before op.
			*(*[16]byte)(dst[op:]) = *(*[16]byte)(dst[ref:])
			return
		}
		if dist >= length {
			copy(dst[op:op+length], dst[ref:ref+length])
			return
		}
	}
	if dist >= 8 && op+length+8 <= len(dst) {
		// Eight bytes at a time; each load reads only bytes already
		// written, and the store may run up to 7 bytes past the match.
		for i := 0; i < length; i += 8 {
			binary.LittleEndian.PutUint64(dst[op+i:], binary.LittleEndian.Uint64(dst[ref+i:]))
		}
		return
	}
	if dist == 1 {
		b := dst[ref]
		s := dst[op : op+length]
		if len(s) >= 8 {
			w := uint64(b) * 0x0101010101010101
			for len(s) >= 8 {
				binary.LittleEndian.PutUint64(s, w)
				s = s[8:]
			}
		}
		for i := range s {
			s[i] = b
		}
		return
	}
	// Overlapping copy: the dist-byte pattern at ref repeats. After the
	// first dist bytes, copy from ref again, doubling the chunk each time
	// (the offset from ref always stays a multiple of dist).
	s := dst[ref : op+length]
	done := dist // bytes of s already in place
	for done < len(s) {
		done += copy(s[done:], s[:done])
	}
}
