package remote

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// diskCache keeps fetched ranges in files under a directory, so that
// they survive remounts: one folder per object version (named by a hash
// of bucket, key and ETag, so that a replaced object never matches), one
// file per range (named start-length). The least recently used ranges go
// when the total passes the bound.
//
// Each file ends in a trailer: a magic and the CRC-32C of the folder's
// name, the range's start and length, and its bytes. A range is served
// only when its trailer checks out. Files are renamed into place without
// an fsync (a cache is not worth one per GET), so after a crash a file may
// have its full length and the wrong contents (XFS fills such files with
// zeros); a disk may rot, and a user may copy a cache directory about. A
// range that fails its check is dropped, logged and fetched again, as
// mountpoint-s3's disk cache does with its per-block checksums.
type diskCache struct {
	dir  string
	max  int64
	logf func(format string, args ...any) // a range that fails its check

	mu    sync.Mutex
	used  int64
	lru   *list.List // of *diskExtent, most recent first
	byObj map[string][]*diskExtent
}

type diskExtent struct {
	obj        string // folder name
	start, len int64  // the range (the file holds len + trailerLen bytes)
	elem       *list.Element
	gone       bool // dropped from the index
}

// trailerMagic starts a cached range's trailer; the CRC-32C follows it.
var trailerMagic = [4]byte{'b', 'f', 'r', '1'}

// trailerLen is the size of a cached range's trailer.
const trailerLen = 8

// castagnoli is built on first use, not at start.
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// rangeSum is the checksum a cached range's trailer carries: it covers the
// range's identity as well as its bytes, so that a file moved to another
// name does not pass either.
func rangeSum(obj string, start int64, data []byte) uint32 {
	var id [16]byte
	binary.LittleEndian.PutUint64(id[:], uint64(start))
	binary.LittleEndian.PutUint64(id[8:], uint64(len(data)))
	t := castagnoli()
	h := crc32.Update(0, t, []byte(obj))
	h = crc32.Update(h, t, id[:])
	return crc32.Update(h, t, data)
}

// trailer returns the trailer of a range.
func trailer(obj string, start int64, data []byte) []byte {
	t := make([]byte, trailerLen)
	copy(t, trailerMagic[:])
	binary.LittleEndian.PutUint32(t[4:], rangeSum(obj, start, data))
	return t
}

func (e *diskExtent) path(dir string) string {
	return filepath.Join(dir, e.obj, fmt.Sprintf("%d-%d", e.start, e.len))
}

