package integration

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// cDriver is a small C program against c-blosc2. "write IN OUT CODEC
// CLEVEL TYPESIZE SPLIT" writes IN as a contiguous frame with
// python-blosc2's defaults otherwise (shuffle, 1 MiB chunks, automatic
// blocks, one thread); "decode FRAME" decodes every chunk on one thread
// into one buffer and writes it to standard output; "pack IN OUT CODEC
// CLEVEL TYPESIZE BLOCKSIZE NTHREADS" is the C counterpart of `bloscfs
// pack` (BenchmarkPackVsC): it reads IN with read(2) in 1 MiB chunks,
// appends each to a contiguous frame at OUT (shuffle, split auto, the
// block size given, NTHREADS threads) and syncs OUT to disk, as pack
// syncs its output before renaming it into place. "chunks" with the same
// arguments does the same but compresses each chunk with
// blosc2_compress_ctx and writes it with write(2), without a frame: the
// least a C program that reads, compresses, writes and syncs can do
// (c-blosc2's frame appends rewrite the frame's index and trailer, and
// compress the index on a context of 4 threads, for every chunk).
const cDriver = `
#include <blosc2.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// packFile is pack (frame != 0: a frame through blosc2_schunk_append_buffer)
// or chunks (frame == 0: each chunk compressed with blosc2_compress_ctx
// and written with write(2), no frame around them).
static int packFile(char **a, int frame) {
	int in = open(a[0], O_RDONLY);
	if (in < 0) { perror(a[0]); return 1; }
	blosc2_cparams cp = BLOSC2_CPARAMS_DEFAULTS;
	cp.compcode = blosc2_compname_to_compcode(a[2]);
	if (cp.compcode < 0) { fprintf(stderr, "no codec %s\n", a[2]); return 1; }
	cp.clevel = atoi(a[3]);
	cp.typesize = atoi(a[4]);
	cp.blocksize = atoi(a[5]);
	cp.nthreads = atoi(a[6]);
	cp.splitmode = BLOSC_AUTO_SPLIT;
	cp.filters[BLOSC2_MAX_FILTERS - 1] = BLOSC_SHUFFLE;
	blosc2_dparams dp = BLOSC2_DPARAMS_DEFAULTS;
	blosc2_storage st = {.contiguous = true, .urlpath = a[1], .cparams = &cp, .dparams = &dp};
	remove(a[1]);
	blosc2_schunk *sc = NULL;
	blosc2_context *cctx = NULL;
	int out = -1;
	size_t cs = 1 << 20;
	char *buf = malloc(cs), *cbuf = malloc(cs + BLOSC2_MAX_OVERHEAD);
	if (frame) {
		sc = blosc2_schunk_new(&st);
		if (!sc) { fprintf(stderr, "%s: blosc2_schunk_new failed\n", a[1]); return 1; }
	} else {
		cctx = blosc2_create_cctx(cp);
		out = open(a[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (!cctx || out < 0) { perror(a[1]); return 1; }
	}
	for (;;) {
		size_t n = 0;
		while (n < cs) {
			ssize_t r = read(in, buf + n, cs - n);
			if (r < 0) { perror(a[0]); return 1; }
			if (r == 0) break;
			n += r;
		}
		if (n == 0) break;
		if (frame) {
			if (blosc2_schunk_append_buffer(sc, buf, (int32_t)n) < 0) { fprintf(stderr, "%s: append failed\n", a[1]); return 1; }
		} else {
			int k = blosc2_compress_ctx(cctx, buf, (int32_t)n, cbuf, (int32_t)(cs + BLOSC2_MAX_OVERHEAD));
			if (k <= 0) { fprintf(stderr, "%s: compress returned %d\n", a[1], k); return 1; }
			for (int w = 0; w < k;) {
				ssize_t r = write(out, cbuf + w, k - w);
				if (r <= 0) { perror(a[1]); return 1; }
				w += r;
			}
		}
		if (n < cs) break;
	}
	close(in);
	if (frame) {
		blosc2_schunk_free(sc);
		out = open(a[1], O_WRONLY);
	} else {
		blosc2_free_ctx(cctx);
	}
	if (out < 0 || fsync(out) != 0 || close(out) != 0) { perror(a[1]); return 1; }
	free(buf);
	free(cbuf);
	return 0;
}

static int writeFrame(char **a) {
	FILE *f = fopen(a[0], "rb");
	if (!f) { perror(a[0]); return 1; }
	blosc2_cparams cp = BLOSC2_CPARAMS_DEFAULTS;
	cp.compcode = strcmp(a[2], "lz4") == 0 ? BLOSC_LZ4 : BLOSC_ZSTD;
	cp.clevel = atoi(a[3]);
	cp.typesize = atoi(a[4]);
	cp.splitmode = strcmp(a[5], "always") == 0 ? BLOSC_ALWAYS_SPLIT : BLOSC_NEVER_SPLIT;
	cp.filters[BLOSC2_MAX_FILTERS - 1] = BLOSC_SHUFFLE;
	cp.nthreads = 1;
	blosc2_dparams dp = BLOSC2_DPARAMS_DEFAULTS;
	blosc2_storage st = {.contiguous = true, .urlpath = a[1], .cparams = &cp, .dparams = &dp};
	remove(a[1]);
	blosc2_schunk *sc = blosc2_schunk_new(&st);
	if (!sc) { fprintf(stderr, "%s: blosc2_schunk_new failed\n", a[1]); return 1; }
	size_t cs = 1 << 20, n;
	char *buf = malloc(cs);
	while ((n = fread(buf, 1, cs, f)) > 0)
		if (blosc2_schunk_append_buffer(sc, buf, (int32_t)n) < 0) { fprintf(stderr, "%s: append failed\n", a[1]); return 1; }
	blosc2_schunk_free(sc);
	return 0;
}

static int decodeFrame(const char *path) {
	blosc2_schunk *sc = blosc2_schunk_open(path);
	if (!sc) { fprintf(stderr, "%s: blosc2_schunk_open failed\n", path); return 1; }
	blosc2_dparams dp = BLOSC2_DPARAMS_DEFAULTS;
	dp.nthreads = 1;
	blosc2_context *ctx = blosc2_create_dctx(dp);
	int32_t cap = sc->chunksize > 0 ? sc->chunksize : 1 << 20;
	char *out = malloc(cap);
	for (int64_t i = 0; i < sc->nchunks; i++) {
		uint8_t *chunk;
		bool needs_free;
		int cb = blosc2_schunk_get_chunk(sc, i, &chunk, &needs_free);
		if (cb < 0) { fprintf(stderr, "%s: chunk %ld: get_chunk %d\n", path, (long)i, cb); return 1; }
		int n = blosc2_decompress_ctx(ctx, chunk, cb, out, cap);
		if (n < 0) { fprintf(stderr, "%s: chunk %ld: decompress %d\n", path, (long)i, n); return 1; }
		if (needs_free) free(chunk);
		for (ssize_t w = 0; w < n;) {
			ssize_t r = write(1, out + w, n - w);
			if (r <= 0) return 1;
			w += r;
		}
	}
	blosc2_free_ctx(ctx);
	blosc2_schunk_free(sc);
	return 0;
}

int main(int argc, char **argv) {
	blosc2_init();
	int rc = 2;
	if (argc == 8 && strcmp(argv[1], "write") == 0) rc = writeFrame(argv + 2);
	if (argc == 3 && strcmp(argv[1], "decode") == 0) rc = decodeFrame(argv[2]);
	if (argc == 9 && strcmp(argv[1], "pack") == 0) rc = packFile(argv + 2, 1);
	if (argc == 9 && strcmp(argv[1], "chunks") == 0) rc = packFile(argv + 2, 0);
	blosc2_destroy();
	return rc;
}
`

