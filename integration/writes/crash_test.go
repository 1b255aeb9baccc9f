package writes

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The crash writer is the test binary run again as a child process
// (helperEnv=crashwriter). It opens the file given as its argument
// through the mount and, for version v = first, first+1, …, overwrites
// the whole file with crashBlock(v, ·), then fsyncs. It reports on
// standard output:
//
//	writing V SHA256   every write of version V has returned; fsync comes next
//	synced V           fsync of version V returned success
//	error WHAT         a call failed (the daemon died); the writer exits
//
// With pause set it waits for a line (or EOF) on standard input after
// each successful fsync, so that the daemon can be killed right then.
//
// With save set it writes each version as a new file instead, the way
// programs save safely: it removes and creates "PATH.new" through the
// mount, writes it from its start in order (a stream), fsyncs it and
// renames it over PATH; "synced V" then means that the rename returned.
const crashWriter = "crashwriter"

// crashBlock fills b (1 MiB or less) with block j of version v: a
// compressible float64 series, distinct for every version and block.
func crashBlock(b []byte, v, j int64, pattern []byte) {
	copy(b, pattern)
	binary.LittleEndian.PutUint64(b, uint64(v))
	if len(b) >= 16 {
		binary.LittleEndian.PutUint64(b[8:], uint64(j))
	}
}

// crashPattern is the 1 MiB series that every block of version v
// starts from.
func crashPattern(v int64) []byte {
	return seriesBytes(1<<20, float64(v))
}

// runHelper runs a helper process of the tests and returns its exit code.
func runHelper(name string) int {
	switch name {
	case crashWriter:
		return runCrashWriter(os.Args[1:])
	}
	fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
	return 2
}

func runCrashWriter(args []string) int {
	if len(args) != 5 {
		fmt.Println("error usage: PATH SIZE FIRST PAUSE SAVE")
		return 2
	}
	path := args[0]
	size, _ := strconv.ParseInt(args[1], 10, 64)
	first, _ := strconv.ParseInt(args[2], 10, 64)
	pause, save := args[3] == "1", args[4] == "1"
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, a ...any) {
		fmt.Fprintf(out, format+"\n", a...)
		out.Flush()
	}
	var f *os.File
	var dir int // save: the mount's directory, opened once, so that the
	// calls fail once the daemon is dead rather than go to the directory
	// under the mountpoint
	base := filepath.Base(path)
	if save {
		var err error
		if dir, err = unix.Open(filepath.Dir(path), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			say("error open dir: %v", err)
			return 1
		}
	} else {
		var err error
		if f, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
			say("error open: %v", err)
			return 1
		}
	}
	// The test kills the daemon at a random moment after this line: the
	// writer must be on the mount by then, not on the directory under
	// the mountpoint, which a kill and a lazy unmount would leave it.
	onFd := int(f.Fd())
	if save {
		onFd = dir
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(onFd, &sfs); err != nil || sfs.Type != unix.FUSE_SUPER_MAGIC {
		say("error not on the mount: %v, file system type %#x", err, sfs.Type)
		return 1
	}
	say("open")
	stdin := bufio.NewReader(os.Stdin)
	buf := make([]byte, 1<<20)
	for v := first; ; v++ {
		if save {
			if err := unix.Unlinkat(dir, base+".new", 0); err != nil && err != unix.ENOENT {
				say("error remove: %v", err)
				return 1
			}
			fd, err := unix.Openat(dir, base+".new", unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
			if err != nil {
				say("error create: %v", err)
				return 1
			}
			f = os.NewFile(uintptr(fd), path+".new")
		}
		pattern := crashPattern(v)
		h := sha256.New()
		for off, j := int64(0), int64(0); off < size; off, j = off+int64(len(buf)), j+1 {
			b := buf[:min(int64(len(buf)), size-off)]
			crashBlock(b, v, j, pattern)
			h.Write(b)
			if _, err := f.WriteAt(b, off); err != nil {
				say("error write v%d at %d: %v", v, off, err)
				return 1
			}
		}
		say("writing %d %s", v, hex.EncodeToString(h.Sum(nil)))
		if err := f.Sync(); err != nil {
			say("error fsync v%d: %v", v, err)
			return 1
		}
		if save {
			if err := f.Close(); err != nil {
				say("error close v%d: %v", v, err)
				return 1
			}
			if err := unix.Renameat(dir, base+".new", dir, base); err != nil {
				say("error rename v%d: %v", v, err)
				return 1
			}
		}
		say("synced %d", v)
		if pause {
			stdin.ReadString('\n')
		}
	}
}

// crashChild is a running crash writer.
type crashChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	mu     sync.Mutex
	lines  []string
	synced chan int64    // versions whose fsync returned, as reported
	open   chan struct{} // closed once the writer has opened its file or directory on the mount
	done   chan struct{}
}

