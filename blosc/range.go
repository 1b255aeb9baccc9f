package blosc

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/bloscfs/bloscfs/shuffle"
)

// DecodeBlockRange writes bytes [from, from+len(dst)) of decoded block i
// into dst, decoding no more of the block than those bytes need where the
// block's layout allows it: with no filter or a byte shuffle alone, each
// stream is decoded only up to the last element the range holds (LZ4
// streams stop early, stored streams are read only where the range lies,
// other codecs decode their streams whole) and only the range is
// unshuffled. A cold read of 4 KiB in a 1 MiB block then touches a few
// KiB of memory instead of decoding a mebibyte into fresh memory. Other
// blocks (bitshuffle, delta, byte delta, variable-length blocks) decode
// whole into scratch memory and the range is copied out. Nothing is
// written outside dst[:len(dst)].
func (c *Chunk) DecodeBlockRange(dst []byte, i, from int) error {
	return c.DecodeBlockRangeRest(dst, nil, i, from)
}

// DecodeBlockRangeRest is DecodeBlockRange that also writes the bytes
// that follow the range, [from+len(dst), from+len(dst)+len(rest)), to
// rest, from the same decode: a sequential reader whose reads are not
// aligned with the blocks (an NPY header in front of a Zarr array's
// chunks) takes most of a block straight into its read's buffer and
// keeps the few bytes after it for its next read. Nothing is written
// outside dst[:len(dst)] and rest[:len(rest)].
func (c *Chunk) DecodeBlockRangeRest(dst, rest []byte, i, from int) error {
	if i < 0 || i >= c.nblocks {
		return fmt.Errorf("blosc: block %d out of range [0,%d)", i, c.nblocks)
	}
	bl := c.BlockLen(i)
	if from < 0 || from > bl || len(dst) > bl-from || len(rest) > bl-from-len(dst) {
		return fmt.Errorf("blosc: range [%d,%d) outside block %d of %d bytes", from, from+len(dst)+len(rest), i, bl)
	}
	ws := [2]Window{{From: from, Dst: dst[:len(dst):len(dst)]}, {From: from + len(dst), Dst: rest[:len(rest):len(rest)]}}
	if len(dst)+len(rest) == 0 {
		return nil
	}
	return c.decodeWindows(i, ws[:])
}

// DecodeBlockWindows writes bytes of decoded block i to windows ws,
// which must follow one another in the block (each starts at or after
// the end of the one before): window w gets bytes [w.From,
// w.From+len(w.Dst)), or a window of rows its rows (see Window). As
// DecodeBlockRange, it decodes no more of the block than the windows
// need where the block's layout allows it, and unshuffles only their
// bytes, straight into them: the rows of an N-D array's chunk that one
// read of its view takes decode into their places in the read, a
// window of rows through one call of the shuffle kernel. Nothing is
// written outside the windows' rows.
func (c *Chunk) DecodeBlockWindows(i int, ws []Window) error {
	if i < 0 || i >= c.nblocks {
		return fmt.Errorf("blosc: block %d out of range [0,%d)", i, c.nblocks)
	}
	bl, end := c.BlockLen(i), 0
	for k := range ws {
		w := &ws[k]
		if w.Rows > 1 {
			if w.N <= 0 || w.Skip < w.N || w.Stride < w.N || w.From < end || w.From > bl-w.N ||
				w.Rows-1 > (bl-w.From-w.N)/w.Skip || w.Rows-1 > (len(w.Dst)-w.N)/w.Stride {
				return fmt.Errorf("blosc: window of %d rows of %d bytes from %d (skip %d, stride %d, %d bytes of room) outside block %d of %d bytes, or before the window before it",
					w.Rows, w.N, w.From, w.Skip, w.Stride, len(w.Dst), i, bl)
			}
			n := (w.Rows-1)*w.Stride + w.N
			w.Dst = w.Dst[:n:n]
			end = w.end()
			continue
		}
		if w.From < end || w.From > bl || len(w.Dst) > bl-w.From {
			return fmt.Errorf("blosc: window [%d,%d) outside block %d of %d bytes, or before the window before it", w.From, w.From+len(w.Dst), i, bl)
		}
		w.Rows = 0
		w.Dst = w.Dst[:len(w.Dst):len(w.Dst)]
		end = w.From + len(w.Dst)
	}
	if len(ws) == 0 || end == ws[0].From {
		return nil
	}
	return c.decodeWindows(i, ws)
}

