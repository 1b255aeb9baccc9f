//go:build ignore

// Command gen writes the amd64 assembly kernels of package shuffle and their
// Go declarations:
//
//	go run gen.go
//
// Each kernel is straight-line SIMD code. While emitting it, gen simulates
// where every byte of one 16-byte lane goes, so each store address is derived
// from (and checked against) where the data actually ends up; a wrong
// permutation fails generation instead of producing a wrong kernel.
//
// AVX2 kernels run the SSE2 algorithm in each 128-bit lane (unpack and pack
// instructions do not cross lanes): lane 0 handles elements 0..15 of a group
// of 32 and lane 1 elements 16..31. Shuffle kernels fill the upper lane with
// VINSERTI128 from the second half of the group, so their stream stores are
// contiguous; unshuffle kernels recombine lanes with VPERM2I128 before their
// 32-byte stores. The algorithm comments written at the top of the .s files
// describe the kernels in more detail.
package main

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
)

// Chunk sizes of the two-pass (typesize 16) kernels, in bytes per stream:
// measured best for 256 KiB buffers.
const (
	unshuffleChunk = 128
	shuffleChunk   = 512
)

type vreg struct {
	phys  int
	lanes [16]int // label of each byte of one 16-byte lane
}

type gen struct {
	b      bytes.Buffer
	avx    bool
	used   [16]bool
	gather []string // stream j at register gather[j], for a gather kernel
}

func (g *gen) op(format string, args ...any) {
	fmt.Fprintf(&g.b, "\t"+format+"\n", args...)
}

func (g *gen) alloc() *vreg {
	for i, u := range g.used {
		if !u {
			g.used[i] = true
			return &vreg{phys: i}
		}
	}
	log.Fatal("out of vector registers")
	return nil
}

func (g *gen) free(vs ...*vreg) {
	for _, v := range vs {
		if !g.used[v.phys] {
			log.Fatalf("double free of register %d", v.phys)
		}
		g.used[v.phys] = false
	}
}

// r names the full-width register; x names its low 128 bits.
func (g *gen) r(v *vreg) string {
	if g.avx {
		return fmt.Sprintf("Y%d", v.phys)
	}
	return fmt.Sprintf("X%d", v.phys)
}

func (g *gen) x(v *vreg) string { return fmt.Sprintf("X%d", v.phys) }

var unpackName = map[int][2]string{ // SSE2 names; AVX2 names differ
	1: {"PUNPCKLBW", "PUNPCKHBW"},
	2: {"PUNPCKLWL", "PUNPCKHWL"},
	4: {"PUNPCKLLQ", "PUNPCKHLQ"},
	8: {"PUNPCKLQDQ", "PUNPCKHQDQ"},
}

var vunpackName = map[int][2]string{
	1: {"VPUNPCKLBW", "VPUNPCKHBW"},
	2: {"VPUNPCKLWD", "VPUNPCKHWD"},
	4: {"VPUNPCKLDQ", "VPUNPCKHDQ"},
	8: {"VPUNPCKLQDQ", "VPUNPCKHQDQ"},
}

// interleave simulates unpack{lo,hi} with w-byte units.
func interleave(a, b *vreg, w int, hi bool) [16]int {
	var out [16]int
	units := 16 / w
	base := 0
	if hi {
		base = units / 2
	}
	for u := 0; u < units/2; u++ {
		for k := 0; k < w; k++ {
			out[(2*u)*w+k] = a.lanes[(base+u)*w+k]
			out[(2*u+1)*w+k] = b.lanes[(base+u)*w+k]
		}
	}
	return out
}

// unpack returns (unpacklo(a,b), unpackhi(a,b)) with w-byte units,
// consuming a and b.
func (g *gen) unpack(a, b *vreg, w int) (lo, hi *vreg) {
	loL, hiL := interleave(a, b, w, false), interleave(a, b, w, true)
	t := g.alloc()
	if g.avx {
		n := vunpackName[w]
		g.op("%s %s, %s, %s", n[0], g.r(b), g.r(a), g.r(t))
		g.op("%s %s, %s, %s", n[1], g.r(b), g.r(a), g.r(a))
		lo, hi = t, a
	} else {
		n := unpackName[w]
		g.op("MOVO %s, %s", g.r(a), g.r(t))
		g.op("%s %s, %s", n[0], g.r(b), g.r(a))
		g.op("%s %s, %s", n[1], g.r(b), g.r(t))
		lo, hi = a, t
	}
	g.free(b)
	lo.lanes, hi.lanes = loL, hiL
	return lo, hi
}

