package frame

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"

	"github.com/bloscfs/bloscfs/npy"
	"github.com/bloscfs/bloscfs/pack"
)

// MaxDims is the largest number of dimensions of a b2nd array.
const MaxDims = 16

// Array is the geometry of a .b2nd array, from its "b2nd" (or legacy
// "caterva") metalayer (FORMATS §7).
type Array struct {
	Version     int     // metalayer version
	Shape       []int64 // array shape
	ChunkShape  []int32 // chunk shape
	BlockShape  []int32 // block shape
	DtypeFormat int     // 0 = NumPy
	Dtype       string  // NumPy dtype string ("<f8", "|u1", a structured list …); "" if absent
	Itemsize    int     // element size (the frame's typesize)
	Legacy      bool    // read from a "caterva" metalayer

	// Derived.
	size       int64   // elements in the array
	extChunk   []int64 // chunk shape padded to whole blocks
	nchunksD   []int64 // chunks per dimension
	nblocksD   []int64 // blocks per chunk per dimension
	chunkItems int64   // elements per (padded) chunk
	blockItems int64   // elements per block
	nchunks    int64
}

// Array returns the b2nd geometry, or nil for a frame that is not a .b2nd.
func (f *Frame) Array() *Array { return f.nd }

// Len returns the number of elements.
func (a *Array) Len() int64 { return a.size }

// ParseArrayMeta parses the content of a "b2nd" (or legacy "caterva")
// metalayer by hand (FORMATS §7.1, pitfall P21): a fixarray, version,
// ndim, shape (int64), chunkshape and blockshape (int32), and, when bytes
// remain, dtype_format and the dtype string. itemsize is the frame's
// typesize. The geometry is checked for consistency and size overflows.
func ParseArrayMeta(b []byte, itemsize int) (*Array, error) {
	c := &cursor{b: b, what: "b2nd metalayer"}
	m, err := c.u8()
	if err != nil {
		return nil, err
	}
	if m < 0x90 || m > 0x9F {
		return nil, fmt.Errorf("%w: b2nd metalayer starts with %#02x, want a fixarray", pack.ErrFormat, m)
	}
	a := &Array{Itemsize: itemsize}
	if a.Version, err = c.fixint("version"); err != nil {
		return nil, err
	}
	nd, err := c.fixint("ndim")
	if err != nil {
		return nil, err
	}
	if nd > MaxDims {
		return nil, fmt.Errorf("%w: b2nd ndim %d exceeds %d", pack.ErrFormat, nd, MaxDims)
	}
	array := func(name string) error {
		m, err := c.u8()
		if err != nil {
			return err
		}
		switch {
		case nd < 16 && m == 0x90|byte(nd):
		case nd == 16 && m == 0xA0: // c-blosc2 writes 0x90+16 (P21)
		case m == 0xDC:
			n, err := c.u16()
			if err != nil {
				return err
			}
			if int(n) != nd {
				return fmt.Errorf("%w: b2nd %s has %d entries for ndim %d", pack.ErrFormat, name, n, nd)
			}
		default:
			return fmt.Errorf("%w: b2nd %s marker %#02x for ndim %d", pack.ErrFormat, name, m, nd)
		}
		return nil
	}
	if err := array("shape"); err != nil {
		return nil, err
	}
	a.Shape = make([]int64, nd)
	for i := range a.Shape {
		if err := c.expect(0xD3, "shape int64"); err != nil {
			return nil, err
		}
		v, err := c.u64()
		if err != nil {
			return nil, err
		}
		a.Shape[i] = int64(v)
	}
	for _, dst := range []*[]int32{&a.ChunkShape, &a.BlockShape} {
		name := "chunkshape"
		if dst == &a.BlockShape {
			name = "blockshape"
		}
		if err := array(name); err != nil {
			return nil, err
		}
		*dst = make([]int32, nd)
		for i := range *dst {
			if err := c.expect(0xD2, name+" int32"); err != nil {
				return nil, err
			}
			v, err := c.u32()
			if err != nil {
				return nil, err
			}
			(*dst)[i] = int32(v)
		}
	}
	if c.p < len(b) {
		if a.DtypeFormat, err = c.fixint("dtype_format"); err != nil {
			return nil, err
		}
		d, err := c.str("dtype")
		if err != nil {
			return nil, err
		}
		a.Dtype = string(d)
	}
	if err := a.derive(); err != nil {
		return nil, err
	}
	return a, nil
}

