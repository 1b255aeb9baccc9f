package pack

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/mmapfile"
)

// Format is a container format that Open can recognise. Formats register
// themselves from their package's init (as image formats do); import
// github.com/bloscfs/bloscfs/pack/all to get every format.
type Format struct {
	// Name is the format's name, as in Info.Format.
	Name string
	// Match reports whether a file starting with head (at most 64 bytes)
	// is of this format. Formats are tried in registration order; a weak
	// test should be registered last.
	Match func(head []byte) bool
	// Open opens a file of this format.
	Open func(r io.ReaderAt, size int64, name string, cache BlockCache) (Container, error)
	// Head reads what the first bytes of a file of this format (head,
	// of a size-byte file) tell of it: see OpenHead. Nil if the format
	// has no such parser (OpenHead then answers ErrNoHead).
	Head func(head []byte, size int64, name string) (Head, error)
	// OpenDir opens a directory container (nil if the format has none).
	// MatchDir reports whether a directory is one.
	OpenDir  func(dir string, cache BlockCache) (Container, error)
	MatchDir func(dir string) bool
}

var (
	formatsMu sync.RWMutex
	formats   []Format
)

// RegisterFormat adds a format for Open and OpenPath.
func RegisterFormat(f Format) {
	formatsMu.Lock()
	defer formatsMu.Unlock()
	formats = append(formats, f)
}

func registered() []Format {
	formatsMu.RLock()
	defer formatsMu.RUnlock()
	return append([]Format(nil), formats...)
}

// ErrUnknownFormat reports content that no registered format recognises.
var ErrUnknownFormat = errors.New("not a Blosc container")

// HeadLen is how many leading bytes Sniff needs.
const HeadLen = 64

// Sniff returns the format whose magic bytes head (the start of a file)
// carries, or nil.
func Sniff(head []byte) *Format {
	for _, f := range registered() {
		if f.Match != nil && f.Match(head) {
			return &f
		}
	}
	return nil
}