// unpackHalf returns unpacklo(a,b) or unpackhi(a,b), consuming a and b.
func (g *gen) unpackHalf(a, b *vreg, w int, hi bool) *vreg {
	l := interleave(a, b, w, hi)
	i := 0
	if hi {
		i = 1
	}
	if g.avx {
		g.op("%s %s, %s, %s", vunpackName[w][i], g.r(b), g.r(a), g.r(a))
	} else {
		g.op("%s %s, %s", unpackName[w][i], g.r(b), g.r(a))
	}
	g.free(b)
	a.lanes = l
	return a
}

// pack returns the even bytes (L) and the odd bytes (H) of a followed by b,
// consuming a and b. mask holds 0x00ff in every 16-bit word.
func (g *gen) pack(a, b, mask *vreg) (L, H *vreg) {
	var lL, hL [16]int
	for k := 0; k < 8; k++ {
		lL[k], lL[8+k] = a.lanes[2*k], b.lanes[2*k]
		hL[k], hL[8+k] = a.lanes[2*k+1], b.lanes[2*k+1]
	}
	ta, tb := g.alloc(), g.alloc()
	if g.avx {
		g.op("VPSRLW $8, %s, %s", g.r(a), g.r(ta))
		g.op("VPSRLW $8, %s, %s", g.r(b), g.r(tb))
		g.op("VPACKUSWB %s, %s, %s", g.r(tb), g.r(ta), g.r(ta))
		g.op("VPAND %s, %s, %s", g.r(mask), g.r(a), g.r(a))
		g.op("VPAND %s, %s, %s", g.r(mask), g.r(b), g.r(b))
		g.op("VPACKUSWB %s, %s, %s", g.r(b), g.r(a), g.r(a))
	} else {
		g.op("MOVO %s, %s", g.r(a), g.r(ta))
		g.op("MOVO %s, %s", g.r(b), g.r(tb))
		g.op("PSRLW $8, %s", g.r(ta))
		g.op("PSRLW $8, %s", g.r(tb))
		g.op("PACKUSWB %s, %s", g.r(tb), g.r(ta))
		g.op("PAND %s, %s", g.r(mask), g.r(a))
		g.op("PAND %s, %s", g.r(mask), g.r(b))
		g.op("PACKUSWB %s, %s", g.r(b), g.r(a))
	}
	g.free(b, tb)
	a.lanes, ta.lanes = lL, hL
	return a, ta
}

// unpackRound interleaves adjacent pairs; results are ordered all-lo then
// all-hi, which keeps the next round's partners adjacent.
func (g *gen) unpackRound(rs []*vreg, w int) []*vreg {
	var lo, hi []*vreg
	for k := 0; k < len(rs); k += 2 {
		l, h := g.unpack(rs[k], rs[k+1], w)
		lo, hi = append(lo, l), append(hi, h)
	}
	return append(lo, hi...)
}

// unshuffleRound interleaves registers k and k+len/2 bytewise, ordering the
// results lo, hi per pair: each round moves the top register-index bit into
// the bottom of the byte index.
func (g *gen) unshuffleRound(rs []*vreg) []*vreg {
	var out []*vreg
	h := len(rs) / 2
	for k := 0; k < h; k++ {
		l, hi := g.unpack(rs[k], rs[k+h], 1)
		out = append(out, l, hi)
	}
	return out
}

// split separates the t interleaved byte streams held in rs (16 elements of
// t bytes per lane), with log2(t) pack rounds or, where measured faster
// (SSE2 at t >= 4, whose two-operand forms make the pack rounds long), four
// perfect-unshuffle rounds of unpacks.
func (g *gen) split(rs []*vreg, t int, mask *vreg) []*vreg {
	if !usePack(g.avx, t) {
		for i := 0; i < 4; i++ {
			rs = g.unshuffleRound(rs)
		}
		return rs
	}
	for i := 0; i < lg(t); i++ {
		rs = g.packRound(rs, mask)
	}
	return rs
}

func usePack(avx bool, t int) bool { return avx || t < 4 }

func (g *gen) packRound(rs []*vreg, mask *vreg) []*vreg {
	var lo, hi []*vreg
	for k := 0; k < len(rs); k += 2 {
		l, h := g.pack(rs[k], rs[k+1], mask)
		lo, hi = append(lo, l), append(hi, h)
	}
	return append(lo, hi...)
}

