package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testutil"
	"golang.org/x/sys/unix"
)

// cCompressScript compresses the file argv[2] in 1 MiB chunks with
// c-blosc2 (the shared library argv[1], through ctypes): blosc2_compress
// with codec argv[3], clevel argv[4], typesize argv[5], shuffle, c-blosc2's
// automatic block size, on argv[6] threads, argv[7] passes. It prints the
// library version, the least CPU time of the process (all its threads)
// and the least wall time of a pass, in seconds, and the compressed size.
const cCompressScript = `
import ctypes, numpy, sys, time
lib, path, cname, clevel, ts, nt, passes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
b2 = ctypes.CDLL(lib)
b2.blosc2_get_version_string.restype = ctypes.c_char_p
b2.blosc2_set_nthreads.argtypes = [ctypes.c_int16]
b2.blosc1_set_compressor.argtypes = [ctypes.c_char_p]
b2.blosc2_compress.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32]
b2.blosc2_init()
if b2.blosc1_set_compressor(cname.encode()) < 0:
    sys.exit('%s: no codec %s' % (lib, cname))
b2.blosc2_set_nthreads(nt)
n = 1 << 20
data = numpy.fromfile(path, dtype=numpy.uint8)
chunks = [data[i:i + n] for i in range(0, len(data), n)]
out = numpy.empty(n + 64, dtype=numpy.uint8)
cpu, wall, total = 1e9, 1e9, 0
for _ in range(passes):
    c0, w0, total = time.process_time(), time.perf_counter(), 0
    for c in chunks:
        k = b2.blosc2_compress(clevel, 1, ts, c.ctypes.data, c.nbytes, out.ctypes.data, out.nbytes)
        if k <= 0:
            sys.exit('%s: blosc2_compress returned %d' % (path, k))
        total += k
    cpu, wall = min(cpu, time.process_time() - c0), min(wall, time.perf_counter() - w0)
print(b2.blosc2_get_version_string().decode(), cpu, wall, total)
`

// packVsCRounds is how many times BenchmarkPackVsC runs each of pack
// and c-blosc2, in turn, per case; it keeps the least times.
const packVsCRounds = 3

