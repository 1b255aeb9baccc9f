package integration

import (
	"bytes"
	"fmt"
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
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
)

// listingRounds is how many times BenchmarkListing measures each case,
// the cases in turn (direct, loopback, bloscfs, …), so that a change of
// the machine's load falls on all of them; it reports the medians.
const listingRounds = 3

// BenchmarkListing measures `ls -l` of one directory of N small
// compressed files (BLOSCFS_BENCH_FILES, 100,000 by default): directly,
// through go-fuse's loopback example (built from the module cache into a
// temp dir; the column is left out with a note if it cannot be built),
// and through bloscfs, each mount fresh: the first `ls -l` (cold: a new
// mount, the sources in the page cache) and the second (nothing changed).
// It reports the bloscfs daemon's resident memory after listing, per
// file, and the same for a directory of N plain files. A last row reads
// a plain file of BLOSCFS_BENCH_SIZE MiB (1024) with `cat` through a
// fresh mount (FUSE passthrough, as root on Linux 6.9+) against the same
// file directly. The table is appended to BLOSCFS_BENCH_TABLE.
func BenchmarkListing(b *testing.B) {
	setup.Require(b)
	n := 100000
	if s := os.Getenv("BLOSCFS_BENCH_FILES"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			n = v
		}
	}
	size := testkit.BenchSize(1 << 30)
	dir := b.TempDir()
	// One frame of about 28 KB (4096 float64 of a random walk, zstd,
	// as bloscfs pack writes it by default), written n times; and n plain
	// files of 4 KiB (a listing does not read them).
	plain := filepath.Join(dir, "walk.f64")
	writeTableData(b, plain, 32<<10, genWalk)
	frame := filepath.Join(dir, "walk.b2frame")
	mustRun(b, bin, "pack", "-q", "-f", plain, frame)
	fb, err := os.ReadFile(frame)
	if err != nil {
		b.Fatal(err)
	}
	csrc, psrc := filepath.Join(dir, "frames"), filepath.Join(dir, "plain")
	os.Mkdir(csrc, 0o755)
	os.Mkdir(psrc, 0o755)
	for i := range n {
		if err := os.WriteFile(filepath.Join(csrc, fmt.Sprintf("f%07d.b2frame", i)), fb, 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(psrc, fmt.Sprintf("f%07d.dat", i)), fb[:min(len(fb), 4096)], 0o644); err != nil {
			b.Fatal(err)
		}
	}
	loopback, note := buildLoopback(b)
	// A directory changed within the last 2 s is listed anew each time (a
	// change within the same tick of a coarse clock would not show in its
	// times): let them settle, as archives have.
	if !testkit.Eventually(b, time.Minute, func() bool { return settled(csrc) && settled(psrc) }) {
		b.Fatal("the directories did not settle")
	}

	type times struct{ cold, warm []time.Duration }
	var direct []time.Duration
	var loop, blosc, bplain times
	var rss, rssBase, rssPlain []int64
	var cpuCold, cpuWarm []time.Duration
	ls := func(d string) time.Duration { return benchRun(b, 1, 0, "ls", "-l", d) }
	for b.Loop() {
		for range listingRounds {
			ls(csrc)
			direct = append(direct, ls(csrc))
			if loopback != "" {
				withLoopback(b, loopback, csrc, func(mnt string) {
					loop.cold = append(loop.cold, ls(mnt))
					loop.warm = append(loop.warm, ls(mnt))
				})
			}
			withFreshMountPid(b, csrc, func(mnt string, pid int) {
				rssBase = append(rssBase, procRSS(b, pid))
				c0 := procCPU(b, pid)
				blosc.cold = append(blosc.cold, ls(mnt))
				c1 := procCPU(b, pid)
				blosc.warm = append(blosc.warm, ls(mnt))
				cpuCold, cpuWarm = append(cpuCold, c1-c0), append(cpuWarm, procCPU(b, pid)-c1)
				rss = append(rss, procRSS(b, pid))
			})
			withFreshMountPid(b, psrc, func(mnt string, pid int) {
				bplain.cold = append(bplain.cold, ls(mnt))
				bplain.warm = append(bplain.warm, ls(mnt))
				rssPlain = append(rssPlain, procRSS(b, pid))
			})
		}
	}
	med := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	medInt := func(vs []int64) int64 {
		s := slices.Clone(vs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	sec := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
	x := func(a, ref time.Duration) string { return fmt.Sprintf("%.2f×", a.Seconds()/ref.Seconds()) }
	d := med(direct)
	var rows [][]string
	row := func(cells ...string) { rows = append(rows, cells) }
	row("directory", "measure", "time", "vs")
	row("compressed", "ls -l directly", sec(d), "")
	if loopback != "" {
		row("compressed", "ls -l through go-fuse's loopback, fresh mount / second", sec(med(loop.cold))+" / "+sec(med(loop.warm)), x(med(loop.cold), d)+" / "+x(med(loop.warm), d)+" of direct")
		b.ReportMetric(med(blosc.cold).Seconds()/med(loop.cold).Seconds(), "cold/loopback")
	}
	vsLoop := ""
	if loopback != "" {
		vsLoop = ", " + x(med(blosc.cold), med(loop.cold)) + " of the loopback's"
	}
	row("compressed", "ls -l through bloscfs, fresh mount", sec(med(blosc.cold)), x(med(blosc.cold), d)+" of direct"+vsLoop)
	row("compressed", "ls -l through bloscfs, second", sec(med(blosc.warm)), x(med(blosc.warm), d)+" of direct")
	row("compressed", "daemon CPU (user+sys), fresh mount / second", sec(med(cpuCold))+" / "+sec(med(cpuWarm)), "")
	perFile := func(v int64) string { return fmt.Sprintf("%.2f KiB", float64(v)/1024/float64(n)) }
	row("compressed", "daemon RSS after listing, per file (its growth per file)", perFile(medInt(rss)), perFile(medInt(rss)-medInt(rssBase)))
	row("plain", "ls -l through bloscfs, fresh mount / second", sec(med(bplain.cold))+" / "+sec(med(bplain.warm)), "")
	row("plain", "daemon RSS after listing, per file", perFile(medInt(rssPlain)), "")
	b.ReportMetric(med(blosc.warm).Seconds()/d.Seconds(), "second/direct")
	b.ReportMetric(float64(medInt(rss))/float64(n), "rss-bytes/file")

	// A plain file read through the mount: passed through by the kernel.
	big := filepath.Join(psrc, "big.dat")
	writeTableData(b, big, size, genWalk)
	benchRun(b, 1, 0, "cat", big) // into the page cache
	var catDirect, catMount, catCPU []time.Duration
	for range 5 {
		catDirect = append(catDirect, benchRun(b, 1, 0, "cat", big))
		withFreshMountPid(b, psrc, func(mnt string, pid int) {
			c0 := procCPU(b, pid)
			catMount = append(catMount, benchRun(b, 1, 0, "cat", filepath.Join(mnt, "big.dat")))
			catCPU = append(catCPU, procCPU(b, pid)-c0)
		})
	}
	gbs := func(t time.Duration) string { return fmt.Sprintf("%.2f GB/s", float64(size)/t.Seconds()/1e9) }
	row(fmt.Sprintf("plain, %d MiB", size>>20), "cat directly (page cache) / through a fresh mount", gbs(med(catDirect))+" / "+gbs(med(catMount)), x(med(catDirect), med(catMount))+" the direct speed")
	row(fmt.Sprintf("plain, %d MiB", size>>20), "daemon CPU (user+sys) during the cat through the mount", sec(med(catCPU)), "0 when the kernel reads the source itself (passthrough)")
	b.ReportMetric(med(catDirect).Seconds()/med(catMount).Seconds(), "plain-cat/direct")
	os.Remove(big)

	load, _ := os.ReadFile("/proc/loadavg")
	hdr := fmt.Sprintf("\nListing: %d files of %d bytes in one directory, %s, medians of %d rounds (direct, loopback, bloscfs in turn), load average %s.\n",
		n, len(fb), time.Now().UTC().Format("2006-01-02"), listingRounds, strings.Join(strings.Fields(string(load))[:3], " "))
	if note != "" {
		hdr += note + "\n"
	}
	hdr += "\n"
	fmt.Fprintf(os.Stderr, "%s%s", hdr, formatTable(rows))
	if f := os.Getenv("BLOSCFS_BENCH_TABLE"); f != "" {
		if fh, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
			fh.WriteString(hdr + formatTable(rows))
			fh.Close()
		}
	}
}

