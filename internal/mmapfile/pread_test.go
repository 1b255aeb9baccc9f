package mmapfile

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestPread: reads from the page cache (readCached) and the ordinary
// way give the file's bytes, at any offset and length, from goroutines
// reading at once; a read past the end is short with io.EOF; after Close
// a read fails and no descriptor is used.
func TestPread(t *testing.T) {
	data := make([]byte, 3<<20+123)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPread(f)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for range 200 {
				off := rng.Int64N(int64(len(data)))
				n := rng.IntN(512 << 10)
				buf := make([]byte, n)
				got, err := p.ReadAt(buf, off)
				want := min(n, len(data)-int(off))
				if got != want || !bytes.Equal(buf[:got], data[off:off+int64(got)]) {
					t.Errorf("ReadAt(%d bytes at %d) = %d, %v; want %d bytes of the file", n, off, got, err, want)
					return
				}
				if want < n && !errors.Is(err, io.EOF) {
					t.Errorf("ReadAt past the end: %v, want io.EOF", err)
					return
				}
				if want == n && err != nil {
					t.Errorf("ReadAt(%d bytes at %d): %v", n, off, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReadAt(make([]byte, 10), 0); err == nil {
		t.Fatal("ReadAt after Close succeeded")
	}
}
