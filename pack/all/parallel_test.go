package all

import (
	"bytes"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/gridfiles"
	"github.com/bloscfs/bloscfs/pack"
)

// TestParallelPathsMatchSerial writes Bloscpack files and frames over the
// parameter grid (several chunks each, of a size that is not a power of
// two) and checks that the paths that decode on several goroutines into
// one buffer, WriteTo (unpack, verify) and ReadAt with and without a
// cache, give what a serial single-goroutine decode gives, several times
// over with GOMAXPROCS 4 so that the goroutines interleave even on two
// cores.
func TestParallelPathsMatchSerial(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	g := gridfiles.Full()
	if testkit.RaceEnabled {
		g = gridfiles.Tiny()
	} else if testing.Short() || puregoBuild {
		g = gridfiles.Small() // make canary runs the whole grid
	}
	files, err := gridfiles.Write(t.TempDir(), g)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		serial, err := gridfiles.SerialDecode(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if d := gridfiles.FirstDiff(serial, f.Plain); d >= 0 {
			t.Fatalf("%s: the serial decode differs from what was written at offset %d", f.Name, d)
		}
		for _, cache := range []pack.BlockCache{pack.NoCache{}, nil} {
			v, err := OpenView(f.Path, cache)
			if err != nil {
				t.Fatal(err)
			}
			for rep := 0; rep < 3; rep++ {
				var buf bytes.Buffer
				if _, err := v.WriteTo(&buf); err != nil {
					t.Fatalf("%s: WriteTo: %v", f.Name, err)
				}
				if d := gridfiles.FirstDiff(buf.Bytes(), serial); d >= 0 {
					t.Fatalf("%s: WriteTo (cache %T, run %d) differs from the serial decode at offset %d", f.Name, cache, rep, d)
				}
				cn := testkit.NewCanary(int(v.Size))
				if n, err := v.ReadAt(cn.Dst(), 0); n != len(serial) || (err != nil && err != io.EOF) {
					t.Fatalf("%s: ReadAt: %d, %v", f.Name, n, err)
				}
				if err := cn.Check(); err != nil {
					t.Fatalf("%s: ReadAt (cache %T) %s", f.Name, cache, err)
				}
				if d := gridfiles.FirstDiff(cn.Dst(), serial); d >= 0 {
					t.Fatalf("%s: ReadAt (cache %T, run %d) differs from the serial decode at offset %d", f.Name, cache, rep, d)
				}
			}
			v.Close()
		}
	}
	t.Logf("%d files", len(files))
}

// TestDecodeRangeMatchesSerial decodes ranges of every file of the grid
// with pack.DecodeRange (what WriteTo's workers do) into a window of a
// guarded buffer: whole files, single bytes, and ranges that start and
// end inside blocks and chunks (the edge-block path, with the delta
// filter's block 0 decoded on the side), and compares them with the
// serial decode. No guard byte may change.
func TestDecodeRangeMatchesSerial(t *testing.T) {
	g := gridfiles.Small()
	if testkit.RaceEnabled {
		g = gridfiles.Tiny()
	}
	files, err := gridfiles.Write(t.TempDir(), g)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, f := range files {
		serial, err := gridfiles.SerialDecode(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		c, closer, err := pack.OpenPath(f.Path, pack.NoCache{})
		if err != nil {
			t.Fatal(err)
		}
		src := c.(pack.ChunkSource)
		size := int64(len(serial))
		ranges := [][2]int64{{0, size}, {0, 1}, {size - 1, 1}, {1, size - 2}}
		for k := 0; k < 16; k++ {
			off := rng.Int64N(size)
			ranges = append(ranges, [2]int64{off, rng.Int64N(size-off) + 1})
		}
		for _, r := range ranges {
			cn := testkit.NewCanary(int(r[1]))
			if err := pack.DecodeRange(src, cn.Dst(), r[0]); err != nil {
				t.Fatalf("%s: DecodeRange [%d,+%d): %v", f.Name, r[0], r[1], err)
			}
			if err := cn.Check(); err != nil {
				t.Fatalf("%s: DecodeRange [%d,+%d): %s", f.Name, r[0], r[1], err)
			}
			if d := gridfiles.FirstDiff(cn.Dst(), serial[r[0]:r[0]+r[1]]); d >= 0 {
				t.Fatalf("%s: DecodeRange [%d,+%d) differs from the serial decode at %d", f.Name, r[0], r[1], d)
			}
		}
		if err := pack.DecodeRange(src, make([]byte, 2), size-1); err == nil {
			t.Fatalf("%s: DecodeRange past the end: no error", f.Name)
		}
		closer.Close()
	}
}