func startCrashWriter(t *testing.T, path string, size, first int64, pause, save bool) *crashChild {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	c := &crashChild{synced: make(chan int64, 1000), done: make(chan struct{}), open: make(chan struct{})}
	c.cmd = exec.Command(exe, path, strconv.FormatInt(size, 10), strconv.FormatInt(first, 10), flag(pause), flag(save))
	c.cmd.Env = append(os.Environ(), helperEnv+"="+crashWriter)
	c.cmd.Stderr = os.Stderr
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.lines = append(c.lines, line)
			c.mu.Unlock()
			if line == "open" {
				close(c.open)
			}
			if v, ok := strings.CutPrefix(line, "synced "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				c.synced <- n
			}
		}
		c.cmd.Wait()
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			c.cmd.Process.Kill()
			<-c.done
		}
	})
	// Only a writer that has its file or directory open on the mount may
	// see the daemon killed: one that opened the mountpoint after a kill
	// (the kill came 9 ms after the start once) wrote to the directory
	// under it, never failed, and ran until the test's 2-minute limit.
	select {
	case <-c.open:
	case <-c.done:
		t.Fatalf("the crash writer exited before it opened %s: %v", path, c.output())
	case <-time.After(time.Minute):
		t.Fatalf("the crash writer did not open %s within a minute: %v", path, c.output())
	}
	return c
}

// output returns the lines the writer printed so far.
func (c *crashChild) output() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.lines)
}

// finish lets a paused writer go on, and waits for it to exit (it must,
// once the daemon is dead).
func (c *crashChild) finish(t *testing.T) []string {
	t.Helper()
	c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(2 * time.Minute):
		c.cmd.Process.Kill()
		<-c.done
		t.Errorf("the writer did not exit within 2 minutes of the daemon's death (killed)")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

func (c *crashChild) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// crashOutcome reads a writer's report: the sha256 of the last version
// whose fsync returned success ("" if none), and of the version whose
// fsync was running when the daemon died ("" if none).
func crashOutcome(lines []string) (synced, pending string) {
	shas := map[string]string{}
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "writing":
			shas[f[1]] = f[2]
			pending = f[2]
		case len(f) == 2 && f[0] == "synced":
			synced, pending = shas[f[1]], ""
		}
	}
	return synced, pending
}

