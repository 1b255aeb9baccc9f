package pack

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"

	"github.com/bloscfs/bloscfs/internal/ordered"
)

// Range is a byte range [Off, Off+Len) of plain data.
type Range struct{ Off, Len int64 }

// Rewritable is a container that can write a new container of its own
// format, parameters and metadata.
type Rewritable interface {
	Container
	ChunkSource
	// NewSink starts a new container of size plain bytes written to w, with
	// this container's format, codec, level, filters, typesize, chunk size,
	// checksum kind and all its metadata. (Formats with an offsets table
	// need the size to reserve it before the chunks.)
	NewSink(w io.WriteSeeker, size int64) (ChunkSink, error)
}

// ChunkSink receives the chunks of a new container in order.
type ChunkSink interface {
	// CopyChunk appends chunk i of the source container verbatim, without
	// decoding it (special chunks stay special).
	CopyChunk(i int) error
	// AddChunk compresses plain bytes as the next chunk. Every chunk but
	// the last must have the container's chunk size.
	AddChunk(plain []byte) error
	// Close writes what follows the chunks (index, trailer) and fixes up
	// the header. It does not close the underlying writer.
	Close() error
}

// ParallelSink is a ChunkSink whose compression can run apart from its
// writing, so that Rewrite compresses chunks on all cores.
type ParallelSink interface {
	ChunkSink
	// Compress compresses plain as AddChunk would. It is safe for
	// concurrent use.
	Compress(plain []byte) ([]byte, error)
	// CompressFrom is Compress of the n bytes of r, read one block at a
	// time, so that a chunk of any size costs a few blocks of memory and
	// its compressed size. It is safe for concurrent use.
	CompressFrom(r io.ReaderAt, n int) ([]byte, error)
	// AddCompressed appends what Compress returned, for the next chunk of
	// plainLen bytes.
	AddCompressed(chunk []byte, plainLen int) error
}

// ChunkSizer is implemented by containers with a nominal chunk size for
// new chunks.
type ChunkSizer interface {
	// NewChunkSize returns the plain size of the chunks a rewrite writes.
	NewChunkSize() int64
}

// ZeroRanger is content that can tell, without reading it, that a range
// holds only zeros (the never-written regions of a sparse stage). Rewrite
// and the writers of new files compress such chunks once, not once each.
type ZeroRanger interface {
	// IsZero reports whether [off, off+n) is known to hold only zeros.
	IsZero(off, n int64) bool
}

// streamChunk is the largest chunk Rewrite reads whole before it
// compresses it; a larger one is read and compressed a block at a time
// (content must then serve reads of any range, which the raw view of a
// .b2nd array does only for whole chunks: arrays keep chunks of a few
// MiB).
const streamChunk = 64 << 20

// rewriteBatch is how many chunks Rewrite plans and has in flight at a
// time, so that its memory does not grow with the number of chunks.
const rewriteBatch = 1024

