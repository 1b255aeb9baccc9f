package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// zipGroupGen writes OUT/g.zarr, a Zarr v2 group of N arrays of 4096
// float64 (Blosc LZ4, one chunk each, with attributes), with
// python3-zarr, without consolidated metadata.
const zipGroupGen = `
import sys, numpy as np, zarr, numcodecs
out, n = sys.argv[1], int(sys.argv[2])
g = zarr.open_group(out + "/g.zarr", mode="w")
for i in range(n):
    a = g.create_dataset("a%04d" % i, shape=(4096,), chunks=(4096,), dtype="<f8",
                         compressor=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE))
    a[:] = np.arange(4096) * i
    a.attrs["i"] = i
`

// medianLsInterleaved returns, for each source, the median time of
// `ls -l` of name (a directory) through a fresh mount, rounds mounts
// each, the sources taking turns.
func medianLsInterleaved(b *testing.B, srcs, names []string, rounds int) []time.Duration {
	b.Helper()
	ts := make([][]time.Duration, len(srcs))
	for range rounds {
		for k := range srcs {
			withFreshMount(b, srcs[k], func(mnt string) {
				ts[k] = append(ts[k], benchRun(b, 1, 0, "ls", "-l", filepath.Join(mnt, names[k])))
			})
		}
	}
	out := make([]time.Duration, len(srcs))
	for k := range ts {
		slices.Sort(ts[k])
		out[k] = ts[k][len(ts[k])/2]
	}
	return out
}

// BenchmarkZipZarrTable adds the rows of a zipped Zarr store against the
// same store as a directory: a Zarr v2 array of float64 (random walk,
// Blosc LZ4 clevel 5 shuffle, 1 MiB chunks; BLOSCFS_BENCH_SIZE MiB,
// 1024 by default) written by python3-zarr and zipped by Python's
// zipfile (members stored, the array at the archive's root: shown as
// z.npy either way): cold cat through a fresh mount (median of 3, the
// two taking turns), cold 4 KiB random read p50 (each read in a chunk
// not read before, the two in turn); and `ls -l` of a group of 1,000
// such arrays (4096 float64 each, without consolidated metadata) zipped
// and as a directory, through a fresh mount (median of 5, in turn). Its
// table goes to stderr and is appended to BLOSCFS_BENCH_TABLE. Needs
// root.
func BenchmarkZipZarrTable(b *testing.B) {
	setup.Require(b)
	py := testkit.Python(b, "zarr", "numcodecs", "numpy")
	size := testkit.BenchSize(1 << 30)
	dir := b.TempDir()
	dsrc, zsrc := filepath.Join(dir, "dsrc"), filepath.Join(dir, "zsrc")
	os.Mkdir(dsrc, 0o755)
	os.Mkdir(zsrc, 0o755)
	mustRun(b, py, "-c", zarrGen, dsrc, strconv.FormatInt(size, 10))
	os.Remove(filepath.Join(dsrc, "f.npy"))
	zipper := filepath.Join(testkit.ModuleRoot(), "testdata/zarr/zip_store.py")
	mustRun(b, py, zipper, filepath.Join(dsrc, "z.zarr"), filepath.Join(zsrc, "z.zarr.zip"))
	const groupN = 1000
	gdir := filepath.Join(dir, "gdir")
	os.Mkdir(gdir, 0o755)
	mustRun(b, py, "-c", zipGroupGen, gdir, strconv.Itoa(groupN))
	mustRun(b, py, zipper, filepath.Join(gdir, "g.zarr"), filepath.Join(zsrc, "g.zarr.zip"))
	os.Rename(filepath.Join(gdir, "g.zarr"), filepath.Join(dsrc, "g.zarr"))
	mustRun(b, "sh", "-c", `cat "$1"/z.zarr/* "$1"/g.zarr/*/* "$2"/* > /dev/null`, "sh", dsrc, zsrc) // into the page cache
	if !testkit.Eventually(b, time.Minute, func() bool { return settled(dsrc) && settled(zsrc) }) {
		b.Fatal("the directories did not settle")
	}
	gbs := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(size)/d.Seconds()/1e9) }
	for b.Loop() {
		var rows [][]string
		row := func(cells ...string) { rows = append(rows, cells) }
		row("data", "stored as", "measure", "GB/s or time", "vs")
		t := medianMountReadsInterleaved(b, []string{dsrc, zsrc}, []string{"z.npy", "z.npy"})
		ds, zs := t[0], t[1]
		row("walk", "Zarr v2 lz4, directory", "cold cat through a fresh mount", gbs(ds), "")
		row("walk", "Zarr v2 lz4, zipped (stored)", "cold cat through a fresh mount", gbs(zs), fmt.Sprintf("%.2f× the directory's speed", ds.Seconds()/zs.Seconds()))
		p50 := random4KTurns(b, []string{dsrc, zsrc}, []string{"z.npy", "z.npy"}, size, 1<<20)
		dr, zr := p50[0], p50[1]
		row("walk", "Zarr v2 lz4, directory", "cold 4 KiB random read, p50", dr.String(), "")
		row("walk", "Zarr v2 lz4, zipped (stored)", "cold 4 KiB random read, p50", zr.String(), fmt.Sprintf("%.2f× the directory's", zr.Seconds()/dr.Seconds()))
		ls := medianLsInterleaved(b, []string{dsrc, zsrc}, []string{"g.zarr", "g.zarr.zip"}, 5)
		dl, zl := ls[0], ls[1]
		row(fmt.Sprintf("%d arrays", groupN), "Zarr v2 group, directory", "ls -l through a fresh mount", dl.String(), "")
		row(fmt.Sprintf("%d arrays", groupN), "Zarr v2 group, zipped (stored)", "ls -l through a fresh mount", zl.String(), fmt.Sprintf("%.2f× the directory's", zl.Seconds()/dl.Seconds()))
		b.ReportMetric(ds.Seconds()/zs.Seconds(), "zip/dir-seq-speed")
		b.ReportMetric(zr.Seconds()/dr.Seconds(), "zip/dir-rand4k-p50")
		b.ReportMetric(zl.Seconds()/dl.Seconds(), "zip/dir-ls-time")
		hdr := fmt.Sprintf("\nZipped Zarr: %d MiB array, a group of %d arrays, %s, one run.\n\n", size>>20, groupN, time.Now().UTC().Format("2006-01-02"))
		fmt.Fprintf(os.Stderr, "%s%s", hdr, formatTable(rows))
		if f := os.Getenv("BLOSCFS_BENCH_TABLE"); f != "" {
			if fh, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
				fh.WriteString(hdr + formatTable(rows))
				fh.Close()
			}
		}
	}
}
