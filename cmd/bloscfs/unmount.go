package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	bfs "github.com/bloscfs/bloscfs/fs"
	"golang.org/x/sys/unix"
)

// unmountHelp is the description in `bloscfs help unmount`.
const unmountHelp = `Unmount a bloscfs mount (root: umount(2); others: fusermount3 -u).
A mount whose daemon has died ("Transport endpoint is not connected") is
unmounted too, lazily if files are still open there. If the daemon of the
mount is stuck dying (it was killed while waiting on its own mount, which
bloscfs no longer does), its FUSE connection is aborted first (root).`

// mountState is what a look at a FUSE mount finds.
type mountState int

const (
	mountAlive mountState = iota // it answers
	mountDead                    // its daemon is gone: ENOTCONN
	mountHung                    // no answer within the probe's time
)

// probeMount stats dir aside, with a time limit: a mount whose daemon
// hangs holds the stat until its connection is aborted.
func probeMount(dir string) mountState {
	done := make(chan error, 1)
	go func() {
		var st unix.Stat_t
		done <- unix.Stat(dir, &st)
	}()
	select {
	case err := <-done:
		if errors.Is(err, syscall.ENOTCONN) {
			return mountDead
		}
		return mountAlive
	case <-time.After(time.Second):
		return mountHung
	}
}

func cmdUnmount(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("unmount", stdout)
	lazy := fs.BoolP("lazy", "l", false, "detach now, clean up when no longer busy")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: unmount MOUNTPOINT", errUsage)
	}
	// Made absolute without resolving links: that would look up names
	// through the mount, which may be dead or hung.
	mnt, err := filepath.Abs(pos[0])
	if err != nil {
		return err
	}
	m, mounted, _ := bfs.MountAt(mnt)
	if !mounted {
		return fmt.Errorf("%s: not a mountpoint", mnt)
	}
	state := mountAlive
	if strings.HasPrefix(m.FSType, "fuse") {
		state = probeMount(mnt)
	}
	if state == mountHung {
		if pids := stuckDaemons(mnt); len(pids) > 0 {
			if err := abortConnection(m.Minor); err != nil {
				return fmt.Errorf("%s: its daemon (pid %s) is stuck dying on its own mount, and aborting FUSE connection %d failed: %v", mnt, joinInts(pids), m.Minor, err)
			}
			fmt.Fprintf(stdout, "%s: its daemon (pid %s) was stuck dying on its own mount: aborted FUSE connection %d\n", mnt, joinInts(pids), m.Minor)
			state = mountDead
		}
	}
	err = bfs.Unmount(mnt, *lazy)
	if errors.Is(err, syscall.EBUSY) && state == mountDead {
		// Programs still hold files of the dead mount: detach it; it
		// goes when they close them (they get ENOTCONN until then).
		if err = bfs.Unmount(mnt, true); err == nil {
			fmt.Fprintf(stdout, "%s: its daemon had died; files are still open there, so the mount was detached (it goes once they are closed)\n", mnt)
			return nil
		}
	}
	switch {
	case err == nil:
		if state == mountDead {
			fmt.Fprintf(stdout, "%s: its daemon had died; unmounted the dead mount\n", mnt)
		}
		return nil
	case errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("%s: busy: files are open there (close them, or use unmount -l)", mnt)
	case errors.Is(err, syscall.EINVAL):
		return fmt.Errorf("%s: not a mountpoint", mnt)
	}
	return fmt.Errorf("%s: %w", mnt, err)
}

// joinInts joins numbers with commas.
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// stuckDaemons returns the bloscfs processes serving mnt that were killed
// but cannot exit: a thread of theirs sleeps uninterruptibly (state D)
// with SIGKILL pending, which is how a daemon that called into its own
// mount stays after kill -9. Such a thread is looked at through its own
// /proc/PID/task/TID: the process's main thread may have exited already,
// and with it what /proc/PID shows of the program.
func stuckDaemons(mnt string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, t := range tasks {
			dir := fmt.Sprintf("/proc/%d/task/%s", pid, t.Name())
			if killedInD(dir+"/status") && servesPath(dir, mnt) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// servesPath reports whether the process or thread whose /proc directory
// is dir runs bloscfs with a command line that names mnt (every form of
// mount names its mountpoint; a relative one is resolved against the
// working directory).
func servesPath(dir, mnt string) bool {
	exe, err := os.Readlink(dir + "/exe")
	if err != nil || filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != "bloscfs" {
		return false
	}
	b, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return false
	}
	cwd, _ := os.Readlink(dir + "/cwd")
	for _, a := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		p := string(a)
		if !filepath.IsAbs(p) && cwd != "" {
			p = filepath.Join(cwd, p)
		}
		if filepath.Clean(p) == mnt {
			return true
		}
	}
	return false
}

// killedInD reports whether the task whose status file is path sleeps
// uninterruptibly with SIGKILL pending.
func killedInD(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var inD bool
	var pending uint64
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			inD = strings.HasPrefix(v, "D")
		case "SigPnd", "ShdPnd":
			if n, err := strconv.ParseUint(v, 16, 64); err == nil {
				pending |= n
			}
		}
	}
	return inD && pending&(1<<(syscall.SIGKILL-1)) != 0
}

// fusectl is where the kernel's FUSE control filesystem is mounted.
const fusectl = "/sys/fs/fuse/connections"

// abortConnection aborts FUSE connection n through the control
// filesystem (mounted first if it is not): every request waiting on it
// fails, and a daemon stuck on one can exit.
func abortConnection(n uint32) error {
	if ok, _ := bfs.IsMountpoint(fusectl); !ok {
		if err := syscall.Mount("fusectl", fusectl, "fusectl", 0, ""); err != nil && !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("mount the FUSE control filesystem at %s: %w", fusectl, err)
		}
	}
	return os.WriteFile(filepath.Join(fusectl, strconv.FormatUint(uint64(n), 10), "abort"), []byte("1"), 0)
}
