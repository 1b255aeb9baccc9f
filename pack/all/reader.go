package all

import (
	"fmt"
	"io"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// OpenViewReader is OpenView for a container that is not a local file:
// size bytes in r (an object in a bucket, say), named name in errors.
func OpenViewReader(r io.ReaderAt, size int64, name string, cache pack.BlockCache) (*View, error) {
	c, err := pack.Open(r, size, name, cache)
	if err != nil {
		return nil, err
	}
	v := &View{ReaderAt: c, Size: c.Size(), Container: c, closer: io.NopCloser(nil)}
	if f, ok := c.(*frame.Frame); ok && f.Array() != nil {
		npy, err := f.NPY()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		v.ReaderAt, v.Size, v.NPY = npy, npy.Size(), true
	}
	return v, nil
}

// OpenSparseView is OpenView for a sparse frame that is not a local
// directory; see frame.OpenSparse.
func OpenSparseView(index []byte, name string, chunk func(id int64) (io.ReaderAt, int64, error), cache pack.BlockCache) (*View, error) {
	f, err := frame.OpenSparse(index, name, chunk, cache)
	if err != nil {
		return nil, err
	}
	v := &View{ReaderAt: f, Size: f.Size(), Container: f, closer: io.NopCloser(nil)}
	if f.Array() != nil {
		npy, err := f.NPY()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		v.ReaderAt, v.Size, v.NPY = npy, npy.Size(), true
	}
	return v, nil
}
