package testutil

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
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
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 5 * time.Second
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := Result{Stdout: so.Bytes(), Stderr: se.Bytes(), Err: err, Code: -1}
	if cmd.ProcessState != nil {
		r.Code = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		r.Err = fmt.Errorf("timed out after %v: %w", timeout, err)
	}
	return r
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
