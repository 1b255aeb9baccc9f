package blosc

import (
	"encoding/binary"
	"fmt"

	"github.com/bloscfs/bloscfs/shuffle"
)

// Byte planes: a block whose only filter is a byte shuffle can be kept
// decoded but not yet unshuffled, as its planes (byte j of every item,
// for each j), and any range of it unshuffled from there straight into
// where it goes. A reader that takes a block in many small pieces at
// different times (the rows of an N-D array's chunk, over the reads of
// its view) then writes each byte once, into its place, instead of
// unshuffling the whole block into memory and copying every piece out.

// PlanesTypesize returns the item size ts > 1 of the byte planes that
// DecodeBlockPlanes leaves block i in, or 1 where it decodes the block
// as DecodeBlockRef does: a block with other filters (or none), a delta
// reference, variable-length blocks, a special or memcpyed chunk, or a
// length that is not a whole number of items.
func (c *Chunk) PlanesTypesize(i int) int {
	if i < 0 || i >= c.nblocks || c.Special() != SpecialNone || c.Memcpyed() {
		return 1
	}
	lay, ok := c.rangeLayout(i)
	if !ok || lay.sts <= 1 || c.BlockLen(i)%lay.sts != 0 {
		return 1
	}
	return lay.sts
}

// DecodeBlockPlanes decodes block i into dst[:BlockLen(i)] as its byte
// planes, where PlanesTypesize(i) = ts > 1: plane j, bytes
// [j*n, (j+1)*n) of dst for n = BlockLen(i)/ts, holds byte j of each of
// the block's n items. UnshufflePlanes reads any range of the block from
// them. Other blocks decode as DecodeBlockRef decodes them (with no
// delta reference: a block that needs one is an error).
func (c *Chunk) DecodeBlockPlanes(dst []byte, i int) error {
	if c.PlanesTypesize(i) == 1 {
		return c.DecodeBlockRef(dst, i, nil)
	}
	bl := c.BlockLen(i)
	if len(dst) < bl {
		return fmt.Errorf("blosc: destination of %d bytes for block %d of %d", len(dst), i, bl)
	}
	lay, _ := c.rangeLayout(i)
	var err error
	if c.readsStreams(i, lay.nstreams) {
		err = c.readPlanes(dst[:bl:bl], i, lay.nstreams)
	} else {
		err = c.decodeStreams(dst[:bl:bl], i, nil, lay.nstreams)
	}
	if err != nil {
		return fmt.Errorf("block %d: %w", i, err)
	}
	return nil
}

// planesPeek is how many bytes readPlanes reads after a stream's header
// with it: a small compressed stream whole, the start of a large one.
const planesPeek = 4<<10 - 4

// readsStreams reports whether DecodeBlockPlanes reads block i, split
// into n streams, stream by stream (readPlanes): its bytes come from a
// read of the chunk's reader (not memory, nor lent in place: a Zarr
// chunk file, not a mapped frame nor a remote object), its planes are
// larger than the bytes read with a header (a smaller stored plane would
// be copied out of them anyway, at up to two reads a stream), and the
// block is large enough for a stream to be stored (csize = the plane's
// size), which then goes straight into its plane.
func (c *Chunk) readsStreams(i, n int) bool {
	if n <= 1 || c.data != nil || c.bstarts == nil || c.BlockLen(i)/n <= planesPeek {
		return false
	}
	if _, _, _, ok := inPlace(c.r); ok {
		return false
	}
	cb := int64(c.bends[i]) - int64(c.bstarts[i])
	return cb >= int64(c.BlockLen(i)/n+4*n)
}

