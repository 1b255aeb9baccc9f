package integration

import (
	"bufio"
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
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"golang.org/x/sys/unix"
)

// The data sets of BenchmarkTable, each BLOSCFS_BENCH_SIZE MiB (1024).
var tableData = []struct {
	name, about string
	typesize    int
	gen         func(b []byte, seed uint64)
}{
	{"walk", "float64 random walk (cumsum of normal)", 8, genWalk},
	{"smooth", "smooth float64 series", 8, genSmooth},
	{"csv", "CSV text, a numeric table", 1, genCSV},
}

// genWalk writes np.cumsum(normal) as float64.
func genWalk(b []byte, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	x := 0.0
	for i := 0; i+8 <= len(b); i += 8 {
		x += rng.NormFloat64()
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(x))
	}
}

// genSmooth writes a slowly varying signal on a coarse grid, as a
// sensor sampled much faster than it changes would give.
func genSmooth(b []byte, seed uint64) {
	for i := 0; i+8 <= len(b); i += 8 {
		x := float64(i/8) + float64(seed)*float64(len(b)/8)
		v := math.Round((math.Sin(x*0.00007)*800+math.Cos(x*0.0013)*30)*16) / 16
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
	}
}

// genCSV writes rows of a numeric table as text.
func genCSV(b []byte, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	var line []byte
	i, row := 0, int(seed)*100000
	for i < len(b) {
		line = strconv.AppendInt(line[:0], int64(row), 10)
		line = append(line, ',')
		line = strconv.AppendFloat(line, 20+rng.NormFloat64()*3, 'f', 3, 64)
		line = append(line, ',')
		line = strconv.AppendFloat(line, 1013+rng.NormFloat64()*8, 'f', 1, 64)
		line = append(line, ",station-"...)
		line = strconv.AppendInt(line, int64(row%37), 10)
		line = append(line, '\n')
		i += copy(b[i:], line)
		row++
	}
}

// writeTableData writes size bytes of gen to path.
func writeTableData(b *testing.B, path string, size int64, gen func([]byte, uint64)) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<20)
	for off, k := int64(0), uint64(0); off < size; off, k = off+int64(len(buf)), k+1 {
		n := min(int64(len(buf)), size-off)
		gen(buf[:n], k)
		if _, err := f.Write(buf[:n]); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRun runs a program with its output to /dev/null and GOMAXPROCS set
// (0: unset), and returns the best wall time of runs.
func benchRun(b *testing.B, runs, procs int, name string, args ...string) time.Duration {
	b.Helper()
	best := time.Duration(math.MaxInt64)
	for range runs {
		cmd := exec.Command(name, args...)
		cmd.Env = os.Environ()
		if procs > 0 {
			cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(procs))
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		t := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
		}
		best = min(best, time.Since(t))
	}
	return best
}

// freshMountRead mounts src in the foreground, reads name through it
// once with `cat FILE > /dev/null` (cold: the mount is new, so are its
// page cache and block cache), unmounts, and returns the time of the read.
func freshMountRead(b *testing.B, src, name string) time.Duration {
	b.Helper()
	var d time.Duration
	withFreshMount(b, src, func(mnt string) { d = benchRun(b, 1, 0, "cat", filepath.Join(mnt, name)) })
	return d
}

// mountReads is how many fresh mounts each mount row of the table
// reads its file through: one cold read of a 256 MiB file lasts about
// 0.1 s, and single reads of the same file moved by half between runs.
const mountReads = 3

// medianMountReadsInterleaved returns, for each source and name, the
// median time of mountReads cold reads through a fresh mount, the
// sources taking turns (A B A B ...) so that a change of load on the
// machine moves them alike.
func medianMountReadsInterleaved(b *testing.B, srcs, names []string) []time.Duration {
	b.Helper()
	return medianMountReadsRuns(b, srcs, names, mountReads)
}

// medianMountReadsRuns is medianMountReadsInterleaved of runs rounds.
func medianMountReadsRuns(b *testing.B, srcs, names []string, runs int) []time.Duration {
	b.Helper()
	ts := make([][]time.Duration, len(srcs))
	for range runs {
		for k := range srcs {
			ts[k] = append(ts[k], freshMountRead(b, srcs[k], names[k]))
		}
	}
	out := make([]time.Duration, len(srcs))
	for k := range ts {
		slices.Sort(ts[k])
		out[k] = ts[k][len(ts[k])/2]
	}
	return out
}

