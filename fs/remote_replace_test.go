package fs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/fakes3"
	"github.com/bloscfs/bloscfs/remote"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The tests of this file replace an object while a mount has it open,
// through the kernel: a replaced object's new version gets a node of its
// own (remoteFile.Open answers ESTALE, the kernel looks the name up
// again), handles of the old version keep reading it, and no ESTALE
// reaches a program.

// hookProxy sits in front of a fakes3 server: it can hold the next HEAD
// until released, and run a function after the next LIST is served.
type hookProxy struct {
	srv *fakes3.Server
	hs  *httptest.Server

	mu        sync.Mutex
	holdHead  chan struct{} // non-nil: the next HEAD waits for it to close
	headHeld  chan struct{} // closed when that HEAD arrived
	afterList func()
	heads     atomic.Int64
	lists     atomic.Int64
}

func newHookProxy(srv *fakes3.Server) *hookProxy {
	p := &hookProxy{srv: srv}
	p.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimPrefix(r.URL.Path, "/")
		_, key, _ := strings.Cut(path, "/")
		if r.Method == http.MethodHead && key != "" {
			p.heads.Add(1)
			p.mu.Lock()
			hold, held := p.holdHead, p.headHeld
			p.holdHead, p.headHeld = nil, nil
			p.mu.Unlock()
			if hold != nil {
				close(held)
				<-hold
			}
		}
		srv.ServeHTTP(w, r)
		if r.Method == http.MethodGet && key == "" {
			p.lists.Add(1)
			p.mu.Lock()
			f := p.afterList
			p.afterList = nil
			p.mu.Unlock()
			if f != nil {
				f()
			}
		}
	}))
	return p
}

