package lz4fast

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"
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

// benchSets are 1 MiB of the data of BenchmarkTable, as Blosc hands them
// to LZ4: the float64 series shuffled (byte k of every value, then k+1),
// the text as is.
func benchSets() []struct {
	name string
	data []byte
} {
	const n = 1 << 20
	walk, smooth := make([]byte, n), make([]byte, n)
	rng := rand.New(rand.NewPCG(0, 1))
	x := 0.0
	for i := 0; i+8 <= n; i += 8 {
		x += rng.NormFloat64()
		binary.LittleEndian.PutUint64(walk[i:], math.Float64bits(x))
		f := float64(i / 8)
		v := math.Round((math.Sin(f*0.00007)*800+math.Cos(f*0.0013)*30)*16) / 16
		binary.LittleEndian.PutUint64(smooth[i:], math.Float64bits(v))
	}
	shuffle := func(b []byte) []byte {
		out := make([]byte, 0, len(b))
		for k := 0; k < 8; k++ {
			for i := k; i < len(b); i += 8 {
				out = append(out, b[i])
			}
		}
		return out
	}
	var csv []byte
	for row := 0; len(csv) < n; row++ {
		csv = strconv.AppendInt(csv, int64(row), 10)
		csv = append(csv, ',')
		csv = strconv.AppendFloat(csv, 20+rng.NormFloat64()*3, 'f', 3, 64)
		csv = append(csv, ',')
		csv = strconv.AppendFloat(csv, 1013+rng.NormFloat64()*8, 'f', 1, 64)
		csv = append(csv, ",station-"...)
		csv = strconv.AppendInt(csv, int64(row%37), 10)
		csv = append(csv, '\n')
	}
	return []struct {
		name string
		data []byte
	}{{"walk", shuffle(walk)}, {"smooth", shuffle(smooth)}, {"csv", csv[:n]}}
}

// BenchmarkCompress compresses 1 MiB in streams of the sizes Blosc uses
// for LZ4 (32 KiB: clevel 1 split; 64 KiB: clevel 5 split; 128 KiB:
// clevel 9 split or clevel 5 text; 16 and 256 KiB: text at clevel 1 and 9)
// with a budget of the stream size less one, as Blosc does, with this
// package and with pierrec/lz4's CompressorCCompat, which writes the same
// bytes.
func BenchmarkCompress(b *testing.B) {
	for _, d := range benchSets() {
		for _, size := range []int{16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10} {
			dst := make([]byte, size-1)
			run := func(b *testing.B, f func(dst, src []byte) int) {
				b.SetBytes(int64(len(d.data)))
				out := 0
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				cpu0 := threadCPU()
				for b.Loop() {
					out = 0
					for off := 0; off < len(d.data); off += size {
						n := f(dst, d.data[off:off+size])
						if n == 0 {
							n = size
						}
						out += n
					}
				}
				cpu := threadCPU() - cpu0
				b.ReportMetric(float64(len(d.data))*float64(b.N)/cpu.Seconds()/1e6, "MB/s-of-CPU")
				b.ReportMetric(float64(len(d.data))/float64(out), "ratio")
			}
			b.Run(fmt.Sprintf("%s/%dK/lz4fast", d.name, size>>10), func(b *testing.B) { run(b, Compress) })
			c := &lz4.CompressorCCompat{Acceleration: 1}
			b.Run(fmt.Sprintf("%s/%dK/pierrec", d.name, size>>10), func(b *testing.B) {
				run(b, func(dst, src []byte) int { n, _ := c.CompressBlock(src, dst); return n })
			})
		}
	}
}
