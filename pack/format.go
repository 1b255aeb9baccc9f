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