// mountHooked mounts prefix d of bucket bkt through p with MountRemote's
// 1 s attribute timeout, a 2 s entry timeout (TestRemoteReplacedTwice
// NoEstale times a lookup by it), no negative entries and no listing
// cache.
func mountHooked(t *testing.T, p *hookProxy) (string, *syncBuffer) {
	logs := &syncBuffer{}
	store, err := remote.New(context.Background(), "bkt", remote.Config{Endpoint: p.hs.URL, Anonymous: true, Logger: log.New(logs, "", 0), DirCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Logger = log.New(logs, "", 0)
	root, _ := NewRemote(store, "d", opts)
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	sec, entry := time.Second, entryTimeout
	neg := time.Duration(0)
	server, err := gofs.Mount(mnt, root, &gofs.Options{
		MountOptions:    fuse.MountOptions{DirectMount: true, DisableSplice: true, MaxBackground: 64},
		AttrTimeout:     &sec,
		EntryTimeout:    &entry,
		NegativeTimeout: &neg,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := server.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	return mnt, logs
}

// entryTimeout is how long the kernel keeps a name's node in the tests of
// this file.
const entryTimeout = 2 * time.Second

// version is 1 MiB of s, a version of the object (fetched whole at open).
func version(s string) []byte { return bytes.Repeat([]byte(s), 1<<16) }

// TestRemoteReplacedNewNode: an open by path of a replaced object gets
// the new version, and a handle of the old one keeps reading the old
// bytes, from its page cache and from the daemon.
func TestRemoteReplacedNewNode(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	srv := fakes3.New("bkt")
	defer srv.Close()
	p := newHookProxy(srv)
	defer p.hs.Close()
	v1, v2 := version("1111111111111111"), version("2222222222222222")
	srv.Put("d/k.bin", v1)
	mnt, logs := mountHooked(t, p)
	path := filepath.Join(mnt, "k.bin")
	f1, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f1.Close()
	if got, _ := io.ReadAll(f1); !bytes.Equal(got, v1) {
		t.Fatal("v1")
	}
	srv.Put("d/k.bin", v2)
	f2, err := os.Open(path)
	if err != nil {
		t.Fatalf("open after replace: %v", err)
	}
	defer f2.Close()
	if got, err := io.ReadAll(f2); err != nil || !bytes.Equal(got, v2) {
		t.Fatalf("f2: %v", err)
	}
	b := make([]byte, 4096)
	if _, err := f1.ReadAt(b, 8192); err != nil || !bytes.Equal(b, v1[8192:8192+4096]) {
		t.Errorf("f1 (page cache) after replace: %v", err)
	}
	unix.Fadvise(int(f1.Fd()), 0, 0, unix.FADV_DONTNEED)
	if _, err := f1.ReadAt(b, 8192); err != nil || !bytes.Equal(b, v1[8192:8192+4096]) {
		t.Errorf("f1 after the replace, from the daemon: %v, old bytes %v", err, bytes.Equal(b, v1[8192:8192+4096]))
	}
	if strings.Contains(logs.String(), "replaced since") {
		t.Errorf("the old version's handle was failed, not given a node of its own:\n%s", logs.String())
	}
}

// TestRemoteReplacedTwiceNoEstale: an object is replaced twice in quick
// succession while another process opens the middle version: the
// kernel's one retry after ESTALE reaches the middle version's node, and
// the object has changed again. That open must not fail with ESTALE (it
// did: the retry met ESTALE again).
func TestRemoteReplacedTwiceNoEstale(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	srv := fakes3.New("bkt")
	defer srv.Close()
	p := newHookProxy(srv)
	defer p.hs.Close()
	v1, v2, v3 := version("1111111111111111"), version("2222222222222222"), version("3333333333333333")
	srv.Put("d/k.bin", v1)
	mnt, _ := mountHooked(t, p)
	path := filepath.Join(mnt, "k.bin")

	// A reader holds the first version open (node N1, its entry fresh
	// for 1 s).
	t0 := time.Now()
	f1, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f1.Close()
	io.ReadAll(f1)

	// The object is replaced; R starts opening it: its path walk finds
	// N1, its OPEN's HEAD is held by the proxy.
	srv.Put("d/k.bin", v2)
	hold, held := make(chan struct{}), make(chan struct{})
	p.mu.Lock()
	p.holdHead, p.headHeld = hold, held
	p.mu.Unlock()
	type res struct {
		f   *os.File
		err error
	}
	rc := make(chan res, 1)
	go func() {
		f, err := os.Open(path)
		rc <- res{f, err}
	}()
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("R's HEAD never came")
	}
	if time.Since(t0) > entryTimeout-200*time.Millisecond {
		close(hold)
		t.Fatalf("R's open took %v to reach its HEAD: its name may have been looked up again, the scenario is lost", time.Since(t0))
	}
	// Q opens it once the entry has expired: a LOOKUP gives node N2 of
	// the second version, which Q opens.
	time.Sleep(time.Until(t0.Add(entryTimeout + 200*time.Millisecond)))
	f2, err := os.Open(path)
	if err != nil {
		close(hold)
		t.Fatalf("Q: %v", err)
	}
	defer f2.Close()
	// The object is replaced again right after the LIST of R's retry.
	p.mu.Lock()
	p.afterList = func() { srv.Put("d/k.bin", v3) }
	p.mu.Unlock()
	close(hold) // R's first HEAD answers the second version: ESTALE, retry
	r := <-rc
	if r.f != nil {
		r.f.Close()
	}
	if r.err != nil {
		t.Errorf("R: open of an object replaced twice: %v (HEADs %d, LISTs %d)", r.err, p.heads.Load(), p.lists.Load())
	}
	// A fresh open works.
	f3, err := os.Open(path)
	if err != nil {
		t.Fatalf("open again: %v", err)
	}
	defer f3.Close()
	if got, _ := io.ReadAll(f3); !bytes.Equal(got, v3) {
		t.Errorf("f3 not v3")
	}
}

// TestRemoteReplacedBackAndForth: versions A, B, A, B of an object in
// quick succession (the same bytes give the same ETag, so A's node
// serves A again): every open gets its version, and the first handle of A
// keeps reading A.
func TestRemoteReplacedBackAndForth(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	srv := fakes3.New("bkt")
	defer srv.Close()
	p := newHookProxy(srv)
	defer p.hs.Close()
	va, vb := version("aaaaaaaaaaaaaaaa"), version("bbbbbbbbbbbbbbbb")
	srv.Put("d/k.bin", va)
	mnt, logs := mountHooked(t, p)
	path := filepath.Join(mnt, "k.bin")
	open := func(want []byte, what string) *os.File {
		f, err := os.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got, err := io.ReadAll(f); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %v", what, err)
		}
		return f
	}
	fa := open(va, "A")
	defer fa.Close()
	srv.Put("d/k.bin", vb)
	fb := open(vb, "B")
	defer fb.Close()
	srv.Put("d/k.bin", va)
	fa2 := open(va, "A again")
	defer fa2.Close()
	srv.Put("d/k.bin", vb)
	fb2 := open(vb, "B again")
	defer fb2.Close()
	b := make([]byte, 4096)
	unix.Fadvise(int(fa.Fd()), 0, 0, unix.FADV_DONTNEED)
	if _, err := fa.ReadAt(b, 8192); err != nil || !bytes.Equal(b, va[8192:8192+4096]) {
		t.Errorf("A's first handle, after B was opened again: %v\n%s", err, logs.String())
	}
}

// TestRemoteReplacedConcurrentOpens: eight opens by path at once right
// after a replacement, while a handle of the old version is open: each
// gets the new version (none ESTALE: each was answered ESTALE at most
// once), and the old handle keeps reading the old bytes.
func TestRemoteReplacedConcurrentOpens(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	srv := fakes3.New("bkt")
	defer srv.Close()
	p := newHookProxy(srv)
	defer p.hs.Close()
	v1, v2 := version("1111111111111111"), version("2222222222222222")
	srv.Put("d/k.bin", v1)
	mnt, logs := mountHooked(t, p)
	path := filepath.Join(mnt, "k.bin")
	f1, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f1.Close()
	io.ReadAll(f1)
	srv.Put("d/k.bin", v2)
	var wg sync.WaitGroup
	var estale atomic.Int64
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.Open(path)
			if err != nil {
				if errors.Is(err, syscall.ESTALE) {
					estale.Add(1)
				}
				t.Errorf("open: %v", err)
				return
			}
			defer f.Close()
			if got, err := io.ReadAll(f); err != nil || !bytes.Equal(got, v2) {
				t.Errorf("new handle: %v", err)
			}
		}()
	}
	wg.Wait()
	b := make([]byte, 4096)
	unix.Fadvise(int(f1.Fd()), 0, 0, unix.FADV_DONTNEED)
	if _, err = f1.ReadAt(b, 8192); err != nil || !bytes.Equal(b, v1[8192:8192+4096]) {
		t.Errorf("old handle after the concurrent opens: %v (%d opens got ESTALE)\n%s", err, estale.Load(), logs.String())
	}
}
