package zarr

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/pack"
	"golang.org/x/sys/unix"
)

// keptStore writes files (name → content) into a new directory and opens
// it as a store, closed at the end of the test.
func keptStore(t *testing.T, files map[string]string) (*DirStore, string) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := OpenDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// readAll reads an object through r.
func readAll(t *testing.T, r io.ReaderAt, size int64) []byte {
	t.Helper()
	b := make([]byte, size)
	if _, err := r.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return b
}

// replace writes body to a new file and renames it over dir/name.
func replace(t *testing.T, dir, name, body string) {
	t.Helper()
	tmp := filepath.Join(dir, name+".new")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// fdOpen reports whether fd is an open descriptor.
func fdOpen(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return !errors.Is(err, syscall.EBADF)
}

// TestKeptFiles: a chunk file read again is read through the file kept
// open; a file replaced or rewritten is opened anew for a new reader,
// and a reader of its old version gets ErrChanged once the old file is
// no longer kept, never bytes of the new one; a read in flight keeps its
// file until it ends; a closed store keeps nothing.
func TestKeptFiles(t *testing.T) {
	t.Run("reused", func(t *testing.T) {
		s, _ := keptStore(t, map[string]string{"0": "chunk zero", "a/1": "chunk one"})
		for _, key := range []string{"0", "a/1"} {
			r1, n, err := s.ObjectReader(key)
			if err != nil {
				t.Fatal(err)
			}
			k := s.kept.files[key]
			r2, _, err := s.ObjectReader(key)
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, r1, n); string(got) != map[string]string{"0": "chunk zero", "a/1": "chunk one"}[key] {
				t.Fatalf("%s: read %q", key, got)
			}
			readAll(t, r2, n)
			if s.kept.files[key] != k {
				t.Fatalf("%s: the kept file was not reused", key)
			}
		}
		if s.kept.len() != 2 {
			t.Fatalf("%d files kept, want 2", s.kept.len())
		}
	})
	for _, how := range []string{"renamed over", "rewritten in place"} {
		t.Run(how, func(t *testing.T) {
			s, dir := keptStore(t, map[string]string{"0": "old version"})
			old, n, err := s.ObjectReader("0")
			if err != nil {
				t.Fatal(err)
			}
			if how == "renamed over" {
				replace(t, dir, "0", "the new version")
			} else if err := os.WriteFile(filepath.Join(dir, "0"), []byte("the new version"), 0o644); err != nil {
				t.Fatal(err)
			}
			r, m, err := s.ObjectReader("0")
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, r, m); string(got) != "the new version" {
				t.Fatalf("a new reader reads %q", got)
			}
			if _, err := old.ReadAt(make([]byte, n), 0); !errors.Is(err, ErrChanged) {
				t.Fatalf("a reader of the old version: %v, want ErrChanged", err)
			}
		})
	}
	t.Run("replaced while a read is in flight", func(t *testing.T) {
		s, dir := keptStore(t, map[string]string{"0": "old version"})
		old, n, err := s.ObjectReader("0")
		if err != nil {
			t.Fatal(err)
		}
		hr, release, err := old.(*dirObject).Hold()
		if err != nil {
			t.Fatal(err)
		}
		k := s.kept.files["0"]
		replace(t, dir, "0", "the new version")
		if _, _, err := s.ObjectReader("0"); err != nil {
			t.Fatal(err)
		}
		if !k.gone || !fdOpen(k.fd) {
			t.Fatal("the old file was closed while a read held it")
		}
		if got := readAll(t, hr, n); string(got) != "old version" {
			t.Fatalf("the read in flight reads %q", got)
		}
		release()
		if fdOpen(k.fd) {
			t.Fatal("the old file stays open after its last read")
		}
		if _, err := old.ReadAt(make([]byte, n), 0); !errors.Is(err, ErrChanged) {
			t.Fatalf("the old version's reader: %v, want ErrChanged", err)
		}
	})
	t.Run("closed store", func(t *testing.T) {
		before := keptTotal.Load()
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "0"), []byte("chunk"), 0o644)
		s, err := OpenDirStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		r, n, err := s.ObjectReader("0")
		if err != nil {
			t.Fatal(err)
		}
		hr, release, err := r.(*dirObject).Hold()
		if err != nil {
			t.Fatal(err)
		}
		k := s.kept.files["0"]
		s.Close()
		if got := readAll(t, hr, n); string(got) != "chunk" {
			t.Fatalf("a read in flight across Close reads %q", got)
		}
		release()
		if fdOpen(k.fd) || s.kept.len() != 0 || keptTotal.Load() != before {
			t.Fatalf("after Close: fd open %v, %d kept, %d in the process (was %d)", fdOpen(k.fd), s.kept.len(), keptTotal.Load(), before)
		}
		if _, _, err := s.ObjectReader("0"); err == nil {
			t.Fatal("ObjectReader of a closed store succeeds")
		}
		if _, err := r.ReadAt(make([]byte, n), 0); err == nil {
			t.Fatal("a read of a closed store succeeds")
		}
	})
	t.Run("limits", func(t *testing.T) {
		files := map[string]string{}
		for i := range keptPerStore + 20 {
			files[fmt.Sprint(i)] = fmt.Sprint("chunk ", i)
		}
		s, _ := keptStore(t, files)
		var rs []io.ReaderAt
		for i := range keptPerStore + 20 {
			r, _, err := s.ObjectReader(fmt.Sprint(i))
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
		if s.kept.len() != keptPerStore {
			t.Fatalf("%d files kept, want %d", s.kept.len(), keptPerStore)
		}
		for i, r := range rs { // those no longer kept are opened again
			want := fmt.Sprint("chunk ", i)
			if got := readAll(t, r, int64(len(want))); string(got) != want {
				t.Fatalf("chunk %d reads %q", i, got)
			}
		}
		// The process's limit holds over stores.
		defer func(f func() int64) { keptLimit = f }(keptLimit)
		limit := keptTotal.Load() - int64(s.kept.len()) + 5
		keptLimit = func() int64 { return limit }
		s2, _ := keptStore(t, files)
		for i := range 30 {
			for _, st := range []*DirStore{s, s2} {
				r, n, err := st.ObjectReader(fmt.Sprint(i))
				if err != nil {
					t.Fatal(err)
				}
				if got := readAll(t, r, n); string(got) != fmt.Sprint("chunk ", i) {
					t.Fatalf("chunk %d reads %q", i, got)
				}
				if keptTotal.Load() > limit {
					t.Fatalf("%d files kept in the process, limit %d", keptTotal.Load(), limit)
				}
			}
		}
	})
}

