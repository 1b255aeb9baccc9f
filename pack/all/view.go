package all

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/bloscfs/bloscfs/internal/ordered"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
	"github.com/bloscfs/bloscfs/zarr"
)

// Suffixes are the file-name suffixes that name containers, with the
// suffix each one's plain view gets (a .b2nd array is shown as .npy).
var Suffixes = []struct{ Disk, View string }{
	{".b2frame", ""}, {".b2f", ""}, {".b2", ""}, {".blp", ""}, {".blosc", ""}, {".b2nd", ".npy"},
	{".zarr", ".npy"}, // a Zarr array directory
}

// PlainName returns the name of a container file's plain view (x.blp →
// x, x.b2nd → x.npy), and whether name has a container suffix at all. A
// stem of "." or ".." is no stem.
func PlainName(name string) (string, bool) {
	for _, s := range Suffixes {
		if strings.HasSuffix(name, s.Disk) && len(name) > len(s.Disk) {
			stem := strings.TrimSuffix(name, s.Disk)
			if stem == "." || stem == ".." {
				return "", false
			}
			return stem + s.View, true
		}
	}
	return "", false
}

// StemOf returns a container file name without its suffix.
func StemOf(name string) string {
	for _, s := range Suffixes {
		if strings.HasSuffix(name, s.Disk) && len(name) > len(s.Disk) {
			return strings.TrimSuffix(name, s.Disk)
		}
	}
	return name
}

// View is the plain content a container is shown as: its plain bytes, or
// for a .b2nd array the .npy file (NPY header and the array in C order).
type View struct {
	io.ReaderAt
	// Size is the size of the view.
	Size int64
	// Container is the opened container.
	Container pack.Container
	// NPY reports that the view is a .b2nd array's .npy form.
	NPY    bool
	closer io.Closer
}

// Close releases the file behind the view.
func (v *View) Close() error { return v.closer.Close() }

// ContainerView returns a View of a container's own plain bytes (for a
// .b2nd, the padded super-chunk rather than the .npy). Closing it does
// nothing: the caller owns the container.
func ContainerView(c pack.Container) *View {
	return &View{ReaderAt: c, Size: c.Size(), Container: c, closer: io.NopCloser(nil)}
}

