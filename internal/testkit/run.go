package testkit

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Result is what a finished program left behind.
type Result struct {
	Stdout, Stderr []byte
	Code           int // exit code; -1 when killed or not started
	Err            error
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d (%v), stderr: %s", r.Code, r.Err, strings.TrimSpace(string(r.Stderr)))
}

// Run runs a program with a timeout and returns its outcome; a program
// still running at the timeout is killed, and its pipes are closed 5 s
// later.
func Run(timeout time.Duration, name string, args ...string) Result {
	return RunCmd(timeout, exec.Command(name, args...))
}

// RunCmd is Run of a command prepared but not started (its environment,
// credentials or directory set); RunCmd sets its stdout and stderr.
func RunCmd(timeout time.Duration, cmd *exec.Cmd) Result {
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return Result{Err: err, Code: -1}
	}
	var timedOut atomic.Bool
	timer := time.AfterFunc(timeout, func() {
		timedOut.Store(true)
		cmd.Process.Kill()
	})
	err := cmd.Wait()
	timer.Stop()
	r := Result{Stdout: so.Bytes(), Stderr: se.Bytes(), Err: err, Code: cmd.ProcessState.ExitCode()}
	if timedOut.Load() {
		r.Err = fmt.Errorf("timed out after %v: %w", timeout, err)
	}
	return r
}

// Wait waits up to d for cmd, started, to exit, and returns whether it
// did and what its Wait returned; one still running after d is killed
// and reaped.
func Wait(cmd *exec.Cmd, d time.Duration) (exited bool, err error) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return true, err
	case <-time.After(d):
		cmd.Process.Kill()
		return false, <-done
	}
}

// ModuleRoot is the directory of the module's go.mod.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// BuildBloscfs builds ./cmd/bloscfs into out, with extra build flags.
func BuildBloscfs(out string, flags ...string) error {
	return BuildCommand(out, "./cmd/bloscfs", flags...)
}

// BuildCommand builds the main package pkg (a path relative to the
// module's root) into out, with extra build flags.
func BuildCommand(out, pkg string, flags ...string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.Command(gobin, args...)
	cmd.Dir = ModuleRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// MountPrereqs says whether tests that mount for real can run: skip is
// set when they should be skipped (not root, outside CI), fail when they
// must fail (in CI without root, or without /dev/fuse). what names the
// tests in the messages.
func MountPrereqs(what string) (skip, fail string) {
	ci := os.Getenv("CI") != ""
	switch {
	case os.Getuid() != 0 && !ci:
		return what + " mount with go-fuse's DirectMount and need root (run `make test` as root)", ""
	case os.Getuid() != 0:
		return "", "CI is set but the tests do not run as root: " + what + " need root to mount"
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return "", fmt.Sprintf("/dev/fuse is missing (%v): load the fuse module or install fuse3", err)
	}
	return "", ""
}

// ProcessGone reports whether process pid has exited: /proc/PID is
// absent, or every thread of it is a zombie (it has released everything,
// /dev/fuse included, and only waits for its parent, which for a
// daemonized mount is init, to collect its exit status). The main thread
// alone says nothing: it is a zombie as soon as it has exited, while a
// thread stuck in the kernel keeps the process.
func ProcessGone(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] != 'Z' {
			return false
		}
	}
	return true
}

// exitGrace is how much longer than its limit KillGone lets a process
// that is tearing itself down (exitingFree) take.
const exitGrace = 10 * time.Second

// KillGone SIGKILLs pid and reports whether it is gone (ProcessGone)
// within d. A process still there after d whose every live thread is in
// the kernel's exit path, none of them waiting on FUSE (exitingFree), is
// not stuck but freeing its memory, which on a loaded machine can take
// more than a second (seen: a remote mount's daemon in exit_mmap after
// 1 s at load 9): it gets exitGrace more. A thread that waits on FUSE,
// as a daemon stuck on its own mount does, fails at d.
func KillGone(pid int, d time.Duration) bool {
	syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(d)
	extended := false
	for !ProcessGone(pid) {
		if time.Now().After(deadline) {
			if extended || !exitingFree(pid) {
				return false
			}
			extended, deadline = true, deadline.Add(exitGrace)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}

// exitingFree reports whether pid, SIGKILLed, is dying rather than
// stuck: no thread that is not a zombie waits on FUSE (a fuse_ frame or
// request_wait_answer on its kernel stack), and at least one is in the
// exit path (do_exit) or running (an empty stack: a killed thread that
// runs is on its way out). Stacks it cannot read (not root) say stuck.
func exitingFree(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	dying := false
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
			continue
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stack", pid, t.Name()))
		if err != nil {
			return false
		}
		switch waitsOnFUSE, exiting := stackState(string(st)); {
		case waitsOnFUSE:
			return false
		case exiting:
			dying = true
		}
	}
	return dying
}

// stackState reads a kernel stack (/proc/PID/task/TID/stack): whether
// the thread waits on FUSE, and whether it is exiting (do_exit) or
// running (empty).
func stackState(st string) (waitsOnFUSE, exiting bool) {
	waitsOnFUSE = strings.Contains(st, "fuse_") || strings.Contains(st, "request_wait_answer")
	exiting = strings.TrimSpace(st) == "" || strings.Contains(st, "do_exit")
	return
}

// KernelStacks returns the kernel stacks of the threads of pid (root
// only), to show what holds a process that does not die.
func KernelStacks(pid int) string {
	var out strings.Builder
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stack", pid, t.Name()))
		fmt.Fprintf(&out, "thread %s:\n%s", t.Name(), st)
	}
	return out.String()
}

// ThreadStates returns, for each thread of pid, its name, state and
// wait channel (from /proc), and its kernel stack (root only): what a
// process that does not exit is doing.
func ThreadStates(pid int) string {
	var out strings.Builder
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		dir := fmt.Sprintf("/proc/%d/task/%s/", pid, t.Name())
		stat, _ := os.ReadFile(dir + "stat")
		wchan, _ := os.ReadFile(dir + "wchan")
		st, _ := os.ReadFile(dir + "stack")
		state := ""
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) {
			state = string(stat[i+2])
		}
		fmt.Fprintf(&out, "thread %s %s (wchan %s):\n%s", t.Name(), state, wchan, st)
	}
	if len(tasks) == 0 {
		fmt.Fprintf(&out, "no threads: pid %d is gone or reaped\n", pid)
	}
	return out.String()
}

// BenchSize is the plain size of a benchmark's data: BLOSCFS_BENCH_SIZE
// MiB when it is set to a positive number, else def bytes.
func BenchSize(def int64) int64 {
	if n, err := strconv.Atoi(os.Getenv("BLOSCFS_BENCH_SIZE")); err == nil && n > 0 {
		return int64(n) << 20
	}
	return def
}