// TestDirStoreSymlinks: a chunk key can never reach a file outside the
// store, through a link to a file or to a directory, while a link that
// stays inside the store is read; a FIFO is not opened for reading.
func TestDirStoreSymlinks(t *testing.T) {
	top := t.TempDir()
	outside := filepath.Join(top, "outside")
	os.Mkdir(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret bytes"), 0o644)
	dir := filepath.Join(top, "store")
	os.Mkdir(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "real"), []byte("real chunk"), 0o644)
	os.Symlink("../outside/secret", filepath.Join(dir, "0"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "1"))
	os.Symlink("../outside", filepath.Join(dir, "c"))
	os.Symlink("real", filepath.Join(dir, "2"))
	if err := unix.Mkfifo(filepath.Join(dir, "3"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		key  string
		want string // "" for refused
	}{
		{"0", ""}, {"1", ""}, {"c/secret", ""}, {"2", "real chunk"}, {"real", "real chunk"}, {"3", ""},
	} {
		r, n, err := s.ObjectReader(tc.key)
		if tc.want == "" {
			if err == nil {
				got := readAll(t, r, n)
				t.Fatalf("%s: read %q through a key that leaves the store", tc.key, got)
			}
			if bytes.Contains([]byte(err.Error()), []byte("secret bytes")) {
				t.Fatal(err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.key, err)
		}
		if got := readAll(t, r, n); string(got) != tc.want {
			t.Fatalf("%s: read %q, want %q", tc.key, got, tc.want)
		}
	}
	if _, err := s.openBeneath("c/secret"); err == nil {
		t.Fatal("openBeneath opened a file outside the store")
	}
}

// TestKeptFilesConcurrent reads files that are being replaced, from
// several goroutines, through stores whose kept files churn: every read
// of one reader gives the bytes of one version of its file, or
// ErrChanged.
func TestKeptFilesConcurrent(t *testing.T) {
	const nfiles, size = 80, 4096
	files := map[string]string{}
	for i := range nfiles {
		files[fmt.Sprint(i)] = string(bytes.Repeat([]byte{0}, size))
	}
	s, dir := keptStore(t, files)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := 1; ; v++ {
			select {
			case <-stop:
				return
			default:
			}
			name := filepath.Join(dir, fmt.Sprint(v%nfiles))
			if err := os.WriteFile(name+".new", bytes.Repeat([]byte{byte(v)}, size), 0o644); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(name+".new", name); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var readers sync.WaitGroup
	for g := range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := range 400 {
				key := fmt.Sprint((i*7 + g) % nfiles)
				r, n, err := s.ObjectReader(key)
				if err != nil {
					t.Error(err)
					return
				}
				a, b := make([]byte, n/2), make([]byte, n-n/2)
				_, ea := r.ReadAt(a, 0)
				_, eb := r.ReadAt(b, n/2)
				if errors.Is(ea, ErrChanged) || errors.Is(eb, ErrChanged) {
					continue
				}
				if ea != nil || eb != nil {
					t.Error(ea, eb)
					return
				}
				if !bytes.Equal(a, bytes.Repeat(a[:1], len(a))) || !bytes.Equal(b, bytes.Repeat(a[:1], len(b))) {
					t.Errorf("%s: one reader read bytes of two versions", key)
					return
				}
			}
		}()
	}
	readers.Wait()
	close(stop)
	wg.Wait()
}

// TestKeptFilesCollected: a store dropped without Close gives its kept
// files back when it is collected.
func TestKeptFilesCollected(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "0"), []byte("chunk"), 0o644)
	before := keptTotal.Load()
	func() {
		s, err := OpenDirStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		r, n, err := s.ObjectReader("0")
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, r, n)
	}()
	if !testkit.Eventually(t, 5*time.Second, func() bool { runtime.GC(); return keptTotal.Load() == before }) {
		t.Fatalf("%d files kept after the store was collected, want %d", keptTotal.Load(), before)
	}
}