// OpenView opens a container file or sparse-frame directory and returns
// the view bloscfs shows of it.
func OpenView(path string, cache pack.BlockCache) (*View, error) {
	c, closer, err := pack.OpenPath(path, cache)
	if err != nil {
		return nil, err
	}
	v := &View{ReaderAt: c, Size: c.Size(), Container: c, closer: closer}
	if f, ok := c.(*frame.Frame); ok && f.Array() != nil {
		npy, err := f.NPY()
		if err != nil {
			closer.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		v.ReaderAt, v.Size, v.NPY = npy, npy.Size(), true
	}
	if _, ok := c.(*zarr.DirArray); ok {
		v.NPY = true // the ReaderAt is the .npy view already
	}
	return v, nil
}

// ReadAtOnce is ReadAt for a sequential reader that keeps what it reads:
// the blocks such reads have read whole leave the cache (pack.Streamer). Views
// that are not a container's own bytes read as ReadAt does.
func (v *View) ReadAtOnce(p []byte, off int64) (int, error) {
	if s, ok := v.streamer(); ok {
		return s.ReadAtOnce(p, off)
	}
	return v.ReadAt(p, off)
}

// Prefetch decodes the blocks behind [off, off+n) into the cache, so that
// the reads that follow find them; reader is as for pack.Streamer. For
// views that are not a container's own bytes it reads the range into
// scratch memory to the same end.
func (v *View) Prefetch(off, n int64, reader func() int64) error {
	if s, ok := v.streamer(); ok {
		return s.Prefetch(off, n, reader)
	}
	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	for end := min(off+n, v.Size); off < end; off += int64(len(*bp)) {
		if _, err := v.ReadAt((*bp)[:min(int64(len(*bp)), end-off)], off); err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}

var scratch = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

func (v *View) streamer() (pack.Streamer, bool) {
	if v.NPY {
		// A Zarr array's container is its .npy view already, and so
		// are its ReadAtOnce and Prefetch.
		switch z := v.Container.(type) {
		case *zarr.Array:
			return z, true
		case *zarr.DirArray:
			return z, true
		}
		return nil, false
	}
	s, ok := v.Container.(pack.Streamer)
	return s, ok
}

// unitTarget is the size WriteTo groups whole chunks to: a unit of about
// a megabyte keeps what a worker decodes and what the writer reads back
// in the caches (4 MiB units took about 1.5 times the CPU time in
// BenchmarkWriteTo), and makes one hand-over per megabyte or so.
const unitTarget = 1 << 20

// pieceMax bounds one read unit of WriteTo, so that what is in flight
// (two per core) stays bounded whatever the chunks claim to hold.
const pieceMax = 8 << 20

// unit is one read unit of WriteTo: a range of the view, and whether it
// lies in special chunks only (zeros, NaN, uninitialised, a repeated
// value), which a verification need not expand.
type unit struct {
	pack.Range
	special bool
}

// units returns a generator of the view's read units, in order: whole
// chunks grouped to about unitTarget when the view is the container itself
// (so that no block is decoded twice), a chunk larger than pieceMax in
// pieceMax parts, and pieceMax parts of other views. It plans lazily:
// memory does not grow with the number of chunks. With kinds, runs of
// special chunks are units of their own, marked special.
func (v *View) units(kinds bool) func() (unit, bool) {
	var pending []unit // parts of the last group, handed out first
	pop := func() (unit, bool) {
		u := pending[0]
		pending = pending[1:]
		return u, true
	}
	split := func(off, end int64, special bool) {
		for ; off < end; off += pieceMax {
			pending = append(pending, unit{pack.Range{Off: off, Len: min(pieceMax, end-off)}, special})
		}
	}
	src, ok := v.Container.(pack.ChunkSource)
	if !ok || v.NPY {
		off := int64(0)
		return func() (unit, bool) {
			if off >= v.Size {
				return unit{}, false
			}
			u := unit{Range: pack.Range{Off: off, Len: min(pieceMax, v.Size-off)}}
			off += u.Len
			return u, true
		}
	}
	isSpecial := func(int) bool { return false }
	if kinds {
		if k, ok := v.Container.(interface{ ChunkSpecial(i int) bool }); ok {
			isSpecial = k.ChunkSpecial
		}
	}
	const target = unitTarget
	n, i := src.NumChunks(), 0
	return func() (unit, bool) {
		for len(pending) == 0 {
			if i >= n {
				return unit{}, false
			}
			start, j := src.ChunkOffset(i), i+1
			if isSpecial(i) {
				for j < n && isSpecial(j) {
					j++
				}
				pending = append(pending, unit{pack.Range{Off: start, Len: src.ChunkOffset(j) - start}, true})
			} else {
				for j < n && src.ChunkOffset(j)-start < target && !isSpecial(j) {
					j++
				}
				split(start, src.ChunkOffset(j), false)
			}
			i = j
		}
		return pop()
	}
}

// pieces returns every read unit of the view (tests).
func (v *View) pieces() []pack.Range {
	var out []pack.Range
	next := v.units(false)
	for u, ok := next(); ok; u, ok = next() {
		out = append(out, u.Range)
	}
	return out
}

// WriteTo writes the whole view to w, decoding on all cores; progress,
// when not nil, is called with the bytes written after each piece.
func (v *View) WriteTo(w io.Writer) (int64, error) { return v.WriteToProgress(w, nil) }

// WriteToProgress is WriteTo with a progress callback.
//
// One worker per core decodes whole read units (about a megabyte of
// chunks) on its own (pack.DecodeRange: no goroutine per block, no cache,
// no lock), each into a buffer of that worker's that comes back to it
// once written, and the caller's goroutine writes the units out in order
// (ordered.Stream). What is in flight is bounded by the number of cores,
// and the workers share nothing but the channels that hand out units,
// once per unit.
func (v *View) WriteToProgress(w io.Writer, progress func(n int64)) (int64, error) {
	var written int64
	bufs := newBufLists()
	err := ordered.Stream(v.units(false), func(wk int, u unit) (unitBuf, error) {
		b := bufs.get(wk, u.Len)
		if err := v.decode(b, u.Off); err != nil {
			bufs.put(wk, b)
			return unitBuf{}, err
		}
		return unitBuf{b, wk}, nil
	}, func(u unit, ub unitBuf) error {
		n, err := w.Write(ub.b)
		bufs.put(ub.worker, ub.b)
		written += int64(n)
		if progress != nil {
			progress(int64(n))
		}
		return err
	})
	return written, err
}

// unitBuf is a decoded unit, in a buffer of the worker that decoded it.
type unitBuf struct {
	b      []byte
	worker int
}

// decode fills b with the view's bytes at off. A view of a container's
// own bytes decodes its chunks on the calling goroutine (pack.DecodeRange);
// if that fails, the range is read again through ReadAt, whose error names
// the file and where in it, and which may succeed where the failure was
// transient. Other views read through ReadAt.
func (v *View) decode(b []byte, off int64) error {
	if src, ok := v.Container.(pack.ChunkSource); ok && !v.NPY {
		if pack.DecodeRange(src, b, off) == nil {
			return nil
		}
	}
	n, err := v.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// bufLists holds the unit buffers of one WriteTo or Verify, a list per
// worker. A worker decodes into a buffer of its own list, which comes
// back to that list once the unit is written, so that streaming decodes
// into memory already faulted in (rather than into fresh pages, as
// buffers from a sync.Pool that each collection empties did) and most
// likely still in that core's caches. A worker whose list is empty takes
// another's free buffer before it makes one: as many buffers are made as
// units are ever in flight (ordered.Window, two per core), and a few more
// when a buffer is on its way back.
type bufLists []chan []byte

func newBufLists() bufLists {
	l := make(bufLists, ordered.Workers())
	for i := range l {
		l[i] = make(chan []byte, ordered.Window())
	}
	return l
}

// get returns a buffer of n bytes (n ≤ pieceMax) for worker w.
func (l bufLists) get(w int, n int64) []byte {
	for k := range l {
		select {
		case b := <-l[(w+k)%len(l)]:
			if int64(cap(b)) >= n {
				return b[:n]
			}
		default:
			continue
		}
		break // too small: dropped, and a new one made
	}
	return make([]byte, n, max(n, unitTarget)) // room for the units that follow
}

// put gives worker w's buffer back.
func (l bufLists) put(w int, b []byte) {
	select {
	case l[w%len(l)] <- b:
	default:
	}
}

// Verify decodes the whole view, checking what can be checked (stream
// structure, Bloscpack checksums), and reports progress as WriteTo does,
// on all cores as WriteTo decodes. Special chunks (zeros, NaN,
// uninitialised, a repeated value) have nothing stored to check beyond
// their header, which opening them checked: they are not expanded, so a
// frame claiming petabytes of zeros verifies at once.
func (v *View) Verify(progress func(n int64)) error {
	bufs := newBufLists()
	return ordered.Stream(v.units(true), func(wk int, u unit) (struct{}, error) {
		if u.special {
			return struct{}{}, v.checkSpecial(u.Range)
		}
		b := bufs.get(wk, u.Len)
		defer bufs.put(wk, b)
		return struct{}{}, v.decode(b, u.Off)
	}, func(u unit, _ struct{}) error {
		if progress != nil {
			progress(u.Len)
		}
		return nil
	})
}

// checkSpecial opens the chunks of a range of special chunks (their
// headers are checked as they are parsed) without decoding them.
func (v *View) checkSpecial(r pack.Range) error {
	c, ok := v.Container.(interface {
		pack.ChunkSource
		CheckChunk(i int) error
	})
	if !ok {
		return nil
	}
	// The first and last chunk of the range: special chunks in a run
	// share their kind and parameters, and the index was checked whole
	// when the container was opened.
	lo, hi := pack.ChunkAt(c, r.Off), pack.ChunkAt(c, r.Off+r.Len-1)
	if err := c.CheckChunk(lo); err != nil {
		return err
	}
	if hi != lo {
		return c.CheckChunk(hi)
	}
	return nil
}