// Rewrite writes to w a new container in the format of old whose plain
// bytes are content[0:size]. dirty lists the ranges where content differs
// from old; a chunk of old that no dirty range touches, and whose plain
// range is the same in the new container, is copied verbatim, the others
// are read from content and compressed again. A chunk that content (a
// ZeroRanger) knows to be zeros is compressed once for all such chunks
// of its size (a Blosc2 frame records it as a special zero chunk).
func Rewrite(w io.WriteSeeker, old Rewritable, content io.ReaderAt, size int64, dirty []Range) error {
	sink, err := old.NewSink(w, size)
	if err != nil {
		return err
	}
	dirty = coalesce(dirty)
	cs := int64(0)
	if s, ok := old.(ChunkSizer); ok {
		cs = s.NewChunkSize()
	}
	if cs <= 0 {
		return fmt.Errorf("%w: container has no chunk size for rewriting", ErrUnsupported)
	}
	// Each new chunk is either old chunk i copied verbatim (copy >= 0),
	// zeros, or [off, off+n) of content compressed again.
	type job struct {
		copy   int
		zero   bool
		off, n int64
	}
	oldN := old.NumChunks()
	zr, _ := content.(ZeroRanger)
	jobAt := func(i int) job {
		off := int64(i) * cs
		n := min(cs, size-off)
		j := job{copy: -1, off: off, n: n}
		if i < oldN && old.ChunkOffset(i) == off && old.ChunkOffset(i+1) == off+n && !touches(dirty, off, n) {
			j.copy = i
		} else if zr != nil && zr.IsZero(off, n) {
			j.zero = true
		}
		return j
	}
	total := int((size + cs - 1) / cs)
	ps, parallel := sink.(ParallelSink)
	if !parallel {
		buf := make([]byte, cs)
		for i := 0; i < total; i++ {
			j := jobAt(i)
			if j.copy >= 0 {
				if err := sink.CopyChunk(j.copy); err != nil {
					return err
				}
				continue
			}
			b := buf[:j.n]
			if j.zero {
				clear(b)
			} else if err := ReadFullAt(content, b, j.off); err != nil {
				return err
			}
			if err := sink.AddChunk(b); err != nil {
				return err
			}
		}
		return sink.Close()
	}
	// A chunk larger than streamChunk is read from content one block at
	// a time as it is compressed: an old chunk may hold up to 2 GiB, and
	// a file that claims such chunks must not make a rewrite hold them
	// whole. Zeros are compressed the same way.
	zeros := zeroChunks(func(n int64) ([]byte, error) { return ps.CompressFrom(zeroReaderAt{}, int(n)) })
	jobs := make([]job, 0, min(total, rewriteBatch))
	for first := 0; first < total; first += rewriteBatch {
		jobs = jobs[:0]
		for i := first; i < min(total, first+rewriteBatch); i++ {
			jobs = append(jobs, jobAt(i))
		}
		err = ordered.Run(len(jobs), func(k int) ([]byte, error) {
			j := jobs[k]
			switch {
			case j.copy >= 0:
				return nil, nil
			case j.zero:
				return zeros(j.n)
			}
			if j.n > streamChunk {
				return ps.CompressFrom(io.NewSectionReader(content, j.off, j.n), int(j.n))
			}
			b := make([]byte, j.n)
			if err := ReadFullAt(content, b, j.off); err != nil {
				return nil, err
			}
			return ps.Compress(b)
		}, func(k int, chunk []byte) error {
			if j := jobs[k]; j.copy >= 0 {
				return sink.CopyChunk(j.copy)
			}
			return ps.AddCompressed(chunk, int(jobs[k].n))
		})
		if err != nil {
			return err
		}
	}
	return sink.Close()
}

// ZeroChunks returns a function that gives the compressed form of n zero
// bytes, compressing each size once (compression is deterministic, so the
// result is what compressing each chunk would give). It is safe for
// concurrent use; the returned chunks must not be modified.
func ZeroChunks(compress func(plain []byte) ([]byte, error)) func(n int64) ([]byte, error) {
	return zeroChunks(func(n int64) ([]byte, error) { return compress(make([]byte, n)) })
}

// zeroChunks is ZeroChunks for a function that compresses n zeros.
func zeroChunks(compress func(n int64) ([]byte, error)) func(n int64) ([]byte, error) {
	var mu sync.Mutex
	done := map[int64][]byte{}
	return func(n int64) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		if c, ok := done[n]; ok {
			return c, nil
		}
		c, err := compress(n)
		if err != nil {
			return nil, err
		}
		done[n] = c
		return c, nil
	}
}

// coalesce sorts ranges and merges overlapping or adjacent ones.
func coalesce(rs []Range) []Range {
	out := make([]Range, 0, len(rs))
	for _, r := range rs {
		if r.Len > 0 {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Range) int { return cmp.Compare(a.Off, b.Off) })
	merged := out[:0]
	for _, r := range out {
		if k := len(merged) - 1; k >= 0 && r.Off <= merged[k].Off+merged[k].Len {
			merged[k].Len = max(merged[k].Off+merged[k].Len, r.Off+r.Len) - merged[k].Off
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

// touches reports whether any of the coalesced ranges overlaps [off, off+n).
func touches(rs []Range, off, n int64) bool {
	// The first range ending after off is the only candidate.
	i := sort.Search(len(rs), func(i int) bool { return rs[i].Off+rs[i].Len > off })
	return i < len(rs) && rs[i].Off < off+n
}

// ReadFullAt reads len(b) bytes at off, zero-filling past the end of r
// (a short read without io.EOF is an error).
func ReadFullAt(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == io.EOF {
		clear(b[n:])
		return nil
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// zeroReaderAt reads as zeros everywhere.
type zeroReaderAt struct{}

func (zeroReaderAt) ReadAt(p []byte, _ int64) (int, error) {
	clear(p)
	return len(p), nil
}
