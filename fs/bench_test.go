package fs

import (
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/pack/frame"
	"golang.org/x/sys/unix"
)

// benchSize is the plain size of the benchmark files (BLOSCFS_BENCH_SIZE
// overrides, in MiB).
func benchSize() int64 { return testkit.BenchSize(1 << 30) }

// benchChunk returns chunk i of a float64 series like measured data.
func benchChunk(i, n int) []byte {
	b := make([]byte, n)
	base := i * n / 8
	for k := 0; k+8 <= n; k += 8 {
		x := float64(base + k/8)
		v := math.Round((math.Sin(x*0.0007)*800+math.Cos(x*0.013)*30)*1024) / 1024
		binary.LittleEndian.PutUint64(b[k:], math.Float64bits(v))
	}
	return b
}

// writeBenchFiles writes the plain file and an LZ4 and a zstd frame of
// it into dir (kept between runs when BLOSCFS_BENCH_DIR is set).
func writeBenchFiles(b *testing.B, dir string, size int64) {
	const cs = 4 << 20
	if st, err := os.Stat(filepath.Join(dir, "stored.b2frame")); err == nil && st.Size() > size {
		if pst, err := os.Stat(filepath.Join(dir, "plain.bin")); err == nil && pst.Size() == size {
			return
		}
	}
	plain, err := os.Create(filepath.Join(dir, "plain.bin"))
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	type out struct {
		f *os.File
		w *frame.Writer
	}
	var outs []out
	for _, c := range []struct {
		name          string
		codec, clevel int
	}{{"lz4", blosc.CodecLZ4, 5}, {"zstd", blosc.CodecZstd, 5}, {"stored", blosc.CodecLZ4, 0}} {
		f, err := os.Create(filepath.Join(dir, c.name+".b2frame"))
		if err != nil {
			b.Fatal(err)
		}
		p := blosc.Params{Codec: c.codec, Clevel: c.clevel, Typesize: 8, Split: blosc.SplitAuto}
		p.Filters[5] = blosc.FilterShuffle
		w, err := frame.NewWriter(f, frame.Params{Chunk: p, ChunkSize: cs})
		if err != nil {
			b.Fatal(err)
		}
		outs = append(outs, out{f, w})
	}
	for i := 0; int64(i)*cs < size; i++ {
		chunk := benchChunk(i, int(min(cs, size-int64(i)*cs)))
		if _, err := plain.Write(chunk); err != nil {
			b.Fatal(err)
		}
		for _, o := range outs {
			if err := o.w.AddChunk(chunk); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, o := range outs {
		if err := o.w.Close(); err != nil {
			b.Fatal(err)
		}
		o.f.Close()
	}
}

// dropCaches empties the page cache (root only).
func dropCaches() bool {
	unix.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0) == nil
}

// timeCmd runs a command and returns how long it took.
func timeCmd(b *testing.B, name string, args ...string) time.Duration {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	cmd := exec.Command(name, args...)
	cmd.Stdout = null // a file, not a pipe through this process
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, stderr.String())
	}
	return time.Since(start)
}

// benchMountDir mounts src in-process on a fresh mountpoint, with
// BLOSCFS_BENCH_READAHEAD (bytes; 0 turns it off) as the read-ahead when
// set, and returns the mountpoint and its unmount.
func benchMountDir(b *testing.B, src string) (string, func()) {
	mnt := b.TempDir()
	opts := DefaultOptions()
	opts.Logger = log.New(io.Discard, "", 0)
	if ra := os.Getenv("BLOSCFS_BENCH_READAHEAD"); ra != "" {
		opts.ReadAhead, _ = strconv.ParseInt(ra, 10, 64)
	}
	server, _, err := Mount(src, mnt, opts)
	if err != nil {
		b.Fatal(err)
	}
	return mnt, func() {
		if err := server.Unmount(); err != nil {
			exec.Command("umount", "-l", mnt).Run()
		}
	}
}

