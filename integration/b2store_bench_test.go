package integration

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/b2w"
	"github.com/bloscfs/bloscfs/npy"
)

// BenchmarkB2StoreTable adds the rows of a python-blosc2 TreeStore: a
// BLOSCFS_BENCH_SIZE MiB (1024) float64 array (a random walk) packed by
// `bloscfs pack` as a .b2nd (LZ4 clevel 5, shuffle, its default chunks),
// made the one value of a TreeStore (4.4.1's layout: every value a file;
// embed.b2e by the store writer of the tests) and zipped as
// DictStore.to_b2z does, by Python's zipfile: cold sequential
// `cat FILE > /dev/null` of the leaf big.npy of the .b2z through a fresh
// mount against the same of the .b2nd as a file (the two taking turns,
// the median of seven each; target ≥ 0.95×), and cold 4 KiB random
// reads, p50. Its table goes to stderr and is appended to
// BLOSCFS_BENCH_TABLE. Needs root.
func BenchmarkB2StoreTable(b *testing.B) {
	setup.Require(b)
	size := testkit.BenchSize(1 << 30)
	size &^= 7
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	// The array as an .npy file, packed as a .b2nd.
	raw := filepath.Join(dir, "walk")
	writeTableData(b, raw, size, genWalk)
	npyPath := filepath.Join(dir, "walk.npy")
	writeNPY(b, npyPath, raw, size/8)
	os.Remove(raw)
	file := filepath.Join(src, "file.b2nd")
	mustRun(b, bin, "pack", "-q", "-f", "--format", "b2nd", "--codec", "lz4", "--clevel", "5", "--filter", "shuffle", "--typesize", "8", npyPath, file)
	os.Remove(npyPath)
	// The store: embed.b2e (marked b2tree, an empty map), the root's
	// vlmeta as __vlmeta__.b2f, and big.b2nd, zipped largest first.
	store := filepath.Join(dir, "store.b2d")
	d := b2w.NewDictWriter(b2w.MarkerTree, 1<<13, 0)
	var vl []b2w.KV
	d.SetVLMeta("", &vl, "title", "bloscfs benchmark")
	d.Write(store)
	if err := os.Link(file, filepath.Join(store, "big.b2nd")); err != nil {
		b.Fatal(err)
	}
	script := `import sys; sys.path.insert(0, sys.argv[1]); import make_b2z; make_b2z.write(sys.argv[2], sys.argv[3])`
	if out, err := exec.Command("/usr/bin/python3", "-c", script, storesDir, store, filepath.Join(src, "store.b2z")).CombinedOutput(); err != nil {
		b.Fatalf("make_b2z.write: %v\n%s", err, out)
	}
	os.RemoveAll(store)
	mustRun(b, "sh", "-c", `cat "$1"/* > /dev/null`, "sh", src) // sources into the page cache
	st, _ := os.Stat(file)
	plain := size + int64(len(npy.Header("'<f8'", []int64{size / 8})))
	gbs := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(plain)/d.Seconds()/1e9) }
	for b.Loop() {
		var rows [][]string
		row := func(cells ...string) { rows = append(rows, cells) }
		row("data", "stored as", "measure", "GB/s or time", "vs")
		// Seven rounds (the table's others take three): the two reads
		// are alike, and a ratio of medians of three moved by ±0.3 from
		// run to run on the shared two cores.
		var ft, lt []time.Duration
		for range 7 {
			ft = append(ft, freshMountRead(b, src, "file.npy"))
			lt = append(lt, freshMountRead(b, src, "store.b2z/big.npy"))
		}
		slices.Sort(ft)
		slices.Sort(lt)
		fileT, leafT := ft[3], lt[3]
		ratio := fileT.Seconds() / leafT.Seconds()
		row("walk", ".b2nd lz4", "cold cat through a fresh mount", gbs(fileT), "")
		row("walk", "the same, the leaf of a TreeStore .b2z", "cold cat through a fresh mount", gbs(leafT), fmt.Sprintf("%.2f× the .b2nd's speed (target ≥ 0.95×)", ratio))
		chunk := int64(4 << 20) // pack's chunks: about 4 MiB
		p50 := random4KTurns(b, []string{src, src}, []string{"file.npy", "store.b2z/big.npy"}, plain-4096, chunk)
		row("walk", ".b2nd lz4", "cold 4 KiB random read, p50", p50[0].String(), "")
		row("walk", "the same, the leaf of a TreeStore .b2z", "cold 4 KiB random read, p50", p50[1].String(), fmt.Sprintf("%.2f× the .b2nd's", p50[1].Seconds()/p50[0].Seconds()))
		b.ReportMetric(ratio, "b2z-leaf/b2nd-seq-speed")
		b.ReportMetric(p50[1].Seconds()/p50[0].Seconds(), "b2z-leaf/b2nd-rand4k-p50")
		hdr := fmt.Sprintf("\npython-blosc2 store: %d MiB array, %.2f ratio, %s, one run.\n\n", size>>20, float64(size)/float64(st.Size()), time.Now().UTC().Format("2006-01-02"))
		fmt.Fprintf(os.Stderr, "%s%s", hdr, formatTable(rows))
		if f := os.Getenv("BLOSCFS_BENCH_TABLE"); f != "" {
			if fh, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
				fh.WriteString(hdr + formatTable(rows))
				fh.Close()
			}
		}
	}
}

// writeNPY writes the .npy file path of the n float64 values in raw.
func writeNPY(b *testing.B, path, raw string, n int64) {
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	in, err := os.Open(raw)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	if _, err := out.Write(npy.Header("'<f8'", []int64{n})); err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
}
