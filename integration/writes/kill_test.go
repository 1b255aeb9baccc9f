package writes

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
)

// killGone SIGKILLs pid and reports whether it is gone within d. When it
// is not, it returns the kernel stacks of its threads (to see what holds
// them) and clears it as a user would: `bloscfs unmount` aborts the
// connection of a daemon stuck dying on its own mount.
func killGone(pid int, dir string, d time.Duration) (bool, string) {
	if testkit.KillGone(pid, d) {
		return true, ""
	}
	stacks := testkit.KernelStacks(pid)
	testkit.Run(30*time.Second, bin, "unmount", dir)
	return false, stacks
}

// clearDead unmounts what a killed daemon left at dir with `bloscfs
// unmount`, which must succeed on a dead mount.
func clearDead(t *testing.T, dir string) {
	t.Helper()
	if !mounttest.IsMounted(dir) {
		return
	}
	if r := testkit.Run(30*time.Second, bin, "unmount", dir); r.Err != nil && mounttest.IsMounted(dir) {
		t.Fatalf("bloscfs unmount of the dead mount %s: %v", dir, r)
	}
	if mounttest.IsMounted(dir) {
		t.Fatalf("%s still mounted after bloscfs unmount", dir)
	}
}

// killCounts is the number of kills of each phase of TestKillAnywhere
// (with BLOSCFS_LONG, ten times as many).
var killCounts = []struct {
	phase string
	n     int
}{{"startup", 60}, {"read", 45}, {"commit", 30}, {"unmount", 45}}

