package remote_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bfs "github.com/bloscfs/bloscfs/fs"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fakes3"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
	"github.com/bloscfs/bloscfs/remote"
	"golang.org/x/sys/unix"
)

// benchSize is the plain size of the benchmark files (BLOSCFS_BENCH_SIZE
// overrides, in MiB).
func benchSize() int64 { return testkit.BenchSize(1 << 30) }

// writeSeries writes size bytes of a float64 series like measured data.
func writeSeries(b *testing.B, path string, size int64) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		for k := 0; k < len(buf); k += 8 {
			x := float64((off + int64(k)) / 8)
			v := math.Round((math.Sin(x*0.0007)*800+math.Cos(x*0.013)*30)*1024) / 1024
			binary.LittleEndian.PutUint64(buf[k:], math.Float64bits(v))
		}
		if _, err := f.Write(buf[:min(int64(len(buf)), size-off)]); err != nil {
			b.Fatal(err)
		}
	}
}

// timed runs a program and returns how long it took.
func timed(b *testing.B, name string, args ...string) time.Duration {
	b.Helper()
	start := time.Now()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return time.Since(start)
}

// selfCPU returns the CPU time of this process: the counting proxy's,
// while a mount reads through it (dd is a child, not counted).
func selfCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuRun is the CPU time, in seconds per GiB read, of the mount's
// daemon, the server and the counting proxy during one timed read.
type cpuRun struct{ daemon, server, proxy float64 }

// add adds x's share of a mean of n runs.
func (c *cpuRun) add(x cpuRun, n int) {
	c.daemon += x.daemon / float64(n)
	c.server += x.server / float64(n)
	c.proxy += x.proxy / float64(n)
}

// seqRounds is how many times each sequential read is timed, local and
// remote in turn.
const seqRounds = 5

// median returns the median of xs (the upper one of an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// timedCPU runs dd of path through mount m and returns its time and the
// CPU each process spent on it, per GiB of size.
func timedCPU(b *testing.B, m *mount, path string, size int64) (time.Duration, cpuRun) {
	procCPU := func(pid int) time.Duration { d, _ := testkit.ProcCPU(pid); return d }
	d0, s0, p0 := procCPU(m.PID), procCPU(serverPid), selfCPU()
	t := timed(b, "dd", "if="+path, "of=/dev/null", "bs=1M", "status=none")
	d1, s1, p1 := procCPU(m.PID), procCPU(serverPid), selfCPU()
	per := func(d time.Duration) float64 { return d.Seconds() / (float64(size) / (1 << 30)) }
	return t, cpuRun{daemon: per(d1 - d0), server: per(s1 - s0), proxy: per(p1 - p0)}
}

// mountStats returns the counters of the mount m (bloscfs stats --json).
func mountStats(b *testing.B, m *mount) bfs.RemoteStats {
	b.Helper()
	out, err := exec.Command(bin, "stats", "--json", m.Dir).Output()
	if err != nil {
		b.Fatalf("stats %s: %v", m.Dir, err)
	}
	var st bfs.Stats
	if err := json.Unmarshal(out, &st); err != nil || st.Remote == nil {
		b.Fatalf("stats %s: %v: %s", m.Dir, err, out)
	}
	return *st.Remote
}