// medianMountRead returns the median time of mountReads cold reads of
// name, each through a fresh mount of src.
func medianMountRead(b *testing.B, src, name string) time.Duration {
	b.Helper()
	ts := make([]time.Duration, mountReads)
	for i := range ts {
		ts[i] = freshMountRead(b, src, name)
	}
	slices.Sort(ts)
	return ts[len(ts)/2]
}

// cTimes is what one C library did in-process on the 1 MiB chunks of
// one data set, best of 3 each, in seconds.
type cTimes struct {
	lib          string  // the library and its version, e.g. "c-blosc 1.21.3"
	comp1, comp2 float64 // compressing on 1 and 2 threads
	dec1         float64 // decompressing its own chunks on 1 thread
	decFrame     float64 // decompressing the chunks of our frame on 1 thread (c-blosc2 only, else 0)
}

// cRef times python3-blosc (c-blosc 1.x) on the chunks of plain,
// in-process: compression with 1 and 2 threads, and decompression of
// its own chunks with 1 thread into a reused buffer.
func cRef(b *testing.B, py, plain, codec string, clevel, typesize int) cTimes {
	script := `
import blosc, numpy, sys, time
path, cname, clevel, ts = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = open(path, 'rb').read()
chunks = [data[i:i + (1 << 20)] for i in range(0, len(data), 1 << 20)]
def best(f):
    t = []
    for _ in range(3):
        t0 = time.perf_counter(); f(); t.append(time.perf_counter() - t0)
    return min(t)
out = []
for n in (1, 2):
    blosc.set_nthreads(n)
    out.append(best(lambda: [blosc.compress(c, ts, clevel, blosc.SHUFFLE, cname) for c in chunks]))
blosc.set_nthreads(1)
comp = [blosc.compress(c, ts, clevel, blosc.SHUFFLE, cname) for c in chunks]
# Into one reused buffer, as a C program would: decompress() would
# allocate (and fault in) a new object per chunk.
buf = numpy.empty(1 << 20, dtype=numpy.uint8)
ptr = buf.__array_interface__['data'][0]
out.append(best(lambda: [blosc.decompress_ptr(c, ptr) for c in comp]))
print(blosc.blosclib_version.split()[0], *out)
`
	out, err := exec.Command(py, "-c", script, plain, codec, strconv.Itoa(clevel), strconv.Itoa(typesize)).CombinedOutput()
	if err != nil {
		b.Fatalf("the C reference (python3-blosc) on %s: %v\n%s", plain, err, out)
	}
	var c cTimes
	if _, err := fmt.Sscan(string(out), &c.lib, &c.comp1, &c.comp2, &c.dec1); err != nil {
		b.Fatalf("the C reference (python3-blosc) on %s printed %q", plain, out)
	}
	c.lib = "c-blosc " + c.lib
	return c
}

