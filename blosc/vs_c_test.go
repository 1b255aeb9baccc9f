package blosc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// cTiming decodes each chunk file with c-blosc 1.21 (Debian's
// python3-blosc, one thread) and returns the best time of each.
const cTiming = `
import blosc, sys, time
blosc.set_nthreads(1)
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    best = 1e9
    for rep in range(30):
        t = time.perf_counter(); blosc.decompress(data); best = min(best, time.perf_counter() - t)
    print(best)
`

// BenchmarkVsCBlosc decodes the same 4 MiB Blosc1 chunks with this
// package and with c-blosc 1.21 (single thread each, best of 30), in one
// run, and reports both speeds and their ratio per codec.
func BenchmarkVsCBlosc(b *testing.B) {
	py := testkit.Python(b, "blosc")
	dir := b.TempDir()
	type tc struct {
		name  string
		data  []byte
		codec int
		ts    int
		f     uint8
	}
	f64 := benchFloat64(benchChunk)
	text := benchText(benchChunk)
	cases := []tc{
		{"f64/blosclz/shuffle", f64, CodecBloscLZ, 8, FilterShuffle},
		{"f64/lz4/shuffle", f64, CodecLZ4, 8, FilterShuffle},
		{"f64/lz4/bitshuffle", f64, CodecLZ4, 8, FilterBitShuffle},
		{"f64/zstd/shuffle", f64, CodecZstd, 8, FilterShuffle},
		{"f64/zlib/shuffle", f64, CodecZlib, 8, FilterShuffle},
		{"text/blosclz/none", text, CodecBloscLZ, 1, FilterNone},
		{"text/lz4/none", text, CodecLZ4, 1, FilterNone},
	}
	var paths []string
	chunks := make([][]byte, len(cases))
	for i, c := range cases {
		p := Params{Codec: c.codec, Clevel: 5, Typesize: c.ts, Blosc1: true}
		p.Filters[5] = c.f
		chunk, err := Compress(nil, c.data, p)
		if err != nil {
			b.Fatal(err)
		}
		chunks[i] = chunk
		path := filepath.Join(dir, fmt.Sprintf("%d.blosc", i))
		os.WriteFile(path, chunk, 0o644)
		paths = append(paths, path)
	}
	for b.Loop() {
		out, err := exec.Command(py, append([]string{"-c", cTiming}, paths...)...).Output()
		if err != nil {
			b.Fatal(err)
		}
		cTimes := strings.Fields(string(out))
		dst := make([]byte, benchChunk)
		for i, c := range cases {
			ch, err := NewChunkBytes(chunks[i])
			if err != nil {
				b.Fatal(err)
			}
			best := time.Hour
			for rep := 0; rep < 30; rep++ {
				t := time.Now()
				if err := ch.Decode(dst); err != nil {
					b.Fatal(err)
				}
				best = min(best, time.Since(t))
			}
			ct, _ := strconv.ParseFloat(cTimes[i], 64)
			goGBs := float64(benchChunk) / best.Seconds() / 1e9
			cGBs := float64(benchChunk) / ct / 1e9
			b.ReportMetric(goGBs/cGBs, c.name+"-go/c")
			fmt.Fprintf(os.Stderr, "%-22s go %6.2f GB/s   c-blosc %6.2f GB/s   go/c %.2f   ratio %.2f\n",
				c.name, goGBs, cGBs, goGBs/cGBs, float64(len(c.data))/float64(len(chunks[i])))
		}
	}
}
