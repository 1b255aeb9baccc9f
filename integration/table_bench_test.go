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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testutil"
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
	mnt := filepath.Join(b.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	cmd := exec.Command(bin, "mount", "-f", "--log", filepath.Join(b.TempDir(), "log"), src, mnt)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	register(mnt, cmd.Process.Pid)
	stop := func() {
		if isMounted(mnt) {
			if err := exec.Command(bin, "unmount", mnt).Run(); err != nil {
				exec.Command("umount", "-l", mnt).Run()
			}
		}
		cmd.Wait()
		liveMu.Lock()
		delete(live, mnt)
		liveMu.Unlock()
	}
	defer stop()
	for deadline := time.Now().Add(30 * time.Second); !isMounted(mnt); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%s not mounted after 30s", mnt)
		}
	}
	return benchRun(b, 1, 0, "cat", filepath.Join(mnt, name))
}

// cRef times python3-blosc (c-blosc 1.x, the C library) on the chunks of
// plain, in-process: compression with 1 and 2 threads and decompression
// with 1 thread, best of 3 each, in seconds.
func cRef(b *testing.B, py, plain, codec string, clevel, typesize int) (comp1, comp2, dec1 float64) {
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
print(*out)
`
	out, err := exec.Command(py, "-c", script, plain, codec, strconv.Itoa(clevel), strconv.Itoa(typesize)).CombinedOutput()
	if err != nil {
		b.Fatalf("the C reference: %v\n%s", err, out)
	}
	if _, err := fmt.Sscan(string(out), &comp1, &comp2, &dec1); err != nil {
		b.Fatalf("the C reference printed %q", out)
	}
	return
}

// BenchmarkTable is the one table of `make bench`: for a float64 random
// walk, a smooth float64 series and CSV text, packed by `bloscfs pack`
// (1 MiB chunks, default blocks, shuffle) with LZ4 and zstd (clevel 5), in
// one run: the ratio; cold sequential `cat FILE > /dev/null` through a
// fresh mount against the same of a frame of stored chunks (the FUSE
// transport with nothing to decode) and `cat` of the plain file from the
// page cache; unpack and verify at
// GOMAXPROCS 1 and 2; pack at GOMAXPROCS 1 and 2; and the C library
// (python3-blosc) compressing on 1 and 2 threads and decompressing on 1
// into a reused buffer, in-process. Sources are in the page cache. Times are best of 3 except
// the mount reads (one fresh mount each). The table goes to stderr and,
// when BLOSCFS_BENCH_TABLE names a file, there too. Needs root.
func BenchmarkTable(b *testing.B) {
	if skipReason != "" {
		b.Skip(skipReason)
	}
	if setupErr != "" {
		b.Fatal(setupErr)
	}
	py := testutil.Python(b, "blosc", "numpy")
	size := int64(1 << 30)
	if s := os.Getenv("BLOSCFS_BENCH_SIZE"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			size = int64(n) << 20
		}
	}
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	gbs := func(d time.Duration) float64 { return float64(size) / d.Seconds() / 1e9 }
	for b.Loop() {
		var rows [][]string
		row := func(cells ...string) { rows = append(rows, cells) }
		row("data", "codec", "ratio", "measure", "GB/s", "vs")
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
			ceil := freshMountRead(b, src, ds.name+"-stored")
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
				c1, c2, cd := cRef(b, py, plain, codec, 5, ds.typesize)
				benchRun(b, 1, 0, "cat", packed)
				m := freshMountRead(b, src, ds.name+"-"+codec)
				u2 := benchRun(b, 3, 2, bin, "unpack", "-q", "-f", packed, "/dev/null")
				u1 := benchRun(b, 3, 1, bin, "unpack", "-q", "-f", packed, "/dev/null")
				v2 := benchRun(b, 3, 2, bin, "verify", packed)
				v1 := benchRun(b, 3, 1, bin, "verify", packed)
				x := func(a, c time.Duration) string { return fmt.Sprintf("%.2f×", c.Seconds()/a.Seconds()) }
				sec := func(s float64) time.Duration { return time.Duration(s * 1e9) }
				row(ds.name, codec, ratio, "cold cat through a fresh mount", fmt.Sprintf("%.2f", gbs(m)), x(m, ceil)+" of the FUSE ceiling, "+x(m, sec(cd))+" of C decoding on 1 thread")
				row(ds.name, codec, ratio, "unpack to /dev/null, GOMAXPROCS=2", fmt.Sprintf("%.2f", gbs(u2)), x(u2, u1)+" of GOMAXPROCS=1, "+x(u2, sec(cd))+" of C on 1 thread")
				row(ds.name, codec, ratio, "unpack to /dev/null, GOMAXPROCS=1", fmt.Sprintf("%.2f", gbs(u1)), x(u1, sec(cd))+" of C on 1 thread")
				row(ds.name, codec, ratio, "verify, GOMAXPROCS=2", fmt.Sprintf("%.2f", gbs(v2)), x(v2, v1)+" of GOMAXPROCS=1")
				row(ds.name, codec, ratio, "C decompress, 1 thread (python3-blosc)", fmt.Sprintf("%.2f", float64(size)/cd/1e9), "")
				row(ds.name, codec, ratio, "pack, GOMAXPROCS=2", fmt.Sprintf("%.2f", gbs(p2)), x(p2, sec(c2))+" of C on 2 threads")
				row(ds.name, codec, ratio, "pack, GOMAXPROCS=1", fmt.Sprintf("%.2f", gbs(p1)), x(p1, sec(c1))+" of C on 1 thread")
				row(ds.name, codec, ratio, "C compress, 2 / 1 threads", fmt.Sprintf("%.2f / %.2f", float64(size)/c2/1e9, float64(size)/c1/1e9), "")
				b.ReportMetric(gbs(m)/gbs(ceil), ds.name+"-"+codec+"-mount/ceiling")
				b.ReportMetric(u1.Seconds()/u2.Seconds(), ds.name+"-"+codec+"-unpack-speedup")
				b.ReportMetric(v1.Seconds()/v2.Seconds(), ds.name+"-"+codec+"-verify-speedup")
				os.Remove(packed)
			}
			os.Remove(stored)
			os.Remove(plain)
		}
		table := formatTable(rows)
		fmt.Fprintf(os.Stderr, "\n%s", table)
		if f := os.Getenv("BLOSCFS_BENCH_TABLE"); f != "" {
			hdr := fmt.Sprintf("%d MiB per data set, %s, GOMAXPROCS up to 2, one run of `make bench-table`.\n\n", size>>20, time.Now().UTC().Format("2006-01-02"))
			if err := os.WriteFile(f, []byte(hdr+table), 0o644); err != nil {
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
