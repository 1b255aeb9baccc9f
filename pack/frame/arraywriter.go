package frame

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/npy"
	"github.com/bloscfs/bloscfs/pack"
)

// NewArray returns the geometry of a new array. Zero chunk or block
// shapes are chosen: chunks of about 4 MiB and blocks of about 128 KiB,
// cut along the leading dimensions first so that rows stay whole (C-order
// reads of a row then touch few blocks).
func NewArray(shape []int64, dtype string, itemsize int, chunkShape, blockShape []int32) (*Array, error) {
	if len(shape) > MaxDims {
		return nil, fmt.Errorf("%w: %d dimensions (at most %d)", pack.ErrUnsupported, len(shape), MaxDims)
	}
	a := &Array{Shape: shape, Dtype: dtype, Itemsize: itemsize}
	if chunkShape == nil {
		chunkShape = cutShape(shape, itemsize, 4<<20)
	}
	if blockShape == nil {
		cs := make([]int64, len(chunkShape))
		for i, v := range chunkShape {
			cs[i] = int64(v)
		}
		blockShape = cutShape(cs, itemsize, 128<<10)
	}
	a.ChunkShape, a.BlockShape = chunkShape, blockShape
	if len(a.ChunkShape) != len(shape) || len(a.BlockShape) != len(shape) {
		return nil, fmt.Errorf("%w: chunk and block shapes need %d dimensions", pack.ErrUnsupported, len(shape))
	}
	if err := a.derive(); err != nil {
		return nil, err
	}
	return a, nil
}

// cutShape halves the leading dimensions of shape until its items fit in
// about target bytes.
func cutShape(shape []int64, itemsize int, target int64) []int32 {
	out := make([]int32, len(shape))
	size := int64(itemsize)
	for i, s := range shape {
		out[i] = int32(min(max(s, 1), 1<<30))
		size *= int64(out[i])
	}
	for d := 0; d < len(out) && size > target; {
		if out[d] == 1 {
			d++
			continue
		}
		size = size / int64(out[d]) * int64((out[d]+1)/2)
		out[d] = (out[d] + 1) / 2
	}
	return out
}

// WriteArray writes data, the C-order bytes of array a, as a .b2nd frame:
// chunks in C order over the chunk grid, blocks in C order within each
// chunk, padding zeroed (FORMATS §7.2). chunk gives the codec, level and
// filters; its typesize and block size follow from a.
func WriteArray(w io.WriteSeeker, data io.ReaderAt, a *Array, chunk blosc.Params) error {
	if err := a.derive(); err != nil {
		return err
	}
	is := int64(a.Itemsize)
	chunk.Typesize = a.Itemsize
	if a.Itemsize > 255 {
		chunk.Typesize = 1
	}
	chunk.Blocksize = int(a.blockItems * is)
	fw, err := NewWriter(w, Params{
		Chunk: chunk, Typesize: a.Itemsize, ChunkSize: int(a.chunkItems * is),
		Metalayers: []Metalayer{{Name: "b2nd", Value: a.MarshalMeta()}},
	})
	if err != nil {
		return err
	}
	if a.size > 0 {
		buf := make([]byte, a.chunkItems*is)
		for c := int64(0); c < a.nchunks; c++ {
			if err := a.fillChunk(buf, data, c); err != nil {
				return err
			}
			if err := fw.AddChunk(buf); err != nil {
				return err
			}
		}
	}
	return fw.Close()
}

// fillChunk lays out chunk c (its index in C order over the chunk grid)
// from C-order data, one run along the last dimension at a time.
func (a *Array) fillChunk(buf []byte, data io.ReaderAt, c int64) error {
	clear(buf)
	nd := len(a.Shape)
	is := int64(a.Itemsize)
	if nd == 0 {
		return readRun(data, buf[:is], 0)
	}
	cc := unravel(c, a.nchunksD)
	pos := int64(0) // element position within the padded chunk
	for b := int64(0); b < a.chunkItems/a.blockItems; b++ {
		bc := unravel(b, a.nblocksD)
		// Rows of the block: every index but the last.
		rowShape := make([]int64, nd)
		for d := range rowShape {
			rowShape[d] = int64(a.BlockShape[d])
		}
		last := rowShape[nd-1]
		rowShape[nd-1] = 1
		nrows := a.blockItems / last
		for r := int64(0); r < nrows; r++ {
			e := unravel(r, rowShape)
			g := make([]int64, nd) // global index of the row's first element
			valid := true
			for d := 0; d < nd; d++ {
				inChunk := bc[d]*int64(a.BlockShape[d]) + e[d]
				g[d] = cc[d]*int64(a.ChunkShape[d]) + inChunk
				if d < nd-1 && (inChunk >= int64(a.ChunkShape[d]) || g[d] >= a.Shape[d]) {
					valid = false
				}
			}
			if valid {
				inChunk := bc[nd-1] * int64(a.BlockShape[nd-1])
				n := min(last, int64(a.ChunkShape[nd-1])-inChunk, a.Shape[nd-1]-g[nd-1])
				if n > 0 {
					src := ravel(g, a.Shape) * is
					if err := readRun(data, buf[pos*is:(pos+n)*is], src); err != nil {
						return err
					}
				}
			}
			pos += last
		}
	}
	return nil
}

func readRun(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading array data at %d: %w", off, err)
}

// unravel turns a C-order linear index into coordinates.
func unravel(i int64, shape []int64) []int64 {
	out := make([]int64, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		out[d] = i % shape[d]
		i /= shape[d]
	}
	return out
}

