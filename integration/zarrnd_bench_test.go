package integration

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/pack/bloscpack"
)

// ndArray is one array of BenchmarkZarrTableND: a 2-D field of rows of
// 8192 items in (128, 1024) chunks, or a 3-D cube of 360×720 planes in
// (24, 90, 180) chunks, float32 or float64, Blosc LZ4 clevel 5 or zstd
// clevel 1, byte shuffle: the chunkings of real Zarr data (a map of
// series, a stack of images), the codecs numcodecs users pick.
type ndArray struct {
	dims  int    // 2 or 3
	dtype string // "<f4" or "<f8"
	codec string // "lz4" or "zstd"
}

func (a ndArray) name() string {
	return fmt.Sprintf("%dd_%s_%s", a.dims, a.dtype[1:], a.codec)
}

// grid returns the array's chunk grid and the plain bytes of a chunk,
// for an array of rows rows (its first dimension; see ndGen).
func (a ndArray) grid(rows int64) (grid []int64, chunkBytes int64) {
	item, _ := strconv.ParseInt(a.dtype[2:], 10, 64)
	if a.dims == 2 {
		return []int64{rows / 128, 8192 / 1024}, 128 * 1024 * item
	}
	return []int64{rows / 24, 360 / 90, 720 / 180}, 24 * 90 * 180 * item
}

