package b2store

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/bloscfs/bloscfs/blosc"
)

// readWatch counts the reads of a store's files that failed. A layer
// above a read may pass its failure on as a fact about the bytes (a chunk
// whose header could not be read is a corrupt chunk to the chunk reader),
// so that an error met while a read failed is never kept as a verdict on
// the store: what failed may read the next time.
type readWatch struct {
	n    atomic.Int64
	mu   sync.Mutex
	last error
}

// wrap returns r, its failed reads counted; a reader that lends its
// bytes (blosc.InPlaceReader) still does.
func (w *readWatch) wrap(r io.ReaderAt) io.ReaderAt {
	if ip, ok := r.(blosc.InPlaceReader); ok {
		return &watchedInPlace{watched{r: r, w: w}, ip}
	}
	return &watched{r: r, w: w}
}

// failures returns how many reads have failed so far.
func (w *readWatch) failures() int64 { return w.n.Load() }

// lastFailure returns the error of the last read that failed.
func (w *readWatch) lastFailure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// sure returns err as it is when no read failed since the count was
// before, else the last read's failure: no verdict on the store.
func (w *readWatch) sure(err error, before int64) error {
	if err == nil || w.failures() == before {
		return err
	}
	if last := w.lastFailure(); last != nil {
		return last
	}
	return err
}

// watched is a reader whose failed reads its watch counts.
type watched struct {
	r io.ReaderAt
	w *readWatch
}

// ReadAt reads from the file; an error other than io.EOF after all of p
// counts as a failure.
func (x *watched) ReadAt(p []byte, off int64) (int, error) {
	n, err := x.r.ReadAt(p, off)
	if err != nil && (err != io.EOF || n < len(p)) {
		x.w.failed(err)
	}
	return n, err
}

// failed counts a failed read.
func (w *readWatch) failed(err error) {
	w.n.Add(1)
	w.mu.Lock()
	w.last = err
	w.mu.Unlock()
}

// watchedInPlace is a watched reader that lends its bytes.
type watchedInPlace struct {
	watched
	ip blosc.InPlaceReader
}

// ReadInPlace lends fn the bytes where the reader lends them.
func (x *watchedInPlace) ReadInPlace(off, n int64, fn func([]byte) error) (bool, error) {
	ok, err := x.ip.ReadInPlace(off, n, fn)
	if !ok && err != nil {
		x.w.failed(err)
	}
	return ok, err
}

// Close closes the file, if it is a closer.
func (x *watched) Close() error {
	if c, ok := x.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
