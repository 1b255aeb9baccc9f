package hostile

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// ZarrCallTimeout guards each call of CheckZarrMount against a hang; it
// is no speed bound (calls are logged with their longest time).
const ZarrCallTimeout = 60 * time.Second

// MaxZarrHWM bounds the daemon's peak RSS (VmHWM) after CheckZarrMount.
const MaxZarrHWM = 512 << 20

// CheckZarrMount checks a mount whose source holds the inputs (written
// by WriteZarr, each as NAME or NAME.zarr) beside a sound array good
// (WriteGoodZarr, whose view must read as want): a listing of the root
// and of every input shown as a directory, a stat and reads (head, dd
// at the middle and the end, ten times each, and a byte of every shard
// of sparse_shards) of every input shown as NAME.npy, then the good
// array whole. Every call must return within ZarrCallTimeout (an error
// is fine; an array whose data are hostile must fail, not give bytes),
// the good array must read bit-exact, and the daemon pid's peak RSS must
// stay under MaxZarrHWM. It returns the peak RSS.
func CheckZarrMount(t *testing.T, mnt string, ins []ZarrInput, good string, want []byte, pid int) int64 {
	t.Helper()
	var slowest time.Duration
	var slowCall string
	run := func(name string, args ...string) testkit.Result {
		t0 := time.Now()
		r := testkit.Run(ZarrCallTimeout, name, args...)
		if d := time.Since(t0); d > slowest {
			slowest, slowCall = d, name+" "+strings.Join(args, " ")
		}
		if r.Err != nil && strings.Contains(r.Err.Error(), "timed out") {
			t.Errorf("%s %s did not return within %v", name, strings.Join(args, " "), ZarrCallTimeout)
		}
		return r
	}
	if r := run("ls", "-l", mnt); r.Err != nil {
		t.Errorf("ls -l %s: %v", mnt, r)
	} else {
		t.Logf("ls -l:\n%s", r.Stdout)
	}
	for _, in := range ins {
		view := filepath.Join(mnt, in.Name+".npy")
		var st syscall.Stat_t
		if err := syscall.Stat(view, &st); err != nil {
			// Shown as the directory it is (and logged).
			dir := filepath.Join(mnt, in.Name)
			if _, err := os.Stat(dir); err != nil {
				dir += ".zarr"
			}
			if r := run("ls", "-l", dir); r.Err != nil {
				t.Errorf("%s: no %s.npy, and ls -l %s: %v", in.Name, in.Name, dir, r)
			}
			if in.Opens {
				t.Errorf("%s: not shown as %s.npy (%s)", in.Name, in.Name, in.What)
			}
			continue
		}
		size := st.Size
		failed := 0
		for range 10 {
			r := run("head", "-c", "4096", view)
			if r.Err != nil {
				failed++
			}
			for _, off := range []int64{size / 2, max(size-4096, 0)} {
				run("dd", "if="+view, "of=/dev/null", "bs=4096", "count=1", "iflag=skip_bytes", "skip="+strconv.FormatInt(off, 10))
			}
		}
		hostileData := in.Opens && !strings.HasPrefix(in.Name, "fifo_")
		if hostileData && failed != 10 {
			t.Errorf("%s: %d of 10 reads of its first 4 KiB succeeded; want EIO (%s)", in.Name, 10-failed, in.What)
		}
		if !hostileData && failed != 0 {
			t.Errorf("%s: %d of 10 reads failed; want the array (%s)", in.Name, failed, in.What)
		}
		if in.Name == "sparse_shards" {
			h := size - ShardFiles*ShardEntries
			for i := range int64(ShardFiles) {
				run("dd", "if="+view, "of=/dev/null", "bs=1", "count=1", "iflag=skip_bytes", "skip="+strconv.FormatInt(h+i*ShardEntries+7, 10))
			}
		}
	}
	r := run("cat", filepath.Join(mnt, good+".npy"))
	if r.Err != nil || !bytes.Equal(r.Stdout, want) {
		t.Errorf("the sound array beside them: %v, %d bytes (sha256 %x), want %d (sha256 %x)", r.Err, len(r.Stdout), sha256.Sum256(r.Stdout), len(want), sha256.Sum256(want))
	}
	t.Logf("the slowest call took %v: %s", slowest.Round(time.Millisecond), slowCall)
	hwm, err := vmHWM(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("daemon peak RSS (VmHWM) %d MiB", hwm>>20)
	if hwm > MaxZarrHWM {
		t.Errorf("daemon peak RSS %d MiB, over %d MiB", hwm>>20, MaxZarrHWM>>20)
	}
	return hwm
}

// vmHWM returns the peak RSS of a process.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("no VmHWM for pid %d", pid)
}
