package zarr

import (
	"container/list"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/bloscfs/bloscfs/pack"
)

// ErrChanged reports that a chunk file is no longer the file a reader
// parsed: it was replaced or rewritten (its device, inode, size, mtime
// or ctime differ) while the parsed chunk was still in use. The read
// fails (EIO through a mount) rather than mix the bytes of two versions;
// it wraps pack.ErrStale, so that the array's reader parses the chunk
// anew for the next read.
var ErrChanged = fmt.Errorf("the Zarr object changed since it was opened: %w", pack.ErrStale)

// Kept files: a DirStore keeps the files of the chunks it read open, at
// most keptPerStore of them (the most recently used) and, over all the
// stores of the process, at most keptLimit(). A cold read of a chunk
// then opens its file once, for its header and the streams of the block
// it decodes, and a chunk read again (a block that a partial decode left
// out, a sequential reader after a random one) opens nothing.
const keptPerStore = 64

// keptTotal counts the files kept open by all stores.
var keptTotal atomic.Int64

// keptLimit is the process's bound on kept files: an eighth of its
// descriptor limit, at most 4096, so that kept files never take the
// descriptors that the mount needs for the files it serves.
var keptLimit = sync.OnceValue(func() int64 {
	return min(max(nofileLimit()/8, 0), 4096)
})

// fileID identifies one version of a file: a file replaced (another
// inode) or rewritten in place (its size, mtime or ctime) has another.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds
}

// keptFile is an open chunk file of a DirStore.
type keptFile struct {
	key  string
	fd   int
	id   fileID
	refs int           // readers using fd (guarded by the store's mu)
	gone bool          // out of the table: fd is closed when refs reaches 0
	elem *list.Element // in the store's lru, while kept
}

// keptFiles is the table of a DirStore's kept files.
type keptFiles struct {
	mu     sync.Mutex
	files  map[string]*keptFile
	lru    list.List // of *keptFile, the most recently used first
	closed bool
}

// get returns the kept file of key whose identity is id, pinned, or nil.
func (t *keptFiles) get(key string, id fileID) *keptFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.files[key]
	if k == nil || k.id != id {
		return nil
	}
	k.refs++
	t.lru.MoveToFront(k.elem)
	return k
}

// peek returns the identity of the kept file of key, if there is one.
func (t *keptFiles) peek(key string) (fileID, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k := t.files[key]; k != nil {
		return k.id, true
	}
	return fileID{}, false
}

// add keeps the newly opened fd of key, pinned, in place of any file kept
// for key, and drops the least recently used files past the limits. A
// file that cannot be kept (the store is closed, or the process keeps
// as many as it may) is returned pinned but not kept: its release closes
// it.
func (t *keptFiles) add(key string, fd int, id fileID) *keptFile {
	n := &keptFile{key: key, fd: fd, id: id, refs: 1, gone: true}
	var closing []int
	t.mu.Lock()
	if old := t.files[key]; old != nil {
		closing = t.dropLocked(old, closing)
	}
	for t.lru.Len() > 0 && (t.lru.Len() >= keptPerStore || keptTotal.Load() >= keptLimit()) {
		closing = t.dropLocked(t.lru.Back().Value.(*keptFile), closing)
	}
	if !t.closed && keptTotal.Load() < keptLimit() {
		if t.files == nil {
			t.files = make(map[string]*keptFile)
		}
		n.gone = false
		n.elem = t.lru.PushFront(n)
		t.files[key] = n
		keptTotal.Add(1)
	}
	t.mu.Unlock()
	closeFDs(closing)
	return n
}

// dropLocked takes k out of the table, adding its fd to closing when no
// reader uses it.
func (t *keptFiles) dropLocked(k *keptFile, closing []int) []int {
	t.lru.Remove(k.elem)
	delete(t.files, k.key)
	k.gone, k.elem = true, nil
	keptTotal.Add(-1)
	if k.refs == 0 {
		closing = append(closing, k.fd)
	}
	return closing
}

// release unpins k, closing its fd if it is no longer kept and no other
// reader uses it.
func (t *keptFiles) release(k *keptFile) {
	t.mu.Lock()
	k.refs--
	last := k.gone && k.refs == 0
	t.mu.Unlock()
	if last {
		closeFDs([]int{k.fd})
	}
}

// close closes the kept files (those in use when their readers release
// them) and keeps no more.
func (t *keptFiles) close() {
	var closing []int
	t.mu.Lock()
	t.closed = true
	for t.lru.Len() > 0 {
		closing = t.dropLocked(t.lru.Back().Value.(*keptFile), closing)
	}
	t.mu.Unlock()
	closeFDs(closing)
}

// len returns the number of kept files.
func (t *keptFiles) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Len()
}

// file returns the open file of key, pinned, whose identity is want, or
// with want nil the file the name resolves to now: a kept file when its
// identity is still that of the name (a stat by name), else a newly
// opened one, which is kept. A file opened for want that is not that
// version gives ErrChanged.
func (s *DirStore) file(key string, want *fileID) (*keptFile, error) {
	if want != nil {
		if k := s.kept.get(key, *want); k != nil {
			return k, nil
		}
	} else if id, ok := s.kept.peek(key); ok {
		if cur, err := s.statName(key); err == nil && cur == id {
			if k := s.kept.get(key, id); k != nil {
				return k, nil
			}
		}
	}
	fd, id, err := s.openFile(key)
	if err != nil {
		return nil, err
	}
	if want != nil && id != *want {
		closeFDs([]int{fd})
		return nil, fmt.Errorf("%s: %w", key, ErrChanged)
	}
	return s.kept.add(key, fd, id), nil
}

// dirObject reads one object of a DirStore: the version of its file that
// ObjectReader found.
type dirObject struct {
	s   *DirStore
	key string
	id  fileID
}

// ReadAt reads len(p) bytes at off of the object's file.
func (o *dirObject) ReadAt(p []byte, off int64) (int, error) {
	k, err := o.s.file(o.key, &o.id)
	if err != nil {
		return 0, err
	}
	defer o.s.kept.release(k)
	return keptReader{k}.ReadAt(p, off)
}

// Hold pins the object's open file for a burst of reads (a range decode
// reads a block's stream headers and the parts it needs, a dozen small
// reads): see blosc.Holder.
func (o *dirObject) Hold() (io.ReaderAt, func(), error) {
	k, err := o.s.file(o.key, &o.id)
	if err != nil {
		return nil, nil, err
	}
	return keptReader{k}, func() { o.s.kept.release(k) }, nil
}

// keptReader reads a pinned kept file.
type keptReader struct{ k *keptFile }

// ReadAt reads len(p) bytes at off of the file.
func (r keptReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := preadFull(r.k.fd, p, off)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%s: %w", r.k.key, err)
	}
	return n, err
}