// TestKillAnywhere SIGKILLs the daemon at random moments: while it starts
// (right after the mountpoint appears, in the foreground and while
// `bloscfs mount` is still returning), during reads, during commits of
// writes, and during unmount (bloscfs unmount or SIGTERM under way).
// Every time the process must be gone within a second, `bloscfs unmount`
// must clear the dead mount, and the source must hold what
// TestCrashSafety allows: the file unchanged when nothing wrote it, else
// the last version whose fsync succeeded or the one being fsynced. (A
// remote mount is killed the same way in integration/remote.)
func TestKillAnywhere(t *testing.T) {
	setup.Require(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BLOSCFS_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	t.Logf("seed %d (BLOSCFS_CRASH_SEED to replay)", seed)
	root, src, mnt := newDirs(t)
	const size = 8 << 20
	plain := filepath.Join(root, "base.dat")
	{
		buf, pattern := make([]byte, size), crashPattern(0)
		for j := int64(0); j < size>>20; j++ {
			crashBlock(buf[j<<20:(j+1)<<20], 0, j, pattern)
		}
		if err := os.WriteFile(plain, buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	disk := filepath.Join(src, "f.b2frame")
	mustRun(t, bin, "pack", "--format", "b2frame", "--codec", "lz4", "--clevel", "5", "--typesize", "8", "--chunk-size", "1MiB", plain, disk)
	current, err := unpackSHA(disk)
	if err != nil {
		t.Fatal(err)
	}
	checkSource := func(phase string, i int) {
		t.Helper()
		if got, err := unpackSHA(disk); err != nil || got != current {
			t.Fatalf("%s %d: the source decodes to %s (%v), want it unchanged (%s)", phase, i, got, err, current)
		}
	}
	total, slow := 0, 0
	check := func(phase string, i int, pid int, how string) {
		t.Helper()
		total++
		ok, stacks := killGone(pid, mnt, time.Second)
		if !ok {
			slow++
			t.Errorf("%s %d (%s): the daemon (pid %d) survived SIGKILL for 1s; its threads:\n%s", phase, i, how, pid, stacks)
		}
	}
	for _, kc := range killCounts {
		n := kc.n
		if longRun() {
			n *= 10
		}
		for i := 0; i < n; i++ {
			switch kc.phase {
			case "startup":
				// Foreground: a kill right after the mountpoint appears, or
				// before it does. Background: while `bloscfs mount`, the
				// parent, still waits for the daemon's word.
				bg := i%2 == 1
				args := []string{"mount", "--log", filepath.Join(root, "startup.log")}
				if !bg {
					args = append(args, "-f")
				}
				cmd := exec.Command(bin, append(args, src, mnt)...)
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan struct{})
				go func() { cmd.Wait(); close(exited) }()
				early := !bg && i%4 == 0
				var pid int
				deadline := time.Now().Add(30 * time.Second)
				wait := time.Duration(rng.IntN(20000)) * time.Microsecond
				for {
					if early && time.Since(deadline.Add(-30*time.Second)) > wait {
						pid = cmd.Process.Pid
						break
					}
					if mounttest.IsMounted(mnt) {
						if bg {
							pid = mounttest.FindDaemon(mnt)
						} else {
							pid = cmd.Process.Pid
						}
						if pid != 0 {
							break
						}
					}
					if time.Now().After(deadline) {
						cmd.Process.Kill()
						t.Fatalf("startup %d: not mounted within 30s", i)
					}
					time.Sleep(100 * time.Microsecond)
				}
				how := "right after the mountpoint appeared"
				if early {
					how = fmt.Sprintf("%v after the start", wait)
				} else {
					d := time.Duration(rng.IntN(2000)) * time.Microsecond
					time.Sleep(d)
					how = fmt.Sprintf("%v after the mountpoint appeared", d)
				}
				if bg {
					how += ", bloscfs mount still returning"
				}
				check("startup", i, pid, how)
				select {
				case <-exited:
				case <-time.After(30 * time.Second):
					cmd.Process.Kill()
					t.Fatalf("startup %d: bloscfs mount did not return within 30s of its daemon's death", i)
				}
				clearDead(t, mnt)
			case "read":
				m := mountFG(t, src, mnt)
				reader := exec.Command("sh", "-c", `while dd if="$1" of=/dev/null bs=1M 2>/dev/null; do :; done`, "sh", m.Path("f"))
				if err := reader.Start(); err != nil {
					t.Fatal(err)
				}
				d := time.Duration(rng.IntN(300)) * time.Millisecond
				time.Sleep(d)
				check("read", i, m.Cmd.Process.Pid, fmt.Sprintf("%v into a read loop", d))
				if exited, _ := testkit.Wait(reader, 30*time.Second); !exited {
					t.Fatalf("read %d: the reader did not exit within 30s of the daemon's death", i)
				}
				m.WaitExit(10 * time.Second)
				clearDead(t, mnt)
			case "commit":
				m := mountFG(t, src, mnt)
				w := startCrashWriter(t, m.Path("f"), size, int64(i+1)*1000, false, i%3 == 2)
				var how string
				if i%2 == 0 { // during a recompression
					deadline := time.Now().Add(time.Minute)
					for !hasTmp(src) {
						if w.exited() || time.Now().After(deadline) {
							t.Fatalf("commit %d: no temp file appeared (writer: %v)", i, w.finish(t))
						}
						time.Sleep(200 * time.Microsecond)
					}
					d := time.Duration(rng.IntN(5000)) * time.Microsecond
					time.Sleep(d)
					how = fmt.Sprintf("%v after a temp file appeared", d)
				} else {
					d := time.Duration(rng.IntN(1500)) * time.Millisecond
					time.Sleep(d)
					how = fmt.Sprintf("%v after the writer started", d)
				}
				check("commit", i, m.Cmd.Process.Pid, how)
				lines := w.finish(t)
				m.WaitExit(10 * time.Second)
				clearDead(t, mnt)
				synced, pending := crashOutcome(lines)
				allowed := map[string]bool{current: synced == "", synced: synced != "", pending: pending != ""}
				got, err := unpackSHA(disk)
				if err != nil || !allowed[got] {
					t.Fatalf("commit %d (kill %s): the source decodes to %s (%v), none of the allowed versions\nwriter: %v", i, how, got, err, lines[max(0, len(lines)-4):])
				}
				current = got
				continue
			case "unmount":
				m := mountFG(t, src, mnt)
				if _, err := os.ReadFile(m.Path("f")); err != nil {
					t.Fatalf("unmount %d: reading f: %v", i, err)
				}
				var stopper *exec.Cmd
				how := "during bloscfs unmount"
				if i%2 == 0 {
					stopper = exec.Command(bin, "unmount", mnt)
					if err := stopper.Start(); err != nil {
						t.Fatal(err)
					}
				} else {
					how = "after SIGTERM"
					m.Cmd.Process.Signal(syscall.SIGTERM)
				}
				d := time.Duration(rng.IntN(3000)) * time.Microsecond
				time.Sleep(d)
				check("unmount", i, m.Cmd.Process.Pid, fmt.Sprintf("%v %s", d, how))
				if stopper != nil {
					stopper.Wait()
				}
				m.WaitExit(10 * time.Second)
				clearDead(t, mnt)
			}
			checkSource(kc.phase, i)
		}
	}
	// A last mount finds the last version and no stale file.
	m := mountFG(t, src, mnt)
	if left := waitNoHidden(t, src, 5*time.Second); len(left) > 0 {
		t.Errorf("the final mount did not remove the stale temp files within 5s: %v", left)
	}
	if got, err := os.ReadFile(m.Path("f")); err != nil || sha(got) != current {
		t.Errorf("f through the final mount: %v, sha256 %s, want %s", err, sha(got), current)
	}
	m.MustUnmount(t)
	t.Logf("%d kills (%v), %d daemons not gone within 1s", total, killCounts, slow)
}

// TestSIGTERMUnderLoad stops a mount with SIGTERM while writers rewrite
// compressed files (in place, and saving as a new file renamed over the
// old) and readers read: the daemon must unmount (detaching the busy
// mount), let the commits that are running finish, and exit 0; the
// writers and readers get errors, not hangs; no temp or stage file is
// left in the source, and every file decodes to a version the crash rules
// allow.
func TestSIGTERMUnderLoad(t *testing.T) {
	setup.Require(t)
	const size = 8 << 20
	for round := 0; round < 3; round++ {
		root, src, mnt := newDirs(t)
		names := []string{"a", "b", "c"}
		before := map[string]string{}
		for k, name := range names {
			writeSeriesFile(t, filepath.Join(root, name+".dat"), size, float64(k))
			disk := filepath.Join(src, name+".b2frame")
			mustRun(t, bin, "pack", "--format", "b2frame", "--codec", "zstd", "--clevel", "1", "--chunk-size", "1MiB", filepath.Join(root, name+".dat"), disk)
			sum, err := unpackSHA(disk)
			if err != nil {
				t.Fatal(err)
			}
			before[name] = sum
		}
		if err := os.WriteFile(filepath.Join(src, "plain.bin"), bytes.Repeat([]byte("plain data\n"), 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		m := mountFG(t, src, mnt)
		writers := map[string]*crashChild{}
		for k, name := range names {
			writers[name] = startCrashWriter(t, m.Path(name), size, int64(k+1)*100000, false, k == 2)
		}
		var readers []*exec.Cmd
		for _, name := range []string{"a", "plain.bin"} {
			r := exec.Command("sh", "-c", `while dd if="$1" of=/dev/null bs=128k 2>/dev/null; do :; done`, "sh", m.Path(name))
			if err := r.Start(); err != nil {
				t.Fatal(err)
			}
			readers = append(readers, r)
		}
		time.Sleep(time.Duration(300+round*400) * time.Millisecond)
		m.Cmd.Process.Signal(syscall.SIGTERM)
		if !m.WaitExit(30 * time.Second) {
			t.Fatalf("round %d: the daemon still runs 30s after SIGTERM\nlog:\n%s\nits threads:\n%s", round, m.LogText(), testkit.ThreadStates(m.PID))
		}
		if code := m.Cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("round %d: the daemon exited with %d after SIGTERM, want 0\nlog:\n%s", round, code, m.LogText())
		}
		if mounttest.IsMounted(mnt) {
			t.Errorf("round %d: %s still mounted after SIGTERM", round, mnt)
		}
		for _, r := range readers {
			if exited, _ := testkit.Wait(r, 30*time.Second); !exited {
				t.Errorf("round %d: a reader did not exit within 30s of the daemon's exit", round)
			}
		}
		for _, name := range names {
			lines := writers[name].finish(t)
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, "error") {
				t.Errorf("round %d: writer of %s ended with %q, want an error", round, name, last)
			}
			synced, pending := crashOutcome(lines)
			allowed := map[string]bool{before[name]: synced == "", synced: synced != "", pending: pending != ""}
			got, err := unpackSHA(filepath.Join(src, name+".b2frame"))
			if err != nil || !allowed[got] {
				t.Errorf("round %d: %s decodes to %s (%v), none of the allowed versions\nwriter: %v", round, name, got, err, lines[max(0, len(lines)-4):])
			}
		}
		if left := hiddenIn(src); len(left) > 0 {
			t.Errorf("round %d: temp or stage files left in the source after SIGTERM: %v", round, left)
		}
		if !strings.Contains(m.LogText(), "detached") {
			t.Errorf("round %d: the log does not say the busy mount was detached:\n%s", round, m.LogText())
		}
	}
}