// ravel turns coordinates into a C-order linear index.
func ravel(c, shape []int64) int64 {
	var i int64
	for d := range shape {
		i = i*shape[d] + c[d]
	}
	return i
}

// The .npy header's fields, compiled on first use, not at start.
var (
	npyDescr = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`'descr':\s*'([^']*)'`) })
	npyOrder = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`'fortran_order':\s*(True|False)`) })
	npyShape = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`'shape':\s*\(([^)]*)\)`) })
)

// NPYInfo is what a .npy header says.
type NPYInfo struct {
	Descr    string  // dtype string, e.g. "<f8"
	Itemsize int     // bytes per element
	Shape    []int64 // array shape
	DataOff  int64   // where the data start
}

// ReadNPYHeader parses the header of a .npy file (format 1.0, 2.0 or
// 3.0). Fortran-order and structured arrays are refused.
func ReadNPYHeader(r io.Reader) (*NPYInfo, error) {
	br := bufio.NewReader(r)
	var pre [8]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil || string(pre[:6]) != "\x93NUMPY" {
		return nil, fmt.Errorf("%w: not a .npy file", pack.ErrFormat)
	}
	var hl, off int64
	switch pre[6] {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return nil, err
		}
		hl, off = int64(binary.LittleEndian.Uint16(b[:])), 10
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return nil, err
		}
		hl, off = int64(binary.LittleEndian.Uint32(b[:])), 12
	default:
		return nil, fmt.Errorf("%w: .npy format %d.%d", pack.ErrUnsupported, pre[6], pre[7])
	}
	if hl > 1<<20 {
		return nil, fmt.Errorf("%w: .npy header of %d bytes", pack.ErrFormat, hl)
	}
	h := make([]byte, hl)
	if _, err := io.ReadFull(br, h); err != nil {
		return nil, err
	}
	dict := string(h)
	info := &NPYInfo{DataOff: off + hl}
	m := npyDescr().FindStringSubmatch(dict)
	if m == nil {
		return nil, fmt.Errorf("%w: .npy descr is not a simple dtype (structured arrays are not supported): %.80s", pack.ErrUnsupported, dict)
	}
	info.Descr = m[1]
	if info.Itemsize = npy.Itemsize(info.Descr); info.Itemsize <= 0 {
		return nil, fmt.Errorf("%w: dtype %q", pack.ErrUnsupported, info.Descr)
	}
	if m := npyOrder().FindStringSubmatch(dict); m == nil || m[1] == "True" {
		return nil, fmt.Errorf("%w: Fortran-order .npy arrays", pack.ErrUnsupported)
	}
	m = npyShape().FindStringSubmatch(dict)
	if m == nil {
		return nil, fmt.Errorf("%w: .npy header has no shape", pack.ErrFormat)
	}
	info.Shape = []int64{}
	for _, f := range strings.Split(m[1], ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSuffix(f, "L"), 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%w: .npy shape %q", pack.ErrFormat, m[1])
		}
		info.Shape = append(info.Shape, v)
	}
	return info, nil
}

// ChunkBytes returns the plain size of one (padded) chunk of the array.
func (a *Array) ChunkBytes() int64 { return a.chunkItems * int64(a.Itemsize) }

// ChunksTouched calls visit for every chunk (its index in C order over
// the chunk grid) that holds an element of the C-order element range
// [start, end). A chunk may be visited more than once.
func (a *Array) ChunksTouched(start, end int64, visit func(chunk int64)) {
	nd := len(a.Shape)
	if start >= end || a.size == 0 {
		return
	}
	if nd == 0 {
		visit(0)
		return
	}
	last := a.Shape[nd-1]
	cl := int64(a.ChunkShape[nd-1])
	for e := start; e < end; {
		// The row of e: all coordinates but the last are fixed.
		rowStart := e - e%last
		lo := e - rowStart
		hi := min(end-rowStart, last)
		g := unravel(rowStart, a.Shape)
		var base int64 // chunk index of the row's chunk-row, last coordinate 0
		for d := 0; d < nd-1; d++ {
			base = base*a.nchunksD[d] + g[d]/int64(a.ChunkShape[d])
		}
		base *= a.nchunksD[nd-1]
		for c := lo / cl; c <= (hi-1)/cl; c++ {
			visit(base + c)
		}
		e = rowStart + last
	}
}

// RawChunkReader is an io.ReaderAt over the padded super-chunk bytes of
// an array whose C-order bytes data holds; it serves reads of whole
// chunks, as pack.Rewrite makes them.
type RawChunkReader struct {
	a    *Array
	data io.ReaderAt
}

// NewRawChunkReader returns the super-chunk view of C-order data.
func (a *Array) NewRawChunkReader(data io.ReaderAt) *RawChunkReader {
	return &RawChunkReader{a: a, data: data}
}

// ReadAt lays out the chunks that p covers; off and len(p) must be
// multiples of the chunk size.
func (r *RawChunkReader) ReadAt(p []byte, off int64) (int, error) {
	cb := r.a.ChunkBytes()
	if cb == 0 || off%cb != 0 || int64(len(p))%cb != 0 {
		return 0, fmt.Errorf("%w: raw array read of %d bytes at %d is not whole chunks of %d", pack.ErrUnsupported, len(p), off, cb)
	}
	for k := int64(0); k < int64(len(p))/cb; k++ {
		c := off/cb + k
		if c >= r.a.nchunks {
			return int(k * cb), io.EOF
		}
		if err := r.a.fillChunk(p[k*cb:(k+1)*cb], r.data, c); err != nil {
			return int(k * cb), err
		}
	}
	return len(p), nil
}