// openDiskCache indexes what dir holds (creating it), dropping temp
// files and ranges past the bound. An existing dir that another user
// owns, or that group or others may write, is refused: what another
// user put there would be served as this user's objects (the trailer
// checksums bytes against their name, which anyone can compute).
func openDiskCache(dir string, max int64, logf func(string, ...any)) (*diskCache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cache dir: %w", err)
	}
	if err := checkCacheDir(dir); err != nil {
		return nil, err
	}
	c := &diskCache{dir: dir, max: max, logf: logf, lru: list.New(), byObj: map[string][]*diskExtent{}}
	objs, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cache dir: %w", err)
	}
	type found struct {
		e     *diskExtent
		mtime int64
	}
	var all []found
	for _, o := range objs {
		if !o.IsDir() {
			continue
		}
		files, _ := os.ReadDir(filepath.Join(dir, o.Name()))
		for _, f := range files {
			s, l, ok := strings.Cut(f.Name(), "-")
			start, err1 := strconv.ParseInt(s, 10, 64)
			n, err2 := strconv.ParseInt(l, 10, 64)
			info, err3 := f.Info()
			if !ok || err1 != nil || err2 != nil || err3 != nil || n <= 0 || info.Size() != n+trailerLen {
				// A temp file, a torn write, or a range of a version
				// without trailers.
				os.Remove(filepath.Join(dir, o.Name(), f.Name()))
				continue
			}
			all = append(all, found{&diskExtent{obj: o.Name(), start: start, len: n}, info.ModTime().UnixNano()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mtime > all[j].mtime })
	for _, f := range all {
		c.addLocked(f.e, false)
	}
	c.mu.Lock()
	c.evictLocked()
	c.mu.Unlock()
	return c, nil
}

// objName names the folder of an object version.
func objName(cacheID string) string {
	h := sha256.Sum256([]byte(cacheID))
	return hex.EncodeToString(h[:16])
}

// addLocked indexes e (most recent first unless back).
func (c *diskCache) addLocked(e *diskExtent, front bool) {
	exts := c.byObj[e.obj]
	i := sort.Search(len(exts), func(i int) bool { return exts[i].start > e.start })
	exts = append(exts, nil)
	copy(exts[i+1:], exts[i:])
	exts[i] = e
	c.byObj[e.obj] = exts
	if front {
		e.elem = c.lru.PushFront(e)
	} else {
		e.elem = c.lru.PushBack(e)
	}
	c.used += e.len + trailerLen
}

func (c *diskCache) evictLocked() {
	for c.used > c.max && c.lru.Len() > 0 {
		c.dropLocked(c.lru.Back().Value.(*diskExtent))
	}
}

// dropLocked removes e from the index and its file from the directory.
func (c *diskCache) dropLocked(e *diskExtent) {
	if e.gone {
		return
	}
	e.gone = true
	c.lru.Remove(e.elem)
	c.used -= e.len + trailerLen
	left := unindex(c.byObj, e.obj, e)
	os.Remove(e.path(c.dir))
	if left == 0 {
		os.Remove(filepath.Join(c.dir, e.obj)) // if empty
	}
}

// get returns the cached range of an object version that holds off, and
// where it starts, or nil.
func (c *diskCache) get(cacheID string, off int64) (int64, []byte) {
	obj := objName(cacheID)
	c.mu.Lock()
	var e *diskExtent
	exts := c.byObj[obj]
	i := sort.Search(len(exts), func(i int) bool { return exts[i].start > off })
	for j := i - 1; j >= 0 && j >= i-maxOverlapScan; j-- {
		if x := exts[j]; x.start+x.len > off {
			e = x
			break
		}
	}
	if e != nil {
		c.lru.MoveToFront(e.elem)
	}
	c.mu.Unlock()
	if e == nil {
		return 0, nil
	}
	b, err := os.ReadFile(e.path(c.dir))
	if err != nil {
		return 0, nil // evicted meanwhile, or unreadable: fetch it
	}
	if n := int64(len(b)) - trailerLen; n != e.len || !bytes.Equal(b[n:n+4], trailerMagic[:]) ||
		binary.LittleEndian.Uint32(b[n+4:]) != rangeSum(obj, e.start, b[:n]) {
		if c.logf != nil {
			c.logf("cache dir: %s: checksum mismatch, dropped (fetched again)", e.path(c.dir))
		}
		c.mu.Lock()
		c.dropLocked(e)
		c.mu.Unlock()
		return 0, nil
	}
	return e.start, b[:e.len:e.len]
}

// put stores a fetched range (errors only cost the cache).
func (c *diskCache) put(cacheID string, start int64, data []byte) {
	if int64(len(data))+trailerLen > c.max || len(data) == 0 {
		return
	}
	e := &diskExtent{obj: objName(cacheID), start: start, len: int64(len(data))}
	if err := os.MkdirAll(filepath.Join(c.dir, e.obj), 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Join(c.dir, e.obj), ".tmp-")
	if err != nil {
		return
	}
	_, err = tmp.Write(data)
	if err == nil {
		_, err = tmp.Write(trailer(e.obj, start, data))
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), e.path(c.dir))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.byObj[e.obj] {
		if x.start == e.start && x.len == e.len {
			return // stored twice: the same bytes
		}
	}
	c.addLocked(e, true)
	c.evictLocked()
}

// checkCacheDir refuses a cache directory that the user running this
// process does not own, or that its group or others may write.
func checkCacheDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cache dir: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("cache dir %s: not a directory", dir)
	case !ok:
		return nil
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("cache dir %s is owned by uid %d, not by this user (uid %d): its ranges would be served as this user's objects; use a directory of your own", dir, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("cache dir %s can be written by its group or others (mode %#o): anyone could put ranges there; chmod go-w it, or use another", dir, fi.Mode().Perm())
	}
	return nil
}
