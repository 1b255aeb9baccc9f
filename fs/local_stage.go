package fs

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"

	"github.com/bloscfs/bloscfs/pack"
)

// stage holds the uncommitted state of a compressed file open for
// writing: written bytes in a sparse file beside the original (hidden
// from the view), the ranges they cover, and the current size. Reads see
// the stage over the original (base), and zeros past what either holds.
type stage struct {
	file      *os.File     // sparse; offsets are plain offsets
	dirty     []pack.Range // sorted, coalesced written ranges
	size      int64        // current plain size
	baseLimit int64        // base bytes at or past this were truncated away
	base      io.ReaderAt  // original plain content (nil for a new file)
	temp      *tempFile    // file, as a temp file to remove (nil in tests)
	// stream, while not nil, holds all of [0, size) instead of file
	// (which then holds nothing), for a new file written in order.
	stream *streamer
	// broken is set when acknowledged writes were lost (a stream that
	// failed): commits fail with it, so that the file keeps its old
	// content, until the stage is dropped.
	broken error
}

// newStage starts a stage over base (baseSize bytes, or 0 and nil).
func newStage(f *os.File, base io.ReaderAt, baseSize int64) *stage {
	return &stage{file: f, size: baseSize, baseLimit: baseSize, base: base}
}

// reset starts the stage over from a new base of size bytes, keeping its
// (emptied) file.
func (s *stage) reset(base io.ReaderAt, size int64) {
	*s = stage{file: s.file, temp: s.temp, size: size, baseLimit: size, base: base}
}

// changed reports whether anything differs from the base.
func (s *stage) changed(baseSize int64) bool {
	return len(s.dirty) > 0 || s.size != baseSize || s.baseLimit != baseSize
}

// addDirty records [off, off+n) as written.
func (s *stage) addDirty(off, n int64) {
	if n <= 0 {
		return
	}
	i := sort.Search(len(s.dirty), func(i int) bool { return s.dirty[i].Off+s.dirty[i].Len >= off })
	j := i
	lo, hi := off, off+n
	for j < len(s.dirty) && s.dirty[j].Off <= hi {
		lo = min(lo, s.dirty[j].Off)
		hi = max(hi, s.dirty[j].Off+s.dirty[j].Len)
		j++
	}
	s.dirty = slices.Replace(s.dirty, i, j, pack.Range{Off: lo, Len: hi - lo})
}

// WriteAt writes into the stage. A stream takes writes at the end; any
// other write ends it first.
func (s *stage) WriteAt(p []byte, off int64) (int, error) {
	if s.broken != nil {
		return 0, s.broken
	}
	if s.stream != nil {
		if off == s.size {
			if err := s.stream.write(p); err != nil {
				s.breakStream(err)
				return 0, err
			}
			s.size += int64(len(p))
			return len(p), nil
		}
		if err := s.demote(); err != nil {
			return 0, err
		}
	}
	n, err := s.file.WriteAt(p, off)
	s.addDirty(off, int64(n))
	s.size = max(s.size, off+int64(n))
	return n, err
}

// truncate sets the size: bytes past it are gone, and reappear as zeros
// if the file grows again.
func (s *stage) truncate(n int64) error {
	if s.broken != nil {
		return s.broken
	}
	switch {
	case s.stream != nil && n == 0:
		s.dropStream() // nothing of it stays
		s.size = 0
		return nil
	case s.stream != nil && n != s.size:
		if err := s.demote(); err != nil {
			return err
		}
	}
	if n < s.size {
		var kept []pack.Range
		for _, r := range s.dirty {
			if r.Off < n {
				r.Len = min(r.Len, n-r.Off)
				kept = append(kept, r)
			}
		}
		s.dirty = kept
		s.baseLimit = min(s.baseLimit, n)
		if err := s.file.Truncate(n); err != nil {
			return err
		}
	}
	s.size = n
	return nil
}