// MarshalMeta encodes the geometry as a "b2nd" metalayer the way c-blosc2
// writes it (FORMATS §7.1), including its array marker 0x90+ndim, which
// for ndim 16 is the byte 0xA0 that c-blosc2's reader expects.
func (a *Array) MarshalMeta() []byte {
	nd := len(a.Shape)
	b := []byte{0x97, byte(a.Version), byte(nd), 0x90 + byte(nd)}
	for _, s := range a.Shape {
		b = append(b, 0xD3)
		b = binary.BigEndian.AppendUint64(b, uint64(s))
	}
	for _, sh := range [][]int32{a.ChunkShape, a.BlockShape} {
		b = append(b, 0x90+byte(nd))
		for _, s := range sh {
			b = append(b, 0xD2)
			b = binary.BigEndian.AppendUint32(b, uint32(s))
		}
	}
	b = append(b, byte(a.DtypeFormat), 0xDB)
	b = binary.BigEndian.AppendUint32(b, uint32(len(a.Dtype)))
	return append(b, a.Dtype...)
}

// mulCheck multiplies non-negative numbers, reporting overflow past limit.
func mulCheck(a, b, limit int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > uint64(limit) {
		return 0, false
	}
	return int64(lo), true
}

func (a *Array) derive() error {
	if a.Itemsize <= 0 {
		return fmt.Errorf("%w: b2nd itemsize %d", pack.ErrFormat, a.Itemsize)
	}
	nd := len(a.Shape)
	a.size = 1
	empty := false
	for d, s := range a.Shape {
		if s < 0 {
			return fmt.Errorf("%w: b2nd shape[%d] = %d", pack.ErrFormat, d, s)
		}
		if s == 0 {
			empty = true
		}
	}
	if empty {
		a.size = 0
		return nil
	}
	const limit = math.MaxInt64 / 2
	a.extChunk = make([]int64, nd)
	a.nchunksD = make([]int64, nd)
	a.nblocksD = make([]int64, nd)
	a.chunkItems, a.blockItems, a.nchunks = 1, 1, 1
	for d := 0; d < nd; d++ {
		s, cs, bs := a.Shape[d], int64(a.ChunkShape[d]), int64(a.BlockShape[d])
		if cs < 1 || bs < 1 || bs > cs {
			return fmt.Errorf("%w: b2nd dimension %d: chunkshape %d, blockshape %d (need 1 ≤ block ≤ chunk)", pack.ErrFormat, d, cs, bs)
		}
		a.nblocksD[d] = (cs + bs - 1) / bs
		a.extChunk[d] = a.nblocksD[d] * bs
		a.nchunksD[d] = (s + cs - 1) / cs
		var ok1, ok2, ok3, ok4 bool
		a.size, ok1 = mulCheck(a.size, s, limit)
		a.chunkItems, ok2 = mulCheck(a.chunkItems, a.extChunk[d], maxChunkNbytes)
		a.blockItems, ok3 = mulCheck(a.blockItems, bs, maxChunkNbytes)
		a.nchunks, ok4 = mulCheck(a.nchunks, a.nchunksD[d], maxChunks)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return fmt.Errorf("%w: b2nd geometry overflows: shape %v, chunkshape %v, blockshape %v", pack.ErrFormat, a.Shape, a.ChunkShape, a.BlockShape)
		}
	}
	if _, ok := mulCheck(a.size, int64(a.Itemsize), limit); !ok {
		return fmt.Errorf("%w: b2nd array of %d elements of %d bytes is too large", pack.ErrFormat, a.size, a.Itemsize)
	}
	if _, ok := mulCheck(a.chunkItems, int64(a.Itemsize), maxChunkNbytes); !ok {
		return fmt.Errorf("%w: b2nd chunk of %d elements of %d bytes exceeds the chunk limit", pack.ErrFormat, a.chunkItems, a.Itemsize)
	}
	return nil
}

// arrayMeta parses the b2nd (or caterva) metalayer of the header, if
// there is one (nil if not).
func (f *Frame) arrayMeta() (*Array, error) {
	b, ok := f.Meta("b2nd")
	legacy := false
	if !ok {
		if b, ok = f.Meta("caterva"); !ok {
			return nil, nil
		}
		legacy = true
	}
	a, err := ParseArrayMeta(b, int(f.hdr.typesize))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	a.Legacy = legacy
	return a, nil
}

