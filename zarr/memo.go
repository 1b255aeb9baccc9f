package zarr

import (
	"container/list"
	"errors"
	"sync"
	"sync/atomic"
)

// What the reader remembers across arrays: the shard indexes it read
// (one byte-bounded cache for the process, that is for the whole mount,
// with one copy of each index however many arrays read its shard), and
// the chunks that failed to decode. Both are keyed by the version of the
// object (Versioner), so that an object replaced is read anew; a store
// that tells no versions has its indexes kept per array, and its
// failures not remembered. A lookup that finds something allocates
// nothing.

// MaxShardIndexBytes bounds the bytes of the shard indexes kept, and of
// those being read at once: an index larger than what is free waits for
// the reads before it. The largest index (maxIndexEntries entries and
// its crc32c) fits.
const MaxShardIndexBytes = 16*maxIndexEntries + 4

// indexKey names one index: the shard's version (or, for a store that
// tells none, the array and shard number) and its layout.
type indexKey struct {
	ver    Version
	owner  uint64 // the array's id, where ver is zero
	shard  int64  // the shard number, where ver is zero
	size   int64  // encoded bytes
	layout uint8  // 1: at start, 2: big-endian, 4: crc32c
	inner  int64  // the largest inner chunk the index was checked against
}

type indexEntry struct {
	key  indexKey
	idx  *shardIndex // nil: the shard does not exist
	elem *list.Element
	done chan struct{} // closed once idx (or err) is set
	err  error
}

// indexCache is the cache of shard indexes.
type indexCache struct {
	mu      sync.Mutex
	m       map[indexKey]*indexEntry
	lru     list.List // of *indexEntry, kept ones, most recent first
	bytes   int64     // of the kept indexes
	reading int64     // bytes of the indexes being read
	free    *sync.Cond
}

var indexes = newIndexCache()

func newIndexCache() *indexCache {
	c := &indexCache{m: map[indexKey]*indexEntry{}}
	c.free = sync.NewCond(&c.mu)
	return c
}

// get returns the index of k, reading it with read (once however many
// callers want it at a time) when it is not kept.
func (c *indexCache) get(k indexKey, read func() (*shardIndex, error)) (*shardIndex, error) {
	c.mu.Lock()
	for {
		e, ok := c.m[k]
		if !ok {
			break
		}
		if e.elem != nil {
			c.lru.MoveToFront(e.elem)
			c.mu.Unlock()
			return e.idx, nil
		}
		c.mu.Unlock()
		<-e.done // being read by another caller
		if e.err == nil {
			return e.idx, nil
		}
		c.mu.Lock()
	}
	e := &indexEntry{key: k, done: make(chan struct{})}
	c.m[k] = e
	// Bound the bytes read at once: with the kept ones, at most twice
	// the budget.
	for c.reading > 0 && c.reading+k.size > MaxShardIndexBytes {
		c.free.Wait()
	}
	c.reading += k.size
	c.mu.Unlock()

	e.idx, e.err = read()

	c.mu.Lock()
	c.reading -= k.size
	c.free.Broadcast()
	if e.err != nil || k.size > MaxShardIndexBytes {
		delete(c.m, k)
	} else {
		e.elem = c.lru.PushFront(e)
		c.bytes += k.size
		for c.bytes > MaxShardIndexBytes && c.lru.Len() > 1 {
			old := c.lru.Remove(c.lru.Back()).(*indexEntry)
			old.elem = nil
			delete(c.m, old.key)
			c.bytes -= old.key.size
		}
	}
	c.mu.Unlock()
	close(e.done)
	return e.idx, e.err
}

// rekey moves the index kept under old to k: a store that learned the
// shard's version by reading its index (an object store) finds it by
// that version from then on.
func (c *indexCache) rekey(old, k indexKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[old]
	if !ok || e.elem == nil {
		return
	}
	if _, taken := c.m[k]; taken {
		return
	}
	delete(c.m, old)
	e.key = k
	c.m[k] = e
}

// kept returns the bytes of the indexes kept.
func (c *indexCache) kept() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// failKey names a chunk of an array: the array's metadata (a hash of the
// document, so that two opens of one array share it) and the chunk's
// number in the read grid.
type failKey struct {
	meta  uint64
	chunk int64
}

type failEntry struct {
	ver Version
	err error
}

// maxFailures bounds the failures remembered; past it one is forgotten
// for each new one.
const maxFailures = 4096

// failures remembers the chunks that failed to decode. n counts them, so
// that a reader checks nothing while none failed.
var failures struct {
	mu sync.RWMutex
	m  map[failKey]failEntry
	n  atomic.Int64
}

// failed returns the error of chunk k when its version ver failed before.
func failed(k failKey, ver Version) error {
	if failures.n.Load() == 0 || ver.IsZero() {
		return nil
	}
	failures.mu.RLock()
	e, ok := failures.m[k]
	failures.mu.RUnlock()
	if ok && e.ver == ver {
		return e.err
	}
	return nil
}

// rememberFailure remembers that version ver of chunk k does not decode,
// when err says so of its bytes (not a failure to read them).
func rememberFailure(k failKey, ver Version, err error) {
	if ver.IsZero() || !(errors.Is(err, ErrCorrupt) || errors.Is(err, ErrChecksum)) {
		return
	}
	failures.mu.Lock()
	defer failures.mu.Unlock()
	if failures.m == nil {
		failures.m = map[failKey]failEntry{}
	}
	if _, ok := failures.m[k]; !ok && len(failures.m) >= maxFailures {
		for old := range failures.m {
			delete(failures.m, old)
			break
		}
	}
	failures.m[k] = failEntry{ver, err}
	failures.n.Store(int64(len(failures.m)))
}
