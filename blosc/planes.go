package blosc

import (
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
	if err := c.decodeStreams(dst[:bl:bl], i, nil, lay.nstreams); err != nil {
		return fmt.Errorf("block %d: %w", i, err)
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
