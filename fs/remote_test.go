package fs

import (
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

	"github.com/bloscfs/bloscfs/internal/fakes3"
	"github.com/bloscfs/bloscfs/internal/fixtures"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/remote"
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
	t.Cleanup(func() {
		if err := server.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
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
