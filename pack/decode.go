package pack

import (
	"fmt"
	"sync"

	"github.com/bloscfs/bloscfs/blosc"
)

// ChunkGetter is implemented by containers that keep their parsed chunks
// (every type that embeds a ChunkReader): DecodeRange takes chunks from
// it, so that a chunk parsed (and its checksum checked) once is not
// parsed again.
type ChunkGetter interface {
	Chunk(i int) (*blosc.Chunk, error)
}

// DecodeRange decodes the plain bytes [off, off+len(p)) of src into p on
// the calling goroutine: each chunk the range covers whole is decoded
// straight into p, block by block in order, and only a chunk the range
// covers in part goes through a scratch block for its edge blocks. It
// keeps no cache and starts no goroutine, so that callers that decode
// many ranges at once (View.WriteTo, on one goroutine per core) get one
// core's worth of work per range and nothing to coordinate. Blocks
// larger than DefaultMaxBlock are refused, as a ChunkReader without a
// cache refuses them.
//
// Errors name the chunk but not the file: callers that report them
// should read the range again through the container's ReadAt, whose
// errors say where.
func DecodeRange(src ChunkSource, p []byte, off int64) error {
	n := src.NumChunks()
	if off < 0 || off+int64(len(p)) > src.ChunkOffset(n) {
		return fmt.Errorf("%w: range [%d,%d) outside the %d plain bytes", ErrFormat, off, off+int64(len(p)), src.ChunkOffset(n))
	}
	get := src.OpenChunk
	if g, ok := src.(ChunkGetter); ok {
		get = g.Chunk
	}
	for i, pos := ChunkAt(src, off), int64(0); pos < int64(len(p)); i++ {
		cstart, cend := src.ChunkOffset(i), src.ChunkOffset(i+1)
		c, err := get(i)
		if err != nil {
			return fmt.Errorf("chunk %d: %w", i, err)
		}
		if int64(c.Nbytes) != cend-cstart {
			return fmt.Errorf("chunk %d: %w: header says %d bytes, index %d", i, ErrFormat, c.Nbytes, cend-cstart)
		}
		in := off + pos - cstart
		k := min(cend-cstart-in, int64(len(p))-pos)
		dst := p[pos : pos+k : pos+k]
		if in == 0 && k == int64(c.Nbytes) {
			err = c.Decode(dst)
		} else {
			err = decodePart(c, dst, in)
		}
		if err != nil {
			return fmt.Errorf("chunk %d: %w", i, err)
		}
		pos += k
	}
	return nil
}

// decodePart decodes the plain bytes [in, in+len(dst)) of chunk c into
// dst: blocks that lie inside whole decode in place, the edge blocks
// into scratch memory.
func decodePart(c *blosc.Chunk, dst []byte, in int64) error {
	if len(dst) == 0 {
		return nil
	}
	end := in + int64(len(dst))
	var ref []byte // decoded block 0, for the delta filter
	if c.NeedsBlock0() && c.BlockAt(in) > 0 {
		l := c.BlockLen(0)
		if l > DefaultMaxBlock {
			return tooLarge(0, l)
		}
		bp := getScratch(l)
		defer scratchBlocks.Put(bp)
		if err := c.DecodeBlockRef(*bp, 0, nil); err != nil {
			return err
		}
		ref = *bp
	}
	for b := c.BlockAt(in); b < c.NumBlocks(); b++ {
		bo, bl := c.BlockOffset(b), c.BlockLen(b)
		if bo >= end {
			break
		}
		if bo >= in && bo+int64(bl) <= end {
			blk := dst[bo-in : bo-in+int64(bl)]
			if err := c.DecodeBlockRef(blk, b, ref); err != nil {
				return err
			}
			if b == 0 {
				ref = blk
			}
			continue
		}
		if bl > DefaultMaxBlock {
			return tooLarge(b, bl)
		}
		bp := getScratch(bl)
		err := c.DecodeBlockRef(*bp, b, ref)
		if err == nil {
			from := max(in, bo)
			copy(dst[from-in:], (*bp)[from-bo:min(end, bo+int64(bl))-bo])
		}
		if b == 0 && err == nil {
			ref = *bp // kept until the end: not put back
			continue
		}
		scratchBlocks.Put(bp)
		if err != nil {
			return err
		}
	}
	return nil
}

func tooLarge(b, n int) error {
	return fmt.Errorf("block %d: %w: a decoded block of %d bytes exceeds the %d-byte limit", b, ErrUnsupported, n, DefaultMaxBlock)
}

// scratchBlocks holds the edge blocks of decodePart.
var scratchBlocks sync.Pool

// getScratch returns scratch memory of n bytes.
func getScratch(n int) *[]byte {
	if bp, ok := scratchBlocks.Get().(*[]byte); ok && cap(*bp) >= n {
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n)
	return &b
}
