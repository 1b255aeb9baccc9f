package remote

import (
	"container/list"
	"sort"
	"sync"
)

// rangeCache keeps fetched byte ranges of objects in memory, bounded in
// bytes (the capacity of their buffers), evicting the least recently
// used range. Ranges are immutable once stored, so readers copy from them
// without holding the lock: get hands out a reference to the buffer,
// which the reader releases when done, and a range that leaves the cache
// releases the cache's own; the buffer is reused at zero.
type rangeCache struct {
	mu    sync.Mutex
	max   int64
	used  int64
	lru   *list.List // of *extent, most recent first
	byObj map[string][]*extent
}

// extent is one fetched range of one object version.
type extent struct {
	obj   string
	start int64
	buf   *rbuf
	elem  *list.Element
}

func (e *extent) end() int64 { return e.start + int64(len(e.buf.b)) }

func newRangeCache(max int64) *rangeCache {
	return &rangeCache{max: max, lru: list.New(), byObj: map[string][]*extent{}}
}

// maxOverlapScan bounds how far back a lookup looks for an earlier range
// that reaches past a later one's start.
const maxOverlapScan = 8

// get returns the cached bytes of obj from off to the end of the range
// holding off, and a reference to their buffer, which the caller must
// release once it has copied them; or nil and nil.
func (c *rangeCache) get(obj string, off int64) ([]byte, *rbuf) {
	c.mu.Lock()
	defer c.mu.Unlock()
	exts := c.byObj[obj]
	i := sort.Search(len(exts), func(i int) bool { return exts[i].start > off })
	for j := i - 1; j >= 0 && j >= i-maxOverlapScan; j-- {
		if e := exts[j]; e.end() > off {
			c.lru.MoveToFront(e.elem)
			e.buf.retain()
			return e.buf.b[off-e.start:], e.buf
		}
	}
	return nil, nil
}

// next returns the start of the first cached range of obj that starts
// after off and is at least gap bytes long or reaches end (shorter ones
// are fetched again rather than split a GET in two), or -1.
func (c *rangeCache) next(obj string, off, end, gap int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	exts := c.byObj[obj]
	i := sort.Search(len(exts), func(i int) bool { return exts[i].start > off })
	for ; i < len(exts); i++ {
		e := exts[i]
		if e.start >= end || int64(len(e.buf.b)) >= gap || e.end() >= end {
			return e.start
		}
	}
	return -1
}

// skip returns the first offset from off on, up to limit, that no
// cached range of obj holds.
func (c *rangeCache) skip(obj string, off, limit int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	exts := c.byObj[obj]
	for off < limit {
		i := sort.Search(len(exts), func(i int) bool { return exts[i].start > off })
		end := off
		for j := i - 1; j >= 0 && j >= i-maxOverlapScan; j-- {
			end = max(end, exts[j].end())
		}
		if end == off {
			break
		}
		off = end
	}
	return min(off, limit)
}

// put stores the bytes of r as the range of obj starting at start; the
// cache takes a reference of its own.
func (c *rangeCache) put(obj string, start int64, r *rbuf) {
	if int64(cap(r.b)) > c.max || len(r.b) == 0 {
		return
	}
	r.retain()
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &extent{obj: obj, start: start, buf: r}
	exts := c.byObj[obj]
	i := sort.Search(len(exts), func(i int) bool { return exts[i].start > start })
	exts = append(exts, nil)
	copy(exts[i+1:], exts[i:])
	exts[i] = e
	c.byObj[obj] = exts
	e.elem = c.lru.PushFront(e)
	c.used += int64(cap(r.b))
	for c.used > c.max {
		c.removeLocked(c.lru.Back().Value.(*extent))
	}
}

func (c *rangeCache) removeLocked(e *extent) {
	c.lru.Remove(e.elem)
	c.used -= int64(cap(e.buf.b))
	e.buf.release()
	unindex(c.byObj, e.obj, e)
}

// unindex removes e from the ranges of obj in idx, and obj from idx when
// none are left; it returns how many are left.
func unindex[E comparable](idx map[string][]E, obj string, e E) int {
	exts := idx[obj]
	for i, x := range exts {
		if x == e {
			exts = append(exts[:i], exts[i+1:]...)
			break
		}
	}
	if len(exts) == 0 {
		delete(idx, obj)
	} else {
		idx[obj] = exts
	}
	return len(exts)
}

// dropBefore forgets the ranges of obj that end at or before off.
func (c *rangeCache) dropBefore(obj string, off int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old []*extent
	for _, e := range c.byObj[obj] {
		if e.start >= off {
			break
		}
		if e.end() <= off {
			old = append(old, e)
		}
	}
	for _, e := range old {
		c.removeLocked(e)
	}
}

// drop forgets every range of obj.
func (c *rangeCache) drop(obj string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range append([]*extent(nil), c.byObj[obj]...) {
		c.removeLocked(e)
	}
}

// size returns the bytes held.
func (c *rangeCache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}