// writeChunksBlp writes the chunks of the store of array a (of rows rows)
// end to end, as they are, in grid order, to a Bloscpack file at out:
// the store's own compressed bytes, which a read decodes chunk by chunk,
// block by block, with no gather (its plain bytes are the chunks', not
// the array's C order).
func writeChunksBlp(b *testing.B, store string, a ndArray, rows int64, out string) {
	b.Helper()
	grid, cb := a.grid(rows)
	keys := gridKeys(grid)
	n := int64(len(keys))
	f, err := os.Create(out)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	p := bloscpack.DefaultParams()
	p.ChunkSize, p.Checksum = cb, 0
	w, err := bloscpack.NewWriter(f, n*cb, p)
	if err != nil {
		b.Fatal(err)
	}
	for _, key := range keys {
		raw, err := os.ReadFile(filepath.Join(store, key))
		if err != nil {
			b.Fatal(err)
		}
		if err := w.AddRawChunk(raw, nil); err != nil {
			b.Fatalf("%s: %v", key, err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// linkFlatStore makes out a Zarr v2 array of the chunk files of the
// store of array a (of rows rows), hard links to them in grid order,
// declared as a 1-D array whose chunks are those files whole: the view
// of out reads the store's own files chunk after chunk, block after
// block, with no gather. Its cold cat against the frame's is the floor
// under the view's: the same compressed bytes in the same files, each
// block decoded once into consecutive bytes, which a gather cannot do
// with less work.
func linkFlatStore(b *testing.B, store string, a ndArray, rows int64, out string) {
	b.Helper()
	grid, cb := a.grid(rows)
	keys := gridKeys(grid)
	n := int64(len(keys))
	if err := os.Mkdir(out, 0o755); err != nil {
		b.Fatal(err)
	}
	item, _ := strconv.ParseInt(a.dtype[2:], 10, 64)
	meta, err := os.ReadFile(filepath.Join(store, ".zarray"))
	if err != nil {
		b.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(meta, &m); err != nil {
		b.Fatal(err)
	}
	m["shape"], m["chunks"] = []int64{n * cb / item}, []int64{cb / item}
	if meta, err = json.Marshal(m); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, ".zarray"), meta, 0o644); err != nil {
		b.Fatal(err)
	}
	for k, key := range keys {
		if err := os.Link(filepath.Join(store, key), filepath.Join(out, strconv.Itoa(k))); err != nil {
			b.Fatal(err)
		}
	}
}

// gridKeys returns the Zarr v2 keys ("0.0.0", "0.0.1", ...) of a chunk
// grid, in C order: the order of the chunks' bytes end to end.
func gridKeys(grid []int64) []string {
	n := int64(1)
	for _, g := range grid {
		n *= g
	}
	keys := make([]string, 0, n)
	idx := make([]int64, len(grid))
	for range n {
		parts := make([]string, len(idx))
		for d, i := range idx {
			parts[d] = strconv.FormatInt(i, 10)
		}
		keys = append(keys, strings.Join(parts, "."))
		for d := len(idx) - 1; d >= 0; d-- {
			if idx[d]++; idx[d] < grid[d] {
				break
			}
			idx[d] = 0
		}
	}
	return keys
}

func (a ndArray) clevel() int {
	if a.codec == "zstd" {
		return 1
	}
	return 5
}

// ndGen writes OUT/NAME.zarr (python3-zarr 2.13, numcodecs' Blosc, as
// zarr users write them) of about SIZE bytes and OUT/NAME.npy, np.save's
// bytes of the same array: a random walk along the last dimension.
const ndGen = `
import sys, numpy as np, zarr, numcodecs
out, name, dims, dtype, cname, clevel, size = sys.argv[1:8]
dims, clevel, size = int(dims), int(clevel), int(size)
itemsize = np.dtype(dtype).itemsize
rng = np.random.default_rng(1)
if dims == 2:
    shape, chunks = (max(size // (8192 * itemsize) // 128, 1) * 128, 8192), (128, 1024)
else:
    shape, chunks = (max(size // (360 * 720 * itemsize) // 24, 1) * 24, 360, 720), (24, 90, 180)
a = np.cumsum(rng.standard_normal(shape, dtype=np.float32), axis=-1, dtype=dtype)
z = zarr.open(f"{out}/{name}.zarr", mode="w", shape=shape, chunks=chunks, dtype=dtype,
              compressor=numcodecs.Blosc(cname=cname, clevel=clevel, shuffle=numcodecs.Blosc.SHUFFLE))
z[:] = a
np.save(f"{out}/{name}.npy", a)
print(shape[0])
`

// The whole processes BenchmarkZarrTableND times: np.load of the view
// (read, or mapped and copied), a slice of its first axis through a
// mapping, and python3-zarr's reads of the same.
const (
	ndLoad      = `import sys, numpy as np; np.load(sys.argv[1])`
	ndMmapLoad  = `import sys, numpy as np; np.array(np.load(sys.argv[1], mmap_mode="r"))`
	ndMmapSlice = `import sys, numpy as np; a, b = int(sys.argv[2]), int(sys.argv[3]); np.array(np.load(sys.argv[1], mmap_mode="r")[a:b])`
	ndZarrAll   = `import sys, zarr; zarr.open(sys.argv[1], mode="r")[:]`
	ndZarrSlice = `import sys, zarr; a, b = int(sys.argv[2]), int(sys.argv[3]); zarr.open(sys.argv[1], mode="r")[a:b]`
)

// ndRuns is how many times each process of BenchmarkZarrTableND runs
// (the processes compared taking turns); the median is kept. Single runs
// of python3-zarr moved by 2× between runs on the shared 2-core machine
// (the first touch of a fresh process's memory costs 8-12 ms per MiB
// there, and varies). Medians of 5 left a different row of the table
// over its target in each run.
const ndRuns = 7

// BenchmarkZarrTableND measures N-D arrays, chunked as real Zarr data is
// (ndArray: 2-D and 3-D chunks, LZ4 and zstd, float32 and float64, each
// about BLOSCFS_BENCH_SIZE/4 MiB), written by python3-zarr, against the
// same bytes packed as a .b2frame (the codec and level of the array, 1
// MiB chunks) and against python3-zarr itself: cold cat through a fresh
// mount, the .npy view against the .b2frame, and against the .b2frame
// packed in the blocks of the store's chunks (python3-zarr's c-blosc
// 1.21 cuts zstd chunks into 32 KiB blocks, pack 128 KiB ones), and
// against the store's own chunks end to end in a .blp (the same
// compressed bytes in one file, decoded without a gather; c-blosc 1.21
// compresses a zstd block as one stream, where pack splits it into one
// stream per byte plane and stores the planes that do not compress as
// they are), and against the store's own chunk files linked into a 1-D
// array (linkFlatStore: the same bytes in the same files, decoded
// without a gather, so that this row is the gather's own cost, and that
// array against the frame the floor under the view); np.load of the
// view in a fresh process through a fresh mount against
// zarr.open(store)[:] in a fresh process (the store in the page cache;
// both processes start an interpreter); np.load(mmap_mode="r") copied
// whole against np.load; a slice of the first axis through a mapping
// (100 rows of a 2-D array, 8 planes of a cube) against
// zarr.open(store)[a:b]. Medians of runs taking turns, each through a
// fresh mount. Its table goes to stderr and is appended to
// BLOSCFS_BENCH_TABLE. Needs root.
func BenchmarkZarrTableND(b *testing.B) {
	setup.Require(b)
	py := testkit.Python(b, "zarr", "numcodecs", "numpy")
	size := testkit.BenchSize(1 << 30)
	size /= 4
	var arrays []ndArray
	for _, dims := range []int{2, 3} {
		for _, dtype := range []string{"<f8", "<f4"} {
			for _, codec := range []string{"lz4", "zstd"} {
				arrays = append(arrays, ndArray{dims, dtype, codec})
			}
		}
	}
	dir := b.TempDir()
	zsrc, fsrc, bsrc, csrc, lsrc := filepath.Join(dir, "zsrc"), filepath.Join(dir, "fsrc"), filepath.Join(dir, "bsrc"), filepath.Join(dir, "csrc"), filepath.Join(dir, "lsrc")
	for _, d := range []string{zsrc, fsrc, bsrc, csrc, lsrc} {
		os.Mkdir(d, 0o755)
	}
	first := map[string]int64{}
	blocks := map[string]int64{}
	for _, a := range arrays {
		n := a.name()
		out := mustRun(b, py, "-c", ndGen, zsrc, n, strconv.Itoa(a.dims), a.dtype, a.codec, strconv.Itoa(a.clevel()), strconv.FormatInt(size, 10))
		rows, err := strconv.ParseInt(string(out[:len(out)-1]), 10, 64)
		if err != nil {
			b.Fatalf("%s: %q", n, out)
		}
		first[n] = rows
		npy := filepath.Join(zsrc, n+".npy")
		mustRun(b, bin, "pack", "-q", "-f", "--codec", a.codec, "--clevel", strconv.Itoa(a.clevel()), "--typesize", a.dtype[2:], "--chunk-size", "1MiB",
			npy, filepath.Join(fsrc, n+".npy.b2frame"))
		// The same frame in the blocks c-blosc chose for the store's
		// chunks (the first chunk's header): what the decode alone costs
		// in them, against which the view's gather shows its own cost.
		key := "0.0"
		if a.dims == 3 {
			key = "0.0.0"
		}
		head := make([]byte, 16)
		if f, err := os.Open(filepath.Join(zsrc, n+".zarr", key)); err != nil {
			b.Fatal(err)
		} else {
			_, err = io.ReadFull(f, head)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
		blocks[n] = int64(binary.LittleEndian.Uint32(head[8:]))
		mustRun(b, bin, "pack", "-q", "-f", "--codec", a.codec, "--clevel", strconv.Itoa(a.clevel()), "--typesize", a.dtype[2:], "--chunk-size", "1MiB",
			"--block-size", strconv.FormatInt(blocks[n], 10), npy, filepath.Join(bsrc, n+".npy.b2frame"))
		os.Remove(npy)
		writeChunksBlp(b, filepath.Join(zsrc, n+".zarr"), a, rows, filepath.Join(csrc, n+".npy.blp"))
		linkFlatStore(b, filepath.Join(zsrc, n+".zarr"), a, rows, filepath.Join(lsrc, n+".zarr"))
	}
	mustRun(b, "sh", "-c", `cat "$1"/*/* "$2"/* "$3"/* "$4"/* > /dev/null`, "sh", zsrc, fsrc, bsrc, csrc) // sources into the page cache (lsrc's files are zsrc's)
	x := func(a, c time.Duration) string { return fmt.Sprintf("%.2f×", a.Seconds()/c.Seconds()) }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", d.Seconds()*1e3) }
	for b.Loop() {
		var rows [][]string
		row := func(cells ...string) { rows = append(rows, cells) }
		row("array", "measure", "bloscfs", "the other", "bloscfs ÷ the other (time)")
		for _, a := range arrays {
			n := a.name()
			store := filepath.Join(zsrc, n+".zarr")
			t := medianMountReadsRuns(b, []string{zsrc, fsrc, bsrc, csrc, lsrc}, []string{n + ".npy", n + ".npy", n + ".npy", n + ".npy", n + ".npy"}, ndRuns)
			row(n, "cold cat, .npy view ÷ the .b2frame", ms(t[0]), ms(t[1]), x(t[0], t[1]))
			row(n, fmt.Sprintf("cold cat, .npy view ÷ the .b2frame in the store's %d KiB blocks", blocks[n]>>10), ms(t[0]), ms(t[2]), x(t[0], t[2]))
			row(n, "cold cat, .npy view ÷ the store's own chunks in a .blp (no gather)", ms(t[0]), ms(t[3]), x(t[0], t[3]))
			row(n, "cold cat, .npy view ÷ the store's own chunk files as a 1-D array (no gather)", ms(t[0]), ms(t[4]), x(t[0], t[4]))
			row(n, "cold cat, that 1-D array ÷ the .b2frame (the floor under the view's ratio)", ms(t[4]), ms(t[1]), x(t[4], t[1]))
			b.ReportMetric(t[0].Seconds()/t[1].Seconds(), n+"-cat/b2frame")
			b.ReportMetric(t[0].Seconds()/t[2].Seconds(), n+"-cat/b2frame-blocks")
			b.ReportMetric(t[0].Seconds()/t[3].Seconds(), n+"-cat/own-chunks")
			b.ReportMetric(t[0].Seconds()/t[4].Seconds(), n+"-cat/flat")
			b.ReportMetric(t[4].Seconds()/t[1].Seconds(), n+"-flat/b2frame")
			// Whole processes, taking turns.
			lo, hi := first[n]/4, first[n]/4+100
			if a.dims == 3 {
				hi = lo + 8
			}
			los, his := strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10)
			var load, zall, mmap, load2, slice, zslice []time.Duration
			for range ndRuns {
				load = append(load, mountProcess(b, zsrc, py, ndLoad, n+".npy"))
				zall = append(zall, benchRun(b, 1, 0, py, "-c", ndZarrAll, store))
				mmap = append(mmap, mountProcess(b, zsrc, py, ndMmapLoad, n+".npy"))
				load2 = append(load2, mountProcess(b, zsrc, py, ndLoad, n+".npy"))
				slice = append(slice, mountProcess(b, zsrc, py, ndMmapSlice, n+".npy", los, his))
				zslice = append(zslice, benchRun(b, 1, 0, py, "-c", ndZarrSlice, store, los, his))
			}
			l, z, m, l2, s, zs := medianOf(load), medianOf(zall), medianOf(mmap), medianOf(load2), medianOf(slice), medianOf(zslice)
			row(n, "np.load ÷ zarr.open()[:]", ms(l), ms(z), x(l, z))
			row(n, "np.load(mmap_mode=\"r\") copied ÷ np.load", ms(m), ms(l2), x(m, l2))
			row(n, fmt.Sprintf("[%d:%d] through a mapping ÷ zarr.open()[%d:%d]", lo, hi, lo, hi), ms(s), ms(zs), x(s, zs))
			b.ReportMetric(l.Seconds()/z.Seconds(), n+"-npload/zarr")
			b.ReportMetric(m.Seconds()/l2.Seconds(), n+"-mmap/read")
			b.ReportMetric(s.Seconds()/zs.Seconds(), n+"-slice/zarr")
		}
		hdr := fmt.Sprintf("\nZarr N-D: %d MiB arrays, %s, medians of %d runs taking turns.\n\n", size>>20, time.Now().UTC().Format("2006-01-02"), ndRuns)
		fmt.Fprintf(os.Stderr, "%s%s", hdr, formatTable(rows))
		if f := os.Getenv("BLOSCFS_BENCH_TABLE"); f != "" {
			if fh, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
				fh.WriteString(hdr + formatTable(rows))
				fh.Close()
			}
		}
	}
}

// mountProcess mounts src afresh, runs `py -c script MNT/name args...`
// once, and returns its wall time.
func mountProcess(b *testing.B, src, py, script, name string, args ...string) time.Duration {
	b.Helper()
	var d time.Duration
	withFreshMount(b, src, func(mnt string) {
		d = benchRun(b, 1, 0, py, append([]string{"-c", script, filepath.Join(mnt, name)}, args...)...)
	})
	return d
}

// medianOf returns the median of ts.
func medianOf(ts []time.Duration) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[len(s)/2]
}