// bitslice transposes the 8x8 bit matrix formed, in every byte position, by
// bit k of register m: afterwards bit m of register k holds the old bit k of
// register m. masks[i] holds 0x55, 0x33, 0x0f in every byte for i = 0, 1, 2.
func (g *gen) bitslice(w []*vreg, masks [3]*vreg) {
	for i, s := range []int{1, 2, 4} {
		for m := 0; m < 8; m++ {
			if m&s != 0 {
				continue
			}
			a, b, t := w[m], w[m+s], g.alloc()
			// t = ((a >> s) ^ b) & mask; b ^= t; a ^= t << s
			if g.avx {
				g.op("VPSRLW $%d, %s, %s", s, g.r(a), g.r(t))
				g.op("VPXOR %s, %s, %s", g.r(b), g.r(t), g.r(t))
				g.op("VPAND %s, %s, %s", g.r(masks[i]), g.r(t), g.r(t))
				g.op("VPXOR %s, %s, %s", g.r(t), g.r(b), g.r(b))
				g.op("VPSLLW $%d, %s, %s", s, g.r(t), g.r(t))
				g.op("VPXOR %s, %s, %s", g.r(t), g.r(a), g.r(a))
			} else {
				g.op("MOVO %s, %s", g.r(a), g.r(t))
				g.op("PSRLW $%d, %s", s, g.r(t))
				g.op("PXOR %s, %s", g.r(b), g.r(t))
				g.op("PAND %s, %s", g.r(masks[i]), g.r(t))
				g.op("PXOR %s, %s", g.r(t), g.r(b))
				g.op("PSLLW $%d, %s", s, g.r(t))
				g.op("PXOR %s, %s", g.r(t), g.r(a))
			}
			g.free(t)
		}
	}
}

// Stream addressing: stream j lives at base + j*stride. BX = stride,
// CX = 3*stride, DX = 5*stride, R8 = 7*stride; streams 8..15 use a second
// base register that points 8*stride further.
func addr(base, base8 string, j int) string {
	if j >= 8 {
		base, j = base8, j-8
	}
	idx := [8]string{"", "(BX*1)", "(BX*2)", "(CX*1)", "(BX*4)", "(DX*1)", "(CX*2)", "(R8*1)"}[j]
	return "(" + base + ")" + idx
}

// loadStream loads 16 (SSE2) or 32 (AVX2) bytes of stream j (in a gather
// kernel, from the stream's own register).
func (g *gen) loadStream(base, base8 string, j int, lanes [16]int) *vreg {
	v := g.alloc()
	a := addr(base, base8, j)
	if g.gather != nil {
		a = "(" + g.gather[j] + ")"
	}
	if g.avx {
		g.op("VMOVDQU %s, %s", a, g.r(v))
	} else {
		g.op("MOVOU %s, %s", a, g.r(v))
	}
	v.lanes = lanes
	return v
}

// loadChunk loads the 16-byte chunk at off(SI); with AVX2 the upper lane
// gets the chunk at off+half(SI).
func (g *gen) loadChunk(off, half int, lanes [16]int) *vreg {
	v := g.alloc()
	if g.avx {
		g.op("VMOVDQU %d(SI), %s", off, g.x(v))
		g.op("VINSERTI128 $1, %d(SI), %s, %s", off+half, g.r(v), g.r(v))
	} else {
		g.op("MOVOU %d(SI), %s", off, g.r(v))
	}
	v.lanes = lanes
	return v
}

// contiguous checks that v holds labels d0..d0+15 with d0 a multiple of 16
// and returns d0.
func contiguous(v *vreg) int {
	d0 := v.lanes[0]
	if d0%16 != 0 {
		log.Fatalf("register starts at label %d", d0)
	}
	for p, l := range v.lanes {
		if l != d0+p {
			log.Fatalf("register not contiguous: %v", v.lanes)
		}
	}
	return d0
}

// byLabel orders registers by their first label, so stores go in address
// order.
func byLabel(rs []*vreg) []*vreg {
	sort.Slice(rs, func(a, b int) bool { return rs[a].lanes[0] < rs[b].lanes[0] })
	return rs
}

// storeChunks stores registers holding consecutive 16-byte chunks of the
// output. With AVX2, pairs of registers are recombined with VPERM2I128 into
// 32-byte stores of lane 0 (at off) and lane 1 (at off+half); all stores are
// issued in address order, which measured clearly faster than storing each
// 16-byte lane on its own or interleaving the two halves.
func (g *gen) storeChunks(rs []*vreg, half int) {
	rs = byLabel(rs)
	if !g.avx {
		for _, v := range rs {
			g.op("MOVOU %s, %d(DI)", g.r(v), contiguous(v))
			g.free(v)
		}
		return
	}
	type store struct {
		v   *vreg
		off int
	}
	var lane0, lane1 []store
	for i := 0; i < len(rs); i += 2 {
		a, b := rs[i], rs[i+1]
		off := contiguous(a)
		if contiguous(b) != off+16 {
			log.Fatal("storeChunks: registers are not adjacent")
		}
		t := g.alloc()
		g.op("VPERM2I128 $0x20, %s, %s, %s", g.r(b), g.r(a), g.r(t))
		g.op("VPERM2I128 $0x31, %s, %s, %s", g.r(b), g.r(a), g.r(a))
		g.free(b)
		lane0 = append(lane0, store{t, off})
		lane1 = append(lane1, store{a, off + half})
	}
	for _, s := range append(lane0, lane1...) {
		g.op("VMOVDQU %s, %d(DI)", g.r(s.v), s.off)
		g.free(s.v)
	}
}

