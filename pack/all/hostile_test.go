package all

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/internal/mmapfile"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/hostile"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// allocated returns the bytes f allocates (all of them, freed or not).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// retained returns how much more heap is live after f than before.
func retained(f func()) int64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.GC()
	runtime.ReadMemStats(&b)
	return int64(b.HeapAlloc) - int64(a.HeapAlloc)
}

// writeHostile writes the crafted file called name (internal/testkit/hostile)
// into a temporary directory and returns its path.
func writeHostile(t *testing.T, name string) string {
	t.Helper()
	p, err := hostile.Write(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHostileSpecialHugeBlock is finding 2 of issue 11: a 32-byte
// special chunk claiming one 2 GiB block is read a few KiB at a time
// without allocating the block.
func TestHostileSpecialHugeBlock(t *testing.T) {
	c := cache.New[pack.BlockKey](64 << 20)
	v, err := OpenView(writeHostile(t, "special_huge_block.blosc"), c)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	buf := make([]byte, 4096)
	n := allocated(func() {
		for _, off := range []int64{0, 1 << 30, v.Size - 4096} {
			if _, err := v.ReadAt(buf, off); err != nil {
				t.Fatal(err)
			}
			for _, b := range buf {
				if b != 0 {
					t.Fatal("not zero")
				}
			}
		}
	})
	if n > 16<<20 {
		t.Fatalf("three 4 KiB reads of a special chunk allocated %d bytes", n)
	}
}

// TestHostileBigBlock is finding 2 of issue 11: a block larger than the
// cache's bound (an eighth of it) is refused with a clear error naming
// the file, not decoded whole for every read.
func TestHostileBigBlock(t *testing.T) {
	c := cache.New[pack.BlockKey](64 << 20) // bound: 8 MiB; the block is 16 MiB
	p := writeHostile(t, "big_block.blosc")
	v, err := OpenView(p, c)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	_, err = v.ReadAt(make([]byte, 4096), 0)
	if !errors.Is(err, pack.ErrUnsupported) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("reading a 16 MiB block through a 64 MiB cache: %v", err)
	}
	// Without a cache's bound (the command line: 64 MiB) it reads.
	v2, err := OpenView(p, pack.NoCache{})
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	b := make([]byte, 4096)
	if _, err := v2.ReadAt(b, 1<<20); err != nil || b[0] != byte((1<<20)%251) {
		t.Fatalf("reading without a cache: %v", err)
	}
}

// TestHostileManyBlocks is finding 4 of issue 11: parsed chunks count
// against the cache's budget. 200 index entries point at one chunk of
// 2^20 blocks (8 MB parsed each); reading a byte of each keeps at most
// about a quarter of the cache.
func TestHostileManyBlocks(t *testing.T) {
	c := cache.New[pack.BlockKey](64 << 20)
	v, err := OpenView(writeHostile(t, "many_blocks.b2frame"), c)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	cs := v.Size / 2000
	chunks := int64(200)
	if testkit.RaceEnabled {
		chunks = 20 // 160 MB parsed: two and a half times the cache, at a tenth of the cost
	}
	n := retained(func() {
		for i := int64(0); i < chunks; i++ {
			if _, err := v.ReadAt(make([]byte, 1), i*cs+12345); err != nil {
				t.Fatal(err)
			}
		}
	})
	if n > 64<<20 {
		t.Fatalf("reading a byte of %d chunks keeps %d bytes", chunks, n)
	}
	if st := c.Stats(); st.Charged > st.MaxBytes/4+16<<20 {
		t.Fatalf("cache charged %d bytes of parsed chunks, budget %d", st.Charged, st.MaxBytes)
	}
	runtime.KeepAlive(v)
}

// TestHostileVLMeta is finding 3 of issue 11: 40 vlmetalayers of 20 MiB
// each (2 KB of file) are not decoded by opening or Info; reading one is
// an error naming the file past the limit.
func TestHostileVLMeta(t *testing.T) {
	var p string
	if !testkit.RaceEnabled {
		p = writeHostile(t, "vlmeta_bomb.b2frame")
	} else {
		// Writing 40 layers compresses 800 MiB of zeros in code the
		// detector watches; 4 (80 MiB, more than the bound below)
		// show the same.
		b, err := hostile.VLMetaBomb(4, 20<<20)
		if err != nil {
			t.Fatal(err)
		}
		p = filepath.Join(t.TempDir(), "vlmeta_bomb.b2frame")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var v *View
	n := allocated(func() {
		var err error
		if v, err = OpenView(p, pack.NoCache{}); err != nil {
			t.Fatal(err)
		}
		_ = v.Container.Info()
	})
	defer v.Close()
	if n > 32<<20 {
		t.Fatalf("opening and describing a 2 KB frame allocated %d bytes", n)
	}
	f := v.Container.(*frame.Frame)
	if _, err := f.VLMeta("m0"); !errors.Is(err, pack.ErrUnsupported) || !strings.Contains(err.Error(), p) {
		t.Fatalf("VLMeta of a 20 MiB layer: %v", err)
	}
}

// TestHostileZeroFrame is finding 5 of issue 11: a 180-byte frame
// claiming 32 PiB of zeros verifies (special chunks are not expanded),
// and streams in bounded memory.
func TestHostileZeroFrame(t *testing.T) {
	c, closer, err := pack.OpenPath(writeHostile(t, "zero_32pib.b2frame"), pack.NoCache{})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	v := ContainerView(c)
	var seen int64
	if err := v.Verify(func(n int64) { seen += n }); err != nil || seen != v.Size {
		t.Fatalf("Verify: %v, %d of %d bytes", err, seen, v.Size)
	}
	// Stream the first 1 GiB of it.
	w := &stopAfter{left: 1 << 30}
	n := allocated(func() {
		if _, err := v.WriteTo(w); !errors.Is(err, errEnough) {
			t.Fatalf("WriteTo: %v", err)
		}
	})
	// Read buffers are reused (less so under the race detector, which
	// drops pooled items at random); the planning of 4 billion pieces is
	// gone.
	if n > 768<<20 {
		t.Fatalf("streaming 1 GiB of zeros allocated %d bytes", n)
	}
}

var errEnough = errors.New("enough")

// stopAfter takes left bytes, all zero, then fails.
type stopAfter struct{ left int64 }

func (s *stopAfter) Write(p []byte) (int, error) {
	if !allZero(p) {
		return 0, errors.New("non-zero byte")
	}
	if s.left -= int64(len(p)); s.left <= 0 {
		return len(p), errEnough
	}
	return len(p), nil
}

var _ io.Writer = (*stopAfter)(nil)

// TestShrunkUnderView truncates container files while views of them are
// open, read with pread (the default) and from the file's memory mapping
// (BLOSCFS_MMAP=1): reads of the lost part fail with an error naming the
// file (wrapping mmapfile.ErrFault when mapped), and nothing crashes. Cutting
// only the tail leaves the last block's streams partly in the page that
// holds the new end, which reads as zeros without a fault: a series that
// compresses well once read back as zeros (zero-run streams) with no
// error, before the mapping checked the file's size after each read.
func TestShrunkUnderView(t *testing.T) {
	for _, mapped := range []bool{false, true} {
		t.Run(map[bool]string{false: "pread", true: "mmap"}[mapped], func(t *testing.T) {
			defer mmapfile.SetEnabled(mmapfile.SetEnabled(mapped))
			testShrunkUnderView(t, mapped)
		})
	}
}

func testShrunkUnderView(t *testing.T, mapped bool) {
	for _, tc := range []struct {
		name   string
		codec  int
		clevel int
		cut    func(size int64) int64 // the new size
	}{
		{"lz4", blosc.CodecLZ4, 5, func(n int64) int64 { return n / 3 }},
		{"stored", blosc.CodecLZ4, 0, func(n int64) int64 { return n / 3 }},
		{"lz4 tail", blosc.CodecLZ4, 9, func(n int64) int64 { return n - 64<<10 }},
		{"lz4 last page", blosc.CodecLZ4, 9, func(n int64) int64 { return n - 200 }},
		// zstd decodes with libzstd in a cgo build: its streams are then
		// copied with pread even when the file is mapped (a fault in C
		// code would kill the process).
		{"zstd", blosc.CodecZstd, 5, func(n int64) int64 { return n / 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.b2frame")
			rng := rand.New(rand.NewPCG(3, 4))
			writeFrame(t, path, blosc.Params{Codec: tc.codec, Clevel: tc.clevel, Typesize: 8, Blocksize: 256 << 10, Split: blosc.SplitAuto},
				1<<20, 8, func(_ int, chunk []byte) {
					for k := range chunk {
						chunk[k] = byte(rng.Uint32() >> 28)
					}
				})
			v, err := OpenView(path, pack.NoCache{})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			buf := make([]byte, 1<<20)
			for off := int64(0); off < v.Size; off += int64(len(buf)) { // every chunk parsed
				if _, err := v.ReadAt(buf, off); err != nil {
					t.Fatal(err)
				}
			}
			st, _ := os.Stat(path)
			if err := os.Truncate(path, tc.cut(st.Size())); err != nil {
				t.Fatal(err)
			}
			_, err = v.ReadAt(buf, v.Size-int64(len(buf)))
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Fatalf("reading past the new end: %v, want an error naming %s", err, path)
			}
			if mapped && !errors.Is(err, mmapfile.ErrFault) {
				t.Errorf("reading past the new end: %v, want a fault on the mapping", err)
			}
			if _, err := v.ReadAt(buf[:4096], v.Size-4096); err == nil {
				t.Error("reading the last 4 KiB past the new end succeeded")
			}
			if err := v.Verify(nil); err == nil {
				t.Error("Verify of a shrunk file passed")
			}
			if _, err := v.WriteTo(io.Discard); err == nil {
				t.Error("WriteTo of a shrunk file passed")
			}
		})
	}
}
