package writes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// benchFlags are the mount's defaults for new files, passed to both
// the mount and `bloscfs pack` so that both do the same work.
var benchFlags = []string{"--codec", "zstd", "--clevel", "5", "--filter", "shuffle", "--typesize", "8", "--chunk-size", "1MiB"}

// BenchmarkWrite measures, in one run:
//
//   - cp of a BLOSCFS_BENCH_SIZE MiB (default 1024) float64 series into
//     the mount (a new .b2frame, recompressed when cp closes it) against
//     `bloscfs pack` of the same file with the same codec parameters:
//     both throughputs, their ratio, and the daemon's peak RSS;
//   - a 4 KiB patch + fsync of a stored frame of a quarter of that size
//     and of the full size: the commit copies untouched chunks verbatim,
//     so its time may grow with the stored size but must not re-encode.
//
// Run it with: go test -run '^$' -bench BenchmarkWrite -benchtime=1x -timeout 60m ./integration/writes/
func BenchmarkWrite(b *testing.B) {
	setup.Require(b)
	requireTool(b, "cp")
	mib := int64(1024)
	if s := os.Getenv("BLOSCFS_BENCH_SIZE"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 8 {
			b.Fatalf("BLOSCFS_BENCH_SIZE=%q: want a number of MiB ≥ 8", s)
		}
		mib = n
	}
	size := mib << 20
	root := b.TempDir()
	src, mnt := filepath.Join(root, "src"), filepath.Join(root, "mnt")
	for _, d := range []string{src, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	plain := filepath.Join(root, "series.f64")
	writeSeriesFile(b, plain, size, 0)
	plainSHA := fileSHA(b, plain)
	small := filepath.Join(root, "quarter.f64")
	copyPrefix(b, plain, small, size/4)
	mbps := func(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

	for i := 0; i < b.N; i++ {
		os.RemoveAll(src)
		os.Mkdir(src, 0o755)

		// (a) cp into the mount against bloscfs pack.
		m := mountFG(b, src, mnt, benchFlags...)
		t0 := time.Now()
		mustRun(b, "cp", plain, m.Path("copied"))
		cpTime := time.Since(t0)
		rssCp, err := testkit.ProcValue(m.PID, "status", "VmHWM")
		if err != nil {
			b.Fatal(err)
		}
		m.MustUnmount(b)
		packed := filepath.Join(root, "packed.b2frame")
		os.Remove(packed)
		t0 = time.Now()
		mustRun(b, bin, append(append([]string{"pack", "--format", "b2frame"}, benchFlags...), plain, packed)...)
		packTime := time.Since(t0)
		copied := filepath.Join(src, "copied.b2frame")
		if got, err := unpackSHA(copied); err != nil || got != plainSHA {
			b.Fatalf("copied.b2frame decodes to sha256 %s (%v), want %s", got, err, plainSHA)
		}
		ci, pi := infoOf(b, copied), infoOf(b, packed)
		if ci.params() != pi.params() {
			b.Errorf("cp and pack stored the data differently:\n  cp   %s\n  pack %s", ci.params(), pi.params())
		}
		storedCp, storedPack := fileSize(b, copied), fileSize(b, packed)
		b.ReportMetric(mbps(size, cpTime), "cp_MB/s")
		b.ReportMetric(mbps(size, packTime), "pack_MB/s")
		b.ReportMetric(packTime.Seconds()/cpTime.Seconds(), "cp/pack_throughput")
		b.ReportMetric(float64(rssCp)/(1<<20), "daemon_peak_RSS_cp_MiB")
		b.ReportMetric(float64(storedCp)/float64(storedPack), "stored_cp/pack")
		b.Logf("%d MiB: cp into the mount %v (%.0f MB/s, stored %d), bloscfs pack %v (%.0f MB/s, stored %d), daemon VmHWM %d MiB",
			mib, cpTime.Round(time.Millisecond), mbps(size, cpTime), storedCp, packTime.Round(time.Millisecond), mbps(size, packTime), storedPack, rssCp>>20)

		// (b) a 4 KiB patch + fsync at two sizes.
		quarter := filepath.Join(src, "quarter.b2frame")
		mustRun(b, bin, append(append([]string{"pack", "--format", "b2frame"}, benchFlags...), small, quarter)...)
		m = mountFG(b, src, mnt)
		var times [2]time.Duration
		for k, c := range []struct {
			view   string
			size   int64
			stored string
		}{{"quarter", size / 4, quarter}, {"copied", size, copied}} {
			d := patchFsync(b, m.Path(c.view), c.size, 3)
			times[k] = d
			st := fileSize(b, c.stored)
			b.ReportMetric(float64(d.Microseconds())/1000, fmt.Sprintf("patch+fsync_ms_%dMiB", c.size>>20))
			b.ReportMetric(float64(st)/1e6/d.Seconds(), fmt.Sprintf("patch_copy_MB/s_%dMiB", c.size>>20))
			b.Logf("4 KiB patch + fsync of %s (%d MiB plain, %d MB stored): %v (median of 3)", c.view, c.size>>20, st/1e6, d.Round(time.Microsecond))
		}
		rssPatch, _ := testkit.ProcValue(m.PID, "status", "VmHWM")
		m.MustUnmount(b)
		b.ReportMetric(times[1].Seconds()/times[0].Seconds(), "patch_time_full/quarter")
		b.ReportMetric(float64(rssPatch)/(1<<20), "daemon_peak_RSS_patch_MiB")
	}
}

// patchFsync writes 4 KiB in the middle of path and fsyncs, n times,
// and returns the median time of write+fsync.
func patchFsync(b *testing.B, path string, size int64, n int) time.Duration {
	b.Helper()
	var ds []time.Duration
	p := make([]byte, 4096)
	for i := 0; i < n; i++ {
		for j := range p {
			p[j] = byte(i + j)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := f.WriteAt(p, size/2+int64(i)*8192); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

func fileSHA(tb testing.TB, path string) string {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func fileSize(tb testing.TB, path string) int64 {
	tb.Helper()
	st, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return st.Size()
}

// copyPrefix copies the first n bytes of src to dst.
func copyPrefix(tb testing.TB, src, dst string, n int64) {
	tb.Helper()
	in, err := os.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.CopyN(out, in, n); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
}