// storeStream stores v (which must hold stream j's bytes) to stream j.
func (g *gen) storeStream(v *vreg) {
	j := contiguous(v) / 16
	mov := "MOVOU"
	if g.avx {
		mov = "VMOVDQU"
	}
	g.op("%s %s, %s", mov, g.r(v), addr("DI", "R10", j))
	g.free(v)
}

// kernel describes one generated function.
type kernel struct {
	name    string
	doc     string
	consts  func(avx bool) []string // constants kept in registers
	srcStrm bool                    // src is strided (streams), else dst is
	streams int                     // number of strided streams
	srcStep int                     // bytes src advances per iteration, per 16 elements
	dstStep int
	body    func(g *gen, pass int)
	passes  int // 2: each chunk of blocks is done in two passes
	// gather: an unshuffle whose streams lie apart, at the addresses in
	// an array: func(dst *byte, streams *[T]*byte, blocks int).
	gather bool
	// rows: an unshuffle of rows of items from byte planes to rows apart
	// in dst: func(dst, planes *byte, n, items, rows, skip, stride int).
	rows bool
}

// gatherRegs hold the stream addresses of a gather kernel.
var gatherRegs = []string{"SI", "BX", "CX", "DX", "R8", "R9", "R10", "R11"}

// gatherKernel is unshuffleKernel(t) reading each stream at its own
// address (t ≤ 8, one pass).
func gatherKernel(t int) kernel {
	k := unshuffleKernel(t)
	k.name = fmt.Sprintf("unshuffle%dGather", t)
	k.doc = fmt.Sprintf("unshuffle%dGather is unshuffle%d with each stream at its own address, streams[j] holding byte j of each element.", t, t)
	k.gather = true
	return k
}

// gatherFunction writes a gather kernel.
func (g *gen) gatherFunction(k kernel, suffix string) {
	lanes := 1
	if g.avx {
		lanes = 2
	}
	name := k.name + suffix
	fmt.Fprintf(&g.b, "// func %s(dst *byte, streams *[%d]*byte, blocks int)\n", name, k.streams)
	fmt.Fprintf(&g.b, "TEXT ·%s(SB), NOSPLIT, $0-24\n", name)
	g.op("MOVQ dst+0(FP), DI")
	g.op("MOVQ streams+8(FP), R12")
	g.op("MOVQ blocks+16(FP), AX")
	g.op("TESTQ AX, AX")
	g.op("JZ done")
	if len(k.constants(g.avx)) > 0 || k.passes > 1 || k.streams > len(gatherRegs) {
		log.Fatalf("%s: a gather kernel has no constants, one pass and at most %d streams", name, len(gatherRegs))
	}
	g.gather = gatherRegs[:k.streams]
	for j, r := range g.gather {
		g.op("MOVQ %d(R12), %s", 8*j, r)
	}
	g.used = [16]bool{}
	fmt.Fprintf(&g.b, "\nloop:\n")
	k.body(g, 0)
	if g.used != ([16]bool{}) {
		log.Fatalf("%s: registers leaked", name)
	}
	for _, r := range g.gather {
		g.op("ADDQ $%d, %s", 16*lanes, r)
	}
	g.op("ADDQ $%d, DI", k.dstStep*lanes)
	g.op("DECQ AX")
	g.op("JNZ loop")
	g.gather = nil
	fmt.Fprintf(&g.b, "\ndone:\n")
	if g.avx {
		g.op("VZEROUPPER")
	}
	g.op("RET")
	fmt.Fprintf(&g.b, "\n")
}

// rowsKernel is unshuffleKernel(t) over rows: items items of t bytes
// from byte planes n bytes apart (plane j holds byte j of each item), row
// r from item r*skip of each plane, to dst+r*stride (t ≤ 8, AVX2 only).
func rowsKernel(t int) kernel {
	k := unshuffleKernel(t)
	k.name = fmt.Sprintf("unshuffle%dRows", t)
	k.doc = fmt.Sprintf("unshuffle%dRows unshuffles rows of items (at least 32) of %d bytes from byte planes n bytes apart: row r takes items [r*skip, r*skip+items) of each plane to dst+r*stride.", t, t)
	k.rows = true
	return k
}

