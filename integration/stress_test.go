package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
)

// TestFioVerify lets fio write a 64 MiB file with verification headers
// (crc32c, and the block's offset as the fill pattern), packs it with lz4
// and shuffle, and has fio read it back through the mount in random order,
// with O_DIRECT and through the page cache, verifying every 4 KiB block:
// its header names its own offset, so misplaced data fails as surely as
// corrupt data.
func TestFioVerify(t *testing.T) {
	setup.Require(t)
	fio := requireTool(t, "fio")
	const size = 64 << 20
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(tmp, "plain")
	verify := []string{"--bs=4k", "--size=64M", "--verify=crc32c", "--verify_pattern=%o",
		"--ioengine=psync", "--verify_state_save=0", "--output-format=json"}
	fioRun(t, fio, tmp, append([]string{"--name=write", "--filename=" + plain, "--rw=write", "--do_verify=0"}, verify...)...)
	if st, err := os.Stat(plain); err != nil || st.Size() != size {
		t.Fatalf("fio wrote %v, %v", st, err)
	}
	packFile(t, plain, filepath.Join(src, "data.b2frame"), "--codec", "lz4", "--filter", "shuffle", "--typesize", "8")
	os.Remove(plain)

	m := mountDaemon(t, src)
	data := m.Path("data")
	args := []string{"--filename=" + data, "--rw=randread", "--verify_fatal=1"}
	args = append(args, verify...)
	jobs := fioRun(t, fio, tmp, append(append([]string(nil), args...), "--name=direct", "--direct=1", "--name=buffered", "--direct=0")...)
	if len(jobs) != 2 {
		t.Fatalf("fio ran %d jobs, want 2", len(jobs))
	}
	for _, j := range jobs {
		if j.Error != 0 || j.Read.IOBytes != size {
			t.Errorf("fio job %s: error %d, read %d bytes in %d IOs; want 0 and %d bytes", j.Name, j.Error, j.Read.IOBytes, j.Read.TotalIOs, size)
		}
	}
}

type fioJob struct {
	Name  string `json:"jobname"`
	Error int    `json:"error"`
	Read  struct {
		IOBytes  int64 `json:"io_bytes"`
		TotalIOs int64 `json:"total_ios"`
	} `json:"read"`
}

// fioRun runs fio in dir and returns its jobs from the JSON report; a
// non-zero exit (a verify failure) fails the test with fio's messages.
func fioRun(t *testing.T, fio, dir string, args ...string) []fioJob {
	t.Helper()
	cmd := exec.Command(fio, args...)
	cmd.Dir = dir
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, err := testkit.Wait(cmd, cmdTimeout)
	if !exited {
		t.Fatalf("fio %s: timed out", strings.Join(args, " "))
	}
	out := so.Bytes()
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:] // fio prints verify errors before the JSON
	}
	var rep struct {
		Jobs []fioJob `json:"jobs"`
	}
	jerr := json.Unmarshal(out, &rep)
	if err != nil || jerr != nil {
		t.Fatalf("fio %s: %v %v\nstderr: %s\nstdout: %.2000s", strings.Join(args, " "), err, jerr, se.Bytes(), so.Bytes())
	}
	return rep.Jobs
}

// TestConcurrentReadersRace runs 16 goroutines that pread random ranges
// of one 24 MiB file (half with O_DIRECT, so that every read reaches the
// daemon) from a daemon built with -race and a small block cache, compares
// every byte, then stops the daemon with SIGTERM: it must exit 0 and
// report no data race.
func TestConcurrentReadersRace(t *testing.T) {
	setup.Require(t)
	race := raceBinary(t)
	const size = 24<<20 + 4321
	plain := seriesBytes(size)
	src := packedSource(t, "big", plain, "--codec", "lz4", "--chunk-size", "1MiB")
	m := mountForeground(t, race, src, "--cache-size", "4MiB")
	p := m.Path("big")
	if st, err := os.Stat(p); err != nil || st.Size() != size {
		t.Fatalf("stat %s: %v, %v; want size %d", p, st, err, size)
	}

	const readers, reads = 16, 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	total := 0
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			flag := os.O_RDONLY
			if i%2 == 0 {
				flag |= syscall.O_DIRECT
			}
			f, err := os.OpenFile(p, flag, 0)
			if err != nil {
				mu.Lock()
				bad = append(bad, err.Error())
				mu.Unlock()
				return
			}
			defer f.Close()
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			buf := make([]byte, 512<<10)
			for range reads {
				off := rng.Int64N(size + 1000)
				n := 1 + rng.IntN(len(buf))
				if rng.IntN(4) == 0 {
					n = 1 + rng.IntN(64) // tiny reads too
				}
				got, err := f.ReadAt(buf[:n], off)
				lo, hi := min(off, size), min(off+int64(n), size)
				want := plain[lo:hi]
				if (err != nil && err != io.EOF) || !bytes.Equal(buf[:got], want) {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("reader %d: pread(%d, %d) = %d, %v: %s", i, off, n, got, err, firstDiff(buf[:got], want)))
					mu.Unlock()
				}
				mu.Lock()
				total += got
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, b := range bad {
		t.Error(b)
	}
	t.Logf("%d readers read %d MiB", readers, total>>20)

	if err := m.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !m.WaitExit(60 * time.Second) {
		t.Fatal("the -race daemon did not exit within 60s of SIGTERM")
	}
	out, _ := os.ReadFile(m.Out)
	logText := m.LogText()
	for _, s := range []string{"DATA RACE", "panic:", "fatal error:"} {
		if strings.Contains(string(out), s) || strings.Contains(logText, s) {
			t.Errorf("the -race daemon reported %q:\n%s\n%s", s, out, logText)
		}
	}
	if m.ExitErr != nil {
		t.Errorf("the -race daemon exited with %v (66 means the race detector found races):\n%s", m.ExitErr, out)
	}
}

