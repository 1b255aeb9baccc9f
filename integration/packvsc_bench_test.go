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
	"github.com/bloscfs/bloscfs/internal/testkit"
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
// and c-blosc2, in turn, per case, unless BLOSCFS_PACKVSC_ROUNDS says;
// it keeps the least times.
const packVsCRounds = 3

// BenchmarkPackVsC compares `bloscfs pack` with c-blosc2, the shared
// library that BLOSCFS_CBLOSC2 names, per codec (LZ4 at clevels 1, 5 and
// 9, zstd at 1 and 5: c-blosc2's clevel 9 is zstd's level 22;
// BLOSCFS_PACKVSC_CODECS=lz4 for LZ4 alone) on the data sets of
// BenchmarkTable (at most 256 MiB each), pack at GOMAXPROCS 1 and 2
// against c-blosc2 on 1 and 2 threads, same 1 MiB chunks, typesize and
// shuffle. Five programs run in turn, packVsCRounds times each, and the
// least CPU time (user and system, all threads) and wall time of each
// count:
//
//   - pack, the whole process: it reads the plain file, writes the frame
//     and syncs it;
//   - its C counterpart, the whole process: cDriver's "pack", which reads
//     the plain file, appends its chunks to a frame with
//     blosc2_schunk_append_buffer and syncs it, with pack's block size;
//   - the least such a C process does: cDriver's "chunks", which reads,
//     compresses each chunk with blosc2_compress_ctx, writes it and syncs
//     the file, without a frame (c-blosc2 rewrites a frame's index and
//     trailer on every append);
//   - blosc.Compress in this process on the same chunks, with pack's
//     parameters and as many goroutines as threads, GOMAXPROCS set to
//     match: the codec and filters without the I/O;
//   - c-blosc2's blosc2_compress loop in-process (through Python ctypes,
//     c-blosc2's automatic block size), the same without the I/O.
//
// "÷ C frame" and "÷ C chunks" compare pack with the two C processes,
// "in-process ÷ C loop" the two loops; "pack ÷ C loop" is the whole
// process against the loop, which pays no I/O. Its table goes to stderr
// and is appended to BLOSCFS_BENCH_TABLE. It skips when BLOSCFS_CBLOSC2
// is unset, and when the C driver cannot be built (no C compiler, or no
// blosc2.h beside the library: BLOSCFS_CBLOSC2_INCLUDE names its
// directory).
func BenchmarkPackVsC(b *testing.B) {
	lib := cblosc2(b, "to compare pack with blosc2_compress")
	py := testkit.Python(b, "numpy")
	driver, why := buildCDriver(b, lib)
	if why != "" {
		b.Skip(why)
	}
	size := int64(256 << 20)
	if s := os.Getenv("BLOSCFS_BENCH_SIZE"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			size = min(size, int64(n)<<20)
		}
	}
	rounds := packVsCRounds
	if n, err := strconv.Atoi(os.Getenv("BLOSCFS_PACKVSC_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	codecs := []string{"lz4", "zstd"}
	if s := os.Getenv("BLOSCFS_PACKVSC_CODECS"); s != "" {
		codecs = strings.Split(s, ",")
	}
	dir := b.TempDir()
	gbs := func(s float64) string { return fmt.Sprintf("%.2f", float64(size)/s/1e9) }
	x := func(c, g float64) string { return fmt.Sprintf("%.2f×", c/g) }
	for b.Loop() {
		var rows [][]string
		row := func(cells ...string) { rows = append(rows, cells) }
		row("data", "codec", "clevel", "threads", "ratio, pack / C", "pack GB/s of CPU", "÷ C frame, CPU", "÷ C frame, wall",
			"÷ C chunks, CPU", "÷ C chunks, wall", "in-process ÷ C loop, CPU", "in-process ÷ C loop, wall", "pack ÷ C loop, CPU")
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
					bs := strconv.Itoa(packParams(b, codec, clevel, ds.typesize).Blocksize)
					packed := filepath.Join(dir, ds.name+".b2frame")
					cPacked := filepath.Join(dir, ds.name+"-c.b2frame")
					cChunks := filepath.Join(dir, ds.name+"-c.chunks")
					for _, procs := range []int{1, 2} {
						np := strconv.Itoa(procs)
						inf := time.Duration(1 << 62)
						pCPU, pWall, qCPU, qWall, rCPU, rWall, gCPU, gWall := inf, inf, inf, inf, inf, inf, inf, inf
						cCPU, cWall := 1e9, 1e9
						var cSize int64
						for range rounds {
							cpu, wall := cpuRun(b, []string{"GOMAXPROCS=" + np}, bin, "pack", "-q", "-f", "--codec", codec, "--clevel", cl, "--typesize", ts, plain, packed)
							pCPU, pWall = min(pCPU, cpu), min(pWall, wall)
							cpu, wall = cpuRun(b, nil, driver, "pack", plain, cPacked, codec, cl, ts, bs, np)
							qCPU, qWall = min(qCPU, cpu), min(qWall, wall)
							cpu, wall = cpuRun(b, nil, driver, "chunks", plain, cChunks, codec, cl, ts, bs, np)
							rCPU, rWall = min(rCPU, cpu), min(rWall, wall)
							cpu, wall, _ = compressInProcess(b, data, codec, clevel, ds.typesize, procs)
							gCPU, gWall = min(gCPU, cpu), min(gWall, wall)
							out, err := exec.Command(py, "-c", cCompressScript, lib, plain, codec, cl, ts, np, "1").CombinedOutput()
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
						cst, err := os.Stat(cPacked)
						if err != nil {
							b.Fatal(err)
						}
						ratio := fmt.Sprintf("%.3f / %.3f", float64(size)/float64(st.Size()), float64(size)/float64(cst.Size()))
						row(ds.name, codec, cl, np, ratio, gbs(pCPU.Seconds()),
							x(qCPU.Seconds(), pCPU.Seconds()), x(qWall.Seconds(), pWall.Seconds()),
							x(rCPU.Seconds(), pCPU.Seconds()), x(rWall.Seconds(), pWall.Seconds()),
							x(cCPU, gCPU.Seconds()), x(cWall, gWall.Seconds()), x(cCPU, pCPU.Seconds()))
						name := fmt.Sprintf("%s-%s-%d-p%d", ds.name, codec, clevel, procs)
						b.ReportMetric(qCPU.Seconds()/pCPU.Seconds(), name+"-pack/c")
						b.ReportMetric(rCPU.Seconds()/pCPU.Seconds(), name+"-pack/cchunks")
						b.ReportMetric(cCPU/gCPU.Seconds(), name+"-inproc/c")
					}
					os.Remove(packed)
					os.Remove(cPacked)
					os.Remove(cChunks)
				}
			}
			os.Remove(plain)
		}
		la, _ := os.ReadFile("/proc/loadavg")
		hdr := fmt.Sprintf("\npack ÷ c-blosc2 per codec and clevel: %d MiB per data set, %s, c-blosc2 %s (BLOSCFS_CBLOSC2; whole processes, and loops in-process), least of %d turns each, load average %s.\n\n",
			size>>20, time.Now().UTC().Format("2006-01-02"), ref, rounds, strings.Join(strings.Fields(string(la))[:3], " "))
		fmt.Fprintf(os.Stderr, "%s%s", hdr, formatTable(rows))
		if f := os.Getenv("BLOSCFS_BENCH_TABLE"); f != "" {
			if fh, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
				fh.WriteString(hdr + formatTable(rows))
				fh.Close()
			}
		}
	}
}

// packParams returns the chunk parameters of `bloscfs pack --codec codec
// --clevel clevel --typesize typesize` with 1 MiB chunks: shuffle, split
// auto, c-blosc2's block size up to 256 KiB.
func packParams(b *testing.B, codec string, clevel, typesize int) blosc.Params {
	b.Helper()
	code, ok := blosc.CodecByName(codec)
	if !ok {
		b.Fatalf("no codec %s", codec)
	}
	p := blosc.Params{Codec: code, Clevel: clevel, Typesize: typesize, Split: blosc.SplitAuto}
	p.Filters[5] = blosc.FilterShuffle
	p.Blocksize = min(p.AutoBlocksize(1<<20), 256<<10)
	return p
}

// compressInProcess compresses data in 1 MiB chunks with blosc.Compress
// as pack does (shuffle, split auto, blocks of c-blosc2's size up to
// 256 KiB) on procs goroutines at GOMAXPROCS procs, and returns the CPU
// time of the process (user and system), the wall time and the size of
// the chunks.
func compressInProcess(b *testing.B, data []byte, codec string, clevel, typesize, procs int) (cpu, wall time.Duration, total int64) {
	b.Helper()
	const n = 1 << 20
	p := packParams(b, codec, clevel, typesize)
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
