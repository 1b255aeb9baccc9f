package remote

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// diskCache keeps fetched ranges in files under a directory, so that
// they survive remounts: one folder per object version (named by a hash
// of bucket, key and ETag, so that a replaced object never matches), one
// file per range (named start-length). The least recently used ranges go
// when the total passes the bound.
type diskCache struct {
	dir string
	max int64

	mu    sync.Mutex
	used  int64
	lru   *list.List // of *diskExtent, most recent first
	byObj map[string][]*diskExtent
}

type diskExtent struct {
	obj        string // folder name
	start, len int64
	elem       *list.Element
}

func (e *diskExtent) path(dir string) string {
	return filepath.Join(dir, e.obj, fmt.Sprintf("%d-%d", e.start, e.len))
}

// openDiskCache indexes what dir holds (creating it), dropping temp
// files and ranges past the bound.
func openDiskCache(dir string, max int64) (*diskCache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cache dir: %w", err)
	}
	c := &diskCache{dir: dir, max: max, lru: list.New(), byObj: map[string][]*diskExtent{}}
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
			if !ok || err1 != nil || err2 != nil || err3 != nil || info.Size() != n {
				os.Remove(filepath.Join(dir, o.Name(), f.Name())) // a temp file or a torn write
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
	c.used += e.len
}

func (c *diskCache) evictLocked() {
	for c.used > c.max && c.lru.Len() > 0 {
		e := c.lru.Back().Value.(*diskExtent)
		c.lru.Remove(e.elem)
		c.used -= e.len
		exts := c.byObj[e.obj]
		for i, x := range exts {
			if x == e {
				exts = append(exts[:i], exts[i+1:]...)
				break
			}
		}
		if len(exts) == 0 {
			delete(c.byObj, e.obj)
			os.Remove(filepath.Join(c.dir, e.obj)) // if empty
		} else {
			c.byObj[e.obj] = exts
		}
		os.Remove(e.path(c.dir))
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
	if err != nil || int64(len(b)) != e.len {
		return 0, nil
	}
	return e.start, b
}

// put stores a fetched range (errors only cost the cache).
func (c *diskCache) put(cacheID string, start int64, data []byte) {
	if int64(len(data)) > c.max || len(data) == 0 {
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
