package frame

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/pack"
)

// FuzzOpenFrame opens arbitrary bytes as a frame and, when that works
// and the views are at most 16 MiB, reads them all, decodes the
// metadata, and copies every chunk into a new frame that must reopen
// with the same content. Nothing may panic or allocate without bound.
func FuzzOpenFrame(f *testing.F) {
	if testkit.RaceEnabled {
		// Writing and decoding the seeds (every fixture, an 800 MiB metadata
		// bomb) takes minutes under the detector, on one goroutine each,
		// with nothing for it to see. make purego and make fuzz run them
		// without it.
		f.Skip("runs without the race detector (make purego, make fuzz)")
	}
	for _, fx := range loadFixtures(f) {
		switch {
		case fx.IsDir:
			if b, err := os.ReadFile(filepath.Join(fx.Path, IndexFile)); err == nil {
				f.Add(b)
			}
		case strings.HasSuffix(fx.Name, ".b2frame") || strings.HasSuffix(fx.Name, ".b2nd"):
			if b, err := os.ReadFile(fx.Path); err == nil {
				f.Add(b)
			}
		}
	}
	// Issue 11: 40 vlmetalayers of 20 MiB each in 2 KB.
	bomb := Params{Chunk: blosc.DefaultParams(1)}
	for i := 0; i < 40; i++ {
		bomb.VLMetalayers = append(bomb.VLMetalayers, Metalayer{Name: fmt.Sprint("m", i), Value: make([]byte, 20<<20)})
	}
	m := &memFile{}
	if w, err := NewWriter(m, bomb); err == nil && w.AddChunk([]byte("hello")) == nil && w.Close() == nil {
		f.Add(m.b)
	} else {
		f.Fatal("writing the vlmetalayer seed failed")
	}
	const limit = 16 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := testkit.StartAlloc()
		var own uint64 // what this target allocates itself
		defer func() { mem.Check(t, len(data), own) }()
		fr, err := Open(bytes.NewReader(data), int64(len(data)), "fuzz", nil)
		if err != nil {
			return
		}
		_ = fr.Info()
		// A few vlmetalayers: each is bounded (pack.MaxMetaLayer), and
		// this loop is the target's, not the library's.
		for _, n := range fr.VLMetaNames()[:min(len(fr.VLMetaNames()), 2)] {
			_, _ = fr.VLMeta(n)
		}
		if fr.Size() > limit {
			return
		}
		// content, the C-order and copy reads, the copy itself.
		own = 3*uint64(fr.Size()) + 4096 + 4*uint64(len(data)) + 8<<20
		content := make([]byte, fr.Size())
		n, rerr := fr.ReadAt(content, 0)
		if rerr != nil && !(rerr == io.EOF && n == len(content)) {
			rerr = errors.New("read failed")
		} else {
			rerr = nil
		}
		if fr.Size() <= 1<<20 {
			// Without a cache, the blocks of one read decode in parallel
			// into windows of the caller's buffer: none may write
			// outside it.
			// A second open, and the canaried buffer and its pattern,
			// are the target's own.
			again := testkit.StartAlloc()
			nc, err := Open(bytes.NewReader(data), int64(len(data)), "fuzz", pack.NoCache{})
			if err != nil {
				t.Fatalf("opens with a cache, not without: %v", err)
			}
			own += again.Allocated() + uint64(nc.Size()) + testkit.CanaryFront + testkit.CanaryBack + 1<<20
			cn := testkit.NewCanary(int(nc.Size()))
			n, err := nc.ReadAt(cn.Dst(), 0)
			if cerr := cn.Check(); cerr != nil {
				t.Fatalf("ReadAt without a cache (err %v) %s", err, cerr)
			}
			if (err == nil || err == io.EOF) && n == len(content) && rerr == nil && !bytes.Equal(cn.Dst(), content) {
				t.Fatal("reads with and without a cache differ")
			}
		}
		if a := fr.Array(); a != nil {
			if c, err := fr.COrder(); err == nil && c.Size() <= limit {
				_, _ = c.ReadAt(make([]byte, c.Size()), 0)
			}
			if v, err := fr.NPY(); err == nil && v.Size() <= limit+1<<16 {
				_, _ = v.ReadAt(make([]byte, min(v.Size(), 4096)), 0)
			}
		}
		// Copy every chunk verbatim into a new frame. The writer keeps an
		// entry per chunk: only for as many chunks as the input has bytes.
		if fr.NumChunks() > len(data) {
			return
		}
		m := &memFile{}
		s, err := fr.NewSink(m, fr.Size())
		if err != nil {
			return
		}
		for i := 0; i < fr.NumChunks(); i++ {
			if err := s.CopyChunk(i); err != nil {
				return
			}
		}
		if err := s.Close(); err != nil {
			return
		}
		g, err := Open(bytes.NewReader(m.b), int64(len(m.b)), "copy", nil)
		if err != nil {
			t.Fatalf("the copy of a frame that opened does not open: %v", err)
		}
		if g.Size() != fr.Size() || g.NumChunks() != fr.NumChunks() {
			t.Fatalf("copy: size %d chunks %d, source %d %d", g.Size(), g.NumChunks(), fr.Size(), fr.NumChunks())
		}
		if rerr == nil {
			got := make([]byte, g.Size())
			if _, err := g.ReadAt(got, 0); err != nil && err != io.EOF {
				t.Fatalf("the copy of a readable frame fails: %v", err)
			}
			if !bytes.Equal(got, content) {
				t.Fatal("the copy reads differently")
			}
		}
	})
}