// cRef2 times c-blosc2, the shared library lib loaded by Python's
// ctypes, in-process on the chunks of plain: blosc2_compress with 1 and
// 2 threads (blosc1_set_compressor, shuffle, automatic block size), and
// blosc2_decompress with 1 thread into a reused buffer, both of its own
// chunks and of the chunks of frame, the file `bloscfs pack` made of
// plain, read out by blosc2_schunk_get_chunk. Each of frame's chunks is
// checked to decode to the bytes of plain first.
func cRef2(b *testing.B, py, lib, plain, frame, codec string, clevel, typesize int) cTimes {
	script := `
import ctypes, numpy, sys, time
lib, path, frame, cname, clevel, ts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
b2 = ctypes.CDLL(lib)
b2.blosc2_get_version_string.restype = ctypes.c_char_p
b2.blosc2_set_nthreads.argtypes = [ctypes.c_int16]
b2.blosc2_set_nthreads.restype = ctypes.c_int16
b2.blosc1_set_compressor.argtypes = [ctypes.c_char_p]
b2.blosc2_compress.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32]
b2.blosc2_decompress.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32]
b2.blosc2_schunk_open.argtypes = [ctypes.c_char_p]
b2.blosc2_schunk_open.restype = ctypes.c_void_p
b2.blosc2_schunk_get_chunk.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8)), ctypes.POINTER(ctypes.c_bool)]
b2.blosc2_schunk_free.argtypes = [ctypes.c_void_p]
libc = ctypes.CDLL(None)
libc.free.argtypes = [ctypes.c_void_p]
b2.blosc2_init()
if b2.blosc1_set_compressor(cname.encode()) < 0:
    sys.exit('%s: no codec %s' % (lib, cname))
n = 1 << 20
data = numpy.fromfile(path, dtype=numpy.uint8)
chunks = [data[i:i + n] for i in range(0, len(data), n)]
cbuf = [numpy.empty(n + 64, dtype=numpy.uint8) for _ in chunks]
def best(f):
    t = []
    for _ in range(3):
        t0 = time.perf_counter(); f(); t.append(time.perf_counter() - t0)
    return min(t)
sizes = [0] * len(chunks)
def compress():
    for i, c in enumerate(chunks):
        sizes[i] = b2.blosc2_compress(clevel, 1, ts, c.ctypes.data, c.nbytes, cbuf[i].ctypes.data, cbuf[i].nbytes)
        if sizes[i] <= 0:
            sys.exit('%s: chunk %d: blosc2_compress returned %d' % (path, i, sizes[i]))
out = []
for nt in (1, 2):
    b2.blosc2_set_nthreads(nt)
    out.append(best(compress))
b2.blosc2_set_nthreads(1)
# Into one reused buffer, as a C program would.
buf = numpy.empty(n, dtype=numpy.uint8)
def decompress(cs, name):
    for i, c in enumerate(cs):
        r = b2.blosc2_decompress(c.ctypes.data, c.nbytes, buf.ctypes.data, n)
        if r < 0:
            sys.exit('%s: chunk %d: blosc2_decompress returned %d' % (name, i, r))
out.append(best(lambda: decompress([c[:k] for c, k in zip(cbuf, sizes)], path)))
sc = b2.blosc2_schunk_open(frame.encode())
if not sc:
    sys.exit('%s: blosc2_schunk_open cannot open it' % frame)
fc = []
p, needs_free = ctypes.POINTER(ctypes.c_uint8)(), ctypes.c_bool()
while len(fc) < len(chunks):
    k = b2.blosc2_schunk_get_chunk(sc, len(fc), ctypes.byref(p), ctypes.byref(needs_free))
    if k < 0:
        sys.exit('%s: chunk %d: blosc2_schunk_get_chunk returned %d' % (frame, len(fc), k))
    fc.append(numpy.frombuffer(ctypes.string_at(p, k), dtype=numpy.uint8))
    if needs_free.value:
        libc.free(p)
b2.blosc2_schunk_free(sc)
for i, c in enumerate(fc):
    r = b2.blosc2_decompress(c.ctypes.data, c.nbytes, buf.ctypes.data, n)
    if r != chunks[i].nbytes or not numpy.array_equal(buf[:r], chunks[i]):
        sys.exit('%s: chunk %d: c-blosc2 decodes it to other bytes than %s holds (%d bytes)' % (frame, i, path, r))
out.append(best(lambda: decompress(fc, frame)))
print(b2.blosc2_get_version_string().decode(), *out)
`
	out, err := exec.Command(py, "-c", script, lib, plain, frame, codec, strconv.Itoa(clevel), strconv.Itoa(typesize)).CombinedOutput()
	if err != nil {
		b.Fatalf("the C reference (c-blosc2, BLOSCFS_CBLOSC2=%s) on %s: %v\n%s", lib, frame, err, out)
	}
	var c cTimes
	if _, err := fmt.Sscan(string(out), &c.lib, &c.comp1, &c.comp2, &c.dec1, &c.decFrame); err != nil {
		b.Fatalf("the C reference (c-blosc2, BLOSCFS_CBLOSC2=%s) on %s printed %q", lib, frame, out)
	}
	c.lib = "c-blosc2 " + c.lib
	return c
}

