package frame

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/pack"
)

func loadFixtures(t testing.TB) []fixtures.Fixture {
	t.Helper()
	fx, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

// frameFixtures returns the valid fixtures of the given kinds.
func frameFixtures(t testing.TB, kinds ...string) []fixtures.Fixture {
	var out []fixtures.Fixture
	for _, fx := range loadFixtures(t) {
		if fx.IsInvalid {
			continue
		}
		for _, k := range kinds {
			if fx.Kind == k {
				out = append(out, fx)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no fixtures of kinds %v", kinds)
	}
	return out
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// mapCache is an unbounded BlockCache for tests.
type mapCache struct {
	mu sync.Mutex
	m  map[pack.BlockKey][]byte
}

func newCache() *mapCache { return &mapCache{m: map[pack.BlockKey][]byte{}} }

func (c *mapCache) TryAcquire(k pack.BlockKey) (*cache.Ref, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[k]
	if !ok {
		return nil, false
	}
	return cache.Unowned(b), true
}

func (c *mapCache) Acquire(k pack.BlockKey, load func() ([]byte, error)) (*cache.Ref, error) {
	if r, ok := c.TryAcquire(k); ok {
		return r, nil
	}
	b, err := load()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.m[k] = b
	c.mu.Unlock()
	return cache.Unowned(b), nil
}

func (c *mapCache) Contains(k pack.BlockKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[k]
	return ok
}

func (*mapCache) Alloc(n int) []byte { return make([]byte, n) }

// RemoveRef keeps the block: the map is the tests' record of what was
// decoded.
func (*mapCache) RemoveRef(pack.BlockKey, *cache.Ref) {}

// openFixture opens a fixture file or sparse directory.
func openFixture(t testing.TB, path string, cache pack.BlockCache) *Frame {
	t.Helper()
	f, err := openPath(path, cache)
	if err != nil {
		t.Fatalf("open %s: %v", filepath.Base(path), err)
	}
	return f
}

func openPath(path string, cache pack.BlockCache) (*Frame, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return OpenDir(path, cache)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Open(bytes.NewReader(b), int64(len(b)), filepath.Base(path), cache)
}

// readAll reads a whole io.ReaderAt of the given size in one call.
func readAll(t testing.TB, r io.ReaderAt, size int64) []byte {
	t.Helper()
	b := make([]byte, size)
	n, err := r.ReadAt(b, 0)
	if n != len(b) || (err != nil && !errors.Is(err, io.EOF)) {
		t.Fatalf("ReadAt(%d bytes, 0) = %d, %v", size, n, err)
	}
	return b
}

// memFile is an in-memory io.WriteSeeker (and io.ReaderAt) with Truncate.
type memFile struct {
	b   []byte
	pos int64
}

func (m *memFile) Write(p []byte) (int, error) {
	end := m.pos + int64(len(p))
	if end > int64(len(m.b)) {
		if end > int64(cap(m.b)) {
			nb := make([]byte, end, 2*end)
			copy(nb, m.b)
			m.b = nb
		}
		m.b = m.b[:end]
	}
	copy(m.b[m.pos:], p)
	m.pos = end
	return len(p), nil
}

func (m *memFile) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += m.pos
	case io.SeekEnd:
		off += int64(len(m.b))
	}
	if off < 0 {
		return 0, errors.New("negative seek")
	}
	m.pos = off
	return off, nil
}

func (m *memFile) Truncate(n int64) error {
	if n < int64(len(m.b)) {
		m.b = m.b[:n]
	}
	return nil
}

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// reopen opens the frame written into m.
func reopen(t testing.TB, m *memFile, cache pack.BlockCache) *Frame {
	t.Helper()
	f, err := Open(bytes.NewReader(m.b), int64(len(m.b)), "written", cache)
	if err != nil {
		t.Fatalf("reopen written frame: %v", err)
	}
	return f
}
