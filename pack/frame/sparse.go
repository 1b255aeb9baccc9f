package frame

import (
	"bytes"
	"fmt"
	"io"

	"github.com/bloscfs/bloscfs/pack"
)

// OpenSparse opens a sparse frame that is not a local directory (a prefix
// in a bucket, say): index holds its chunks.b2frame, and chunk opens the
// chunk file of an id (its bytes and size). name prefixes errors.
func OpenSparse(index []byte, name string, chunk func(id int64) (io.ReaderAt, int64, error), cache pack.BlockCache) (*Frame, error) {
	if int64(len(index)) > maxIndexFile {
		return nil, fmt.Errorf("%s: %w: %s of %d bytes exceeds the %d-byte limit", name, pack.ErrUnsupported, IndexFile, len(index), maxIndexFile)
	}
	f := &Frame{name: name, dir: name, sparse: true, chunkFile: chunk, r: bytes.NewReader(index)}
	if err := f.parse(int64(len(index))); err != nil {
		return nil, err
	}
	f.cr = pack.NewChunkReader(name, f, cache)
	return f, nil
}

// ChunkFileName returns the name of a sparse frame's chunk file.
func ChunkFileName(id int64) string { return fmt.Sprintf("%08X.chunk", id) }