// BenchmarkTable is the one table of `make bench`: for a float64 random
// walk, a smooth float64 series and CSV text, packed by `bloscfs pack`
// (1 MiB chunks, default blocks, shuffle) with LZ4 and zstd (clevel 5), in
// one run: the ratio; cold sequential `cat FILE > /dev/null` through a
// fresh mount against the same of a frame of stored chunks (the FUSE
// transport with nothing to decode) and `cat` of the plain file from the
// page cache; unpack and verify at GOMAXPROCS 1 and 2; pack at GOMAXPROCS
// 1 and 2; and the C library compressing on 1 and 2 threads and
// decompressing on 1 into a reused buffer, in-process: c-blosc 1.x
// (python3-blosc) always, and c-blosc2 when BLOSCFS_CBLOSC2 names its
// shared library (libblosc2.so), which then also decodes the very
// chunks of our frame and is the C of the "vs" column. Sources are in the page
// cache. Times are best of 3 except the mount reads (the median of
// mountReads fresh mounts each). The table goes to stderr and, when BLOSCFS_BENCH_TABLE names a
// file, there too. Needs root.
func BenchmarkTable(b *testing.B) {
	setup.Require(b)
	py := testkit.Python(b, "blosc", "numpy")
	lib := os.Getenv("BLOSCFS_CBLOSC2")
	if lib != "" {
		if _, err := os.Stat(lib); err != nil {
			b.Fatalf("BLOSCFS_CBLOSC2 names no c-blosc2 shared library: %v", err)
		}
	}
	size := testkit.BenchSize(1 << 30)
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	gbs := func(d time.Duration) float64 { return float64(size) / d.Seconds() / 1e9 }
	cgbs := func(s float64) string { return fmt.Sprintf("%.2f", float64(size)/s/1e9) }
	x := func(a, c time.Duration) string { return fmt.Sprintf("%.2f×", c.Seconds()/a.Seconds()) }
	sec := func(s float64) time.Duration { return time.Duration(s * 1e9) }
	for b.Loop() {
		var rows [][]string
		row := func(cells ...string) { rows = append(rows, cells) }
		row("data", "codec", "ratio", "measure", "GB/s", "vs")
		var ref string // the C of the "vs" column
		for _, ds := range tableData {
			plain := filepath.Join(dir, ds.name)
			writeTableData(b, plain, size, ds.gen)
			ts := strconv.Itoa(ds.typesize)
			benchRun(b, 1, 0, "cat", plain) // into the page cache
			cat := benchRun(b, 3, 0, "cat", plain)
			row(ds.name, "-", "1", "cat of the plain file, page cache", fmt.Sprintf("%.2f", gbs(cat)), "")
			stored := filepath.Join(src, ds.name+"-stored.b2frame")
			mustRun(b, bin, "pack", "-q", "-f", "--codec", "lz4", "--clevel", "0", "--typesize", ts, plain, stored)
			benchRun(b, 1, 0, "cat", stored)
			ceil := medianMountRead(b, src, ds.name+"-stored")
			row(ds.name, "stored", "1", "cold cat through a fresh mount (the FUSE ceiling)", fmt.Sprintf("%.2f", gbs(ceil)), "")
			for _, codec := range []string{"lz4", "zstd"} {
				packed := filepath.Join(src, ds.name+"-"+codec+".b2frame")
				args := []string{"pack", "-q", "-f", "--codec", codec, "--clevel", "5", "--typesize", ts, plain, packed}
				p2 := benchRun(b, 3, 2, bin, args...)
				p1 := benchRun(b, 3, 1, bin, args...)
				st, err := os.Stat(packed)
				if err != nil {
					b.Fatal(err)
				}
				ratio := fmt.Sprintf("%.2f", float64(size)/float64(st.Size()))
				c1 := cRef(b, py, plain, codec, 5, ds.typesize)
				// The reference: c-blosc 1.x on its own chunks, or
				// c-blosc2 on our frame's chunks or its own, whichever
				// it decodes faster. Identical bytes would be the fairer
				// race, but our typesize-1 chunks carry a shuffle filter
				// that c-blosc2 itself would drop and undoes with a byte
				// loop, so on text C is at its best only on its own.
				c, dec := c1, c1.dec1
				own, frame := "", ""
				if lib != "" {
					c = cRef2(b, py, lib, plain, packed, codec, 5, ds.typesize)
					dec = min(c.dec1, c.decFrame)
					if dec == c.dec1 {
						own = "; the C of the vs column"
					} else {
						frame = "; the C of the vs column"
					}
				}
				ref = c.lib
				benchRun(b, 1, 0, "cat", packed)
				m := medianMountRead(b, src, ds.name+"-"+codec)
				u2 := benchRun(b, 3, 2, bin, "unpack", "-q", "-f", packed, "/dev/null")
				u1 := benchRun(b, 3, 1, bin, "unpack", "-q", "-f", packed, "/dev/null")
				v2 := benchRun(b, 3, 2, bin, "verify", packed)
				v1 := benchRun(b, 3, 1, bin, "verify", packed)
				row(ds.name, codec, ratio, "cold cat through a fresh mount", fmt.Sprintf("%.2f", gbs(m)), x(m, ceil)+" of the FUSE ceiling, "+x(m, sec(dec))+" of "+c.lib+" decoding on 1 thread")
				row(ds.name, codec, ratio, "unpack to /dev/null, GOMAXPROCS=2", fmt.Sprintf("%.2f", gbs(u2)), x(u2, u1)+" of GOMAXPROCS=1, "+x(u2, sec(dec))+" of "+c.lib+" on 1 thread")
				row(ds.name, codec, ratio, "unpack to /dev/null, GOMAXPROCS=1", fmt.Sprintf("%.2f", gbs(u1)), x(u1, sec(dec))+" of "+c.lib+" on 1 thread")
				row(ds.name, codec, ratio, "verify, GOMAXPROCS=2", fmt.Sprintf("%.2f", gbs(v2)), x(v2, v1)+" of GOMAXPROCS=1")
				row(ds.name, codec, ratio, "C decompress, 1 thread ("+c1.lib+", its own chunks)", cgbs(c1.dec1), "")
				if lib != "" {
					row(ds.name, codec, ratio, "C decompress, 1 thread ("+c.lib+", its own chunks)", cgbs(c.dec1), x(sec(c.dec1), sec(c1.dec1))+" of "+c1.lib+own)
					row(ds.name, codec, ratio, "C decompress, 1 thread ("+c.lib+", our frame's chunks)", cgbs(c.decFrame), x(sec(c.decFrame), sec(c1.dec1))+" of "+c1.lib+frame)
				}
				row(ds.name, codec, ratio, "pack, GOMAXPROCS=2", fmt.Sprintf("%.2f", gbs(p2)), x(p2, sec(c.comp2))+" of "+c.lib+" on 2 threads")
				row(ds.name, codec, ratio, "pack, GOMAXPROCS=1", fmt.Sprintf("%.2f", gbs(p1)), x(p1, sec(c.comp1))+" of "+c.lib+" on 1 thread")
				row(ds.name, codec, ratio, "C compress, 2 / 1 threads ("+c1.lib+")", cgbs(c1.comp2)+" / "+cgbs(c1.comp1), "")
				if lib != "" {
					row(ds.name, codec, ratio, "C compress, 2 / 1 threads ("+c.lib+")", cgbs(c.comp2)+" / "+cgbs(c.comp1), x(sec(c.comp1), sec(c1.comp1))+" of "+c1.lib+" on 1 thread")
				}
				b.ReportMetric(gbs(m)/gbs(ceil), ds.name+"-"+codec+"-mount/ceiling")
				b.ReportMetric(u1.Seconds()/u2.Seconds(), ds.name+"-"+codec+"-unpack-speedup")
				b.ReportMetric(v1.Seconds()/v2.Seconds(), ds.name+"-"+codec+"-verify-speedup")
				os.Remove(packed)
			}
			os.Remove(stored)
			os.Remove(plain)
		}
		about := "C in the \"vs\" column: " + ref + " through python3-blosc, on its own chunks (set BLOSCFS_CBLOSC2 to a libblosc2.so to compare with c-blosc2)."
		if lib != "" {
			about = "C in the \"vs\" column: " + ref + " (BLOSCFS_CBLOSC2, through Python ctypes): decoding, the faster of our frame's chunks and its own; compressing, its own."
		}
		hdr := fmt.Sprintf("%d MiB per data set, %s, GOMAXPROCS up to 2, one run of `make bench-table`.\n%s\n\n", size>>20, time.Now().UTC().Format("2006-01-02"), about)
		fmt.Fprintf(os.Stderr, "\n%s%s", hdr, formatTable(rows))
		if f := os.Getenv("BLOSCFS_BENCH_TABLE"); f != "" {
			if err := os.WriteFile(f, []byte(hdr+formatTable(rows)), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// formatTable renders rows (the first is the header) as a Markdown table.
func formatTable(rows [][]string) string {
	var sb strings.Builder
	w := bufio.NewWriter(&sb)
	for i, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		if i == 0 {
			fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(r)))
		}
	}
	w.Flush()
	return sb.String()
}

// withFreshMount mounts src in the foreground, runs fn on the mount
// point, and unmounts.
func withFreshMount(b *testing.B, src string, fn func(mnt string)) {
	b.Helper()
	withFreshMountPid(b, src, func(mnt string, _ int) { fn(mnt) })
}

// random4KTurns returns the median time of 4 KiB reads at random offsets
// of each names[i] through a fresh mount of srcs[i], each read in a chunk
// (of chunk bytes) no read of that file touched before, kernel read-ahead
// off (FADV_RANDOM). The files are mounted at once and read in turn (4 KiB
// of one, then of the next, the order rotating each round), so that what
// changes on the machine during the run (other work, the hypervisor)
// weighs on all of them alike and their ratios hold from run to run.
func random4KTurns(b *testing.B, srcs, names []string, size, chunk int64) []time.Duration {
	b.Helper()
	files := make([]*os.File, len(srcs))
	var mountAll func(i int)
	ts := make([][]time.Duration, len(srcs))
	mountAll = func(i int) {
		if i < len(srcs) {
			withFreshMount(b, srcs[i], func(mnt string) {
				f, err := os.Open(filepath.Join(mnt, names[i]))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
				files[i] = f
				mountAll(i + 1)
			})
			return
		}
		rng := rand.New(rand.NewPCG(1, 2))
		chunks := rng.Perm(int(size / chunk))
		buf := make([]byte, 4096)
		for round, c := range chunks[:min(len(chunks), 200)] {
			off := int64(c)*chunk + rng.Int64N(chunk-4096)
			for k := range files {
				j := (k + round) % len(files)
				t := time.Now()
				if _, err := files[j].ReadAt(buf, off); err != nil {
					b.Fatal(err)
				}
				ts[j] = append(ts[j], time.Since(t))
			}
		}
	}
	mountAll(0)
	p50 := make([]time.Duration, len(srcs))
	for i := range ts {
		slices.Sort(ts[i])
		p50[i] = ts[i][len(ts[i])/2]
	}
	return p50
}

// zarrGen writes OUT/z.zarr, a Zarr v2 array of float64 (a random walk)
// of SIZE bytes, Blosc LZ4 clevel 5 byte shuffle, 1 MiB chunks, with
// python3-zarr, and OUT/f.npy, np.save's bytes of the same array.
const zarrGen = `
import sys, numpy as np, zarr, numcodecs
out, size = sys.argv[1], int(sys.argv[2])
n = size // 8
a = np.cumsum(np.random.default_rng(1).normal(size=n))
z = zarr.open(out + "/z.zarr", mode="w", shape=(n,), chunks=(1 << 17,), dtype="<f8",
              compressor=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE))
z[:] = a
np.save(out + "/f.npy", a)
`

// zarrTime times, in python3, zarr.open(path)[:] (best of 3, the store in
// the page cache) or np.load(path) (once: through a fresh mount). Both
// first fill and free an array of the result's size (SIZE bytes): the
// first touch of a fresh process's memory cost 8-12 ms per MiB on the
// 2-core virtual machine (np.ones of 256 MiB: 3.05 s fresh, 0.24 s the
// second time), which the one np.load paid and the best of three
// zarr.open()[:] did not.
const zarrTime = `
import sys, time, numpy as np, zarr
how, path, runs, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
w = np.ones(size // 8)
del w
best = 1e9
for _ in range(runs):
    t = time.perf_counter()
    a = zarr.open(path, mode="r")[:] if how == "zarr" else np.load(path)
    best = min(best, time.perf_counter() - t)
print(best)
`

// BenchmarkZarrTable adds the rows of a Zarr v2 array (float64 random
// walk, Blosc LZ4 clevel 5 shuffle, 1 MiB chunks, one file per chunk, as
// python3-zarr writes it) against the same array as a .b2frame with the
// same codec and chunk size: cold sequential cat through a fresh mount
// (the two taking turns), cold 4 KiB random read p50, and np.load
// through the mount against zarr.open()[:] with python3-zarr. c-blosc
// 1.21 stores each Zarr chunk as one 1 MiB block, and a cold 4 KiB read
// decodes the block under it: the 4 KiB rows also show a .b2frame of
// 1 MiB blocks, besides `bloscfs pack`'s 256 KiB ones. Its table goes to
// stderr and is appended to BLOSCFS_BENCH_TABLE. Needs root.
func BenchmarkZarrTable(b *testing.B) {
	setup.Require(b)
	py := testkit.Python(b, "zarr", "numcodecs", "numpy")
	size := testkit.BenchSize(1 << 30)
	dir := b.TempDir()
	zsrc, fsrc := filepath.Join(dir, "zsrc"), filepath.Join(dir, "fsrc")
	os.Mkdir(zsrc, 0o755)
	os.Mkdir(fsrc, 0o755)
	mustRun(b, py, "-c", zarrGen, zsrc, strconv.FormatInt(size, 10))
	npy := filepath.Join(zsrc, "f.npy")
	mustRun(b, bin, "pack", "-q", "-f", "--codec", "lz4", "--clevel", "5", "--typesize", "8", "--chunk-size", "1MiB", npy, filepath.Join(fsrc, "f.npy.b2frame"))
	fsrc1 := filepath.Join(dir, "fsrc1")
	os.Mkdir(fsrc1, 0o755)
	mustRun(b, bin, "pack", "-q", "-f", "--codec", "lz4", "--clevel", "5", "--typesize", "8", "--chunk-size", "1MiB", "--block-size", "1MiB", npy, filepath.Join(fsrc1, "f.npy.b2frame"))
	os.Remove(npy)
	mustRun(b, "sh", "-c", `cat "$1"/z.zarr/* "$2"/* "$3"/* > /dev/null`, "sh", zsrc, fsrc, fsrc1) // sources into the page cache
	gbs := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(size)/d.Seconds()/1e9) }
	x := func(a, c time.Duration) string { return fmt.Sprintf("%.2f×", c.Seconds()/a.Seconds()) }
	secs := func(out []byte) time.Duration {
		f, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			b.Fatalf("python: %q", out)
		}
		return time.Duration(f * 1e9)
	}
	for b.Loop() {
		var rows [][]string
		row := func(cells ...string) { rows = append(rows, cells) }
		row("data", "stored as", "measure", "GB/s or time", "vs")
		t := medianMountReadsInterleaved(b, []string{zsrc, fsrc}, []string{"z.npy", "f.npy"})
		zs, fs := t[0], t[1]
		row("walk", ".b2frame lz4", "cold cat through a fresh mount", gbs(fs), "")
		row("walk", "Zarr v2 lz4", "cold cat through a fresh mount", gbs(zs), x(zs, fs)+" of the .b2frame")
		p50 := random4KTurns(b, []string{zsrc, fsrc, fsrc1}, []string{"z.npy", "f.npy", "f.npy"}, size, 1<<20)
		zr, fr, f1r := p50[0], p50[1], p50[2]
		row("walk", ".b2frame lz4", "cold 4 KiB random read, p50", fr.String(), "")
		row("walk", ".b2frame lz4, 1 MiB blocks", "cold 4 KiB random read, p50", f1r.String(), "")
		row("walk", "Zarr v2 lz4 (1 MiB blocks)", "cold 4 KiB random read, p50", zr.String(),
			fmt.Sprintf("%.2f× the .b2frame's, %.2f× that of 1 MiB blocks", zr.Seconds()/fr.Seconds(), zr.Seconds()/f1r.Seconds()))
		sz := strconv.FormatInt(size, 10)
		zo := secs(mustRun(b, py, "-c", zarrTime, "zarr", filepath.Join(zsrc, "z.zarr"), "3", sz))
		var nl time.Duration
		withFreshMount(b, zsrc, func(mnt string) {
			nl = secs(mustRun(b, py, "-c", zarrTime, "npy", filepath.Join(mnt, "z.npy"), "1", sz))
		})
		row("walk", "Zarr v2 lz4", "zarr.open(store)[:], python3-zarr, warm store", gbs(zo), "")
		row("walk", "Zarr v2 lz4", "np.load through a fresh mount", gbs(nl), x(nl, zo)+" of zarr.open()[:]")
		b.ReportMetric(zs.Seconds()/fs.Seconds(), "zarr/b2frame-seq-time")
		b.ReportMetric(zr.Seconds()/fr.Seconds(), "zarr/b2frame-rand4k-p50")
		b.ReportMetric(zr.Seconds()/f1r.Seconds(), "zarr/b2frame1m-rand4k-p50")
		b.ReportMetric(zo.Seconds()/nl.Seconds(), "npload/zarr-open-speed")
		hdr := fmt.Sprintf("\nZarr: %d MiB array, %s, one run.\n\n", size>>20, time.Now().UTC().Format("2006-01-02"))
		fmt.Fprintf(os.Stderr, "%s%s", hdr, formatTable(rows))
		if f := os.Getenv("BLOSCFS_BENCH_TABLE"); f != "" {
			if fh, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
				fh.WriteString(hdr + formatTable(rows))
				fh.Close()
			}
		}
	}
}