// ReadAt reads the staged view: written ranges from the stage file, the
// rest from the base below baseLimit, zeros beyond. A streaming stage
// cannot be read: demote it first.
func (s *stage) ReadAt(p []byte, off int64) (int, error) {
	if s.stream != nil {
		return 0, errStreaming
	}
	if s.broken != nil {
		return 0, s.broken
	}
	if off >= s.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := len(p)
	p = p[:min(int64(len(p)), s.size-off)]
	pos := off
	end := off + int64(len(p))
	i := sort.Search(len(s.dirty), func(i int) bool { return s.dirty[i].Off+s.dirty[i].Len > pos })
	for pos < end {
		var next int64 = end
		if i < len(s.dirty) && s.dirty[i].Off <= pos {
			// Inside a written range.
			stop := min(end, s.dirty[i].Off+s.dirty[i].Len)
			if err := readFullAt(s.file, p[pos-off:stop-off], pos); err != nil {
				return int(pos - off), err
			}
			pos = stop
			i++
			continue
		}
		if i < len(s.dirty) {
			next = min(end, s.dirty[i].Off)
		}
		// A gap: base bytes, then zeros.
		gap := p[pos-off : next-off]
		nb := int64(0)
		if s.base != nil && pos < s.baseLimit {
			nb = min(int64(len(gap)), s.baseLimit-pos)
			if err := readFullAt(s.base, gap[:nb], pos); err != nil {
				return int(pos - off), err
			}
		}
		clear(gap[nb:])
		pos = next
	}
	if len(p) < want {
		return len(p), io.EOF
	}
	return len(p), nil
}

// readFullAt reads exactly len(p) bytes, zero-filling past the end of a
// (sparse) file.
func readFullAt(r io.ReaderAt, p []byte, off int64) error { return pack.ReadFullAt(r, p, off) }

// rewriteRanges returns the ranges a rewrite must re-encode: the written
// ones and what a truncation cut from the base.
func (s *stage) rewriteRanges(baseSize int64) []pack.Range {
	out := slices.Clone(s.dirty)
	if s.baseLimit < baseSize {
		out = append(out, pack.Range{Off: s.baseLimit, Len: baseSize - s.baseLimit})
	}
	slices.SortFunc(out, func(a, b pack.Range) int { return cmp.Compare(a.Off, b.Off) })
	return out
}

// errStreaming reports a read of a stage whose content is still in a
// stream (a bug: readers demote first).
var errStreaming = errors.New("bloscfs: reading a stage that is streaming")

// demote ends the stream: its content moves into the stage file, as
// written ranges. If that fails, the writes are lost: the stage breaks.
func (s *stage) demote() error {
	st := s.stream
	s.stream = nil
	n, err := st.demote(s.file)
	if err != nil {
		s.broken = fmt.Errorf("moving the streamed writes to the stage: %w", err)
		return s.broken
	}
	s.addDirty(0, n)
	return nil
}

// breakStream drops a stream that failed: what it held is lost.
func (s *stage) breakStream(err error) {
	s.broken = fmt.Errorf("streaming the writes: %w", err)
	s.stream.abort()
	s.stream = nil
}

// dropStream abandons a stream, if any, and its temp file.
func (s *stage) dropStream() {
	if s.stream != nil {
		s.stream.abort()
		s.stream = nil
	}
}

// IsZero reports whether [off, off+n) reads as zeros without being
// stored anywhere (pack.ZeroRanger): never written, and past what is kept
// of the base. A truncation that extends a file makes such a region;
// it is written as zero chunks that cost nothing to compress.
func (s *stage) IsZero(off, n int64) bool {
	if s.stream != nil || s.base != nil && off < s.baseLimit {
		return false
	}
	i := sort.Search(len(s.dirty), func(i int) bool { return s.dirty[i].Off+s.dirty[i].Len > off })
	return i >= len(s.dirty) || s.dirty[i].Off >= off+n
}
