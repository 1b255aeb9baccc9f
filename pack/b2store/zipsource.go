package b2store

import (
	"fmt"
	"io"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/zipread"
)

// ZipSource is the Source of a .b2z archive: its members, read in place
// through zipread as python-blosc2 reads them (a member's data starts
// after its own local header, docs/FORMATS.md §14.5). Only stored
// members open: a deflated one is refused, with an error naming the
// archive and the member, as python-blosc2 fails to open it as a frame.
type ZipSource struct {
	a  *zipread.Archive
	ip blosc.InPlaceReader // the archive's reader, if it lends its bytes
}

// NewZipSource returns the Source of an opened archive; r, when not nil,
// is the archive's reader: a member then lends its bytes where r does
// (blosc.InPlaceReader: a bucket's fetched ranges, a mapping), so that a
// block of a leaf's chunk is read in one read, not stream by stream.
func NewZipSource(a *zipread.Archive, r io.ReaderAt) *ZipSource {
	ip, _ := r.(blosc.InPlaceReader)
	return &ZipSource{a: a, ip: ip}
}

// OpenZip opens the ZIP archive of size bytes in r (in at most two reads:
// its end records and central directory) as a Source; name names it in
// errors. Bytes that are not a ZIP archive give an error wrapping
// zipread.ErrFormat.
func OpenZip(r io.ReaderAt, size int64, name string) (*ZipSource, error) {
	a, err := zipread.Open(r, size, name)
	if err != nil {
		return nil, err
	}
	return NewZipSource(a, r), nil
}

// Archive returns the archive.
func (s *ZipSource) Archive() *zipread.Archive { return s.a }

// Members lists the archive's members that are not directory entries,
// in directory order, stopping after MaxEntries+1 besides embed.b2e
// (the store reads no more, and says so); embed.b2e is always listed
// when the archive has it. Members that cannot be read are listed:
// opening one says why.
func (s *ZipSource) Members() ([]Member, error) {
	n := s.a.Len()
	out := make([]Member, 0, min(n, MaxEntries+2))
	embed := false
	for i, values := 0, 0; i < n && values <= MaxEntries; i++ {
		m := s.a.Member(i)
		if m.IsDir() {
			continue
		}
		if m.Name == EmbedFile {
			embed = true
		} else {
			values++
		}
		out = append(out, Member{Path: m.Name, Size: m.Size})
	}
	if !embed {
		if i, ok := s.a.Lookup(EmbedFile); ok {
			m := s.a.Member(i)
			out = append(out, Member{Path: m.Name, Size: m.Size})
		}
	}
	return out, nil
}

// Open returns a reader of the stored member p, read in place, and its
// size.
func (s *ZipSource) Open(p string) (io.ReaderAt, int64, error) {
	i, ok := s.a.Lookup(p)
	if !ok {
		return nil, 0, fmt.Errorf("%s: %s: %w", s.a.Name(), p, ErrNotFound)
	}
	r, err := s.a.Open(i)
	if err != nil {
		if m := s.a.Member(i); m.Err == nil && m.Method != zipread.Store {
			return nil, 0, fmt.Errorf("%w (python-blosc2 reads only stored members of a .b2z)", err)
		}
		return nil, 0, err
	}
	if s.ip != nil {
		return &inPlaceMember{Reader: r, ip: s.ip}, r.Size(), nil
	}
	return r, r.Size(), nil
}

// inPlaceMember is a stored member of an archive whose reader lends its
// bytes.
type inPlaceMember struct {
	*zipread.Reader
	ip blosc.InPlaceReader
}

// ReadInPlace lends fn the n bytes at off of the member where the
// archive's reader lends them (blosc.InPlaceReader).
func (m *inPlaceMember) ReadInPlace(off, n int64, fn func([]byte) error) (bool, error) {
	if off < 0 || n < 0 || off > m.Size()-n {
		return false, nil
	}
	d, err := m.DataOffset()
	if err != nil {
		return false, err
	}
	return m.ip.ReadInPlace(d+off, n, fn)
}
