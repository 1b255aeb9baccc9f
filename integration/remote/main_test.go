// Package remote_test runs the mount's checks against a remote mount of
// a bucket served by a real S3-compatible server: versitygw with its
// POSIX backend, started on 127.0.0.1 for the tests (make test installs
// it). Every fixture is uploaded, then read through `bloscfs mount
// s3://...` with sha256sum, dd, numpy and concurrent readers, and through
// `bloscfs info/verify/unpack s3://...`.
package remote_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
	"github.com/bloscfs/bloscfs/remote"
)

var (
	// setup is what TestMain decided: setup.Require(t) skips or fails a
	// test that cannot run (without the server too).
	setup     *mounttest.Setup
	bin       string // the bloscfs binary under test
	endpoint  string // http://127.0.0.1:port of the server
	serverPid int    // the server's process, whose CPU the benchmark counts
	bucket    = "fixtures"
)

// VersitygwEnv names the variable that may point at the versitygw binary.
const versitygwEnv = "BLOSCFS_VERSITYGW"

// findVersitygw returns the versitygw binary: $BLOSCFS_VERSITYGW, the
// builds that make deps and make test install (optimized, then quick), or
// PATH.
func findVersitygw() (string, error) {
	if p := os.Getenv(versitygwEnv); p != "" {
		return p, nil
	}
	if home, err := os.UserHomeDir(); err == nil {
		for _, name := range []string{"versitygw", "versitygw-quick"} {
			p := filepath.Join(home, ".cache", "bloscfs-tools", "bin", name)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	return exec.LookPath("versitygw")
}

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	setup = mounttest.Prepare("remote integration tests")
	defer setup.Close()
	bin = setup.Bin
	if !setup.OK() {
		return mounttest.RunTests(m)
	}
	gw, err := findVersitygw()
	if err != nil {
		msg := "versitygw is not installed (make test installs it: go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)"
		if os.Getenv("CI") != "" {
			setup.Fail = msg
		} else {
			setup.Skip = msg
		}
		return mounttest.RunTests(m)
	}
	stop, err := startServer(gw, filepath.Join(setup.Dir, "data"))
	if err != nil {
		setup.Fail = err.Error()
		return mounttest.RunTests(m)
	}
	defer stop()
	if err := uploadFixtures(); err != nil {
		setup.Fail = err.Error()
	}
	return mounttest.RunTests(m)
}

// startServer starts versitygw on a free port of 127.0.0.1 with fresh
// credentials, which it puts in this process's environment (the
// programs the tests run inherit them), and returns how to stop it.
func startServer(gw, data string) (func(), error) {
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	key, secret := randHex(10), randHex(20)
	// --keep-alive: versitygw closes the connection after every
	// response unless told otherwise, so each GET paid a new TCP
	// connection on both sides; S3 services keep connections open, and
	// so does the client.
	cmd := exec.Command(gw, "--keep-alive", "--port", addr, "posix", data)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+key, "ROOT_SECRET_KEY="+secret)
	logf, err := os.Create(data + ".log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	serverPid = cmd.Process.Pid
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		logf.Close()
	}
	gone := false
	listening := testkit.Eventually(nil, 30*time.Second, func() bool {
		select {
		case <-exited:
			gone = true
			return true
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	switch {
	case gone:
		b, _ := os.ReadFile(data + ".log")
		return nil, fmt.Errorf("versitygw exited: %s", b)
	case !listening:
		stop()
		return nil, fmt.Errorf("versitygw did not listen on %s within 30s", addr)
	}
	endpoint = "http://" + addr
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret,
		"AWS_REGION": "us-east-1", "AWS_PROFILE": "", "AWS_SESSION_TOKEN": "",
		"AWS_EC2_METADATA_DISABLED": "true", // no request off loopback
	} {
		if v == "" {
			os.Unsetenv(k)
		} else {
			os.Setenv(k, v)
		}
	}
	return stop, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newStore returns a store of bucket (credentials from the environment).
func newStore(t testing.TB, bucket string) *remote.Store {
	s, err := remote.New(context.Background(), bucket, remote.Config{Logger: log.New(os.Stderr, "remote: ", 0)})
	if err != nil {
		if t != nil {
			t.Fatal(err)
		}
		panic(err)
	}
	return s
}

// uploadFixtures creates the bucket and uploads testdata/fixtures into
// it, under the same names (a sparse frame directory's files under its
// name as prefix).
func uploadFixtures() error {
	s := newStore(nil, bucket)
	ctx := context.Background()
	if err := s.CreateBucket(ctx); err != nil {
		return err
	}
	root := fixtures.Dir()
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return s.Upload(ctx, filepath.ToSlash(rel), f)
	})
}

// mount is one foreground `bloscfs mount s3://...`.
type mount = mounttest.Mount

// mountRemote mounts url in the foreground at a new mountpoint.
func mountRemote(t *testing.T, url string, flags ...string) *mount {
	t.Helper()
	setup.Require(t)
	return mounttest.Foreground(t, bin, url, mounttest.NewMountpoint(t), flags...)
}

// run runs a program with a timeout and returns its stdout; a failure
// fails the test.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	r := testkit.Run(2*time.Minute, name, args...)
	if r.Err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), r)
	}
	return string(r.Stdout)
}