// parseND detects a b2nd (or caterva) metalayer and checks the geometry
// against the super-chunk.
func (f *Frame) parseND() error {
	a, err := f.arrayMeta()
	if a == nil || err != nil {
		return err
	}
	if a.size == 0 {
		f.nd = a
		return nil
	}
	if int64(f.n) != a.nchunks {
		return f.errf(pack.ErrFormat, "b2nd shape %v in chunks %v needs %d chunks, the frame has %d", a.Shape, a.ChunkShape, a.nchunks, f.n)
	}
	cb := a.chunkItems * int64(a.Itemsize)
	for i := 0; i < f.n; i++ {
		if l := f.chunkLen(i); l != cb {
			return f.errf(pack.ErrFormat, "b2nd chunk %d holds %d bytes, the geometry needs %d", i, l, cb)
		}
		if f.starts == nil {
			break // fixed chunk size: the last chunk has the same size iff nbytes fits
		}
	}
	if f.Size() != a.nchunks*cb {
		return f.errf(pack.ErrFormat, "b2nd super-chunk of %d bytes, the geometry needs %d", f.Size(), a.nchunks*cb)
	}
	f.nd = a
	return nil
}

// ErrNotArray reports a view requested from a frame that is not a .b2nd.
var ErrNotArray = fmt.Errorf("%w: not a b2nd array", pack.ErrUnsupported)

// COrderView is the array of a .b2nd frame in C order with the chunk and
// block padding removed: the bytes of numpy's arr.tobytes(). It is an
// io.ReaderAt safe for concurrent use and a pack.Container.
type COrderView struct {
	f    *Frame
	a    *Array
	size int64
}

// COrder returns the C-order view of a .b2nd frame.
func (f *Frame) COrder() (*COrderView, error) {
	if f.nd == nil {
		return nil, fmt.Errorf("%s: %w", f.name, ErrNotArray)
	}
	return &COrderView{f: f, a: f.nd, size: f.nd.size * int64(f.nd.Itemsize)}, nil
}

// Size returns the array size in bytes.
func (v *COrderView) Size() int64 { return v.size }

// Info describes the frame, with Size the view's size.
func (v *COrderView) Info() pack.Info {
	in := v.f.Info()
	in.Size = v.size
	return in
}

// run is a piece of a C-order read: n bytes at raw offset raw go to
// dst[at:].
type run struct {
	raw int64
	at  int
	n   int
}

// maxRunsPerBatch bounds the run table of one ReadAt.
const maxRunsPerBatch = 1 << 16

// ReadAt reads C-order array bytes. Each stretch of elements contiguous in
// both orders (a row of a block along the last dimension) is one run; runs
// are sorted by raw offset and runs that touch the same block are read
// with one ReadAt of the raw view, so that every block is decoded once per
// call.
func (v *COrderView) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", v.f.name, off)
	}
	if off >= v.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := len(p)
	if int64(want) > v.size-off {
		p = p[:v.size-off]
	}
	a := v.a
	it := int64(a.Itemsize)
	nd := len(a.Shape)
	done := 0
	elem := off / it
	skip := off % it
	g := make([]int64, nd)
	rem := elem
	for d := nd - 1; d >= 0; d-- {
		g[d] = rem % a.Shape[d]
		rem /= a.Shape[d]
	}
	runs := make([]run, 0, min(maxRunsPerBatch, len(p)/a.Itemsize+2))
	for done < len(p) {
		runs = runs[:0]
		for done < len(p) && len(runs) < maxRunsPerBatch {
			raw, n := a.locate(g)
			b := n*it - skip
			b = min(b, int64(len(p)-done))
			runs = append(runs, run{raw*it + skip, done, int(b)})
			done += int(b)
			skip = 0
			// Advance g by n elements along the last dimension.
			if nd > 0 {
				g[nd-1] += n
				for d := nd - 1; d > 0 && g[d] >= a.Shape[d]; d-- {
					g[d] = 0
					g[d-1]++
				}
			}
		}
		if err := v.fill(p, runs); err != nil {
			return 0, err
		}
	}
	if len(p) < want {
		return len(p), io.EOF
	}
	return len(p), nil
}

// locate returns the raw element index of the element at g and how many
// elements from it along the last dimension are contiguous in the raw
// layout (up to the end of the row, chunk or block). FORMATS §7.2.
func (a *Array) locate(g []int64) (raw, n int64) {
	nd := len(g)
	if nd == 0 {
		return 0, 1
	}
	var ci, bi, ei int64
	for d := 0; d < nd; d++ {
		cs, bs := int64(a.ChunkShape[d]), int64(a.BlockShape[d])
		c := g[d] / cs
		r := g[d] - c*cs
		b := r / bs
		e := r - b*bs
		ci = ci*a.nchunksD[d] + c
		bi = bi*a.nblocksD[d] + b
		ei = ei*bs + e
	}
	raw = ci*a.chunkItems + bi*a.blockItems + ei
	d := nd - 1
	cs, bs := int64(a.ChunkShape[d]), int64(a.BlockShape[d])
	r := g[d] % cs
	blockEnd := min((r/bs+1)*bs, cs)
	n = min(a.Shape[d]-g[d], blockEnd-r)
	return raw, n
}