// TestCrashSafety SIGKILLs the daemon at random moments while a child
// process rewrites a 64 MiB LZ4 frame through the mount and fsyncs in a
// loop, or saves each version as a new file (streamed) that it fsyncs
// and renames over the old. After every kill the source must decode to
// one complete version:
// the last one whose fsync succeeded (the original before any), or the
// one being fsynced when the daemon died; a new mount must remove the
// temp and staging files the dead one left.
func TestCrashSafety(t *testing.T) {
	setup.Require(t)
	requireTool(t, "umount")
	iterations := 24
	if longRun() {
		iterations = 150
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BLOSCFS_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (BLOSCFS_CRASH_SEED to replay), %d iterations", seed, iterations)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	root, src, mnt := newDirs(t)
	const size = 64 << 20
	plain := filepath.Join(root, "base.dat")
	{
		f, err := os.Create(plain)
		if err != nil {
			t.Fatal(err)
		}
		buf, pattern := make([]byte, 1<<20), crashPattern(0)
		for j := int64(0); j < size>>20; j++ {
			crashBlock(buf, 0, j, pattern)
			if _, err := f.Write(buf); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	disk := filepath.Join(src, "f.b2frame")
	mustRun(t, bin, "pack", "--format", "b2frame", "--codec", "lz4", "--clevel", "5", "--filter", "shuffle",
		"--typesize", "8", "--chunk-size", "4MiB", plain, disk)
	in := infoOf(t, disk)
	if in.Codec != "lz4" || in.Chunks != 16 {
		t.Fatalf("the packed file: %+v, want lz4 in 16 chunks", in)
	}
	current, err := unpackSHA(disk)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(plain)

	var duringRecompression, confirmedKills, staleSeen int
	for i := 0; i < iterations; i++ {
		m := mountFG(t, src, mnt)
		if i > 0 {
			if left := waitNoHidden(t, src, 5*time.Second); len(left) > 0 {
				t.Fatalf("iteration %d: a new mount did not remove the stale temp files within 5s: %v", i, left)
			}
		}
		// Every other group of three iterations saves each version as a
		// new file, streamed, renamed over the old one.
		mode, save := i%3, i/3%2 == 1
		w := startCrashWriter(t, m.Path("f"), size, int64(i+1)*1000, mode == 2, save)
		var how string
		switch mode {
		case 0: // during recompression: when a temp file appears
			deadline := time.Now().Add(time.Minute)
			for !hasTmp(src) {
				if w.exited() || time.Now().After(deadline) {
					t.Fatalf("iteration %d: no .bloscfs-tmp- file appeared in the source (writer: %v)", i, w.finish(t))
				}
				time.Sleep(time.Millisecond)
			}
			d := time.Duration(rng.IntN(30)) * time.Millisecond
			time.Sleep(d)
			how = fmt.Sprintf("%v after a temp file appeared", d)
		case 1: // at a random moment
			d := time.Duration(rng.IntN(2000)) * time.Millisecond
			time.Sleep(d)
			how = fmt.Sprintf("%v after the writer started", d)
		case 2: // right after an fsync returned success
			select {
			case <-w.synced:
			case <-time.After(2 * time.Minute):
				t.Fatalf("iteration %d: the writer reported no fsync in 2 minutes: %v", i, w.finish(t))
			}
			how = "right after fsync returned"
		}
		tmpAtKill := hasTmp(src)
		m.Kill(t)
		lines := w.finish(t)
		if tmpAtKill {
			duringRecompression++
		}
		synced, pending := crashOutcome(lines)
		allowed := map[string]string{}
		if synced != "" {
			allowed[synced] = "the last version whose fsync succeeded"
		} else {
			allowed[current] = "the content before this iteration (no fsync succeeded)"
		}
		if pending != "" {
			allowed[pending] = "the version whose fsync was running"
		}
		got, err := unpackSHA(disk)
		tail := lines[max(0, len(lines)-4):]
		switch {
		case err != nil:
			t.Errorf("iteration %d (kill %s, temp file present: %v): the source does not decode: %v\nwriter: %v", i, how, tmpAtKill, err, tail)
		case allowed[got] == "":
			t.Errorf("iteration %d (kill %s, temp file present: %v): the source decodes to sha256 %s, which is none of %v\nwriter: %v", i, how, tmpAtKill, got, allowed, tail)
		case mode == 2 && got != synced:
			t.Errorf("iteration %d: data confirmed by fsync were lost by a SIGKILL right after it: sha256 %s, want %s\nwriter: %v", i, got, synced, tail)
		}
		if mode == 2 && got == synced {
			confirmedKills++
		}
		if err == nil {
			current = got
		}
		if left := hiddenIn(src); len(left) > 0 {
			staleSeen++
		}
		t.Logf("iteration %d (save as a new file: %v): kill %s; temp file at the kill: %v; source = %s", i, save, how, tmpAtKill, allowed[got])
	}
	// A last mount cleans what the last kill left.
	m := mountFG(t, src, mnt)
	if left := waitNoHidden(t, src, 5*time.Second); len(left) > 0 {
		t.Errorf("the final mount did not remove the stale temp files within 5s: %v", left)
	}
	if got, err := os.ReadFile(m.Path("f")); err != nil {
		t.Errorf("reading f through the final mount: %v", err)
	} else if sha(got) != current {
		t.Errorf("f through the final mount: sha256 %s, want %s", sha(got), current)
	}
	m.MustUnmount(t)
	t.Logf("%d kills, %d while a temp file existed (during recompression), %d right after a confirmed fsync, %d left stale files that the next mount removed",
		iterations, duringRecompression, confirmedKills, staleSeen)
	if duringRecompression == 0 {
		t.Errorf("no kill landed during a recompression: the test proved less than it should")
	}
}

// hasTmp reports whether dir holds a recompression temp file.
func hasTmp(dir string) bool {
	for _, n := range hiddenIn(dir) {
		if strings.HasPrefix(n, ".bloscfs-tmp-") {
			return true
		}
	}
	return false
}
