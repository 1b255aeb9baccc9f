package blosc

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time (user and system) of the calling thread:
// under load, wall time says little about speed.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The data sets of the LZ4 compression benchmarks, as integration's
// table generates them: a float64 random walk (cumsum of normal), a
// smooth float64 series (sine and ramp on a coarse grid) and CSV text.
func lz4Walk(n int) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(0, 1))
	x := 0.0
	for i := 0; i+8 <= n; i += 8 {
		x += rng.NormFloat64()
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(x))
	}
	return b
}

func lz4Smooth(n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		x := float64(i / 8)
		v := math.Round((math.Sin(x*0.00007)*800+math.Cos(x*0.0013)*30)*16) / 16
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
	}
	return b
}

func lz4CSV(n int) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(0, 2))
	var line []byte
	for i, row := 0, 0; i < n; row++ {
		line = strconv.AppendInt(line[:0], int64(row), 10)
		line = append(line, ',')
		line = strconv.AppendFloat(line, 20+rng.NormFloat64()*3, 'f', 3, 64)
		line = append(line, ',')
		line = strconv.AppendFloat(line, 1013+rng.NormFloat64()*8, 'f', 1, 64)
		line = append(line, ",station-"...)
		line = strconv.AppendInt(line, int64(row%37), 10)
		line = append(line, '\n')
		i += copy(b[i:], line)
	}
	return b
}

var lz4BenchData = []struct {
	name string
	gen  func(int) []byte
	ts   int
}{
	{"walk", lz4Walk, 8},
	{"smooth", lz4Smooth, 8},
	{"csv", lz4CSV, 1},
}

// BenchmarkCompressLZ4 compresses 16 MiB in 1 MiB chunks with LZ4 as
// `pack` does (shuffle, split auto, c-blosc2's block sizes) at clevels 1,
// 5 and 9, and reports the speed in MB per second of the thread's CPU
// time (steadier than wall time under load) and the compression ratio.
func BenchmarkCompressLZ4(b *testing.B) {
	const size, chunk = 16 << 20, 1 << 20
	for _, d := range lz4BenchData {
		src := d.gen(size)
		for _, clevel := range []int{1, 5, 9} {
			b.Run(fmt.Sprintf("%s/clevel%d", d.name, clevel), func(b *testing.B) {
				p := Params{Codec: CodecLZ4, Clevel: clevel, Typesize: d.ts, Split: SplitAuto}
				p.Filters[5] = FilterShuffle
				dst := make([]byte, 0, chunk+MaxOverhead)
				b.SetBytes(size)
				var out int
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				cpu0 := threadCPU()
				for b.Loop() {
					out = 0
					for off := 0; off < size; off += chunk {
						c, err := Compress(dst[:0], src[off:off+chunk], p)
						if err != nil {
							b.Fatal(err)
						}
						out += len(c)
					}
				}
				b.ReportMetric(float64(size)*float64(b.N)/(threadCPU()-cpu0).Seconds()/1e6, "MB/s-of-CPU")
				b.ReportMetric(float64(size)/float64(out), "ratio")
			})
		}
	}
}
