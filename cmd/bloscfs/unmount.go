package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	bfs "github.com/bloscfs/bloscfs/fs"
)

// unmountHelp is the description in `bloscfs help unmount`.
const unmountHelp = `Unmount a bloscfs mount (root: umount(2); others: fusermount3 -u).
A mount whose daemon has died ("Transport endpoint is not connected") is
unmounted too, lazily if files are still open there. If the daemon of the
mount is stuck dying (it was killed while waiting on its own mount, which
bloscfs no longer does), its FUSE connection is aborted first (root).`

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
	// Made absolute, and its links resolved only where it is not a
	// mountpoint as given, without looking at what a mount shows (the
	// mount may be dead or hung).
	mnt, err := filepath.Abs(pos[0])
	if err != nil {
		return err
	}
	m, mounted, _ := bfs.MountAt(mnt)
	if !mounted {
		if r, err := bfs.ResolveMountpoint(mnt); err == nil && r != mnt {
			if m, mounted, _ = bfs.MountAt(r); mounted {
				mnt = r
			}
		}
	}
	if !mounted {
		return fmt.Errorf("%s: not a mountpoint", mnt)
	}
	state := bfs.MountAlive
	if strings.HasPrefix(m.FSType, "fuse") {
		state = bfs.ProbeMount(mnt, time.Second)
	}
	if state == bfs.MountHung && m.FSType == "fuse.bloscfs" {
		if pids := stuckDaemons(mnt); len(pids) > 0 {
			if err := abortMount(mnt, m); err != nil {
				return fmt.Errorf("%s: its daemon (pid %s) is stuck dying on its own mount, and aborting its FUSE connection failed: %v", mnt, joinInts(pids), err)
			}
			fmt.Fprintf(stdout, "%s: its daemon (pid %s) was stuck dying on its own mount: aborted FUSE connection %s\n", mnt, joinInts(pids), m.Conn())
			state = bfs.MountDead
		}
	}
	err = bfs.Unmount(mnt, *lazy)
	if errors.Is(err, syscall.EBUSY) && state == bfs.MountDead {
		// Programs still hold files of the dead mount: detach it; it
		// goes when they close them (they get ENOTCONN until then).
		if err = bfs.Unmount(mnt, true); err == nil {
			fmt.Fprintf(stdout, "%s: its daemon had died; files are still open there, so the mount was detached (it goes once they are closed)\n", mnt)
			return nil
		}
	}
	switch {
	case err == nil:
		if state == bfs.MountDead {
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
//
// A process stuck in its exit has lost its command line: nothing tells
// which mount it served. It is taken for mnt's daemon only when nothing
// else can be: it is the only such process, no live bloscfs serves mnt,
// and every other bloscfs mount either has a daemon in sight that names
// it or has no request waiting (fusectl's count), as a mount whose
// daemon is stuck has. A live daemon is never aborted: its mount is
// only busy, and aborting would lose the writes it holds.
func stuckDaemons(mnt string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out, exiting []int
	served := map[string]bool{} // mountpoints named by a bloscfs process
	live := false               // a bloscfs not killed serves mnt
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := fmt.Sprintf("/proc/%d", pid)
		args := bloscfsArgs(dir)
		for _, a := range args {
			served[a] = true
		}
		tasks, _ := os.ReadDir(dir + "/task")
		killed := false
		for _, t := range tasks {
			tdir := fmt.Sprintf("%s/task/%s", dir, t.Name())
			if !killedInD(tdir + "/status") {
				continue
			}
			killed = true
			if servesPath(tdir, mnt) {
				out = append(out, pid)
				break
			}
			// A thread stuck in the exit itself (closing a file of its
			// own mount) has released its memory: its program and command
			// line are gone, and only its name is left.
			comm, _ := os.ReadFile(tdir + "/comm")
			if cmd, _ := os.ReadFile(tdir + "/cmdline"); len(cmd) == 0 && strings.TrimSpace(string(comm)) == "bloscfs" {
				exiting = append(exiting, pid)
				break
			}
		}
		if !killed && slices.Contains(args, mnt) {
			live = true
		}
	}
	if live {
		return nil
	}
	if len(out) == 0 && len(exiting) == 1 {
		ms, err := bfs.Mounts()
		if err != nil || mountFusectl() != nil {
			return nil
		}
		for _, m := range ms {
			if m.FSType != "fuse.bloscfs" || m.Dir == mnt || served[m.Dir] {
				continue
			}
			if b, err := os.ReadFile(filepath.Join(fusectl, m.Conn(), "waiting")); err != nil || strings.TrimSpace(string(b)) != "0" {
				return nil // that mount's daemon may be the one stuck
			}
		}
		return exiting
	}
	return out
}

// bloscfsArgs returns the absolute paths that the command line of a
// bloscfs process (its /proc directory dir) names, nil for another
// program.
func bloscfsArgs(dir string) []string {
	exe, err := os.Readlink(dir + "/exe")
	if err != nil || filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != "bloscfs" {
		return nil
	}
	b, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return nil
	}
	cwd, _ := os.Readlink(dir + "/cwd")
	var out []string
	for _, a := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		p := string(a)
		if !filepath.IsAbs(p) && cwd != "" {
			p = filepath.Join(cwd, p)
		}
		out = append(out, filepath.Clean(p))
	}
	return out
}

// servesPath reports whether the process or thread whose /proc directory
// is dir runs bloscfs with a command line that names mnt (every form of
// mount names its mountpoint; a relative one is resolved against the
// working directory).
func servesPath(dir, mnt string) bool {
	return slices.Contains(bloscfsArgs(dir), mnt)
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

// abortMount aborts the FUSE connection of the bloscfs mount m at mnt
// (abortConnection), after reading the mount table again: only if a
// bloscfs mount of the same device is still at mnt.
func abortMount(mnt string, m bfs.MountInfo) error {
	now, ok, err := bfs.MountAt(mnt)
	switch {
	case err != nil:
		return err
	case !ok || now.FSType != "fuse.bloscfs" || now.Dev() != m.Dev():
		return fmt.Errorf("the mount at %s changed: not aborting FUSE connection %s", mnt, m.Conn())
	}
	return abortConnection(m)
}

// abortConnection aborts the FUSE connection of mount m through the
// control filesystem (mounted first if it is not): every request
// waiting on it fails, and a daemon stuck on one can exit.
func abortConnection(m bfs.MountInfo) error {
	if err := mountFusectl(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(fusectl, m.Conn(), "abort"), []byte("1"), 0)
}

// mountFusectl mounts the FUSE control filesystem if it is not.
func mountFusectl() error {
	if ok, _ := bfs.IsMountpoint(fusectl); !ok {
		if err := syscall.Mount("fusectl", fusectl, "fusectl", 0, ""); err != nil && !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("mount the FUSE control filesystem at %s: %w", fusectl, err)
		}
	}
	return nil
}
