package all

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/bloscfs/bloscfs/internal/ordered"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// Suffixes are the file-name suffixes that name containers, with the
// suffix each one's plain view gets (a .b2nd array is shown as .npy).
var Suffixes = []struct{ Disk, View string }{
	{".b2frame", ""}, {".b2f", ""}, {".b2", ""}, {".blp", ""}, {".blosc", ""}, {".b2nd", ".npy"},
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
		return nil, false
	}
	s, ok := v.Container.(pack.Streamer)
	return s, ok
}

// pieceMax bounds one read unit of WriteTo, so that what is in flight
// (two per core) stays bounded whatever the chunks claim to hold.
const pieceMax = 8 << 20

// pieces splits the view into read units: whole chunks grouped to about
// 4 MiB when the view is the container itself (so that no block is
// decoded twice), a chunk larger than pieceMax in pieceMax parts, and
// pieceMax parts of other views.
func (v *View) pieces() []pack.Range {
	var out []pack.Range
	split := func(off, end int64) {
		for ; off < end; off += pieceMax {
			out = append(out, pack.Range{Off: off, Len: min(pieceMax, end-off)})
		}
	}
	if src, ok := v.Container.(pack.ChunkSource); ok && !v.NPY {
		const target = 4 << 20
		start := int64(0)
		for i := 1; i <= src.NumChunks(); i++ {
			end := src.ChunkOffset(i)
			if end-start >= target || i == src.NumChunks() {
				if end-start > pieceMax {
					split(start, end)
				} else if end > start {
					out = append(out, pack.Range{Off: start, Len: end - start})
				}
				start = end
			}
		}
		return out
	}
	split(0, v.Size)
	return out
}

// WriteTo writes the whole view to w, decoding on all cores; progress,
// when not nil, is called with the bytes written after each piece.
func (v *View) WriteTo(w io.Writer) (int64, error) { return v.WriteToProgress(w, nil) }

// WriteToProgress is WriteTo with a progress callback.
func (v *View) WriteToProgress(w io.Writer, progress func(n int64)) (int64, error) {
	ps := v.pieces()
	var written int64
	err := ordered.Run(len(ps), func(i int) ([]byte, error) {
		b := make([]byte, ps[i].Len)
		n, err := v.ReadAt(b, ps[i].Off)
		if n == len(b) {
			return b, nil
		}
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}, func(i int, b []byte) error {
		n, err := w.Write(b)
		written += int64(n)
		if progress != nil {
			progress(int64(n))
		}
		return err
	})
	return written, err
}