// buildCDriver compiles cDriver against the c-blosc2 whose shared library
// is lib. Its header is looked for in BLOSCFS_CBLOSC2_INCLUDE, then where
// a CMake build tree inside the source tree (LIB's ../../include) or an
// installed prefix (../include) has it. It returns why it cannot, if so.
func buildCDriver(b *testing.B, lib string) (string, string) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", "no C compiler (cc) to build the c-blosc2 driver"
	}
	libdir := filepath.Dir(lib)
	var inc string
	for _, d := range []string{os.Getenv("BLOSCFS_CBLOSC2_INCLUDE"), filepath.Join(libdir, "..", "..", "include"), filepath.Join(libdir, "..", "include")} {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "blosc2.h")); err == nil {
			inc = d
			break
		}
	}
	if inc == "" {
		return "", "no blosc2.h beside " + lib + ": set BLOSCFS_CBLOSC2_INCLUDE to c-blosc2's include directory"
	}
	dir := b.TempDir()
	src, exe := filepath.Join(dir, "cdriver.c"), filepath.Join(dir, "cdriver")
	if err := os.WriteFile(src, []byte(cDriver), 0o644); err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command(cc, "-O2", "-I", inc, src, "-o", exe, "-L", libdir, "-l:"+filepath.Base(lib), "-Wl,-rpath,"+libdir).CombinedOutput()
	if err != nil {
		return "", fmt.Sprintf("building the c-blosc2 driver against %s failed: %v\n%s", lib, err, out)
	}
	return exe, ""
}