// decodeWindows is DecodeBlockWindows on checked windows, the last of
// which ends past the first's start.
func (c *Chunk) decodeWindows(i int, ws []Window) error {
	bl := c.BlockLen(i)
	off := c.BlockOffset(i)
	switch {
	case c.Special() != SpecialNone:
		for _, w := range ws {
			for r := range w.rows() {
				if c.value != nil {
					fillPattern(w.row(r), c.value, off+int64(w.rowFrom(r)))
				} else {
					clear(w.row(r))
				}
			}
		}
		return nil
	case c.Memcpyed():
		for _, w := range ws {
			for r := range w.rows() {
				if d := w.row(r); len(d) > 0 {
					if err := c.readAt(d, int64(c.Len())+off+int64(w.rowFrom(r))); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if ws[0].Rows <= 1 && ws[0].From == 0 && len(ws[0].Dst) == bl {
		return c.DecodeBlock(ws[0].Dst, i)
	}
	if lay, ok := c.rangeLayout(i); ok {
		if err := c.decodeRangeStreams(ws, i, lay); err != nil {
			return fmt.Errorf("block %d: %w", i, err)
		}
		return nil
	}
	bp := getBuf(bl)
	defer putBuf(bp)
	if err := c.DecodeBlock(*bp, i); err != nil {
		return err
	}
	for _, w := range ws {
		for r := range w.rows() {
			copy(w.row(r), (*bp)[w.rowFrom(r):])
		}
	}
	return nil
}

// A Window is where bytes [From, From+len(Dst)) of a decoded block go
// (see DecodeBlockWindows); or, where Rows > 1, Rows rows of N bytes:
// row r the block's bytes from From+r*Skip to Dst[r*Stride:r*Stride+N]
// (Skip and Stride at least N, Dst running on to the end of the last
// row). A chunk's rows that one read of an N-D array's view takes lie
// so: Skip the chunk's row length, Stride the view's.
type Window struct {
	From int
	Dst  []byte
	// Rows, N, Skip and Stride describe a window of rows (Rows > 1).
	Rows, N, Skip, Stride int
}

// rows returns the window's number of rows.
func (w *Window) rows() int { return max(w.Rows, 1) }

// rowFrom returns where row r starts in the block.
func (w *Window) rowFrom(r int) int { return w.From + r*w.Skip }

// row returns where row r goes.
func (w *Window) row(r int) []byte {
	if w.Rows <= 1 {
		return w.Dst
	}
	return w.Dst[r*w.Stride : r*w.Stride+w.N]
}

// end returns where the window's last row ends in the block.
func (w *Window) end() int {
	if w.Rows <= 1 {
		return w.From + len(w.Dst)
	}
	return w.From + (w.Rows-1)*w.Skip + w.N
}

// layout is how a block's bytes lie in its streams, for a range decode.
type layout struct {
	nstreams int // streams of the block (1 or the typesize)
	sts      int // typesize of the byte shuffle to undo, 1 for none
}

// rangeLayout returns the layout of block i, and whether DecodeBlockRange
// can decode part of it.
func (c *Chunk) rangeLayout(i int) (layout, bool) {
	if c.vlOff != nil || c.decode == nil || c.bstarts == nil || c.NeedsBlock0() {
		return layout{}, false
	}
	sts := 1
	if c.activeFilters() {
		s, ok := c.shuffleOnly()
		if !ok {
			return layout{}, false
		}
		sts = s
	}
	bsize := c.BlockLen(i)
	ts := int(c.Typesize)
	leftover := i == c.nblocks-1 && int(c.Nbytes)%c.blocksize != 0
	split := c.Flags&flagDontSplit == 0 && !leftover
	if c.Version <= VersionBlosc1 && split && !(ts <= 16 && bsize/ts >= 128) {
		return layout{}, false // stored either way (FORMATS P3): decodeFrom tries both
	}
	if !split {
		ts = 1
	}
	if ts > 1 && (bsize%ts != 0 || (sts > 1 && sts != ts)) {
		return layout{}, false
	}
	return layout{nstreams: ts, sts: sts}, true
}

// blockSrc gives the compressed bytes of one block: all of them when
// they are in memory (or lent in place), else read from the chunk's
// reader on demand, into a buffer laid out as the block, so that a range
// decode reads only the stream headers and the parts it needs.
type blockSrc struct {
	mem   []byte // the block's bytes, when in memory
	c     *Chunk
	r     io.ReaderAt // the reader of c, held open when it can be
	start int64       // the block's offset in the chunk
	buf   []byte      // read mode: the block's bytes where read
	spans [][2]int    // read mode: the ranges of buf read
}

// headAhead is the least a read-mode blockSrc reads at a stream's
// header: a small compressed stream, and the header after it, come with
// it. The part of a stored stream that a range needs is read alone: a
// 4 KiB range of a block of eight stored streams reads 4 KiB of them.
const headAhead = 1 << 10

// base returns the block's bytes (valid where get made them so).
func (s *blockSrc) base() []byte {
	if s.mem != nil {
		return s.mem
	}
	return s.buf
}

// get returns the block's bytes [lo, hi), reading at least ahead bytes
// when it reads.
func (s *blockSrc) get(lo, hi, ahead int) ([]byte, error) {
	b := s.base()
	if lo < 0 || hi < lo || hi > len(b) {
		return nil, fmt.Errorf("%w: stream bytes [%d,%d) past the block's %d", ErrCorrupt, lo, hi, len(b))
	}
	if s.mem != nil || lo == hi {
		return b[lo:hi], nil
	}
	for _, sp := range s.spans {
		if sp[0] <= lo && hi <= sp[1] {
			return b[lo:hi], nil
		}
	}
	end := min(max(hi, lo+ahead), len(b))
	if err := readFull(s.r, b[lo:end], s.start+int64(lo)); err != nil {
		return nil, err
	}
	if len(s.spans) < 32 {
		s.spans = append(s.spans, [2]int{lo, end})
	} else {
		s.spans[len(s.spans)-1] = [2]int{lo, end}
	}
	return b[lo:hi], nil
}

// readTo reads the block's bytes [lo, lo+len(p)) into p, in read mode,
// where the block's layout is not needed (a stored stream's part).
func (s *blockSrc) readTo(p []byte, lo int) error {
	if lo < 0 || lo+len(p) > len(s.buf) {
		return fmt.Errorf("%w: stream bytes [%d,%d) past the block's %d", ErrCorrupt, lo, lo+len(p), len(s.buf))
	}
	return readFull(s.r, p, s.start+int64(lo))
}

// lz4WholeRead is the size up to which a read-mode blockSrc reads an LZ4
// stream whole even when a range needs only a prefix of its output:
// another read would cost more than the bytes it saves. (A variable for
// the tests, which read the fixtures' small streams in parts.)
var lz4WholeRead = 16 << 10

// decodeLZ4Range writes at least bytes [from, need) of the output of the
// LZ4 stream at [pos, pos+csize) of the block to dst[from:need], where
// dst holds the stream's whole output (and perhaps more of dst). It walks
// the stream up to the first match that reaches need (lz4Walker); the
// range is then resolved from the literals the walk recorded where that
// pays (resolveLZ4), or the prefix decoded (decodeLZ4Cut). A stream with
// no such match decodes whole. In read mode it reads only a prefix of a
// large stream: a guess from the share of the output needed, then twice
// as much each time the prefix does not hold the cut (the walk goes on
// where it stopped). A resolved range goes to part[from:need] instead
// where part is not nil (a compact view, as long as dst, of which
// nothing else is written), and resolved reports that it went there.
func (s *blockSrc) decodeLZ4Range(dst, part []byte, pos, csize int, dict []byte, from, need int) (resolved bool, err error) {
	if need >= len(dst) {
		cs, err := s.get(pos, pos+csize, 0)
		if err != nil {
			return false, err
		}
		return false, decodeLZ4(dst[:len(dst):len(dst)], cs, dict)
	}
	to, toPart := dst, part != nil && len(part) == len(dst)
	if toPart {
		to = part
	}
	n := csize
	if s.mem == nil && csize > lz4WholeRead {
		n = min(csize, int(int64(csize)*int64(need)/int64(len(dst)))*5/4+4<<10)
	}
	var rec *lz4Rec
	if wantResolve(dict, from, need) {
		rec = getLZ4Rec()
		defer putLZ4Rec(rec)
	}
	var w lz4Walker
	for got := 0; ; {
		if _, err := s.get(pos+got, pos+n, 0); err != nil {
			return false, err
		}
		got = n
		cs := s.base()[pos : pos+n]
		var cut, m, found int
		if rec != nil {
			cut, m, found = w.cutRecord(cs, need, n == csize, rec)
		} else {
			cut, m, found = w.cut(cs, need, n == csize)
		}
		if found == lz4Found {
			if rec != nil && resolveLZ4(to, cs, rec, from, need, m) {
				return toPart, nil
			}
			if decodeLZ4Cut(dst, cs[:cut], dict, m) {
				return false, nil
			}
		}
		if found != lz4More {
			break
		}
		n = min(csize, 2*n)
	}
	cs, err := s.get(pos, pos+csize, 0)
	if err != nil {
		return false, err
	}
	return false, decodeLZ4(dst[:len(dst):len(dst)], cs, dict)
}

// A Holder is an io.ReaderAt each of whose reads opens its object anew
// (a file read by name). Hold returns a reader of the same bytes that
// keeps the object open until release is called, for a burst of small
// reads: a range decode reads a block's stream headers and the parts of
// its streams it needs, a dozen reads or so.
type Holder interface {
	Hold() (r io.ReaderAt, release func(), err error)
}

// decodeRangeStreams decodes the range of block i from its streams,
// reading them from memory, in place, or in parts.
func (c *Chunk) decodeRangeStreams(ws []Window, i int, lay layout) error {
	start, end := int64(c.bstarts[i]), int64(c.bends[i])
	if c.data != nil {
		return c.decodeRange(ws, i, lay, &blockSrc{mem: c.data[start:end]})
	}
	cZstd := c.Codec() == CodecZstd && libzstd() != nil
	if ip, base, n, ok := inPlace(c.r); ok {
		if !cZstd && end <= n && end <= int64(c.Cbytes) {
			if ok, err := ip.ReadInPlace(base+start, end-start, func(src []byte) error {
				return c.decodeRange(ws, i, lay, &blockSrc{mem: src})
			}); ok {
				return err
			}
		}
		// A reader that can lend bytes may be a remote object, each of
		// whose reads is a round trip: the block's bytes in one read, as
		// a whole block decode reads them.
		sp := getBuf(int(end - start))
		defer putBuf(sp)
		if err := c.readAt(*sp, start); err != nil {
			return err
		}
		return c.decodeRange(ws, i, lay, &blockSrc{mem: *sp})
	}
	if end > int64(c.Cbytes) {
		return fmt.Errorf("%w: block ends at %d past cbytes %d", ErrCorrupt, end, c.Cbytes)
	}
	if c.Codec() != CodecLZ4 && (lay.nstreams == 1 || lay.sts > 1) {
		// Every stream decodes whole (only LZ4 stops early), and the
		// range needs every stream (one, or all the planes of a shuffle):
		// the block's bytes in one read, not a header's read and then a
		// stream's. (A zstd Zarr chunk of 32 KiB blocks, read by rows of
		// an N-D view: half as many reads.)
		sp := getBuf(int(end - start))
		defer putBuf(sp)
		if err := c.readAt(*sp, start); err != nil {
			return err
		}
		return c.decodeRange(ws, i, lay, &blockSrc{mem: *sp})
	}
	// A local file: the stream headers and the parts the range needs,
	// read one by one (through one open file where the reader opens its
	// file for each read).
	r := c.r
	if h, ok := r.(Holder); ok {
		hr, release, err := h.Hold()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		defer release()
		r = hr
	}
	bp := getBuf(int(end - start))
	defer putBuf(bp)
	var spans [8][2]int
	return c.decodeRange(ws, i, lay, &blockSrc{c: c, r: r, start: start, buf: *bp, spans: spans[:0]})
}

// decodeRange decodes the bytes of block i for windows ws, which follow
// one another, from src.
func (c *Chunk) decodeRange(ws []Window, i int, lay layout, src *blockSrc) error {
	bsize := c.BlockLen(i)
	a, b := ws[0].From, ws[len(ws)-1].end()
	nst, sts := lay.nstreams, lay.sts
	neblock := bsize / nst
	// The shuffled bytes of the block, S: plane j of element e at
	// j*N+e, then the bytes after the last whole element as they are.
	// [lo, hi) is the part of each plane (or of S) the range needs.
	N := bsize / sts
	lo, hi := a, b
	if sts > 1 {
		lo, hi = a/sts, min((b+sts-1)/sts, N)
	}
	slack := 0
	if c.Codec() == CodecZstd {
		slack = zstdSlack
	}
	sp := getBuf(bsize + slack)
	defer putBuf(sp)
	S := *sp
	var views [maxLent][]byte
	view := views[:0]
	if nst > maxLent {
		view = make([][]byte, 0, nst)
	}
	// The parts of stored split streams read from a file, and ranges of
	// LZ4 streams resolved from their literals, go to compact views:
	// stream s's view o lies in the arena so that o[slo:shi] are
	// the arena's bytes [neblock+at, neblock+at+shi-slo), at the sum of
	// the parts before it (nothing else of a view is written). A read
	// then touches the same few pages of the arena every time, where
	// parts laid out as the block touch pages at the range's offset in a
	// pooled mebibyte, each a page fault the first time (tens of
	// microseconds on a virtual machine whose hypervisor shadows the page
	// tables).
	var ap *[]byte
	defer func() {
		if ap != nil {
			putBuf(ap)
		}
	}()
	at := 0
	compact := func(slo, shi int) []byte {
		if nst == 1 {
			return nil
		}
		if ap == nil {
			parts := b - a // the parts' sum: the range, split among the streams
			if sts > 1 {
				parts = nst * (hi - lo)
			}
			ap = getBuf(2*neblock + parts)
		}
		x := neblock + at - slo
		if x < 0 || x+neblock > len(*ap) {
			return nil
		}
		at += shi - slo
		return (*ap)[x : x+neblock : x+neblock]
	}
	ext := c.Extended()
	pos := 0
	for s := 0; s < nst; s++ {
		// The bytes of stream s the range needs: [slo, shi).
		slo, shi := 0, 0
		switch {
		case nst == 1 && sts > 1:
			slo, shi = lo, (sts-1)*N+hi
			if b > N*sts {
				shi = b
			}
		case nst == 1 || sts > 1:
			slo, shi = lo, hi
		default: // split streams, no shuffle: stream s is S[s*neblock:]
			slo, shi = max(a-s*neblock, 0), min(b-s*neblock, neblock)
		}
		hd, err := src.get(pos, pos+4, headAhead)
		if err != nil {
			return fmt.Errorf("stream %d header: %w", s, err)
		}
		csize := int32(binary.LittleEndian.Uint32(hd))
		pos += 4
		o := S[s*neblock : (s+1)*neblock]
		need := shi > slo
		switch {
		case ext && csize == 0:
			if need {
				clear(o[slo:shi])
			}
		case ext && csize < 0:
			t, err := src.get(pos, pos+1, 0)
			if err != nil {
				return fmt.Errorf("stream %d run token: %w", s, err)
			}
			if t[0]&1 == 0 {
				return fmt.Errorf("%w: stream %d run token %#02x", ErrUnsupported, s, t[0])
			}
			pos++
			if need {
				fillByte(o[slo:shi], byte(-csize))
			}
		case csize <= 0 || int(csize) > len(src.base())-pos:
			return fmt.Errorf("%w: stream %d csize %d with %d bytes left", ErrCorrupt, s, csize, len(src.base())-pos)
		case int(csize) == neblock:
			o = nil
			if need && src.mem == nil {
				if o = compact(slo, shi); o != nil {
					if err := src.readTo(o[slo:shi], pos+slo); err != nil {
						return err
					}
				}
			}
			if o == nil {
				if need {
					if _, err := src.get(pos+slo, pos+shi, 0); err != nil {
						return err
					}
				}
				o = src.base()[pos : pos+neblock : pos+neblock]
			}
			pos += neblock
		default:
			if need {
				// o's capacity runs to the end of S: the streams after
				// it, written afterwards, and the scratch slack.
				var err error
				if c.Codec() == CodecLZ4 {
					// A range resolved from the literals goes to a compact
					// view too (see compact); a prefix decoded, to o.
					var part []byte
					if wantResolve(c.dict, slo, shi) {
						part = compact(slo, shi)
					}
					var resolved bool
					if resolved, err = src.decodeLZ4Range(o, part, pos, int(csize), c.dict, slo, shi); resolved {
						o = part
					}
				} else {
					var cs []byte
					if cs, err = src.get(pos, pos+int(csize), 0); err != nil {
						return err
					}
					err = c.decode(o, cs, c.dict)
				}
				if err != nil {
					return fmt.Errorf("%w: stream %d (%s, %d→%d bytes): %v", ErrCorrupt, s, CodecName(c.Codec()), csize, neblock, err)
				}
			}
			pos += int(csize)
		}
		view = append(view, o)
	}
	if sts == 1 {
		for _, w := range ws {
			for r := range w.rows() {
				d := w.row(r)
				a := w.rowFrom(r)
				b := a + len(d)
				for s, o := range view {
					if s*neblock < b && (s+1)*neblock > a {
						copy(d[max(s*neblock-a, 0):], o[max(a-s*neblock, 0):min(b-s*neblock, neblock)])
					}
				}
			}
		}
		return nil
	}
	var planes [maxLent][]byte
	pl := planes[:0]
	if sts > maxLent {
		pl = make([][]byte, 0, sts)
	}
	for j := range sts {
		if nst > 1 {
			pl = append(pl, view[j])
		} else {
			pl = append(pl, view[0][j*N:(j+1)*N])
		}
	}
	for _, w := range ws {
		if w.Rows > 1 && nst == 1 && w.end() <= N*sts {
			// The rows' bytes from the planes, all in one call.
			UnshufflePlanesRows(w.Dst, w.Stride, view[0][:N*sts], sts, w.From, w.N, w.Rows, w.Skip)
			continue
		}
		for r := range w.rows() {
			d := w.row(r)
			a := w.rowFrom(r)
			b := a + len(d)
			unshuffleRange(d, pl, a, min(b, N*sts))
			for p := max(a, N*sts); p < b; p++ { // bytes after the last element
				d[p-a] = view[0][p]
			}
		}
	}
	return nil
}

// unshuffleRange writes bytes [a, b) of the unshuffled elements whose
// byte planes are planes (plane j holds byte j of every element) to
// dst[0:b-a]. Whole elements go through the SIMD kernels; the bytes of
// the elements cut by a and b are set one by one.
func unshuffleRange(dst []byte, planes [][]byte, a, b int) {
	t := len(planes)
	if a >= b {
		return
	}
	ea, eb := (a+t-1)/t, b/t // the whole elements in [a, b)
	if ea >= eb {
		for p := a; p < b; p++ {
			dst[p-a] = planes[p%t][p/t]
		}
		return
	}
	for p := a; p < ea*t; p++ {
		dst[p-a] = planes[p%t][p/t]
	}
	for p := eb * t; p < b; p++ {
		dst[p-a] = planes[p%t][p/t]
	}
	mid := dst[ea*t-a : eb*t-a]
	if shuffle.CanUnshuffleStreams(t) {
		var ws [maxLent][]byte
		w := ws[:0]
		if t > maxLent {
			w = make([][]byte, 0, t)
		}
		for _, p := range planes {
			w = append(w, p[ea:eb])
		}
		shuffle.UnshuffleStreams(mid, w)
		return
	}
	m := eb - ea
	tp := getBuf(m * t)
	defer putBuf(tp)
	tmp := *tp
	for j, p := range planes {
		copy(tmp[j*m:(j+1)*m], p[ea:eb])
	}
	shuffle.Unshuffle(mid, tmp, t)
}