// buildLoopback builds go-fuse's loopback example from the module cache
// into a temp dir, or returns why it could not.
func buildLoopback(b *testing.B) (path, note string) {
	path = filepath.Join(b.TempDir(), "loopback")
	cmd := exec.Command("go", "build", "-o", path, "github.com/hanwen/go-fuse/v2/example/loopback")
	cmd.Dir = ".." // the module, which requires go-fuse
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Sprintf("No loopback column: go-fuse's loopback example could not be built (%v: %s).", err, bytes.TrimSpace(out))
	}
	return path, ""
}

// settled reports whether dir's last change (mtime or ctime) is more than
// 2 s old, bloscfs's settle time, with a margin: a listing of it is kept.
func settled(dir string) bool {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return false
	}
	changed := max(time.Unix(st.Mtim.Unix()).UnixNano(), time.Unix(st.Ctim.Unix()).UnixNano())
	return time.Since(time.Unix(0, changed)) > 2500*time.Millisecond
}

// withLoopback mounts src at a new mountpoint with go-fuse's loopback
// example, runs fn on it, and unmounts.
func withLoopback(b *testing.B, loopback, src string, fn func(mnt string)) {
	b.Helper()
	mnt := mounttest.NewMountpoint(b)
	m := mounttest.Start(b, exec.Command(loopback, "-q", "-directmount", mnt, src), mnt)
	fn(mnt)
	m.MustUnmount(b)
}

// withFreshMountPid mounts src in the foreground, runs fn on the mount
// point and the daemon's process id, and unmounts.
func withFreshMountPid(b *testing.B, src string, fn func(mnt string, pid int)) {
	b.Helper()
	m := mounttest.Foreground(b, bin, src, mounttest.NewMountpoint(b))
	fn(m.Dir, m.PID)
	m.MustUnmount(b)
}

// procRSS returns the resident memory of process pid, in bytes.
func procRSS(b *testing.B, pid int) int64 {
	n, err := testkit.ProcValue(pid, "status", "VmRSS")
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// procCPU returns the CPU time (user+sys) process pid has used.
func procCPU(b *testing.B, pid int) time.Duration {
	d, err := testkit.ProcCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	return d
}
