package blosc

import (
	"sync"
)

// A cold small read of a large block needs a few hundred bytes of each
// byte plane, far into it. Where a plane's LZ4 stream is mostly literals
// (the low mantissa bytes of floating-point data: a sequence every 50
// bytes or so of output, 90 % of it literal), decoding its prefix up to
// those bytes costs far more than finding them: the walk that looks for
// the cut records each sequence it passes, and the bytes of the range are
// then taken from the literals they come from, following each match back
// to the bytes it copies (lz4Resolver). Where matches dominate (runs,
// repeated patterns: chains of copies of copies), the prefix is decoded
// as before (decodeLZ4Cut).

// lz4Seq is one sequence of an LZ4 block as the recording walk found it:
// its nlit literals at src[lit:] are output [d, d+nlit), its match, up to
// the next sequence's d, copies from off bytes back.
type lz4Seq struct{ d, lit, nlit, off int32 }

// lz4MaxSeqs bounds the sequences one recording holds (256 KiB of
// records, pooled); a prefix with more is decoded instead.
const lz4MaxSeqs = 1 << 14

// lz4Rec is what a recording walk found: the sequences it passed (each
// valid as the decoder checks it: literals inside the block, an offset
// of 1 up to the bytes output before the match), then, once a cut is
// found, the end (seqs[:len(seqs)+1]: a record whose d is the cut's
// output length), the literal bytes among their output, and whether the
// walk stopped recording (full: no resolve).
type lz4Rec struct {
	seqs []lz4Seq
	lits int
	full bool
}

var lz4RecPool = sync.Pool{New: func() any { return &lz4Rec{seqs: make([]lz4Seq, 0, 4096)} }}

func getLZ4Rec() *lz4Rec {
	r := lz4RecPool.Get().(*lz4Rec)
	r.seqs, r.lits, r.full = r.seqs[:0], 0, false
	return r
}

func putLZ4Rec(r *lz4Rec) { lz4RecPool.Put(r) }

// cutRecord is cut that also records the sequences it passes in rec,
// which must be empty on the walk's first call (a walker that starts at
// the block's start). It stops recording (rec.full), and walks on as cut
// does, where the records would not be resolved (see resolveLZ4): more
// than lz4MaxSeqs sequences, a prefix that is neither mostly literals nor
// long sequences (checked after lz4FirstCheck sequences, then every
// lz4CheckSeqs), or a sequence
// whose offset the decoder refuses (zero, or before the block's output;
// the decode of the cut then reports the error).
func (w *lz4Walker) cutRecord(src []byte, need int, complete bool, rec *lz4Rec) (cut, m, found int) {
	if rec.full {
		return w.cut(src, need, complete)
	}
	short := lz4More
	if complete {
		short = lz4Whole
	}
	si, di, n := w.si, w.di, len(src)
	seqs, k, lits := rec.seqs[:cap(rec.seqs)], len(rec.seqs), rec.lits
	defer func() { rec.seqs, rec.lits = seqs[:k], lits }()
	for si < n {
		tok := src[si]
		p := si + 1
		lit := int(tok >> 4)
		if lit == 15 {
			for {
				if p >= n {
					w.si, w.di = si, di
					return 0, 0, short
				}
				x := src[p]
				p++
				lit += int(x)
				if x != 255 {
					break
				}
			}
		}
		ls := p
		p += lit
		if p+2 > n {
			break // the last sequence (literals only), or more to read
		}
		off := int(src[p]) | int(src[p+1])<<8
		p += 2
		ml := int(tok & 15)
		if ml == 15 {
			for {
				if p >= n {
					w.si, w.di = si, di
					return 0, 0, short
				}
				x := src[p]
				p++
				ml += int(x)
				if x != 255 {
					break
				}
			}
		}
		if uint(off-1) >= uint(di+lit) || k >= len(seqs)-1 && !rec.grow(&seqs) ||
			k%lz4CheckSeqs == lz4FirstCheck && !worthResolving(lits, di, k) {
			w.si, w.di, rec.full = si, di, true
			return w.cut(src, need, complete)
		}
		seqs[k] = lz4Seq{int32(di), int32(ls), int32(lit), int32(off)}
		k++
		lits += lit
		si, di = p, di+lit+ml+4
		if di >= need {
			w.si, w.di = si, di
			seqs[k] = lz4Seq{d: int32(di)} // the end, not counted in k
			return si, di, lz4Found
		}
	}
	w.si, w.di = si, di
	return 0, 0, short
}

// grow makes room for more records in *seqs, up to lz4MaxSeqs, reporting
// whether it did.
func (r *lz4Rec) grow(seqs *[]lz4Seq) bool {
	if len(*seqs) >= lz4MaxSeqs {
		return false
	}
	s := make([]lz4Seq, min(2*len(*seqs)+64, lz4MaxSeqs))
	copy(s, *seqs)
	*seqs = s
	return true
}

// worthResolving reports whether a prefix of m bytes of output in nseq
// sequences, lits of them literals, is worth resolving rather than
// decoding: mostly literals, or long sequences.
func worthResolving(lits, m, nseq int) bool {
	return lits*lz4ResolveMin >= m || m >= lz4ResolveRun*nseq
}

// lz4Resolver takes bytes of a cut LZ4 block's output from the block's
// literals, following matches back, without decoding the block.
type lz4Resolver struct {
	src    []byte
	seqs   []lz4Seq // as recorded, the end last
	budget int      // steps left (a run of literals or of a match each)
}

