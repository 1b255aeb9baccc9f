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