// span is a range of the raw view read with one ReadAt, serving runs.
type span struct {
	start, end int64
	runs       []run
}

// fill reads runs (raw offsets, destinations in p) through the frame's
// raw view.
func (v *COrderView) fill(p []byte, runs []run) error {
	slices.SortFunc(runs, func(x, y run) int {
		switch {
		case x.raw < y.raw:
			return -1
		case x.raw > y.raw:
			return 1
		}
		return 0
	})
	blk := v.a.blockItems * int64(v.a.Itemsize)
	var spans []span
	for k, r := range runs {
		if n := len(spans); n > 0 {
			s := &spans[n-1]
			if r.raw == s.end || r.raw/blk == (s.end-1)/blk {
				s.end = max(s.end, r.raw+int64(r.n))
				s.runs = runs[k-len(s.runs) : k+1]
				continue
			}
		}
		spans = append(spans, span{r.raw, r.raw + int64(r.n), runs[k : k+1]})
	}
	one := func(s span) error {
		// Runs contiguous in both layouts are read in place.
		direct := true
		for k := 1; k < len(s.runs) && direct; k++ {
			a, b := s.runs[k-1], s.runs[k]
			direct = b.raw == a.raw+int64(a.n) && b.at == a.at+a.n
		}
		if direct {
			first := s.runs[0]
			return v.readRaw(p[first.at:first.at+int(s.end-s.start)], s.start)
		}
		buf := make([]byte, s.end-s.start)
		if err := v.readRaw(buf, s.start); err != nil {
			return err
		}
		for _, r := range s.runs {
			copy(p[r.at:r.at+r.n], buf[r.raw-s.start:])
		}
		return nil
	}
	if len(spans) == 1 {
		return one(spans[0])
	}
	errs := make([]error, len(spans))
	sem := make(chan struct{}, max(runtime.GOMAXPROCS(0), 1))
	var wg sync.WaitGroup
	for k, s := range spans {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = one(s)
			<-sem
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (v *COrderView) readRaw(b []byte, off int64) error {
	n, err := v.f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = fmt.Errorf("%w: raw view ends at %d, array needs [%d,%d)", pack.ErrFormat, v.f.Size(), off, off+int64(len(b)))
	}
	return err
}

// NPYView is a .b2nd array as an NPY file: a version 1.0 header (2.0 when
// the header would exceed 65535 bytes) followed by the C-order data. It
// is an io.ReaderAt safe for concurrent use and a pack.Container.
type NPYView struct {
	c   *COrderView
	hdr []byte
}

// NPY returns the NPY view of a .b2nd frame.
func (f *Frame) NPY() (*NPYView, error) {
	c, err := f.COrder()
	if err != nil {
		return nil, err
	}
	return &NPYView{c: c, hdr: npy.Header(f.nd.NPYDescr(), f.nd.Shape)}, nil
}

// Header returns the NPY header bytes.
func (v *NPYView) Header() []byte { return slices.Clone(v.hdr) }

// Size returns the NPY file size.
func (v *NPYView) Size() int64 { return int64(len(v.hdr)) + v.c.size }

// Info describes the frame, with Size the view's size.
func (v *NPYView) Info() pack.Info {
	in := v.c.f.Info()
	in.Size = v.Size()
	return in
}

// ReadAt reads NPY bytes.
func (v *NPYView) ReadAt(p []byte, off int64) (int, error) {
	return npy.ReadAt(v.c.f.name, v.hdr, v.Size(), p, off, func(q []byte, at int64) error {
		if _, err := v.c.ReadAt(q, at); err != nil && err != io.EOF {
			return err
		}
		return nil
	})
}

// NPYDescr returns the NPY 'descr' literal of the array: the dtype string
// quoted, a structured dtype's list literal rebuilt from its parse (the
// stored string is data, never copied into the header), or, when the
// dtype is absent, not NumPy's, not a valid descr, or its item size
// disagrees with the array's, raw bytes '|V<itemsize>'.
func (a *Array) NPYDescr() string {
	if a.DtypeFormat == 0 && a.Dtype != "" {
		if d, n, err := npy.DescrLiteral(a.Dtype); err == nil && n == a.Itemsize {
			return d
		}
	}
	return fmt.Sprintf("'|V%d'", a.Itemsize)
}