// TestReplacedChunkFile reads an array whose chunk file is replaced
// while the array is open: a read of the old version's parsed chunk
// through a file no longer kept fails with ErrChanged, and the next read
// parses the new file and gives its bytes.
func TestReplacedChunkFile(t *testing.T) {
	const n = 1 << 16 // float64 elements per chunk
	dir := t.TempDir()
	meta := fmt.Sprintf(`{"zarr_format":2,"shape":[%d],"chunks":[%d],"dtype":"<f8","compressor":{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1,"blocksize":0},"fill_value":0.0,"order":"C","filters":null}`, 2*n, n)
	os.WriteFile(filepath.Join(dir, ".zarray"), []byte(meta), 0o644)
	chunk := func(v byte) []byte {
		plain := bytes.Repeat([]byte{v, 1, 2, 3, 4, 5, 6, 7}, n)
		p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Blosc1: true}
		p.Filters[5] = blosc.FilterShuffle
		c, err := blosc.Compress(nil, plain, p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for i := range 2 {
		os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), chunk(10), 0o644)
	}
	s, err := OpenDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := Open(s, "", cache.New[pack.BlockKey](64<<20))
	if err != nil {
		t.Fatal(err)
	}
	hdr := int64(len(a.Header()))
	p := make([]byte, 8)
	if _, err := a.ReadAt(p, hdr+8*n+8); err != nil || p[0] != 10 {
		t.Fatalf("chunk 1 reads %v, %v", p, err)
	}
	tmp := filepath.Join(dir, "1.new")
	os.WriteFile(tmp, chunk(20), 0o644)
	os.Rename(tmp, filepath.Join(dir, "1"))
	if _, _, err := s.ObjectReader("1"); err != nil { // the old file is no longer kept
		t.Fatal(err)
	}
	_, err = a.ReadAt(p, hdr+8*n+4096)
	if !errors.Is(err, ErrChanged) || !errors.Is(err, pack.ErrStale) {
		t.Fatalf("a read of the replaced chunk: %v, want ErrChanged", err)
	}
	if _, err := a.ReadAt(p, hdr+8*n+4096); err != nil || p[0] != 20 {
		t.Fatalf("the next read of the replaced chunk: %v, %v; want the new bytes", p, err)
	}
	if _, err := a.ReadAt(p, hdr+8*n+8); err != nil || p[0] != 20 {
		t.Fatalf("a read of the replaced chunk's block read before: %v, %v; want the new bytes", p, err)
	}
}
