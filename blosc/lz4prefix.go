package blosc

import "github.com/pierrec/lz4/v4"

// lz4Walker is where a walk of an LZ4 block's sequences stopped: at the
// start of a sequence, si bytes into the block, whose output starts di
// bytes into the block's output. The walk can go on over a longer prefix
// of the block, so that a block read in parts is walked once.
type lz4Walker struct{ si, di int }

// What a walk of a prefix of an LZ4 block found.
const (
	lz4Found = iota // a cut that decodes to at least need bytes
	lz4More         // the prefix ends first: walk a longer one
	lz4Whole        // no cut fits (or the block does not parse): decode it whole
)

// cut walks src, a prefix of an LZ4 block (the whole block when
// complete), from where the walk stopped, looking for the end of the
// first sequence whose match ends at or after need bytes of output: it
// returns that end (cut) and the output length m that src[:cut] decodes
// to, with lz4Found. A sequence that runs past the end of an incomplete
// prefix gives lz4More (the walk then stops at its start); in a complete
// block, the last sequence (literals only) or a sequence that does not
// parse gives lz4Whole. It reads src only and writes nothing.
func (w *lz4Walker) cut(src []byte, need int, complete bool) (cut, m, found int) {
	short := lz4More
	if complete {
		short = lz4Whole
	}
	// si, di: the start of the sequence being walked (kept in registers,
	// stored back on return).
	si, di, n := w.si, w.di, len(src)
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
		p += lit
		if p >= n {
			break // the last sequence (literals only), or more to read
		}
		p += 2 // the match offset
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
		if p > n {
			break
		}
		si, di = p, di+lit+ml+4
		if di >= need {
			w.si, w.di = si, di
			return si, di, lz4Found
		}
	}
	w.si, w.di = si, di
	return 0, 0, short
}

// lz4Cut finds where an LZ4 block may be cut so that it decodes to a
// prefix of its output of at least need bytes: it walks the block's
// sequences (token, literals, offset, match length) without decoding them
// and returns the length of src up to the end of the first sequence whose
// match ends at or after need, and the output length m that prefix
// decodes to. ok is false when no such sequence exists (the block's last
// sequence, which has literals only, is reached first: the whole block is
// needed) or the block does not parse; the caller then decodes it whole,
// which reports a broken block. It reads src only and writes nothing.
func lz4Cut(src []byte, need int) (cut, m int, ok bool) {
	var w lz4Walker
	cut, m, found := w.cut(src, need, true)
	return cut, m, found == lz4Found
}

// decodeLZ4Cut decodes src, an LZ4 block cut after one of its matches,
// which decodes to m bytes, into dst[:m:m], reporting whether it did: a
// block cut after one of its matches is itself a block that decodes to
// the prefix of the whole block's output up to that match's end (LZ4
// sequences only refer back), and pierrec's decoder writes nothing past
// m.
func decodeLZ4Cut(dst, src, dict []byte, m int) bool {
	if m > len(dst) {
		return false
	}
	var n int
	var err error
	if dict != nil {
		n, err = lz4.UncompressBlockWithDict(src, dst[:m:m], dict)
	} else {
		n, err = lz4.UncompressBlock(src, dst[:m:m])
	}
	return err == nil && n == m
}

// decodeLZ4Prefix decodes at least the first need bytes of the LZ4 block
// src, whose whole output is len(dst) bytes, into dst: the block cut
// after the first match that reaches need (see lz4Cut, decodeLZ4Cut).
// When no cut fits (the prefix is the whole block, or the cut block does
// not decode to exactly m bytes) the block decodes whole, as decodeLZ4
// does.
func decodeLZ4Prefix(dst, src, dict []byte, need int) error {
	if need < len(dst) {
		if cut, m, ok := lz4Cut(src, need); ok && decodeLZ4Cut(dst, src[:cut], dict, m) {
			return nil
		}
	}
	return decodeLZ4(dst[:len(dst):len(dst)], src, dict)
}