// rowsFunction writes a rows kernel: per row, the whole groups of 32
// items, then, where the row's length is not a multiple of 32, the group
// that ends with the row, stored over the last group's bytes (the same
// values) rather than past the row.
func (g *gen) rowsFunction(k kernel, suffix string) {
	if !g.avx || len(k.constants(g.avx)) > 0 || k.passes > 1 || k.streams > len(gatherRegs) {
		log.Fatalf("%s: a rows kernel is AVX2, has no constants, one pass and at most %d streams", k.name, len(gatherRegs))
	}
	name := k.name + suffix
	fmt.Fprintf(&g.b, "// func %s(dst, planes *byte, n, items, rows, skip, stride int)\n", name)
	fmt.Fprintf(&g.b, "TEXT ·%s(SB), NOSPLIT, $0-56\n", name)
	g.op("MOVQ dst+0(FP), R13")
	g.op("MOVQ planes+8(FP), R12")
	g.op("MOVQ rows+32(FP), AX")
	g.op("TESTQ AX, AX")
	g.op("JZ done")
	g.gather = gatherRegs[:k.streams]
	body := func() {
		g.used = [16]bool{}
		k.body(g, 0)
		if g.used != ([16]bool{}) {
			log.Fatalf("%s: registers leaked", name)
		}
	}
	fmt.Fprintf(&g.b, "\nrow:\n")
	g.op("MOVQ n+16(FP), AX")
	// Plane j of the row: R12 + j*n.
	g.op("MOVQ R12, SI")
	g.op("LEAQ (R12)(AX*1), BX")
	g.op("LEAQ (R12)(AX*2), CX")
	g.op("LEAQ (BX)(AX*2), DX")
	if k.streams == 8 {
		g.op("LEAQ (R12)(AX*4), R8")
		g.op("LEAQ (BX)(AX*4), R9")
		g.op("LEAQ (CX)(AX*4), R10")
		g.op("LEAQ (DX)(AX*4), R11")
	}
	g.op("MOVQ R13, DI")
	g.op("MOVQ items+24(FP), AX")
	g.op("SHRQ $5, AX")
	fmt.Fprintf(&g.b, "\nloop:\n")
	body()
	for _, r := range g.gather {
		g.op("ADDQ $32, %s", r)
	}
	g.op("ADDQ $%d, DI", 32*k.streams)
	g.op("DECQ AX")
	g.op("JNZ loop")
	// The last items, r = items%32 of them: step back 32-r items and
	// do a whole group.
	g.op("MOVQ items+24(FP), AX")
	g.op("ANDQ $31, AX")
	g.op("JZ next")
	g.op("NEGQ AX")
	g.op("ADDQ $32, AX")
	for _, r := range g.gather {
		g.op("SUBQ AX, %s", r)
	}
	g.op("SHLQ $%d, AX", lg(k.streams))
	g.op("SUBQ AX, DI")
	body()
	fmt.Fprintf(&g.b, "\nnext:\n")
	g.op("ADDQ skip+40(FP), R12")
	g.op("ADDQ stride+48(FP), R13")
	g.op("DECQ rows+32(FP)")
	g.op("JNZ row")
	g.gather = nil
	fmt.Fprintf(&g.b, "\ndone:\n")
	g.op("VZEROUPPER")
	g.op("RET")
	fmt.Fprintf(&g.b, "\n")
}

func (k kernel) constants(avx bool) []string {
	if k.consts == nil {
		return nil
	}
	return k.consts(avx)
}

func passes(t int) int {
	if t == 16 {
		return 2
	}
	return 1
}

func lg(t int) int {
	n := 0
	for 1<<n < t {
		n++
	}
	return n
}

func unshuffleKernel(t int) kernel {
	return kernel{
		name:    fmt.Sprintf("unshuffle%d", t),
		doc:     fmt.Sprintf("unshuffle%d interleaves %d streams of 16 bytes per lane into 16 elements.", t, t),
		srcStrm: true, streams: t, srcStep: 16, dstStep: 16 * t, passes: passes(t),
		body: func(g *gen, pass int) {
			load := func(j int) *vreg {
				var l [16]int
				for p := range l {
					l[p] = p*t + j
				}
				return g.loadStream("SI", "R9", j, l)
			}
			if t < 16 {
				rs := make([]*vreg, t)
				for j := range rs {
					rs[j] = load(j)
				}
				for w := 1; w < t; w *= 2 {
					rs = g.unpackRound(rs, w)
				}
				g.storeChunks(rs, 16*t)
				return
			}
			// 16 streams: a full register file, so do the elements of
			// the low and the high half of the lane in separate passes.
			{
				hi := pass == 1
				var rs []*vreg
				for j := 0; j < 16; j += 2 {
					a, b := load(j), load(j+1)
					rs = append(rs, g.unpackHalf(a, b, 1, hi))
				}
				for w := 2; w < 16; w *= 2 {
					rs = g.unpackRound(rs, w)
				}
				g.storeChunks(rs, 16*t)
			}
		},
	}
}