// BenchmarkRemote measures, over loopback to versitygw, in one run: cold
// sequential dd of an LZ4 and a zstd frame through a remote mount
// straight to the server (and again through a counting proxy, whose
// counts check the mount's own) and through a local mount of the same
// file, and of the plain data stored as an uncompressed object through
// `rclone mount` (when rclone is installed; make bench-remote installs
// it), bytes and requests per byte read (from `bloscfs stats`), cold 4
// KiB random reads against bare GETs of 4 and 128 KiB and the same reads
// through a local mount (all taking turns), unpack s3:// against
// unpack of the local file, and the daemon's peak RSS streaming a file
// many times its caches. Each sequential read is timed seqRounds times,
// local and remote in turn, and the medians are reported (with the
// smallest and largest remote ÷ local ratio). With them it reports the CPU
// seconds per GiB of the daemon and the server (and of the proxy, on its
// run), which other work on the machine changes less than the times.
// Speed is reported, never asserted.
func BenchmarkRemote(b *testing.B) {
	setup.Require(b)
	size := benchSize()
	dir := b.TempDir()
	plainPath := filepath.Join(dir, "plain.bin")
	writeSeries(b, plainPath, size)
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	s := newStore(b, "bench")
	s.CreateBucket(context.Background())
	for _, c := range []string{"lz4", "zstd"} {
		out := filepath.Join(src, c+".b2frame")
		timed(b, bin, "pack", "--codec", c, "--clevel", "5", "--chunk-size", "4MiB", plainPath, out)
		f, err := os.Open(out)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Upload(context.Background(), c+".b2frame", f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	rclone, _ := exec.LookPath("rclone")
	if rclone != "" {
		f, err := os.Open(plainPath)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Upload(context.Background(), "plain.bin", f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	} else {
		b.Log("rclone not installed: no rclone comparison")
	}
	os.Remove(plainPath)
	counter := fakes3.NewFaults(endpoint, 0, 1)
	defer counter.Close()
	viaProxy, err := remote.New(context.Background(), "bench", remote.Config{Endpoint: counter.URL})
	if err != nil {
		b.Fatal(err)
	}
	res := map[string]float64{}
	for i := 0; i < b.N; i++ {
		for _, c := range []string{"lz4", "zstd"} {
			// A local mount and a remote one, straight to the server as
			// a user mounts a bucket, in turn, seqRounds times: the
			// medians, since the load of other work on a shared machine
			// moves single runs by a sixth. What the remote mount
			// fetched comes from its own counters.
			var locals, remotes, ratios []float64
			var lcpu, rcpu cpuRun
			var rs bfs.RemoteStats
			for range seqRounds {
				lm := benchMount(b, src)
				local, lc := timedCPU(b, lm, filepath.Join(lm.Dir, c), size)
				lm.MustUnmount(b)
				rm := benchMount(b, "s3://bench")
				remote, rc := timedCPU(b, rm, filepath.Join(rm.Dir, c), size)
				rs = mountStats(b, rm)
				rm.MustUnmount(b)
				locals = append(locals, local.Seconds())
				remotes = append(remotes, remote.Seconds())
				ratios = append(ratios, local.Seconds()/remote.Seconds())
				lcpu.add(lc, seqRounds)
				rcpu.add(rc, seqRounds)
			}
			// CPU seconds per GiB, which the load of other work on the
			// machine changes less than the times: the local daemon's,
			// and the remote daemon's and the server's (means).
			res[c+"-local-daemon-CPU-s/GiB"] = lcpu.daemon
			res[c+"-remote-daemon-CPU-s/GiB"] = rcpu.daemon
			res[c+"-remote-server-CPU-s/GiB"] = rcpu.server
			st, _ := os.Stat(filepath.Join(src, c+".b2frame"))
			res[c+"-local-GB/s"] = float64(size) / median(locals) / 1e9
			res[c+"-remote-GB/s"] = float64(size) / median(remotes) / 1e9
			res[c+"-remote/local"] = median(ratios)
			res[c+"-remote/local-min"] = slices.Min(ratios)
			res[c+"-remote/local-max"] = slices.Max(ratios)
			local := time.Duration(median(locals) * float64(time.Second))
			res[c+"-seq-fetched/read"] = float64(rs.FetchedBytes) / float64(size)
			res[c+"-seq-requests"] = float64(rs.Requests)
			res[c+"-stored/plain"] = float64(st.Size()) / float64(size)
			// The same through the counting proxy, which checks the
			// mount's counts; its copies take CPU from the two cores
			// the mount and the server share, as no proxy would in use.
			req0, byt0 := counter.Requests.Load(), counter.Bytes.Load()
			pm := benchMount(b, "s3://bench", "--endpoint", counter.URL)
			proxied, pcpu := timedCPU(b, pm, filepath.Join(pm.Dir, c), size)
			ps := mountStats(b, pm)
			pm.MustUnmount(b)
			res[c+"-remote-via-proxy/local"] = local.Seconds() / proxied.Seconds()
			res[c+"-remote-via-proxy-proxy-CPU-s/GiB"] = pcpu.proxy
			if got := counter.Requests.Load() - req0; got != ps.Requests {
				b.Errorf("%s: the mount counted %d requests, the proxy %d", c, ps.Requests, got)
			}
			if got := counter.Bytes.Load() - byt0; ps.FetchedBytes > got {
				b.Errorf("%s: the mount counted %d bytes fetched, the proxy forwarded %d", c, ps.FetchedBytes, got)
			}
			// unpack s3:// against unpack of the local file.
			ul := timed(b, bin, "unpack", "-f", filepath.Join(src, c+".b2frame"), "/dev/null")
			ur := timed(b, bin, "unpack", "-f", "s3://bench/"+c+".b2frame", "/dev/null")
			res[c+"-unpack-remote/local"] = ul.Seconds() / ur.Seconds()
		}
		if rclone != "" {
			// The plain data as an uncompressed object, through rclone
			// mount with its default --vfs-cache-mode off, straight to
			// the server as the remote mount above.
			m := rcloneMount(b, rclone, endpoint, "bench")
			t := timed(b, "dd", "if="+filepath.Join(m.Dir, "plain.bin"), "of=/dev/null", "bs=1M", "status=none")
			m.MustUnmount(b)
			res["rclone-GB/s"] = float64(size) / t.Seconds() / 1e9
			for _, c := range []string{"lz4", "zstd"} {
				res[c+"-remote/rclone"] = res[c+"-remote-GB/s"] / res["rclone-GB/s"]
			}
		}
		// Cold 4 KiB random reads through a fresh remote mount and a
		// fresh local one, and bare GETs of 4 KiB and of a block's
		// size (about 128 KiB here), taking turns, so that all four see
		// the same load on the server and the machine: timed in phases,
		// one after the other, the bare GETs came out 25 % faster in one
		// run than in the next, and the target moved with them.
		rm := benchMount(b, "s3://bench")
		lm := benchMount(b, src)
		cold := interleavedColdReads(b, filepath.Join(rm.Dir, "lz4"), filepath.Join(lm.Dir, "lz4"), s, "lz4.b2frame", size, 300)
		rs := mountStats(b, rm)
		rm.MustUnmount(b)
		lm.MustUnmount(b)
		p50 := cold.remote[len(cold.remote)/2]
		lp50 := cold.local[len(cold.local)/2]
		direct := cold.get4k[len(cold.get4k)/2]
		block := cold.getBlock[len(cold.getBlock)/2]
		res["cold4k-p50-ms"] = float64(p50.Microseconds()) / 1e3
		res["cold4k-p99-ms"] = float64(cold.remote[len(cold.remote)*99/100].Microseconds()) / 1e3
		// Opening the file and its index are in the counts too: a few
		// requests for the 300 reads.
		res["rand-fetched/read"] = float64(rs.FetchedBytes) / (300 * 4096)
		res["rand-requests/read"] = float64(rs.Requests) / 300
		// The local reads: one block decode and the FUSE round trip, no
		// GET.
		res["cold4k-local-p50-ms"] = float64(lp50.Microseconds()) / 1e3
		res["bare-GET-p50-ms"] = float64(direct.Microseconds()) / 1e3
		res["bare-GET-128KiB-p50-ms"] = float64(block.Microseconds()) / 1e3
		res["cold4k-p50/bare-GET"] = float64(p50) / float64(direct)
		// The target, two round trips and one block decode, as a time
		// (see coldReads); and the same with the second GET carrying a
		// whole compressed block, as a cold read's does. The sums of
		// the medians too, which the runs before this one reported.
		res["cold4k-p50-target-ms"] = float64(cold.target.Microseconds()) / 1e3
		res["cold4k-p50-target-block-ms"] = float64(cold.targetBlock.Microseconds()) / 1e3
		res["cold4k-p50/target-block"] = float64(p50) / float64(cold.targetBlock)
		res["cold4k-p50-sum-of-medians-ms"] = float64((2*direct + lp50).Microseconds()) / 1e3
		res["cold4k-p50-sum-of-medians-block-ms"] = float64((direct + block + lp50).Microseconds()) / 1e3
		// The same bare GET through the counting proxy, which adds its
		// own hop (for the proxied rows above).
		_, proxied := bareGETs(b, s, viaProxy, "lz4.b2frame", 4096, 100)
		res["bare-GET-via-proxy-p50-ms"] = float64(proxied.Microseconds()) / 1e3
		// Peak RSS streaming a file ≥ 10× the caches (48 MiB + 48 MiB).
		rm = benchMount(b, "s3://bench", "--cache-size", "48MiB", "--remote-cache-size", "48MiB")
		timed(b, "dd", "if="+filepath.Join(rm.Dir, "zstd"), "of=/dev/null", "bs=1M", "status=none")
		hwm, _ := testkit.ProcValue(rm.PID, "status", "VmHWM")
		res["stream-RSS-MiB"] = float64(hwm) / (1 << 20)
		rm.MustUnmount(b)
	}
	keys := make([]string, 0, len(res))
	for k := range res {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.ReportMetric(res[k], k)
	}
}

// coldReads holds the latencies of interleavedColdReads, sorted, and
// the medians of what the target allows a cold read.
type coldReads struct {
	remote, local, get4k, getBlock []time.Duration
	// target and targetBlock are the medians, over the rounds, of one
	// round's two bare 4 KiB GETs plus its local read, and of its bare
	// 4 KiB GET, its bare block GET and its local read: two round trips
	// and one block decode (with the FUSE round trip) as they took in
	// that round. A median of sums, not a sum of medians: GET times
	// have a long tail, and the sum of their medians is less than the
	// median time of two GETs in a row.
	target, targetBlock time.Duration
}

// interleavedColdReads times n rounds of: a 4 KiB read at a random
// 4 KiB-aligned offset of the file remotePath (through a remote mount),
// the same read of the file localPath (through a local mount), two bare
// GETs of 4 KiB and one of 128 KiB at random offsets of key through s.
// The two files are opened for random reads (no kernel read-ahead).
func interleavedColdReads(b *testing.B, remotePath, localPath string, s *remote.Store, key string, size int64, n int) coldReads {
	open := func(p string) *os.File {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
		return f
	}
	rf, lf := open(remotePath), open(localPath)
	o, err := s.Open(context.Background(), key)
	if err != nil {
		b.Fatal(err)
	}
	o.Opened()
	var c coldReads
	var target, targetBlock []time.Duration
	rng := rand.New(rand.NewPCG(1, 2))
	buf, blk := make([]byte, 4096), make([]byte, 128<<10)
	timeRead := func(r io.ReaderAt, p []byte, off int64) time.Duration {
		t0 := time.Now()
		if _, err := r.ReadAt(p, off); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for range n {
		off := rng.Int64N(size/4096) * 4096
		r := timeRead(rf, buf, off)
		l := timeRead(lf, buf, off)
		g1 := timeRead(o, buf, rng.Int64N(o.Size-4096))
		g2 := timeRead(o, buf, rng.Int64N(o.Size-4096))
		gb := timeRead(o, blk, rng.Int64N(o.Size-int64(len(blk))))
		c.remote, c.local = append(c.remote, r), append(c.local, l)
		c.get4k, c.getBlock = append(c.get4k, g1, g2), append(c.getBlock, gb)
		target, targetBlock = append(target, g1+g2+l), append(targetBlock, g1+gb+l)
	}
	for _, l := range [][]time.Duration{c.remote, c.local, c.get4k, c.getBlock, target, targetBlock} {
		slices.Sort(l)
	}
	c.target, c.targetBlock = target[n/2], targetBlock[n/2]
	return c
}

// bareGETs times n GETs of size bytes at random offsets of key through
// each of two stores, taking turns, and returns the median of each.
func bareGETs(b *testing.B, s1, s2 *remote.Store, key string, size, n int) (p50a, p50b time.Duration) {
	var objs [2]*remote.Object
	for i, s := range []*remote.Store{s1, s2} {
		o, err := s.Open(context.Background(), key)
		if err != nil {
			b.Fatal(err)
		}
		o.Opened()
		objs[i] = o
	}
	var gets [2][]time.Duration
	rng := rand.New(rand.NewPCG(3, uint64(size))) // not the offsets of another size
	buf := make([]byte, size)
	for range n {
		for i, o := range objs {
			t0 := time.Now()
			if _, err := o.ReadAt(buf, rng.Int64N(o.Size-int64(size))); err != nil {
				b.Fatal(err)
			}
			gets[i] = append(gets[i], time.Since(t0))
		}
	}
	for i := range gets {
		slices.Sort(gets[i])
	}
	return gets[0][n/2], gets[1][n/2]
}

// rcloneMount mounts bucket with `rclone mount`, its S3 remote configured
// from the environment (path-style, the same credentials), read-only and
// with rclone's default --vfs-cache-mode off: what a user would run.
func rcloneMount(b *testing.B, rclone, endpoint, bucket string) *mount {
	dir := mounttest.NewMountpoint(b)
	cmd := exec.Command(rclone, "mount", "--read-only", "--vfs-cache-mode", "off", "benchs3:"+bucket, dir)
	conf := filepath.Join(b.TempDir(), "rclone.conf")
	os.WriteFile(conf, nil, 0o600)
	// rclone 1.60's AWS SDK refuses AWS_CA_BUNDLE with rclone's own HTTP
	// transport; the server is plain HTTP on loopback, it needs none.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "AWS_CA_BUNDLE=") })
	cmd.Env = append(env,
		"RCLONE_CONFIG="+conf,
		"RCLONE_CONFIG_BENCHS3_TYPE=s3",
		"RCLONE_CONFIG_BENCHS3_PROVIDER=Other",
		"RCLONE_CONFIG_BENCHS3_ENDPOINT="+endpoint,
		"RCLONE_CONFIG_BENCHS3_ACCESS_KEY_ID="+os.Getenv("AWS_ACCESS_KEY_ID"),
		"RCLONE_CONFIG_BENCHS3_SECRET_ACCESS_KEY="+os.Getenv("AWS_SECRET_ACCESS_KEY"),
		"RCLONE_CONFIG_BENCHS3_REGION="+os.Getenv("AWS_REGION"),
		"RCLONE_CONFIG_BENCHS3_FORCE_PATH_STYLE=true",
	)
	return mounttest.Start(b, cmd, dir)
}

// benchMount mounts src in the foreground for a benchmark.
func benchMount(b *testing.B, src string, flags ...string) *mount {
	return mounttest.Foreground(b, bin, src, mounttest.NewMountpoint(b), flags...)
}