// Open opens the container in r (size bytes), recognising its format by
// content. name prefixes errors. A nil cache gives the container a private
// cache of DefaultCacheSize bytes.
func Open(r io.ReaderAt, size int64, name string, cache BlockCache) (Container, error) {
	head := make([]byte, min(size, HeadLen))
	if _, err := r.ReadAt(head, 0); err != nil && err != io.EOF {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f := Sniff(head)
	if f == nil {
		return nil, fmt.Errorf("%s: %w", name, ErrUnknownFormat)
	}
	return f.Open(r, size, name, cache)
}

// Head is what the first bytes of a container tell of it without the
// rest (see OpenHead): enough to show the file, its name and its size,
// but not its index, chunks or metadata, which only an Open reads (and
// checks).
type Head struct {
	// Format is the format's name, as in Info.Format.
	Format string
	// Size is the size of the view bloscfs shows: the plain bytes, or,
	// for a .b2nd array (NPY), its .npy form.
	Size int64
	// NPY reports that the view is a .b2nd array's .npy form.
	NPY bool
}

// ErrNoHead reports a container whose head does not tell its size (a
// Bloscpack file that does not record its chunk sizes, say): it must be
// opened to be known.
var ErrNoHead = errors.New("the size is not in the header")

// HeadShortError reports a head too short for its container's header:
// the first N bytes would do (a frame whose metalayers reach past the
// head given).
type HeadShortError struct {
	Name string
	N    int64
}

func (e *HeadShortError) Error() string {
	return fmt.Sprintf("%s: the header takes the first %d bytes", e.Name, e.N)
}

// MaxHead bounds the head any format asks for (HeadShortError.N): a
// header larger than this is refused as the full parse refuses it.
const MaxHead = 64 << 20

// OpenHead reads what the first bytes of a container tell of it: head
// holds the first min(size, len(head)) bytes of a size-byte file. It
// recognises the format by content, as Open does, and returns the
// format's name and the size of its view, reading nothing else: a
// listing shows a container from one small ranged read. A head that is
// too short for the container's header gives a *HeadShortError saying
// how many bytes would do; a format that cannot tell its size from its
// header gives ErrNoHead (open it whole); content that no format
// recognises gives ErrUnknownFormat; a header that does not parse gives
// the error its Open would. A Head is never larger a claim than Open
// checks: where both succeed they give the same size, but the head does
// not check what lies past the header (the index, the chunks, the
// trailer), which Open does.
func OpenHead(head []byte, size int64, name string) (Head, error) {
	if int64(len(head)) > size {
		head = head[:size]
	}
	if int64(len(head)) < min(size, HeadLen) {
		return Head{}, &HeadShortError{Name: name, N: min(size, HeadLen)}
	}
	f := Sniff(head[:min(len(head), HeadLen)])
	if f == nil {
		return Head{}, fmt.Errorf("%s: %w", name, ErrUnknownFormat)
	}
	if f.Head == nil {
		return Head{}, fmt.Errorf("%s: %s: %w", name, f.Name, ErrNoHead)
	}
	return f.Head(head, size, name)
}

// SniffDir returns the directory format that dir holds, or nil.
func SniffDir(dir string) *Format {
	for _, f := range registered() {
		if f.MatchDir != nil && f.MatchDir(dir) {
			return &f
		}
	}
	return nil
}

// OpenPath opens a container file or directory (a sparse frame). The
// returned closer releases the file; the container must not be used after.
// A symlink is not followed, and a FIFO, socket or device is refused
// (ErrNotRegular) without being read: see OpenSource.
func OpenPath(path string, cache BlockCache) (Container, io.Closer, error) {
	file, st, err := OpenSource(path, true)
	if err != nil {
		return nil, nil, err
	}
	if st.IsDir() {
		file.Close()
		f := SniffDir(path)
		if f == nil {
			return nil, nil, fmt.Errorf("%s: %w (directory)", path, ErrUnknownFormat)
		}
		c, err := f.OpenDir(path, cache)
		if err != nil {
			return nil, nil, err
		}
		closer, _ := c.(io.Closer)
		if closer == nil {
			closer = io.NopCloser(nil)
		}
		return c, closer, nil
	}
	if !mmapfile.Enabled() {
		pr := mmapfile.NewPread(file)
		c, err := Open(pr, st.Size(), path, cache)
		if err != nil {
			pr.Close()
			return nil, nil, err
		}
		return c, pr, nil
	}
	// Blocks decode from the file's memory mapping, not from a pread copy.
	m := mmapfile.New(file, st.Size())
	c, err := Open(m, st.Size(), path, cache)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return c, m, nil
}

// ChunkFile is a bare Blosc chunk stored as a file (.blosc): a container
// of one chunk.
type ChunkFile struct {
	*ChunkReader
	chunk *blosc.Chunk
	size  int64
}

// OpenChunkFile opens a file holding one Blosc chunk.
func OpenChunkFile(r io.ReaderAt, size int64, name string, cache BlockCache) (*ChunkFile, error) {
	c, err := blosc.NewChunk(r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(c.Cbytes) != size {
		return nil, fmt.Errorf("%s: %w: chunk of %d bytes in a %d-byte file", name, ErrFormat, c.Cbytes, size)
	}
	f := &ChunkFile{chunk: c, size: size}
	f.ChunkReader = NewChunkReader(name, f, cache)
	return f, nil
}

// NumChunks returns 1.
func (f *ChunkFile) NumChunks() int { return 1 }

// ChunkOffset returns 0 for the chunk and its size for the end.
func (f *ChunkFile) ChunkOffset(i int) int64 {
	if i == 0 {
		return 0
	}
	return int64(f.chunk.Nbytes)
}

// OpenChunk returns the chunk.
func (f *ChunkFile) OpenChunk(int) (*blosc.Chunk, error) { return f.chunk, nil }

// Info describes the chunk.
func (f *ChunkFile) Info() Info {
	h := f.chunk.Header
	return Info{
		Format: "chunk", Version: int(h.Version), Size: int64(h.Nbytes), StoredSize: f.size,
		Chunks: 1, ChunkSize: int64(h.Nbytes), Blocksize: f.chunk.BlockSize(),
		Codec: blosc.CodecName(h.Codec()), Clevel: -1, Typesize: int(h.Typesize),
		Filters: h.Filters, FiltersMeta: h.FiltersMeta,
	}
}

// MatchChunk is the weak content test for a bare Blosc chunk: a header
// that parses. OpenChunkFile then checks that cbytes is the file size.
func MatchChunk(head []byte) bool {
	if len(head) < blosc.MinHeaderLen {
		return false
	}
	_, err := blosc.ParseHeader(head)
	return err == nil && head[0] >= blosc.VersionBlosc1 && head[0] <= blosc.VersionVLBlocks
}

// ChunkFileHead is OpenHead for a bare Blosc chunk stored as a file: the
// plain size is its header's nbytes, and its cbytes must be the file
// size, as OpenChunkFile requires. A chunk whole in head is parsed whole
// (block starts and all), as OpenChunkFile parses it.
func ChunkFileHead(head []byte, size int64, name string) (Head, error) {
	h, err := blosc.ParseHeader(head)
	if err != nil {
		if len(head) < blosc.ExtHeaderLen && int64(len(head)) < size {
			return Head{}, &HeadShortError{Name: name, N: min(size, blosc.ExtHeaderLen)}
		}
		return Head{}, fmt.Errorf("%s: %w", name, err)
	}
	if int64(h.Cbytes) != size {
		if int64(h.Cbytes) > size {
			return Head{}, fmt.Errorf("%s: %w: chunk truncated: cbytes %d, only %d bytes available", name, blosc.ErrCorrupt, h.Cbytes, size)
		}
		return Head{}, fmt.Errorf("%s: %w: chunk of %d bytes in a %d-byte file", name, ErrFormat, h.Cbytes, size)
	}
	if int64(len(head)) >= size {
		if _, err := blosc.NewChunkBytes(head[:size]); err != nil {
			return Head{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	return Head{Format: "chunk", Size: int64(h.Nbytes)}, nil
}