func shuffleKernel(t int) kernel {
	return kernel{
		name:    fmt.Sprintf("shuffle%d", t),
		doc:     fmt.Sprintf("shuffle%d splits 16 elements per lane into %d streams.", t, t),
		srcStrm: false, streams: t, srcStep: 16 * t, dstStep: 16, passes: passes(t),
		consts: func(avx bool) []string {
			if t < 16 && usePack(avx, t) {
				return []string{"lowbytes"}
			}
			return nil
		},
		body: func(g *gen, pass int) {
			load := func(c int) *vreg {
				var l [16]int
				for p := range l {
					f := 16*c + p
					l[p] = (f%t)*16 + f/t
				}
				return g.loadChunk(16*c, 16*t, l)
			}
			if t < 16 {
				mask := &vreg{phys: 15}
				rs := make([]*vreg, t)
				for c := range rs {
					rs[c] = load(c)
				}
				rs = g.split(rs, t, mask)
				for _, v := range byLabel(rs) {
					g.storeStream(v)
				}
				return
			}
			// A 16x16 byte transpose, in two passes as in unshuffle16.
			{
				hi := pass == 1
				var rs []*vreg
				for c := 0; c < 16; c += 2 {
					a, b := load(c), load(c+1)
					rs = append(rs, g.unpackHalf(a, b, 1, hi))
				}
				for w := 2; w < 16; w *= 2 {
					rs = g.unpackRound(rs, w)
				}
				for _, v := range byLabel(rs) {
					g.storeStream(v)
				}
			}
		},
	}
}

// bitTransKernel turns 128 bytes per lane of a row (16 groups of 8 bytes)
// into 16 bytes of each of 8 bit planes: a shuffle with typesize 8 makes
// register m hold byte m of every group, then a bit-slice transpose turns
// register k into plane k.
func bitTransKernel() kernel {
	return kernel{
		name: "bitTrans",
		doc:  "bitTrans transposes 16 groups of 8 bytes per lane into 8 bit planes.",
		consts: func(avx bool) []string {
			if usePack(avx, 8) {
				return []string{"lowbytes", "bits55", "bits33", "bits0f"}
			}
			return []string{"bits55", "bits33", "bits0f"}
		},
		srcStrm: false, streams: 8, srcStep: 128, dstStep: 16,
		body: func(g *gen, pass int) {
			mask := &vreg{phys: 15}
			bm := [3]*vreg{{phys: 14}, {phys: 13}, {phys: 12}}
			rs := make([]*vreg, 8)
			for c := range rs {
				var l [16]int
				for p := range l {
					f := 16*c + p
					l[p] = (f%8)*16 + f/8
				}
				rs[c] = g.loadChunk(16*c, 128, l)
			}
			rs = byLabel(g.split(rs, 8, mask))
			for m, v := range rs {
				if contiguous(v) != 16*m {
					log.Fatal("bitTrans: byte transpose went wrong")
				}
			}
			g.bitslice(rs, bm)
			// Register k now holds plane k; label it as stream k.
			for k, v := range rs {
				for p := range v.lanes {
					v.lanes[p] = 16*k + p
				}
				g.storeStream(v)
			}
		},
	}
}

// bitUntransKernel is the inverse of bitTransKernel: bit-slice the 8 planes
// back into byte streams, then interleave them with typesize 8.
func bitUntransKernel() kernel {
	return kernel{
		name:    "bitUntrans",
		doc:     "bitUntrans transposes 16 bytes per lane of 8 bit planes back into 16 groups of 8 bytes.",
		consts:  func(bool) []string { return []string{"bits55", "bits33", "bits0f"} },
		srcStrm: true, streams: 8, srcStep: 16, dstStep: 128,
		body: func(g *gen, pass int) {
			bm := [3]*vreg{{phys: 14}, {phys: 13}, {phys: 12}}
			rs := make([]*vreg, 8)
			for k := range rs {
				rs[k] = g.loadStream("SI", "R9", k, [16]int{})
			}
			g.bitslice(rs, bm)
			for m, v := range rs {
				for q := range v.lanes {
					v.lanes[q] = 8*q + m
				}
			}
			for w := 1; w < 8; w *= 2 {
				rs = g.unpackRound(rs, w)
			}
			g.storeChunks(rs, 128)
		},
	}
}

var constData = map[string]string{
	"lowbytes": "0x00ff00ff00ff00ff",
	"bits55":   "0x5555555555555555",
	"bits33":   "0x3333333333333333",
	"bits0f":   "0x0f0f0f0f0f0f0f0f",
}

var constReg = map[string]int{"lowbytes": 15, "bits55": 14, "bits33": 13, "bits0f": 12}