// readPlanes is DecodeBlockPlanes for a block of n split streams read
// from the chunk's reader one stream at a time: each header with the
// first bytes after it, then a stored stream's rest straight into its
// plane, a compressed stream's rest into scratch, decoded into its
// plane. Reading the block whole into scratch and copying its stored
// streams into the planes cost the copy (a float32 or float64 block of
// LZ4 streams whose low mantissa bytes do not compress: three planes of
// four, seven of eight, 6 % of reading an N-D array's view). A reader
// that can be held open (a Zarr chunk file) is held for the block's
// reads. Each zstd stream is its own call into libzstd, where
// decodeSplit gathers a block's in one: no slower on 128 KiB blocks, and
// c-blosc 1.x does not split zstd blocks.
func (c *Chunk) readPlanes(dst []byte, i, n int) error {
	start, end := int64(c.bstarts[i]), int64(c.bends[i])
	if end > int64(c.Cbytes) || end < start {
		return fmt.Errorf("%w: block ends at %d past cbytes %d", ErrCorrupt, end, c.Cbytes)
	}
	r := c.r
	if h, ok := r.(Holder); ok {
		hr, release, err := h.Hold()
		if err != nil {
			return fmt.Errorf("%w: %w: %w", ErrCorrupt, errRead, err)
		}
		defer release()
		r = hr
	}
	// read reads the block's bytes [off, off+len(p)), which lie inside it.
	read := func(p []byte, off int64) error { return readFull(r, p, start+off) }
	size := end - start
	neblock := len(dst) / n
	ext := c.Extended()
	hp := getBuf(4 + planesPeek)
	var sp *[]byte
	defer func() {
		putBuf(hp)
		if sp != nil {
			putBuf(sp)
		}
	}()
	head := *hp
	pos := int64(0)
	for s := range n {
		// o's capacity runs to the end of dst: the streams after it,
		// which this loop fills afterwards.
		o := dst[s*neblock:]
		o = o[:neblock]
		if pos+4 > size {
			return fmt.Errorf("%w: stream %d header past the block end", ErrCorrupt, s)
		}
		k := min(size-pos, int64(len(head)))
		if err := read(head[:k], pos); err != nil {
			return err
		}
		csize := int32(binary.LittleEndian.Uint32(head[:4]))
		body := head[4:k]
		pos += 4
		switch {
		case ext && csize == 0:
			clear(o)
		case ext && csize < 0:
			if len(body) == 0 {
				return fmt.Errorf("%w: stream %d run token past the block end", ErrCorrupt, s)
			}
			if body[0]&1 == 0 {
				return fmt.Errorf("%w: stream %d run token %#02x", ErrUnsupported, s, body[0])
			}
			pos++
			fillByte(o, byte(-csize))
		case csize <= 0 || int64(csize) > size-pos:
			return fmt.Errorf("%w: stream %d csize %d with %d bytes left", ErrCorrupt, s, csize, size-pos)
		case int(csize) == neblock:
			m := copy(o, body)
			if m < neblock {
				if err := read(o[m:], pos+int64(m)); err != nil {
					return err
				}
			}
			pos += int64(neblock)
		default:
			cs := body
			if int(csize) <= len(body) {
				cs = body[:csize]
			} else {
				if sp == nil || cap(*sp) < int(csize) {
					if sp != nil {
						putBuf(sp)
					}
					sp = getBuf(int(csize))
				}
				cs = (*sp)[:csize]
				m := copy(cs, body)
				if err := read(cs[m:], pos+int64(m)); err != nil {
					return err
				}
			}
			if err := c.decode(o, cs, c.dict); err != nil {
				return fmt.Errorf("%w: stream %d (%s, %d→%d bytes): %v", ErrCorrupt, s, CodecName(c.Codec()), csize, neblock, err)
			}
			pos += int64(csize)
		}
	}
	return nil
}

// UnshufflePlanes writes bytes [from, from+len(dst)) of a block of
// ts-byte items, given as its byte planes (as DecodeBlockPlanes leaves
// it), to dst.
func UnshufflePlanes(dst, planes []byte, ts, from int) {
	n := len(planes) / ts
	a, b := from, from+len(dst)
	ea, eb := (a+ts-1)/ts, b/ts // the whole items in [a, b)
	if ea >= eb {
		for p := a; p < b; p++ {
			dst[p-a] = planes[p%ts*n+p/ts]
		}
		return
	}
	for p := a; p < ea*ts; p++ { // an item cut by a
		dst[p-a] = planes[p%ts*n+p/ts]
	}
	for p := eb * ts; p < b; p++ { // an item cut by b
		dst[p-a] = planes[p%ts*n+p/ts]
	}
	shuffle.UnshufflePlanes(dst[ea*ts-a:eb*ts-a], planes, ts, n, ea, eb-ea)
}

// UnshufflePlanesRows is UnshufflePlanes for rows rows of n bytes: row r
// takes bytes [from+r*skip, from+r*skip+n) of the block, as its byte
// planes, to dst[r*stride:r*stride+n]. Rows of whole items go through
// one call of the rows kernel (shuffle.UnshufflePlanesRows).
func UnshufflePlanesRows(dst []byte, stride int, planes []byte, ts, from, n, rows, skip int) {
	if rows > 1 && from%ts == 0 && n%ts == 0 && skip%ts == 0 && len(planes)%ts == 0 {
		shuffle.UnshufflePlanesRows(dst, stride, planes, ts, len(planes)/ts, from/ts, n/ts, rows, skip/ts)
		return
	}
	for r := range rows {
		UnshufflePlanes(dst[r*stride:r*stride+n], planes, ts, from+r*skip)
	}
}