// BenchmarkMount measures the mount against the alternatives, in one run:
// cold sequential dd of an LZ4+shuffle and a zstd+shuffle frame through a
// fresh mount; `bloscfs unpack` of the same files, to /dev/null and into
// dd through a pipe; dd of a plain copy from the page cache; dd of a
// frame of stored chunks through a fresh mount (the FUSE transport with
// nothing to decode); and 4 KiB random-read latency, warm and cold.
// Needs root (mount, drop_caches). Files of BLOSCFS_BENCH_SIZE MiB (1024)
// are made in BLOSCFS_BENCH_DIR (a temp dir by default).
func BenchmarkMount(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root")
	}
	size := benchSize()
	dir := os.Getenv("BLOSCFS_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	writeBenchFiles(b, src, size)
	plainPath := filepath.Join(src, "plain.bin")
	bin := filepath.Join(b.TempDir(), "bloscfs")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/bloscfs").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	gbs := func(d time.Duration) float64 { return float64(size) / d.Seconds() / 1e9 }
	mount := func() (string, func()) { return benchMountDir(b, src) }
	b.ResetTimer()
	for b.Loop() {
		res := map[string]float64{}
		for _, codec := range []string{"lz4", "zstd"} {
			// Cold: a fresh mount (empty block cache) and an empty page cache.
			mnt, unmount := mount()
			if !dropCaches() {
				b.Log("could not drop the page cache: 'cold' reads may be warm")
			}
			d := timeCmd(b, "dd", "if="+filepath.Join(mnt, codec), "of=/dev/null", "bs=1M")
			res[codec+"-mount-GB/s"] = gbs(d)
			// Second open: served from the page cache (KEEP_CACHE).
			d = timeCmd(b, "dd", "if="+filepath.Join(mnt, codec), "of=/dev/null", "bs=1M")
			res[codec+"-reread-GB/s"] = gbs(d)
			unmount()
			dropCaches()
			d = timeCmd(b, bin, "unpack", filepath.Join(src, codec+".b2frame"), "-")
			res[codec+"-unpack-GB/s"] = gbs(d)
			res[codec+"-mount/unpack"] = res[codec+"-mount-GB/s"] / res[codec+"-unpack-GB/s"]
			// unpack into a reader, as dd reads from the mount: through a pipe.
			dropCaches()
			d = timeCmd(b, "sh", "-c", bin+" unpack "+filepath.Join(src, codec+".b2frame")+" - | dd of=/dev/null bs=1M")
			res[codec+"-unpack|dd-GB/s"] = gbs(d)
			res[codec+"-mount/unpack|dd"] = res[codec+"-mount-GB/s"] / res[codec+"-unpack|dd-GB/s"]
		}
		timeCmd(b, "cat", plainPath) // into the page cache
		d := timeCmd(b, "dd", "if="+plainPath, "of=/dev/null", "bs=1M")
		res["plain-pagecache-GB/s"] = gbs(d)
		// The FUSE transport with nothing to decode: a frame of stored
		// chunks, its source in the page cache, through a fresh mount. (The
		// plain copy itself would go through FUSE passthrough.)
		timeCmd(b, "cat", filepath.Join(src, "stored.b2frame"))
		mnt, unmount := mount()
		d = timeCmd(b, "dd", "if="+filepath.Join(mnt, "stored"), "of=/dev/null", "bs=1M")
		res["stored-mount-GB/s"] = gbs(d)
		unmount()
		for _, codec := range []string{"lz4", "zstd"} {
			res[codec+"-mount/stored-mount"] = res[codec+"-mount-GB/s"] / res["stored-mount-GB/s"]
		}

		mnt, unmount = mount()
		dropCaches()
		p50, p99 := testkit.ReadLatencies(b, filepath.Join(mnt, "lz4"), size, 2000)
		res["cold4k-p50-µs"], res["cold4k-p99-µs"] = float64(p50.Microseconds()), float64(p99.Microseconds())
		timeCmd(b, "cat", filepath.Join(mnt, "lz4")) // the whole file into the page cache
		p50, p99 = testkit.ReadLatencies(b, filepath.Join(mnt, "lz4"), size, 20000)
		res["warm4k-p50-µs"], res["warm4k-p99-µs"] = float64(p50.Nanoseconds())/1e3, float64(p99.Nanoseconds())/1e3
		unmount()
		keys := make([]string, 0, len(res))
		for k := range res {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b.ReportMetric(res[k], k)
			fmt.Fprintf(os.Stderr, "%-24s %8.2f\n", k, res[k])
		}
	}
	runtime.KeepAlive(size)
}