// genSineRamp writes a sine plus a ramp as float64: a smooth series.
func genSineRamp(b []byte, seed uint64) {
	base := float64(seed) * float64(len(b)/8)
	for i := 0; i+8 <= len(b); i += 8 {
		x := base + float64(i/8)
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(math.Sin(x*2e-4)*100+x*1e-5))
	}
}

// genCounts writes int32 event counts (Poisson around a slowly varying
// rate).
func genCounts(b []byte, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	base := float64(seed) * float64(len(b)/4)
	for i := 0; i+4 <= len(b); i += 4 {
		lam := math.Abs(math.Sin((base+float64(i/4))*1e-3)) * 50
		// Knuth's method is slow for large rates; a rounded normal
		// approximation is close enough for data to compress.
		k := math.Round(lam + math.Sqrt(lam)*rng.NormFloat64())
		binary.LittleEndian.PutUint32(b[i:], uint32(int32(max(k, 0))))
	}
}

// cpuRun runs a program with its output to /dev/null and returns its CPU
// time (user + system, from wait4) and wall time.
func cpuRun(b *testing.B, env []string, name string, args ...string) (time.Duration, time.Duration) {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	wall := time.Since(t)
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return cpu, wall
}

// median returns the median of xs.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// cblosc2 returns the c-blosc2 shared library that BLOSCFS_CBLOSC2
// names, after the integration set-up's checks; unset, the benchmark
// skips, saying what the library is for.
func cblosc2(b *testing.B, forWhat string) string {
	b.Helper()
	setup.Require(b)
	lib := os.Getenv("BLOSCFS_CBLOSC2")
	if lib == "" {
		b.Skip("BLOSCFS_CBLOSC2 is not set: it names the libblosc2.so of a c-blosc2 build, " + forWhat)
	}
	if _, err := os.Stat(lib); err != nil {
		b.Fatalf("BLOSCFS_CBLOSC2 names no c-blosc2 shared library: %v", err)
	}
	return lib
}

// vsCRounds is how many interleaved pairs each row of BenchmarkDecodeVsC
// takes its median ratio over.
const vsCRounds = 5

