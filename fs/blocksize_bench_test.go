package fs

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack/frame"
	"golang.org/x/sys/unix"
)

// coldBlockLatencies reads 4 KiB at a random offset inside each of n
// distinct blocks of bs bytes, chosen at random, so that every read finds
// its block not yet decoded, and returns the p50 and p99 of the preads.
func coldBlockLatencies(b *testing.B, path string, size int64, bs, n int, seed uint64) (p50, p99 time.Duration) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
	rng := rand.New(rand.NewPCG(seed, 7))
	blocks := rng.Perm(int(size / int64(bs)))
	n = min(n, len(blocks))
	buf := make([]byte, 4096)
	ds := make([]time.Duration, n)
	for i := range ds {
		off := int64(blocks[i])*int64(bs) + rng.Int64N(int64(bs)/4096)*4096
		t := time.Now()
		if _, err := f.ReadAt(buf, off); err != nil {
			b.Fatal(err)
		}
		ds[i] = time.Since(t)
	}
	slices.Sort(ds)
	return ds[n/2], ds[n*99/100]
}

// BenchmarkBlockSize shows what the block size trades: for 64, 128, 256
// and 512 KiB blocks of LZ4 and zstd (clevel 5, shuffle, typesize 8, 1 MiB
// chunks) of a float64 random walk and of a smooth series, the
// compression ratio,
// the p50 and p99 of cold 4 KiB preads through a fresh mount (each in a
// block not yet decoded, the source in the page cache), the decode time
// of one block in-process, and a cold sequential read through a fresh
// mount. Needs root. BLOSCFS_BENCH_SIZE MiB (default 1024) of data; 256
// is plenty for the latencies.
func BenchmarkBlockSize(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root")
	}
	size := benchSize()
	dir := b.TempDir()
	type file struct {
		name      string
		smooth    bool
		codec, bs int
		path      string
	}
	var files []*file
	for _, smooth := range []bool{false, true} {
		for _, codec := range []int{blosc.CodecLZ4, blosc.CodecZstd} {
			for _, bs := range []int{64 << 10, 128 << 10, 256 << 10, 512 << 10} {
				name := fmt.Sprintf("walk-%s-%dK", blosc.CodecName(codec), bs>>10)
				if smooth {
					name = "smooth" + name[4:]
				}
				files = append(files, &file{name, smooth, codec, bs, filepath.Join(dir, name+".b2frame")})
			}
		}
	}
	const cs = 1 << 20
	ws := make([]*frame.Writer, len(files))
	for i, fl := range files {
		f, err := os.Create(fl.path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		p := blosc.Params{Codec: fl.codec, Clevel: 5, Typesize: 8, Split: blosc.SplitAuto, Blocksize: fl.bs}
		p.Filters[5] = blosc.FilterShuffle
		if ws[i], err = frame.NewWriter(f, frame.Params{Chunk: p, ChunkSize: cs}); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	x := 0.0
	chunk := make([]byte, cs)
	for i := 0; int64(i)*cs < size; i++ {
		// A float64 random walk, np.cumsum(normal) (issue 15's data),
		// and BenchmarkMount's smooth series.
		chunk = chunk[:min(cs, size-int64(i)*cs)]
		for k := 0; k+8 <= len(chunk); k += 8 {
			x += rng.NormFloat64()
			binary.LittleEndian.PutUint64(chunk[k:], math.Float64bits(x))
		}
		smooth := benchChunk(i, len(chunk))
		for j, w := range ws {
			c := chunk
			if files[j].smooth {
				c = smooth
			}
			if err := w.AddChunk(c); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, w := range ws {
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	mount := func() (string, func()) { return benchMountDir(b, dir) }
	b.ResetTimer()
	for b.Loop() {
		fmt.Fprintf(os.Stderr, "%-16s %6s %9s %9s %10s %8s\n", "file", "ratio", "p50-µs", "p99-µs", "decode-µs", "seq-GB/s")
		for _, fl := range files {
			st, err := os.Stat(fl.path)
			if err != nil {
				b.Fatal(err)
			}
			timeCmd(b, "cat", fl.path) // the source into the page cache
			ratio := float64(size) / float64(st.Size())
			mnt, unmount := mount()
			p50, p99 := coldBlockLatencies(b, filepath.Join(mnt, fl.name), size, fl.bs, 500, 1)
			unmount()
			dec := blockDecodeTime(b, fl.path)
			mnt, unmount = mount()
			d := timeCmd(b, "dd", "if="+filepath.Join(mnt, fl.name), "of=/dev/null", "bs=1M")
			unmount()
			seq := float64(size) / d.Seconds() / 1e9
			b.ReportMetric(ratio, fl.name+"-ratio")
			b.ReportMetric(float64(p50.Microseconds()), fl.name+"-cold4k-p50-µs")
			b.ReportMetric(float64(p99.Microseconds()), fl.name+"-cold4k-p99-µs")
			b.ReportMetric(float64(dec.Microseconds()), fl.name+"-block-decode-µs")
			b.ReportMetric(seq, fl.name+"-seq-GB/s")
			fmt.Fprintf(os.Stderr, "%-16s %6.2f %9d %9d %10d %8.2f\n", fl.name, ratio, p50.Microseconds(), p99.Microseconds(), dec.Microseconds(), seq)
		}
	}
}

// blockDecodeTime returns the median time to decode one block of the
// frame at path, in-process, into a reused buffer (the decode part of a
// cold read).
func blockDecodeTime(b *testing.B, path string) time.Duration {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	fr, err := frame.Open(f, st.Size(), path, nil)
	if err != nil {
		b.Fatal(err)
	}
	var ds []time.Duration
	var dst []byte
	for i := 0; i < min(fr.NumChunks(), 64); i++ {
		c, err := fr.OpenChunk(i)
		if err != nil {
			b.Fatal(err)
		}
		for k := 0; k < c.NumBlocks(); k++ {
			dst = slices.Grow(dst[:0], c.BlockLen(k))[:c.BlockLen(k)]
			t := time.Now()
			if err := c.DecodeBlock(dst, k); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(t))
		}
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}