func (g *gen) function(k kernel, suffix string) {
	if k.gather {
		g.gatherFunction(k, suffix)
		return
	}
	if k.rows {
		g.rowsFunction(k, suffix)
		return
	}
	lanes := 1
	if g.avx {
		lanes = 2
	}
	name := k.name + suffix
	fmt.Fprintf(&g.b, "// func %s(dst, src *byte, stride, blocks int)\n", name)
	fmt.Fprintf(&g.b, "TEXT ·%s(SB), NOSPLIT, $0-32\n", name)
	g.op("MOVQ dst+0(FP), DI")
	g.op("MOVQ src+8(FP), SI")
	g.op("MOVQ stride+16(FP), BX")
	g.op("MOVQ blocks+24(FP), AX")
	g.op("TESTQ AX, AX")
	g.op("JZ done")
	if k.streams > 2 {
		g.op("LEAQ (BX)(BX*2), CX")
	}
	if k.streams > 5 {
		g.op("LEAQ (BX)(BX*4), DX")
		g.op("LEAQ (CX)(BX*4), R8")
	}
	strm := "DI"
	if k.srcStrm {
		strm = "SI"
	}
	base8 := map[string]string{"SI": "R9", "DI": "R10"}[strm]
	if k.streams > 8 && k.passes < 2 {
		g.op("LEAQ (%s)(BX*8), %s", strm, base8)
	}
	g.used = [16]bool{}
	for _, c := range k.constants(g.avx) {
		r := constReg[c]
		g.used[r] = true
		if g.avx {
			g.op("VPBROADCASTQ %s<>(SB), Y%d", c, r)
		} else {
			g.op("MOVOU %s<>(SB), X%d", c, r)
		}
	}
	reserved := g.used
	advance := func() {
		g.op("ADDQ $%d, SI", k.srcStep*lanes)
		g.op("ADDQ $%d, DI", k.dstStep*lanes)
		if k.streams > 8 {
			g.op("ADDQ $%d, %s", 16*lanes, base8)
		}
	}
	body := func(pass int) {
		k.body(g, pass)
		if g.used != reserved {
			log.Fatalf("%s: registers leaked", name)
		}
	}
	if k.passes < 2 {
		fmt.Fprintf(&g.b, "\nloop:\n")
		body(0)
		advance()
		g.op("DECQ AX")
		g.op("JNZ loop")
	} else {
		// Chunks of up to a few cache lines per stream, each done in two passes
		// that touch 8 streams each: 16 streams at a stride that is a
		// multiple of 4 KiB would share one L1 set and thrash it.
		cnt := map[string]string{"R9": "R10", "R10": "R9"}[base8]
		fmt.Fprintf(&g.b, "\nouter:\n")
		chunk := unshuffleChunk
		if !k.srcStrm {
			chunk = shuffleChunk
		}
		g.op("MOVQ $%d, R13", chunk/(16*lanes))
		g.op("CMPQ AX, R13")
		g.op("CMOVQLT AX, R13")
		g.op("MOVQ SI, R11")
		g.op("MOVQ DI, R12")
		for pass := 0; pass < 2; pass++ {
			if pass == 1 {
				g.op("MOVQ R11, SI")
				g.op("MOVQ R12, DI")
			}
			g.op("MOVQ R13, %s", cnt)
			g.op("LEAQ (%s)(BX*8), %s", strm, base8)
			fmt.Fprintf(&g.b, "\npass%d:\n", pass)
			body(pass)
			advance()
			g.op("DECQ %s", cnt)
			g.op("JNZ pass%d", pass)
		}
		g.op("SUBQ R13, AX")
		g.op("JNZ outer")
	}
	fmt.Fprintf(&g.b, "\ndone:\n")
	if g.avx {
		g.op("VZEROUPPER")
	}
	g.op("RET")
	fmt.Fprintf(&g.b, "\n")
}

const header = `// Code generated by go run gen.go; DO NOT EDIT.

//go:build amd64 && !purego

`

func asmFile(avx bool, suffix, comment string, ks []kernel) []byte {
	g := &gen{avx: avx}
	g.b.WriteString(header)
	g.b.WriteString(comment)
	g.b.WriteString("\n#include \"textflag.h\"\n\n")
	used := map[string]bool{}
	for _, k := range ks {
		for _, c := range k.constants(avx) {
			used[c] = true
		}
	}
	var names []string
	for c := range used {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		n := 8
		if !avx {
			n = 16
		}
		for off := 0; off < n; off += 8 {
			fmt.Fprintf(&g.b, "DATA %s<>+%d(SB)/8, $%s\n", c, off, constData[c])
		}
		fmt.Fprintf(&g.b, "GLOBL %s<>(SB), RODATA|NOPTR, $%d\n\n", c, n)
	}
	for _, k := range ks {
		g.function(k, suffix)
	}
	return g.b.Bytes()
}

