package zarr

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"syscall"
)

// Errors of the package, wrapped with context (store key, what is wrong);
// test with errors.Is.
var (
	// ErrNotExist reports an object that is not in the store. A chunk that
	// does not exist holds the array's fill value.
	ErrNotExist = errors.New("the Zarr object does not exist")
	// ErrFormat reports metadata that is not valid Zarr.
	ErrFormat = errors.New("invalid Zarr metadata")
	// ErrUnsupported reports a valid feature this package does not read
	// (a codec, a data type, a chunk grid).
	ErrUnsupported = errors.New("not supported")
	// ErrCorrupt reports a chunk or shard that does not decode to what
	// the metadata promise.
	ErrCorrupt = errors.New("corrupt Zarr chunk")
	// ErrChecksum reports a crc32c mismatch.
	ErrChecksum = errors.New("checksum mismatch")
)

// Store reads the objects of a Zarr store by key ("a/b/.zarray",
// "a/b/c/0/1"). Keys are relative, '/'-separated and never hold "." or
// ".." components (see ValidKey). A Store must be safe for concurrent use.
type Store interface {
	// Get returns the whole object, or an error wrapping ErrNotExist.
	Get(key string) ([]byte, error)
	// GetRange returns n bytes at offset off of the object; with off < 0
	// it returns the last n bytes. A range past the object's end is an
	// error (io.ErrUnexpectedEOF); a missing object wraps ErrNotExist.
	GetRange(key string, off, n int64) ([]byte, error)
}

// ReaderAtStore is implemented by stores that read part of an object
// into the caller's memory. A Blosc chunk read through it costs its
// header and the streams of the blocks a read touches, in pooled
// buffers, rather than the whole object in fresh memory.
type ReaderAtStore interface {
	// ObjectReader returns a reader of the object and its size, or an
	// error wrapping ErrNotExist. The reader reads the version of the
	// object that the call found, or fails (DirStore: ErrChanged); it
	// holds nothing that the caller must release.
	ObjectReader(key string) (io.ReaderAt, int64, error)
}

// Lister is implemented by stores that can list the entries directly
// under a prefix (used to find the arrays of a group without consolidated
// metadata). Names are returned without the prefix; directories end in "/".
type Lister interface {
	List(prefix string) ([]string, error)
}

// ValidKey reports whether key is a relative '/'-separated key whose
// components are neither empty, ".", nor "..", and hold no NUL or
// backslash: such a key cannot name a path outside its store.
func ValidKey(key string) bool {
	if key == "" || len(key) > 4096 {
		return false
	}
	for _, c := range strings.Split(key, "/") {
		if c == "" || c == "." || c == ".." || strings.ContainsAny(c, "\x00\\") {
			return false
		}
	}
	return true
}

// JoinKey joins a prefix and a key with '/'; an empty prefix is the root.
func JoinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	if key == "" {
		return prefix
	}
	return prefix + "/" + key
}

// DirStore is a Store over a local directory. It opens objects through an
// os.Root, so that neither a key nor a symbolic link inside the store can
// reach a file outside it; on Linux, chunk files are opened with
// openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), falling back to the
// os.Root for a key that meets a symbolic link. The files of the chunks
// it reads are kept open (see keptPerStore).
type DirStore struct {
	root *os.Root
	dir  syscall.RawConn // the store's directory, for openat2 and fstatat
	dirf *os.File
	kept *keptFiles
}

// OpenDirStore opens the directory dir as a store.
func OpenDirStore(dir string) (*DirStore, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	d, err := r.Open(".")
	if err != nil {
		r.Close()
		return nil, err
	}
	rc, err := d.SyscallConn()
	if err != nil {
		d.Close()
		r.Close()
		return nil, err
	}
	s := &DirStore{root: r, dir: rc, dirf: d, kept: new(keptFiles)}
	// A store dropped without Close closes its kept files when collected
	// (its os.Root and directory close themselves).
	runtime.AddCleanup(s, (*keptFiles).close, s.kept)
	return s, nil
}

// Close releases the directory and the files the store keeps open (a
// read in flight keeps its file until it ends).
func (s *DirStore) Close() error {
	s.kept.close()
	s.dirf.Close()
	return s.root.Close()
}

func (s *DirStore) open(key string) (*os.File, int64, error) {
	if !ValidKey(key) {
		return nil, 0, fmt.Errorf("zarr: key %q: %w (not a relative key inside the store)", key, ErrFormat)
	}
	f, err := s.root.Open(key)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, fmt.Errorf("%s: %w", key, ErrNotExist)
		}
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s: %w (not a regular file)", key, ErrNotExist)
	}
	return f, st.Size(), nil
}

// Get reads a whole object.
func (s *DirStore) Get(key string) ([]byte, error) {
	f, size, err := s.open(key)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > MaxObject {
		return nil, fmt.Errorf("%s: %w: object of %d bytes exceeds %d", key, ErrCorrupt, size, int64(MaxObject))
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return b, nil
}

// GetRange reads part of an object.
func (s *DirStore) GetRange(key string, off, n int64) ([]byte, error) {
	f, size, err := s.open(key)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if off < 0 {
		off = size - n
	}
	if n < 0 || n > MaxObject || off < 0 || off > size-n {
		return nil, fmt.Errorf("%s: range [%d,+%d) of a %d-byte object: %w", key, off, n, size, io.ErrUnexpectedEOF)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return b, nil
}

// ObjectReader returns a reader of a stored object and its size. The
// reader reads the version of the file found now, through a kept open
// file: once that file is no longer kept, a read that finds another
// version under the name fails with ErrChanged.
func (s *DirStore) ObjectReader(key string) (io.ReaderAt, int64, error) {
	if !ValidKey(key) {
		return nil, 0, fmt.Errorf("zarr: key %q: %w (not a relative key inside the store)", key, ErrFormat)
	}
	k, err := s.file(key, nil)
	if err != nil {
		return nil, 0, err
	}
	id := k.id
	s.kept.release(k)
	return &dirObject{s: s, key: key, id: id}, id.size, nil
}

// openRoot opens key through the store's os.Root (which follows symbolic
// links that stay inside the store) and returns a descriptor of its own,
// without closing the os.Root's.
func (s *DirStore) openRoot(key string) (int, error) {
	f, err := s.root.OpenFile(key, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return -1, fmt.Errorf("%s: %w", key, ErrNotExist)
		}
		return -1, err
	}
	defer f.Close()
	return dupFD(f)
}

// List lists the entries of a directory of the store.
func (s *DirStore) List(prefix string) ([]string, error) {
	dir := "."
	if prefix != "" {
		if !ValidKey(prefix) {
			return nil, fmt.Errorf("zarr: key %q: %w", prefix, ErrFormat)
		}
		dir = prefix
	}
	f, err := s.root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			name += "/"
		}
		out = append(out, name)
	}
	return out, nil
}

// MaxObject bounds the size of one object (a chunk, a shard's inner chunk,
// a metadata document) read into memory.
const MaxObject = 1 << 30
