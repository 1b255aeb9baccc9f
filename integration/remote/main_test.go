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
	"flag"
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

	bfs "github.com/bloscfs/bloscfs/fs"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/remote"
)

var (
	bin        string // the bloscfs binary under test
	skipReason string
	setupErr   string
	endpoint   string // http://127.0.0.1:port of the server
	serverPid  int    // the server's process, whose CPU the benchmark counts
	bucket     = "fixtures"
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
	flag.Parse()
	if skipReason, setupErr = testkit.MountPrereqs("remote integration tests"); skipReason != "" || setupErr != "" {
		return m.Run()
	}
	gw, err := findVersitygw()
	if err != nil {
		msg := "versitygw is not installed (make test installs it: go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)"
		if os.Getenv("CI") != "" {
			setupErr = msg
		} else {
			skipReason = msg
		}
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "bloscfs-remote-")
	if err != nil {
		setupErr = err.Error()
		return m.Run()
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "bloscfs")
	if err := testkit.BuildBloscfs(bin); err != nil {
		setupErr = err.Error()
		return m.Run()
	}
	stop, err := startServer(gw, filepath.Join(dir, "data"))
	if err != nil {
		setupErr = err.Error()
		return m.Run()
	}
	defer stop()
	if err := uploadFixtures(); err != nil {
		setupErr = err.Error()
	}
	return m.Run()
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(data + ".log")
			return nil, fmt.Errorf("versitygw exited: %s", b)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("versitygw did not listen on %s within 30s", addr)
		}
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

// requireServer skips or fails as TestMain decided.
func requireServer(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if setupErr != "" {
		t.Fatal(setupErr)
	}
}

// mount is one foreground `bloscfs mount s3://...`.
type mount struct {
	dir    string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// mountRemote mounts url and registers the unmount (which also runs when
// the test fails half-way).
func mountRemote(t *testing.T, url string, flags ...string) *mount {
	t.Helper()
	requireServer(t)
	tmp := t.TempDir()
	m := &mount{dir: filepath.Join(tmp, "mnt"), log: filepath.Join(tmp, "bloscfs.log"), exited: make(chan struct{})}
	if err := os.Mkdir(m.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"mount", "-f", "--log", m.log}, flags...)
	args = append(args, url, m.dir)
	m.cmd = exec.Command(bin, args...)
	out, err := os.Create(filepath.Join(tmp, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	m.cmd.Stdout, m.cmd.Stderr = out, out
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.cmd.Wait(); close(m.exited) }()
	t.Cleanup(func() { m.cleanup(t) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ok, _ := bfs.IsMountpoint(m.dir); ok {
			return m
		}
		select {
		case <-m.exited:
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("bloscfs %s exited before mounting: %s", strings.Join(args, " "), b)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("bloscfs %s: not mounted after 30s", strings.Join(args, " "))
		}
	}
}

func (m *mount) path(name string) string { return filepath.Join(m.dir, name) }

func (m *mount) logText() string {
	b, _ := os.ReadFile(m.log)
	return string(b)
}

// cleanup unmounts and makes sure the daemon is gone.
func (m *mount) cleanup(t *testing.T) {
	if ok, _ := bfs.IsMountpoint(m.dir); ok {
		if err := syscall.Unmount(m.dir, 0); err != nil {
			t.Errorf("unmount %s: %v; detaching", m.dir, err)
			syscall.Unmount(m.dir, syscall.MNT_DETACH)
		}
	}
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		t.Errorf("bloscfs still runs 10s after unmount; killing it")
		syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.exited
	}
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