// find returns the sequence whose output holds position p, which lies
// before the end of sequence hi: hi itself or one just before it (a
// match that copies from near its start, as runs do), else found by
// bisection.
func (r *lz4Resolver) find(p, hi int) int {
	if int(r.seqs[hi].d) <= p {
		return hi
	}
	if hi > 0 && int(r.seqs[hi-1].d) <= p {
		return hi - 1
	}
	lo := 0
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if int(r.seqs[mid].d) <= p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// fill writes output bytes [p, p+len(out)) to out, which lie before the
// end of sequence hi, reporting false when the budget runs out first
// (out is then partly written).
func (r *lz4Resolver) fill(out []byte, p, hi int) bool {
	for len(out) > 0 {
		if r.budget--; r.budget < 0 {
			return false
		}
		k := r.find(p, hi)
		s := r.seqs[k]
		le := int(s.d) + int(s.nlit)
		var n int
		if p < le {
			n = copy(out, r.src[int(s.lit)+p-int(s.d):int(s.lit)+int(s.nlit)])
		} else {
			// The match copies from off bytes back, overlapping itself
			// when off is short of its length: byte p is byte
			// le-off+(p-le)%off, which lies before the match. The bytes
			// up to the end of that period come from there, the next
			// period from its start, and the rest repeat them, as the
			// decoder's overlapping copy does.
			off := int(s.off)
			ph := (p - le) % off
			n = min(len(out), int(r.seqs[k+1].d)-p)
			a := min(n, off-ph)
			if !r.fill(out[:a], le-off+ph, k) {
				return false
			}
			if b := min(n, a+off); b > a {
				if !r.fill(out[a:b], le-off, k) {
					return false
				}
				for i := b; i < n; i += copy(out[i:n], out[a:i]) {
				}
			}
		}
		out, p = out[n:], p+n
	}
	return true
}

// A range is resolved instead of its prefix decoded where the literals
// are 1/lz4ResolveMin of the output or more, or the sequences are long
// (lz4ResolveRun bytes of output each on average, or more: runs, each
// resolved in a few steps); lz4ResolveSteps bounds the steps per byte of
// the range. Short matches between short literals (a sequence every dozen
// bytes) make chains of copies of copies, whose bytes the decode of the
// prefix gives sooner.
const (
	lz4ResolveMin   = 2
	lz4ResolveRun   = 64
	lz4ResolveSteps = 1
	lz4CheckSeqs    = 64 // sequences between two checks of the records
	lz4FirstCheck   = 7  // sequences before the first
)

// resolveLZ4 writes bytes [from, need) of the output of an LZ4 block to
// dst[from:need], from rec, the records of a walk of src that found a
// cut decoding to m bytes, reporting whether it did. It declines (writing
// nothing outside dst[from:need] either way) when the records ran out,
// the output is not mostly literals, m exceeds len(dst), or the chains of
// matches take more steps than the range is worth: the caller then
// decodes the prefix.
func resolveLZ4(dst, src []byte, rec *lz4Rec, from, need, m int) bool {
	if rec.full || len(rec.seqs) < 1 || m > len(dst) || need > m || from < 0 || from >= need ||
		!worthResolving(rec.lits, m, len(rec.seqs)) {
		return false
	}
	r := lz4Resolver{src: src, seqs: rec.seqs[:len(rec.seqs)+1], budget: 64 + lz4ResolveSteps*(need-from)}
	return r.fill(dst[from:need:need], from, len(rec.seqs)-1)
}

// lz4ResolveMax is the longest range resolved rather than decoded,
// lz4ResolveShare the least ratio of the prefix to it (a range that is a
// large part of its prefix decodes at least as fast), and
// lz4ResolvePrefix the shortest prefix resolved: below it the recording
// walk costs about what it saves. (In the 32 KiB planes of a 256 KiB
// block of a float64 walk as the frame writer compresses them, ranges of
// 512 bytes at random took 13.3 µs resolved against 12.0 µs decoded; in
// the 128 KiB planes of numcodecs' 1 MiB blocks, 6.2 against 9.1 µs in
// memory, and a fifth of the decode's time on cold reads.)
const (
	lz4ResolveMax    = 16 << 10
	lz4ResolveShare  = 8
	lz4ResolvePrefix = 32 << 10
)

// wantResolve reports whether bytes [from, need) of an LZ4 stream's
// output are worth resolving.
func wantResolve(dict []byte, from, need int) bool {
	return dict == nil && need >= lz4ResolvePrefix && need-from <= lz4ResolveMax && (need-from)*lz4ResolveShare <= need
}

// decodeLZ4Range writes at least bytes [from, need) of the output of the
// LZ4 block src, whose whole output is len(dst) bytes, to dst[from:need]
// (and perhaps more of dst): resolved from the block's literals where
// that pays (see lz4Resolver), else as decodeLZ4Prefix does.
func decodeLZ4Range(dst, src, dict []byte, from, need int) error {
	if need < len(dst) && wantResolve(dict, from, need) {
		rec := getLZ4Rec()
		defer putLZ4Rec(rec)
		var w lz4Walker
		cut, m, found := w.cutRecord(src, need, true, rec)
		if found == lz4Found {
			if resolveLZ4(dst, src, rec, from, need, m) || decodeLZ4Cut(dst, src[:cut], dict, m) {
				return nil
			}
		}
	}
	return decodeLZ4Prefix(dst, src, dict, need)
}
