package fs

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit/fakes3"
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
func mountHooked(t *testing.T, p *hookProxy) (string, *syncBuffer, gofs.InodeEmbedder) {
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
	server, err := serve(mnt, root, &gofs.Options{
		MountOptions:    fuse.MountOptions{DirectMount: true, DisableSplice: true, MaxBackground: 64},
		AttrTimeout:     &sec,
		EntryTimeout:    &entry,
		NegativeTimeout: &neg,
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	unmountAtEnd(t, server, mnt)
	return mnt, logs, root
}

// replaceScene is an object d/k.bin in a fake bucket, mounted through a
// hookProxy, and a handle f1 that has read its first version whole.
type replaceScene struct {
	srv  *fakes3.Server
	p    *hookProxy
	path string // of the object in the mount
	logs *syncBuffer
	root gofs.InodeEmbedder
	f1   *os.File
	// lookedUp is when f1's open began: the kernel keeps the name's node
	// for entryTimeout from about then.
	lookedUp time.Time
}

func newReplaceScene(t *testing.T, v1 []byte) *replaceScene {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	sc := &replaceScene{srv: fakes3.New("bkt")}
	t.Cleanup(sc.srv.Close)
	sc.p = newHookProxy(sc.srv)
	t.Cleanup(sc.p.hs.Close)
	sc.srv.Put("d/k.bin", v1)
	mnt, logs, root := mountHooked(t, sc.p)
	sc.path, sc.logs, sc.root = filepath.Join(mnt, "k.bin"), logs, root
	sc.lookedUp = time.Now()
	sc.f1 = sc.open(t, v1, "first version")
	return sc
}

// open opens the object by path, reads it whole, checks it is want, and
// closes it at the end of the test (before the unmount).
func (sc *replaceScene) open(t *testing.T, want []byte, what string) *os.File {
	t.Helper()
	f, err := os.Open(sc.path)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() { f.Close() })
	if got, err := io.ReadAll(f); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s: %v, right bytes %v", what, err, bytes.Equal(got, want))
	}
	return f
}

// readsOld checks that f, its page cache dropped, reads old at 8192.
func readsOld(t *testing.T, f *os.File, old []byte, what string, logs *syncBuffer) {
	t.Helper()
	b := make([]byte, 4096)
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	if _, err := f.ReadAt(b, 8192); err != nil || !bytes.Equal(b, old[8192:8192+4096]) {
		t.Errorf("%s, from the daemon: %v, old bytes %v\n%s", what, err, bytes.Equal(b, old[8192:8192+4096]), logs.String())
	}
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
	v1, v2 := version("1111111111111111"), version("2222222222222222")
	sc := newReplaceScene(t, v1)
	sc.srv.Put("d/k.bin", v2)
	sc.open(t, v2, "the new version")
	b := make([]byte, 4096)
	if _, err := sc.f1.ReadAt(b, 8192); err != nil || !bytes.Equal(b, v1[8192:8192+4096]) {
		t.Errorf("f1 (page cache) after the replace: %v", err)
	}
	readsOld(t, sc.f1, v1, "f1 after the replace", sc.logs)
	if strings.Contains(sc.logs.String(), "replaced since") {
		t.Errorf("the old version's handle was failed, not given a node of its own:\n%s", sc.logs.String())
	}
}

// TestRemoteReplacedTwiceNoEstale: an object is replaced twice in quick
// succession while another process opens the middle version: the
// kernel's one retry after ESTALE reaches the middle version's node, and
// the object has changed again. That open must not fail with ESTALE (it
// did: the retry met ESTALE again).
func TestRemoteReplacedTwiceNoEstale(t *testing.T) {
	v1, v2, v3 := version("1111111111111111"), version("2222222222222222"), version("3333333333333333")
	// A reader holds the first version open (node N1, its entry fresh
	// for entryTimeout).
	sc := newReplaceScene(t, v1)
	srv, p, path, t0 := sc.srv, sc.p, sc.path, sc.lookedUp

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
	va, vb := version("aaaaaaaaaaaaaaaa"), version("bbbbbbbbbbbbbbbb")
	sc := newReplaceScene(t, va)
	sc.srv.Put("d/k.bin", vb)
	sc.open(t, vb, "B")
	sc.srv.Put("d/k.bin", va)
	sc.open(t, va, "A again")
	sc.srv.Put("d/k.bin", vb)
	sc.open(t, vb, "B again")
	readsOld(t, sc.f1, va, "A's first handle, after B was opened again", sc.logs)
}

// TestRemoteReplacedConcurrentOpens: eight opens by path at once right
// after a replacement, while a handle of the old version is open: each
// gets the new version (none ESTALE: each was answered ESTALE at most
// once), and the old handle keeps reading the old bytes.
func TestRemoteReplacedConcurrentOpens(t *testing.T) {
	v1, v2 := version("1111111111111111"), version("2222222222222222")
	sc := newReplaceScene(t, v1)
	sc.srv.Put("d/k.bin", v2)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			f, err := os.Open(sc.path)
			if err != nil {
				t.Errorf("open of the new version: %v", err)
				return
			}
			defer f.Close()
			if got, err := io.ReadAll(f); err != nil || !bytes.Equal(got, v2) {
				t.Errorf("new handle: %v", err)
			}
		})
	}
	wg.Wait()
	readsOld(t, sc.f1, v1, "old handle after the concurrent opens", sc.logs)
}