// BenchmarkPackVsC compares `bloscfs pack` with c-blosc2's
// blosc2_compress, the shared library that BLOSCFS_CBLOSC2 names, per
// codec (LZ4 at clevels 1, 5 and 9, zstd at 1 and 5: c-blosc2's clevel 9
// is zstd's level 22; BLOSCFS_PACKVSC_CODECS=lz4 for LZ4 alone) on the
// data sets of
// BenchmarkTable (at most 256 MiB each): pack at GOMAXPROCS 1 and 2
// against c-blosc2 on 1 and 2 threads, same 1 MiB chunks, typesize and
// shuffle (pack's default blocks, at most 256 KiB; c-blosc2's automatic
// ones). pack and C run in turn, packVsCRounds times each, and the least
// CPU time (user and system, all threads) and wall time count: pack's
// is its whole process, reading the plain file and writing the frame
// (and syncing it); C's is its compression loop, in-process. So the
// "in-process" rows also time blosc.Compress in this process on the same
// chunks, with pack's parameters and as many goroutines as threads,
// GOMAXPROCS set to match: the codec and filters without the I/O. Its table goes to stderr and
// is appended to BLOSCFS_BENCH_TABLE. It skips when BLOSCFS_CBLOSC2 is
// unset.
func BenchmarkPackVsC(b *testing.B) {
	lib := cblosc2(b, "to compare pack with blosc2_compress")
	py := testutil.Python(b, "numpy")
	size := int64(256 << 20)
	if s := os.Getenv("BLOSCFS_BENCH_SIZE"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			size = min(size, int64(n)<<20)
		}
	}
	codecs := []string{"lz4", "zstd"}
	if s := os.Getenv("BLOSCFS_PACKVSC_CODECS"); s != "" {
		codecs = strings.Split(s, ",")
	}
	dir := b.TempDir()
	gbs := func(s float64) string { return fmt.Sprintf("%.2f", float64(size)/s/1e9) }
	for b.Loop() {
		var rows [][]string
		row := func(cells ...string) { rows = append(rows, cells) }
		row("data", "codec", "clevel", "ratio, ours / C", "ours / C threads", "pack GB/s of CPU", "C GB/s of CPU", "pack ÷ C, CPU", "pack ÷ C, wall")
		var ref string
		for _, ds := range tableData {
			plain := filepath.Join(dir, ds.name)
			writeTableData(b, plain, size, ds.gen)
			benchRun(b, 1, 0, "cat", plain) // into the page cache
			data, err := os.ReadFile(plain)
			if err != nil {
				b.Fatal(err)
			}
			ts := strconv.Itoa(ds.typesize)
			for _, codec := range codecs {
				for _, clevel := range []int{1, 5, 9} {
					if codec == "zstd" && clevel == 9 {
						continue // zstd level 22 in c-blosc2: minutes per 256 MiB
					}
					cl := strconv.Itoa(clevel)
					packed := filepath.Join(dir, ds.name+".b2frame")
					for _, procs := range []int{1, 2} {
						pCPU, pWall := time.Duration(1<<62), time.Duration(1<<62)
						cCPU, cWall := 1e9, 1e9
						var cSize int64
						gCPU, gWall := time.Duration(1<<62), time.Duration(1<<62)
						var gSize int64
						for range packVsCRounds {
							cpu, wall := cpuRun(b, []string{"GOMAXPROCS=" + strconv.Itoa(procs)}, bin, "pack", "-q", "-f", "--codec", codec, "--clevel", cl, "--typesize", ts, plain, packed)
							pCPU, pWall = min(pCPU, cpu), min(pWall, wall)
							cpu, wall, gSize = compressInProcess(b, data, codec, clevel, ds.typesize, procs)
							gCPU, gWall = min(gCPU, cpu), min(gWall, wall)
							out, err := exec.Command(py, "-c", cCompressScript, lib, plain, codec, cl, ts, strconv.Itoa(procs), "1").CombinedOutput()
							if err != nil {
								b.Fatalf("c-blosc2 (BLOSCFS_CBLOSC2=%s) on %s: %v\n%s", lib, plain, err, out)
							}
							var c, w float64
							if _, err := fmt.Sscan(string(out), &ref, &c, &w, &cSize); err != nil {
								b.Fatalf("c-blosc2 (BLOSCFS_CBLOSC2=%s) on %s printed %q", lib, plain, out)
							}
							cCPU, cWall = min(cCPU, c), min(cWall, w)
						}
						st, err := os.Stat(packed)
						if err != nil {
							b.Fatal(err)
						}
						ratio := fmt.Sprintf("%.3f / %.3f", float64(size)/float64(st.Size()), float64(size)/float64(cSize))
						cpuX := cCPU / pCPU.Seconds()
						row(ds.name, codec, cl, ratio, fmt.Sprintf("GOMAXPROCS=%d / %d", procs, procs), gbs(pCPU.Seconds()), gbs(cCPU),
							fmt.Sprintf("%.2f×", cpuX), fmt.Sprintf("%.2f×", cWall/pWall.Seconds()))
						b.ReportMetric(cpuX, fmt.Sprintf("%s-%s-%d-p%d-pack/c", ds.name, codec, clevel, procs))
						gX := cCPU / gCPU.Seconds()
						row(ds.name, codec, cl, fmt.Sprintf("%.3f / %.3f", float64(size)/float64(gSize), float64(size)/float64(cSize)),
							fmt.Sprintf("in-process, %d / %d", procs, procs), gbs(gCPU.Seconds()), gbs(cCPU), fmt.Sprintf("%.2f×", gX), fmt.Sprintf("%.2f×", cWall/gWall.Seconds()))
						b.ReportMetric(gX, fmt.Sprintf("%s-%s-%d-p%d-inproc/c", ds.name, codec, clevel, procs))
					}
					os.Remove(packed)
				}
			}
			os.Remove(plain)
		}
		la, _ := os.ReadFile("/proc/loadavg")
		hdr := fmt.Sprintf("\npack ÷ c-blosc2 per codec and clevel: %d MiB per data set, %s, c-blosc2 %s (BLOSCFS_CBLOSC2, through Python ctypes), least of %d turns each, load average %s.\n\n",
			size>>20, time.Now().UTC().Format("2006-01-02"), ref, packVsCRounds, strings.Join(strings.Fields(string(la))[:3], " "))
		fmt.Fprintf(os.Stderr, "%s%s", hdr, formatTable(rows))
		if f := os.Getenv("BLOSCFS_BENCH_TABLE"); f != "" {
			if fh, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
				fh.WriteString(hdr + formatTable(rows))
				fh.Close()
			}
		}
	}
}

// compressInProcess compresses data in 1 MiB chunks with blosc.Compress
// as pack does (shuffle, split auto, blocks of c-blosc2's size up to
// 256 KiB) on procs goroutines at GOMAXPROCS procs, and returns the CPU
// time of the process (user and system), the wall time and the size of
// the chunks.
func compressInProcess(b *testing.B, data []byte, codec string, clevel, typesize, procs int) (cpu, wall time.Duration, total int64) {
	b.Helper()
	code, ok := blosc.CodecByName(codec)
	if !ok {
		b.Fatalf("no codec %s", codec)
	}
	const n = 1 << 20
	p := blosc.Params{Codec: code, Clevel: clevel, Typesize: typesize, Split: blosc.SplitAuto}
	p.Filters[5] = blosc.FilterShuffle
	p.Blocksize = min(p.AutoBlocksize(n), 256<<10)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	runtime.GC()
	var ru0, ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	t := time.Now()
	var wg sync.WaitGroup
	sizes := make([]int64, procs)
	errs := make([]error, procs)
	for w := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, n+blosc.MaxOverhead)
			for off := w * n; off < len(data); off += procs * n {
				out, err := blosc.Compress(buf[:0], data[off:min(off+n, len(data))], p)
				if err != nil {
					errs[w] = err
					return
				}
				sizes[w] += int64(len(out))
			}
		}()
	}
	wg.Wait()
	wall = time.Since(t)
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	for w := range procs {
		if errs[w] != nil {
			b.Fatal(errs[w])
		}
		total += sizes[w]
	}
	cpu = time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	return cpu, wall, total
}
