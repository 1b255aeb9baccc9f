//go:build amd64 && !purego

package shuffle

import "golang.org/x/sys/cpu"

//go:generate go run gen.go

// A kernel is one assembly function: it processes blocks groups of width
// elements (8*width row bytes for the bit kernels); stride is the distance
// between streams or planes.
type kernel func(dst, src *byte, stride, blocks int)

// simd is the set of assembly kernels of one instruction set. Its methods
// run a kernel over the whole groups and finish the rest in Go.
type simd struct {
	width      int        // elements per iteration
	shuffle    [17]kernel // indexed by typesize; nil: use the Go code
	unshuffle  [17]kernel
	bitTrans   kernel // 8*width row bytes per iteration
	bitUntrans kernel
}

var avx2 = simd{
	width:      32,
	shuffle:    [17]kernel{2: shuffle2AVX2, 4: shuffle4AVX2, 8: shuffle8AVX2, 16: shuffle16AVX2},
	unshuffle:  [17]kernel{2: unshuffle2AVX2, 4: unshuffle4AVX2, 8: unshuffle8AVX2, 16: unshuffle16AVX2},
	bitTrans:   bitTransAVX2,
	bitUntrans: bitUntransAVX2,
}

var sse2 = simd{
	width:      16,
	shuffle:    [17]kernel{2: shuffle2SSE2, 4: shuffle4SSE2, 8: shuffle8SSE2, 16: shuffle16SSE2},
	unshuffle:  [17]kernel{2: unshuffle2SSE2, 4: unshuffle4SSE2, 8: unshuffle8SSE2, 16: unshuffle16SSE2},
	bitTrans:   bitTransSSE2,
	bitUntrans: bitUntransSSE2,
}

func (s *simd) shuffleBytes(dst, src []byte, t int) {
	n := len(src) / t
	if t >= len(s.shuffle) || s.shuffle[t] == nil || n < s.width {
		shuffleGeneric(dst, src, t)
		return
	}
	nv := n - n%s.width
	s.shuffle[t](&dst[0], &src[0], n, nv/s.width)
	shuffleTail(dst, src, t, nv)
}

func (s *simd) unshuffleBytes(dst, src []byte, t int) {
	n := len(src) / t
	if t >= len(s.unshuffle) || s.unshuffle[t] == nil || n < s.width {
		unshuffleGeneric(dst, src, t)
		return
	}
	nv := n - n%s.width
	s.unshuffle[t](&dst[0], &src[0], n, nv/s.width)
	unshuffleTail(dst, src, t, nv)
}

func (s *simd) bitTransRow(planes, row []byte, stride int) {
	nv := len(row) - len(row)%(8*s.width)
	if nv > 0 {
		_ = planes[7*stride+nv/8-1] // the kernel writes up to here
		s.bitTrans(&planes[0], &row[0], stride, nv/(8*s.width))
	}
	bitTransGeneric(planes[nv/8:], row[nv:], stride)
}

func (s *simd) bitUntransRow(row, planes []byte, stride int) {
	nv := len(row) - len(row)%(8*s.width)
	if nv > 0 {
		_ = planes[7*stride+nv/8-1] // the kernel reads up to here
		s.bitUntrans(&row[0], &planes[0], stride, nv/(8*s.width))
	}
	bitUntransGeneric(row[nv:], planes[nv/8:], stride)
}

var (
	flavourAVX2 = flavour{
		name:       "avx2",
		available:  cpu.X86.HasAVX2,
		shuffle:    avx2.shuffleBytes,
		unshuffle:  avx2.unshuffleBytes,
		bitTrans:   avx2.bitTransRow,
		bitUntrans: avx2.bitUntransRow,
	}
	flavourSSE2 = flavour{
		name:       "sse2",
		available:  true,
		shuffle:    sse2.shuffleBytes,
		unshuffle:  sse2.unshuffleBytes,
		bitTrans:   sse2.bitTransRow,
		bitUntrans: sse2.bitUntransRow,
	}
)

// flavours lists the implementations this build knows, fastest first.
var flavours = []*flavour{&flavourAVX2, &flavourSSE2, &flavourGeneric}

// useAVX2 selects the AVX2 kernels (x/sys/cpu checks that the OS saves
// the YMM registers); otherwise the SSE2 ones, which every amd64 CPU has.
var useAVX2 = flavourAVX2.available

func shuffle(dst, src []byte, t int) {
	if useAVX2 {
		avx2.shuffleBytes(dst, src, t)
	} else {
		sse2.shuffleBytes(dst, src, t)
	}
}

func unshuffle(dst, src []byte, t int) {
	if useAVX2 {
		avx2.unshuffleBytes(dst, src, t)
	} else {
		sse2.unshuffleBytes(dst, src, t)
	}
}

func bitShuffle(dst, src []byte, t int) {
	if useAVX2 {
		flavourAVX2.bitShuffle(dst, src, t)
	} else {
		flavourSSE2.bitShuffle(dst, src, t)
	}
}

func bitUnshuffle(dst, src []byte, t int) {
	if useAVX2 {
		flavourAVX2.bitUnshuffle(dst, src, t)
	} else {
		flavourSSE2.bitUnshuffle(dst, src, t)
	}
}
