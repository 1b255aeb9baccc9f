package blosc

import "github.com/pierrec/lz4/v4"

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
	si, di := 0, 0
	for si < len(src) {
		tok := src[si]
		si++
		lit := int(tok >> 4)
		if lit == 15 {
			for {
				if si >= len(src) {
					return 0, 0, false
				}
				x := src[si]
				si++
				lit += int(x)
				if x != 255 {
					break
				}
			}
		}
		si += lit
		di += lit
		if si >= len(src) {
			return 0, 0, false // the last sequence: literals only
		}
		si += 2 // the match offset
		ml := int(tok & 15)
		if ml == 15 {
			for {
				if si >= len(src) {
					return 0, 0, false
				}
				x := src[si]
				si++
				ml += int(x)
				if x != 255 {
					break
				}
			}
		}
		if si > len(src) {
			return 0, 0, false
		}
		di += ml + 4
		if di >= need {
			return si, di, true
		}
	}
	return 0, 0, false
}

// decodeLZ4Prefix decodes at least the first need bytes of the LZ4 block
// src, whose whole output is len(dst) bytes, into dst. A block cut after
// one of its matches is itself a block that decodes to the prefix of the
// whole block's output up to that match's end (LZ4 sequences only refer
// back), so pierrec's decoder decodes the cut block into dst[:m:m], and
// writes nothing past it. When no cut fits (the prefix is the whole
// block, or the cut block does not decode to exactly m bytes) the block
// decodes whole, as decodeLZ4 does.
func decodeLZ4Prefix(dst, src, dict []byte, need int) error {
	if need < len(dst) {
		if cut, m, ok := lz4Cut(src, need); ok && m <= len(dst) {
			var n int
			var err error
			if dict != nil {
				n, err = lz4.UncompressBlockWithDict(src[:cut], dst[:m:m], dict)
			} else {
				n, err = lz4.UncompressBlock(src[:cut], dst[:m:m])
			}
			if err == nil && n == m {
				return nil
			}
		}
	}
	return decodeLZ4(dst[:len(dst):len(dst)], src, dict)
}
