package fs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit/fakes3"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/remote"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// TestRemoteInProcess mounts an in-process fake bucket holding the
// fixtures, through a proxy that fails a fifth of the requests, in this
// process (so that the race detector sees the remote tree), and reads
// every valid fixture with plain syscalls from several goroutines: bit-
// exact or EIO.
func TestRemoteInProcess(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	fxs, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	srv := fakes3.New("bkt")
	defer srv.Close()
	root := fixtures.Dir()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			b, _ := os.ReadFile(p)
			srv.Put("fx/"+filepath.ToSlash(rel), b)
		}
		return err
	})
	faults := fakes3.NewFaults(srv.URL, 0.2, 5)
	defer faults.Close()
	faults.Delay.Store(int64(time.Millisecond))
	logs := &syncBuffer{}
	logger := log.New(logs, "", 0)
	store, err := remote.New(context.Background(), "bkt", remote.Config{Endpoint: faults.URL, Anonymous: true, Logger: logger, Attempts: 6, CacheSize: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	opts := DefaultOptions()
	opts.Logger, opts.CacheSize = logger, 8<<20
	server, _, err := MountRemote(store, "fx", mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	unmountAtEnd(t, server, mnt)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, fx := range fxs {
				if i%4 != g || !fx.ValidPlain || fx.Kind == "b2nd" {
					continue
				}
				name := strings.TrimSuffix(fx.Name, "/")
				p := filepath.Join(mnt, name)
				if st, err := os.Stat(p); err != nil || st.Size() != fx.PlainSize {
					stem, _ := all.PlainName(name)
					p = filepath.Join(mnt, stem)
				}
				f, err := os.Open(p)
				if err != nil {
					if !errors.Is(err, syscall.EIO) {
						t.Errorf("%s: %v", fx.Name, err)
					}
					continue
				}
				h := sha256.New()
				_, err = io.Copy(h, f)
				f.Close()
				switch {
				case errors.Is(err, syscall.EIO):
				case err != nil:
					t.Errorf("%s: %v", fx.Name, err)
				case hex.EncodeToString(h.Sum(nil)) != fx.PlainSHA:
					t.Errorf("%s: wrong bytes", fx.Name)
				default:
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if ok < 50 {
		t.Errorf("only %d fixtures read:\n%s", ok, logs.String())
	}
	if _, err := os.Create(filepath.Join(mnt, "new")); !errors.Is(err, syscall.EROFS) {
		t.Errorf("create: %v, want EROFS", err)
	}
}

// TestRemoteReplacedSameNode: an open of a replaced object on the node of
// its old version answers ESTALE (the kernel then looks the name up
// again and gets a node of the new version); an open that comes back to
// the same node after a lookup all the same opens the new version there, without
// KEEP_CACHE, and the old version's handles get EIO from then on, even
// for bytes the daemon holds: they would go into the page cache the new
// handles read.
func TestRemoteReplacedSameNode(t *testing.T) {
	old := version("0123456789abcdef")
	repl := version("ZYXWVUTSRQPONMLK")
	sc := newReplaceScene(t, old)
	sc.srv.Put("d/k.bin", repl)
	ch := sc.root.EmbeddedInode().GetChild("k.bin")
	if ch == nil {
		t.Fatal("no node for k.bin")
	}
	n := ch.Operations().(*remoteFile)
	ctx := context.Background()
	if _, _, errno := n.Open(ctx, syscall.O_RDONLY); errno != syscall.ESTALE {
		t.Fatalf("first open of the replaced object on the old node: %v, want ESTALE", errno)
	}
	// The kernel's retry looks the name up again, and reaches this node
	// (as it would if the listing still showed the old version).
	n.r.staleMu.Lock()
	n.r.stale[n.StableAttr().Ino].lookups[n.StableAttr().Gen] = true
	n.r.staleMu.Unlock()
	fh, fl, errno := n.Open(ctx, syscall.O_RDONLY)
	if errno != 0 {
		t.Fatalf("open coming back to the old node: %v", errno)
	}
	h := fh.(*remoteHandle)
	defer h.Release(ctx)
	if fl&fuse.FOPEN_KEEP_CACHE != 0 {
		t.Errorf("the new version opened on the old node keeps the kernel's cached pages")
	}
	buf := make([]byte, 4096)
	rr, errno := h.Read(ctx, buf, 8192)
	if errno != 0 {
		t.Fatalf("new version: %v", errno)
	}
	if got, _ := rr.Bytes(buf); !bytes.Equal(got, repl[8192:8192+4096]) {
		t.Errorf("new version: wrong bytes")
	}
	// The old handle: its bytes are all in the daemon's range cache, and
	// still it gets EIO.
	unix.Fadvise(int(sc.f1.Fd()), 0, 0, unix.FADV_DONTNEED)
	if _, err := sc.f1.ReadAt(buf, 8192); !errors.Is(err, syscall.EIO) {
		t.Errorf("old handle after the new version was opened on its node: %v, want EIO", err)
	}
	if !strings.Contains(sc.logs.String(), "replaced since this handle opened it") {
		t.Errorf("no log line for the old handle's read:\n%s", sc.logs.String())
	}
}
