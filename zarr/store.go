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
	// ErrTooLarge reports an object larger than its reader allows (a
	// metadata document past MaxMetaSize, a chunk past the largest
	// encoding of its plain size). It is refused without being read.
	ErrTooLarge = errors.New("object too large")
)

// Store reads the objects of a Zarr store by key ("a/b/.zarray",
// "a/b/c/0/1"). Keys are relative, '/'-separated and never hold "." or
// ".." components (see ValidKey). A Store must be safe for concurrent use,
// and must never block on an object that is not a regular file or object
// (a FIFO, a device): such an object does not exist for it.
type Store interface {
	// Get returns the whole object, or an error wrapping ErrNotExist.
	// An object of more than limit bytes is refused with an error
	// wrapping ErrTooLarge, before more than limit+1 of its bytes are
	// read (none, where the store knows its size beforehand): the
	// caller's limit, not the object, decides what Get may allocate.
	Get(key string, limit int64) ([]byte, error)
	// GetRange returns n bytes at offset off of the object; with off < 0
	// it returns the last n bytes. A range past the object's end is an
	// error (io.ErrUnexpectedEOF); a missing object wraps ErrNotExist.
	GetRange(key string, off, n int64) ([]byte, error)
}

// Versioner is implemented by stores that can tell which version of an
// object a key names, without reading it. The reader remembers shard
// indexes and chunks that failed to decode by version, so that an object
// replaced is read anew and an unchanged one is not.
type Versioner interface {
	// Version returns the version of the object key names now: for a
	// file, its device, inode, size and times (a stat); for an object
	// store, the version it reads (an ETag), or the zero Version when it
	// does not know one without a request. A missing object wraps
	// ErrNotExist.
	Version(key string) (Version, error)
}

// Version identifies one version of one stored object; it is comparable,
// and equal non-zero Versions name the same bytes. The zero Version is
// unknown: nothing is remembered for it.
type Version struct {
	file fileID // a file: device, inode, size, mtime, ctime
	tag  string // an object store: the object's name and ETag
}

// FileVersion returns the Version of a file by its device, inode, size
// and modification and change times (nanoseconds).
func FileVersion(dev, ino uint64, size, mtime, ctime int64) Version {
	return Version{file: fileID{dev: dev, ino: ino, size: size, mtime: mtime, ctime: ctime}}
}

// TagVersion returns the Version of an object named by tag, which must
// tell the object (its store and name) as well as its version (an ETag):
// Versions of different objects must differ. An empty tag is unknown.
func TagVersion(tag string) Version { return Version{tag: tag} }

// IsZero reports whether v is the unknown Version.
func (v Version) IsZero() bool { return v == Version{} }

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

// openReg opens key, a regular file beneath the store's directory,
// without blocking (O_NONBLOCK: a FIFO or device is never waited on,
// and is ErrNotExist, see openFile).
func (s *DirStore) openReg(key string) (int, fileID, error) {
	if !ValidKey(key) {
		return -1, fileID{}, fmt.Errorf("zarr: key %q: %w (not a relative key inside the store)", key, ErrFormat)
	}
	return s.openFile(key)
}

// Get reads a whole object of at most limit bytes.
func (s *DirStore) Get(key string, limit int64) ([]byte, error) {
	fd, id, err := s.openReg(key)
	if err != nil {
		return nil, err
	}
	defer closeFDs([]int{fd})
	if id.size > min(limit, MaxObject) {
		return nil, fmt.Errorf("%s: %w: %d bytes, more than %d", key, ErrTooLarge, id.size, min(limit, MaxObject))
	}
	b := make([]byte, id.size)
	if n, err := preadFull(fd, b, 0); err != nil {
		return nil, fmt.Errorf("%s: read %d of %d bytes: %w", key, n, len(b), err)
	}
	return b, nil
}

// GetRange reads part of an object.
func (s *DirStore) GetRange(key string, off, n int64) ([]byte, error) {
	fd, id, err := s.openReg(key)
	if err != nil {
		return nil, err
	}
	defer closeFDs([]int{fd})
	size := id.size
	if off < 0 {
		off = size - n
	}
	if n < 0 || n > MaxObject || off < 0 || off > size-n {
		return nil, fmt.Errorf("%s: range [%d,+%d) of a %d-byte object: %w", key, off, n, size, io.ErrUnexpectedEOF)
	}
	b := make([]byte, n)
	if _, err := preadFull(fd, b, off); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return b, nil
}

// Version returns the version of the file key names now (one stat).
func (s *DirStore) Version(key string) (Version, error) {
	if !ValidKey(key) {
		return Version{}, fmt.Errorf("zarr: key %q: %w (not a relative key inside the store)", key, ErrFormat)
	}
	id, err := s.statName(key)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Version{}, fmt.Errorf("%s: %w", key, ErrNotExist)
		}
		return Version{}, fmt.Errorf("%s: %w", key, err)
	}
	return Version{file: id}, nil
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
	f, err := s.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
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