const commonComment = `// Byte shuffle kernels; one iteration handles %[1]s elements.
//
// unshuffleT (decode) loads %[2]s bytes of each of the T streams and
// interleaves them with log2(T) rounds of unpack instructions (bytes, then
// 16-bit, 32-bit and 64-bit units), each round pairing adjacent registers.
//
// shuffleT (encode) loads T*%[2]s bytes and splits them into streams.%[3]s
// For T = 16 both directions are the same 16x16 byte transpose (4 unpack
// rounds), done in two passes of 8 output registers each (the register file
// holds 16), chunk by chunk so each pass touches only 8 streams: 16 streams
// at a stride that is a multiple of 4 KiB share one L1 set and thrash it.
//
// bitTrans/bitUntrans are the bit shuffle kernels: a row of bytes is split
// as by shuffle8, so register m holds byte m of each 8-byte group, then
// three delta-swap rounds (t = ((a>>s)^b)&mask; b ^= t; a ^= t<<s with
// s = 1, 2, 4 and masks 0x55, 0x33, 0x0f) transpose the 8x8 bit matrix that
// the 8 registers form in every byte position, so register k holds bit
// plane k. bitUntrans runs the same steps backwards (the bit transpose is
// its own inverse, and the split becomes unshuffle8's interleave).
//
// Arguments: dst, src, stride (the distance between streams or planes) and
// blocks (the number of iterations, at least 1 to do anything).
`

const ssePack = `
// T = 2 uses a "pack" round: the even bytes of two registers (PAND 0x00ff,
// PACKUSWB) and their odd bytes (PSRLW 8, PACKUSWB). T = 4 and 8 use four
// rounds of PUNPCKL/HBW on registers k and k+n/2: each is a perfect shuffle
// of the index bits, and four of them undo the interleave of 16 elements;
// with two-operand SSE2 forms this beat the log2(T) pack rounds.`

const avxPack = `
// T = 2, 4, 8 use log2(T) "pack" rounds: the even bytes of two registers
// (VPAND 0x00ff, VPACKUSWB) and their odd bytes (VPSRLW 8, VPACKUSWB).`

const avxComment = `//
// AVX2: the SSE2 algorithm runs in each 128-bit lane, lane 0 on elements
// 0..15 of a group of 32 and lane 1 on 16..31. Element-side loads fill the
// upper lane with VINSERTI128 (no shuffle needed on the stream side);
// element-side results are recombined with VPERM2I128 into 32-byte stores,
// issued in address order.
`

const gatherComment = `//
// unshuffle8GatherAVX2 is unshuffle8AVX2 with each of the 8 streams at its
// own address (an array of 8 pointers, each advanced by 32 bytes per
// iteration): UnshuffleStreams reads stored streams where they lie.
// unshuffle4GatherAVX2 is the same for 4 streams.
//
// unshuffle4RowsAVX2 and unshuffle8RowsAVX2 unshuffle rows of items from
// byte planes (plane j at planes+j*n) to rows apart in dst: per row the
// gather loop over its whole groups of 32 items, then the group that ends
// with the row, which overlaps the last one (it stores the same bytes
// again) instead of running past the row; rows need 32 items or more.
`

func declFile(ks, avxOnly []kernel) []byte {
	var b bytes.Buffer
	b.WriteString("// Code generated by go run gen.go; DO NOT EDIT.\n\n//go:build amd64 && !purego\n\npackage shuffle\n")
	for _, suffix := range []string{"SSE2", "AVX2"} {
		all := ks
		if suffix == "AVX2" {
			all = append(all[:len(all):len(all)], avxOnly...)
		}
		for _, k := range all {
			sig := "dst, src *byte, stride, blocks int"
			if k.gather {
				sig = fmt.Sprintf("dst *byte, streams *[%d]*byte, blocks int", k.streams)
			}
			if k.rows {
				sig = "dst, planes *byte, n, items, rows, skip, stride int"
			}
			fmt.Fprintf(&b, "\n// %s\n//\n//go:noescape\nfunc %s%s(%s)\n",
				strings.Replace(k.doc, k.name, k.name+suffix, 1), k.name, suffix, sig)
		}
	}
	return b.Bytes()
}

func main() {
	var ks []kernel
	for _, t := range []int{2, 4, 8, 16} {
		ks = append(ks, shuffleKernel(t), unshuffleKernel(t))
	}
	ks = append(ks, bitTransKernel(), bitUntransKernel())
	// Only AVX2 gathers and rows, for typesizes 4 and 8: the fast paths
	// of UnshuffleStreams and UnshufflePlanesRows.
	avxOnly := []kernel{gatherKernel(4), gatherKernel(8), rowsKernel(4), rowsKernel(8)}
	files := map[string][]byte{
		"kernels_sse2_amd64.s": asmFile(false, "SSE2", fmt.Sprintf(commonComment, "16", "16", ssePack), ks),
		"kernels_avx2_amd64.s": asmFile(true, "AVX2", fmt.Sprintf(commonComment, "32", "32", avxPack)+avxComment+gatherComment,
			append(ks[:len(ks):len(ks)], avxOnly...)),
		"kernels_amd64.go": declFile(ks, avxOnly),
	}
	for name, data := range files {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