// BenchmarkDecodeVsC compares, on frames written by c-blosc2 itself
// (BLOSCFS_CBLOSC2 names its libblosc2.so, from which a small C driver is
// built) with python-blosc2's defaults (zstd, shuffle, split always, 1
// MiB chunks, automatic blocks; typesize 8 for the float64 sets, 4 for
// int32 counts, 1 for CSV text) at clevels 1, 5 and 9 and with streams
// never split at clevel 1, and LZ4 clevel 5 for comparison:
//
//   - `GOMAXPROCS=1 bloscfs unpack -q -f FRAME -` against the C driver
//     decoding the same frame on one thread, both whole processes with
//     their output to /dev/null. The ratio is of CPU time (user + system):
//     the median over vsCRounds interleaved pairs of C's CPU time ÷ ours,
//     which is our speed ÷ C's;
//   - for the walk and the smooth series at the defaults (zstd clevel 1),
//     cold `cat` through a fresh mount of the zstd frame against the same
//     of a frame of stored chunks (the FUSE ceiling), interleaved, the
//     median of mountReads each.
//
// Its table goes to stderr and is appended to BLOSCFS_BENCH_TABLE. Sizes:
// BLOSCFS_BENCH_SIZE MiB per data set (256 by default). Needs root for the
// mount rows.
func BenchmarkDecodeVsC(b *testing.B) {
	lib := cblosc2(b, "whose frames and decoder these rows compare with")
	driver, why := buildCDriver(b, lib)
	if why != "" {
		b.Skip(why)
	}
	size := testkit.BenchSize(256 << 20)
	sets := []struct {
		name     string
		typesize int
		gen      func([]byte, uint64)
		mount    bool
	}{
		{"walk", 8, genWalk, true},
		{"smooth", 8, genSineRamp, true},
		{"csv", 1, genCSV, false},
		{"int32", 4, genCounts, false},
	}
	type variant struct {
		codec  string
		clevel int
		split  string
	}
	variants := []variant{{"zstd", 1, "always"}, {"zstd", 5, "always"}, {"zstd", 9, "always"}, {"zstd", 1, "never"}, {"lz4", 5, "always"}}
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	for b.Loop() {
		var rows [][]string
		row := func(cells ...string) { rows = append(rows, cells) }
		row("data", "codec, clevel, split", "ratio", "C's CPU time", "our CPU time", "ours ÷ C (speed, one core)")
		var mrows [][]string
		for _, ds := range sets {
			plain := filepath.Join(dir, ds.name)
			writeTableData(b, plain, size, ds.gen)
			for _, v := range variants {
				frame := filepath.Join(src, fmt.Sprintf("%s-%s%d-%s.b2frame", ds.name, v.codec, v.clevel, v.split))
				// c-blosc2 writes CSV text at zstd clevel 9 at a few MB/s
				// on one thread: more than cmdTimeout for 256 MiB.
				if r := testkit.Run(30*time.Minute, driver, "write", plain, frame, v.codec, strconv.Itoa(v.clevel), strconv.Itoa(ds.typesize), v.split); r.Err != nil {
					b.Fatalf("the C writer on %s: %v", plain, r)
				}
				st, err := os.Stat(frame)
				if err != nil {
					b.Fatal(err)
				}
				benchRun(b, 1, 0, "cat", frame) // into the page cache
				var ratios, cs, os_ []float64
				for range vsCRounds {
					c, _ := cpuRun(b, nil, driver, "decode", frame)
					o, _ := cpuRun(b, []string{"GOMAXPROCS=1"}, bin, "unpack", "-q", "-f", frame, "-")
					ratios = append(ratios, c.Seconds()/o.Seconds())
					cs, os_ = append(cs, c.Seconds()), append(os_, o.Seconds())
				}
				r := median(ratios)
				row(ds.name, fmt.Sprintf("%s %d, split %s", v.codec, v.clevel, v.split), fmt.Sprintf("%.2f", float64(size)/float64(st.Size())),
					fmt.Sprintf("%.3f s", median(cs)), fmt.Sprintf("%.3f s", median(os_)), fmt.Sprintf("%.2f×", r))
				b.ReportMetric(r, fmt.Sprintf("%s-%s%d-%s-ours/C", ds.name, v.codec, v.clevel, v.split))
				if ds.mount && v.codec == "zstd" && v.clevel == 1 && v.split == "always" {
					stored := filepath.Join(src, ds.name+"-stored.b2frame")
					mustRun(b, bin, "pack", "-q", "-f", "--codec", "lz4", "--clevel", "0", "--typesize", strconv.Itoa(ds.typesize), plain, stored)
					benchRun(b, 1, 0, "cat", stored)
					var ct, zt []time.Duration
					for range mountReads {
						ct = append(ct, freshMountRead(b, src, strings.TrimSuffix(filepath.Base(stored), ".b2frame")))
						zt = append(zt, freshMountRead(b, src, strings.TrimSuffix(filepath.Base(frame), ".b2frame")))
					}
					slices.Sort(ct)
					slices.Sort(zt)
					c, z := ct[len(ct)/2], zt[len(zt)/2]
					gb := func(d time.Duration) string { return fmt.Sprintf("%.2f GB/s", float64(size)/d.Seconds()/1e9) }
					mrows = append(mrows, []string{ds.name, gb(c), gb(z), fmt.Sprintf("%.2f×", c.Seconds()/z.Seconds())})
					b.ReportMetric(c.Seconds()/z.Seconds(), ds.name+"-zstd1-mount/ceiling")
					os.Remove(stored)
				}
				os.Remove(frame)
			}
			os.Remove(plain)
		}
		hdr := fmt.Sprintf("\nOur decoder against c-blosc2, one core: %d MiB per data set, %s, one run of `make bench-table`. "+
			"Frames written by c-blosc2 (%s) with python-blosc2's defaults; `GOMAXPROCS=1 bloscfs unpack -q -f FRAME -` against c-blosc2 decoding the same frame on one thread, "+
			"whole processes, output to /dev/null; CPU times (user + system) and the ratio are medians over %d interleaved pairs.\n\n",
			size>>20, time.Now().UTC().Format("2006-01-02"), lib, vsCRounds)
		table := formatTable(rows)
		mhdr := fmt.Sprintf("\nzstd through the mount against the FUSE ceiling: cold `cat` through a fresh mount of the c-blosc2 zstd frame (python-blosc2's defaults) and of a frame of stored chunks of the same data, interleaved, median of %d each.\n\n", mountReads)
		mtable := formatTable(append([][]string{{"data", "the FUSE ceiling", "zstd", "zstd ÷ ceiling"}}, mrows...))
		fmt.Fprintf(os.Stderr, "%s%s%s%s", hdr, table, mhdr, mtable)
		if f := os.Getenv("BLOSCFS_BENCH_TABLE"); f != "" {
			if fh, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
				fh.WriteString(hdr + table + mhdr + mtable)
				fh.Close()
			}
		}
	}
}