// TestKillReaderMidRead kills a dd reading a 256 MiB file through the
// mount while it runs, checks that the daemon still serves, then unmounts
// with `bloscfs unmount`: the mount must go and the daemon exit.
func TestKillReaderMidRead(t *testing.T) {
	setup.Require(t)
	requireTool(t, "dd")
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	// 16 MiB of the series, then zeros: the sparse plain file costs
	// little disk, and dd at 4 KiB O_DIRECT reads takes seconds over it.
	plain := filepath.Join(tmp, "plain")
	writeSeries(t, plain, 16<<20)
	if err := os.Truncate(plain, 256<<20); err != nil {
		t.Fatal(err)
	}
	packFile(t, plain, filepath.Join(src, "big.b2frame"), "--codec", "lz4")
	os.Remove(plain)
	small := seriesBytes(100003)
	if err := os.WriteFile(plain, small, 0o644); err != nil {
		t.Fatal(err)
	}
	packFile(t, plain, filepath.Join(src, "small.b2frame"))
	os.Remove(plain)

	m := mountDaemon(t, src)
	dd := exec.Command("dd", "if="+m.Path("big"), "of=/dev/null", "bs=4k", "iflag=direct", "status=none")
	if err := dd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- dd.Wait() }()
	// Wait until dd has read 8 MiB, then kill it.
	readBytes := func() int64 { n, _ := testkit.ProcValue(dd.Process.Pid, "io", "rchar"); return n }
	var ddErr error
	ddDone := false
	testkit.Eventually(t, 30*time.Second, func() bool {
		select {
		case ddErr = <-done:
			ddDone = true
		default:
		}
		return ddDone || readBytes() >= 8<<20
	})
	if ddDone {
		t.Fatalf("dd finished (%v) before it could be killed: the file is too small for this machine", ddErr)
	}
	if readBytes() < 8<<20 {
		dd.Process.Kill()
		<-done
		t.Fatal("dd read less than 8 MiB in 30s")
	}
	if err := dd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := <-done; !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("dd ended with %v, not killed mid-read", err)
	}

	got, err := os.ReadFile(m.Path("small"))
	if err != nil || !bytes.Equal(got, small) {
		t.Errorf("after the kill, reading small gives %d bytes, %v (want the same %d bytes)", len(got), err, len(small))
	}
	// The kernel may still release dd's file: busy for a moment.
	var r testkit.Result
	testkit.Eventually(t, 2*time.Second, func() bool {
		r = m.Unmount()
		return r.Err == nil || !strings.Contains(string(r.Stderr), "busy")
	})
	if r.Err != nil {
		t.Fatalf("bloscfs unmount after killing a reader: %v", r)
	}
	if mounttest.IsMounted(m.Dir) {
		t.Errorf("%s still mounted after bloscfs unmount returned 0", m.Dir)
	}
	if !m.WaitExit(10 * time.Second) {
		t.Errorf("the daemon (pid %d) still runs 10s after the unmount", m.PID)
	}
}

// TestMemoryBound packs a 512 MiB float64 series (lz4, shuffle, 4 MiB
// chunks), mounts it with --cache-size 64MiB and streams it through
// sha256sum while sampling the daemon's memory: the content must match
// and the peak RSS (VmHWM) must stay under cache + 64 MiB.
func TestMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("streams a 512 MiB file; skipped with -short")
	}
	setup.Require(t)
	requireTool(t, "sha256sum")
	const size = 512<<20 + 12345
	const cache, slack = 64 << 20, 64 << 20
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(tmp, "plain")
	start := time.Now()
	want := writeSeries(t, plain, size)
	t.Logf("wrote %d MiB in %v", size>>20, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	packFile(t, plain, filepath.Join(src, "big.b2frame"), "--codec", "lz4", "--filter", "shuffle", "--typesize", "8", "--chunk-size", "4MiB")
	if err := os.Remove(plain); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(src, "big.b2frame"))
	t.Logf("packed %d MiB into %d MiB in %v", size>>20, st.Size()>>20, time.Since(start).Round(time.Millisecond))

	m := mountDaemon(t, src, "--cache-size", "64MiB")
	before, _ := testkit.ProcValue(m.PID, "status", "VmRSS")
	stop := make(chan struct{})
	sampled := make(chan int64)
	go func() {
		var peak int64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if v, err := testkit.ProcValue(m.PID, "status", "VmRSS"); err == nil {
				peak = max(peak, v)
			}
			select {
			case <-stop:
				sampled <- peak
				return
			case <-tick.C:
			}
		}
	}()
	start = time.Now()
	out := mustRun(t, "sha256sum", m.Path("big"))
	close(stop)
	t.Logf("sha256sum through the mount: %v", time.Since(start).Round(time.Millisecond))
	peakRSS := <-sampled
	hwm, err := testkit.ProcValue(m.PID, "status", "VmHWM")
	if err != nil {
		t.Fatalf("VmHWM of the daemon (pid %d): %v", m.PID, err)
	}
	if got, _, _ := strings.Cut(string(out), " "); got != want {
		t.Errorf("sha256sum through the mount %s, want %s", got, want)
	}
	t.Logf("daemon RSS: %d MiB before reading, sampled peak %d MiB, VmHWM %d MiB", before>>20, peakRSS>>20, hwm>>20)
	if hwm >= cache+slack {
		t.Errorf("daemon peak RSS (VmHWM) %d MiB with --cache-size 64MiB; want < %d MiB", hwm>>20, (cache+slack)>>20)
	}
}
