package remote_test

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit/fakes3"
	"github.com/bloscfs/bloscfs/remote"
)

// readRange opens key in s and reads 64 KiB at 4 KiB.
func readRange(s *remote.Store, key string) ([]byte, error) {
	o, err := s.Open(context.Background(), key)
	if err != nil {
		return nil, err
	}
	o.Opened()
	b := make([]byte, 64<<10)
	_, err = o.ReadAt(b, 4<<10)
	return b, err
}

// TestCacheDirRefused: an existing --cache-dir that another user owns,
// or that group or others can write, is refused with an error that says
// why (issue 33, point 14).
func TestCacheDirRefused(t *testing.T) {
	srv := fakes3.New("bkt")
	defer srv.Close()
	for _, c := range []struct {
		name string
		mode os.FileMode
		uid  int
		want string
	}{{"group-writable", 0o770, -1, "written by its group or others"}, {"world-writable", 0o1777, -1, "written by its group or others"}, {"other-owner", 0o700, 12345, "owned by uid 12345"}} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cache")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, c.mode); err != nil {
				t.Fatal(err)
			}
			if c.uid >= 0 {
				if os.Geteuid() != 0 {
					t.Skip("chown needs root")
				}
				if err := os.Chown(dir, c.uid, -1); err != nil {
					t.Fatal(err)
				}
			}
			_, err := remote.New(context.Background(), "bkt", remote.Config{Endpoint: srv.URL, Anonymous: true, CacheDir: dir, Logger: log.New(io.Discard, "", 0)})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("got %v, want an error naming %s that says %q", err, dir, c.want)
			}
		})
	}
	// A new directory is made private, and used.
	dir := filepath.Join(t.TempDir(), "new")
	newStore(t, srv.URL, "bkt", remote.Config{CacheDir: dir})
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("new cache dir: %v, %v", fi, err)
	}
}

// TestCacheDirEndpoint: two services holding the same bucket, key and
// ETag with different bytes share a cache directory: each store reads
// its own service's bytes (issue 33, point 14).
func TestCacheDirEndpoint(t *testing.T) {
	a, b := fakes3.New("bkt"), fakes3.New("bkt")
	defer a.Close()
	defer b.Close()
	da, db := bytes.Repeat([]byte{'a'}, 1<<20), bytes.Repeat([]byte{'b'}, 1<<20)
	a.PutETag("k", da, "same")
	b.PutETag("k", db, "same")
	dir := t.TempDir()
	cfg := remote.Config{CacheDir: dir, CacheDirSize: 16 << 20, ReadAheadMax: -1}
	if got, err := readRange(newStore(t, a.URL, "bkt", cfg), "k"); err != nil || !bytes.Equal(got, da[4<<10:4<<10+64<<10]) {
		t.Fatalf("service A: %v", err)
	}
	got, err := readRange(newStore(t, b.URL, "bkt", cfg), "k")
	if err != nil || !bytes.Equal(got, db[4<<10:4<<10+64<<10]) {
		t.Fatalf("service B read %q..., %v: service A's bytes from the shared cache dir", got[:4], err)
	}
}

// TestNoETag: an object served without an ETag is read without an
// empty If-Match (which matches no object) and never cached on disk,
// where nothing would tell its replacement from it (issue 33, point 14).
func TestNoETag(t *testing.T) {
	srv := fakes3.New("bkt")
	defer srv.Close()
	data := bytes.Repeat([]byte("0123456789"), 1<<17)
	srv.PutETag("k", data, "")
	dir := t.TempDir()
	cfg := remote.Config{CacheDir: dir, CacheDirSize: 16 << 20, ReadAheadMax: -1, RequestTimeout: 5 * time.Second}
	if got, err := readRange(newStore(t, srv.URL, "bkt", cfg), "k"); err != nil || !bytes.Equal(got, data[4<<10:4<<10+64<<10]) {
		t.Fatalf("read: %v", err)
	}
	if n := srv.EmptyIfMatch(); n != 0 {
		t.Errorf("%d requests with an empty If-Match", n)
	}
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Errorf("an object without an ETag was cached on disk: %q", files)
	}
}
