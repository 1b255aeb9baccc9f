package all

import (
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// benchStreamSize is the plain size of the frames BenchmarkWriteTo reads.
const benchStreamSize = 128 << 20

// writeFrame writes a frame of n chunks of cs bytes to path, with p's
// chunk parameters and byte shuffle; fill writes chunk i's plain bytes.
func writeFrame(tb testing.TB, path string, p blosc.Params, cs, n int, fill func(i int, chunk []byte)) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	p.Filters[5] = blosc.FilterShuffle
	w, err := frame.NewWriter(f, frame.Params{Chunk: p, ChunkSize: cs})
	if err != nil {
		tb.Fatal(err)
	}
	chunk := make([]byte, cs)
	for i := range n {
		fill(i, chunk)
		if err := w.AddChunk(chunk); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}

// writeRandomWalk writes a frame of a float64 random walk (the running
// sum of normal steps, as np.cumsum(np.random.normal(size=n)) gives) in
// 1 MiB chunks of 512 KiB blocks with byte shuffle, as `bloscfs pack
// --codec CODEC` writes it, and returns its path.
func writeRandomWalk(b *testing.B, dir string, codec int) string {
	path := filepath.Join(dir, blosc.CodecName(codec)+".b2frame")
	rng := rand.New(rand.NewPCG(1, 2))
	x := 0.0
	const cs = 1 << 20
	writeFrame(b, path, blosc.Params{Codec: codec, Clevel: 5, Typesize: 8, Blocksize: 512 << 10, Split: blosc.SplitAuto},
		cs, benchStreamSize/cs, func(_ int, chunk []byte) {
			for k := 0; k < cs; k += 8 {
				x += rng.NormFloat64()
				binary.LittleEndian.PutUint64(chunk[k:], math.Float64bits(x))
			}
		})
	return path
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per op since start, and the cores it
// kept busy on average: on a shared machine the wall time of a run
// depends on the other load, the CPU time per op much less, and cores
// near -cpu say that nothing waits.
func reportCPU(b *testing.B, start time.Duration) {
	cpu := cpuTime() - start
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	if wall := b.Elapsed(); wall > 0 {
		b.ReportMetric(float64(cpu)/float64(wall), "cores")
	}
}

// BenchmarkWriteTo measures what `bloscfs unpack IN - > /dev/null`
// (View.WriteTo to a discarding writer) and `bloscfs verify` (View.Verify)
// do, on a 128 MiB float64 random walk packed with LZ4 and with zstd (1 MiB
// chunks, 512 KiB blocks, shuffle), read from a file in the page cache
// without a block cache as unpack reads it. Run it with -cpu 1,2 (or
// more): the speed-up from one core to several is the ratio of the rates
// within one run.
func BenchmarkWriteTo(b *testing.B) {
	dir := b.TempDir()
	for _, codec := range []int{blosc.CodecLZ4, blosc.CodecZstd} {
		path := writeRandomWalk(b, dir, codec)
		v, err := OpenView(path, pack.NoCache{})
		if err != nil {
			b.Fatal(err)
		}
		name := blosc.CodecName(codec)
		b.Run("unpack/"+name, func(b *testing.B) {
			b.SetBytes(v.Size)
			cpu := cpuTime()
			for b.Loop() {
				if n, err := v.WriteTo(io.Discard); err != nil || n != v.Size {
					b.Fatalf("WriteTo: %d of %d bytes, %v", n, v.Size, err)
				}
			}
			reportCPU(b, cpu)
		})
		b.Run("verify/"+name, func(b *testing.B) {
			b.SetBytes(v.Size)
			cpu := cpuTime()
			for b.Loop() {
				if err := v.Verify(nil); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
		v.Close()
	}
}
