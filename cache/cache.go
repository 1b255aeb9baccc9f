// Package cache is a byte-bounded LRU of decoded blocks with single-flight
// loading: concurrent misses for one key wait for one load. It keeps hit,
// miss and eviction counters. It knows nothing of formats; any comparable
// key works (pack uses pack.BlockKey, and *Cache[pack.BlockKey] is a
// pack.BlockCache).
//
// Values are handed out pinned, as a *Ref that the caller releases. The
// memory of a value that is evicted or removed and no longer pinned is
// kept on a small free list and handed out again by Alloc (for a value
// of its size or up to an eighth smaller: a chunk's shorter last block),
// so that a stream of loads reuses a few warm buffers instead of faulting
// in fresh pages for every block. A value's memory counts against the
// cache's budget by its capacity.
package cache

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Ref is a pinned value. Its bytes stay valid, and are not reused, until
// Release is called. A Ref must be released exactly once.
type Ref struct {
	used    atomic.Int64 // bytes read by readers that do not come back
	val     []byte
	owner   recycler // nil: no cache owns the bytes
	refs    int32    // pins; guarded by the owner's lock
	evicted bool     // no longer in the owner's LRU; guarded likewise
}

type recycler interface{ release(*Ref) }

// Unowned returns a Ref that no cache owns: Release does nothing. Caches
// that keep nothing use it to hand out what they load.
func Unowned(b []byte) *Ref { return &Ref{val: b} }

// Bytes returns the value. The caller must not modify it, nor use it
// after Release.
func (r *Ref) Bytes() []byte { return r.val }

// Consume records that a reader who will not come back to the value
// (a sequential stream) has read n more bytes of it, and reports whether
// such readers have now read all of it: the caller may then Remove it.
// Streams whose reads arrive out of order thus drop a value only once
// they are done with all of it.
func (r *Ref) Consume(n int) bool { return r.used.Add(int64(n)) >= int64(len(r.val)) }

// Release unpins the value.
func (r *Ref) Release() {
	if r.owner != nil {
		r.owner.release(r)
	}
}

// Cache holds byte slices up to a total size. It is safe for concurrent use.
type Cache[K comparable] struct {
	max     int64
	freeMax int64

	mu        sync.Mutex
	lru       *simplelru.LRU[K, *Ref]
	bytes     int64
	inflight  map[K]*call
	free      map[int][][]byte // released buffers by capacity
	freeBytes int64
	removing  bool  // Remove or Purge is evicting: not an eviction
	warming   bool  // a warm goroutine runs
	charged   int64 // bytes charged by Charge, part of bytes

	hits, misses, evictions, loads, reused, warmed atomic.Int64
}

type call struct {
	done    chan struct{}
	ref     *Ref
	err     error
	waiters int32
}

// New returns a cache holding at most maxBytes bytes of values. A value
// larger than maxBytes is returned to its caller but not kept. Released
// buffers kept for reuse add at most an eighth of maxBytes (between 1 MiB
// and 64 MiB) on top.
func New[K comparable](maxBytes int64) *Cache[K] {
	c := &Cache[K]{
		max:      maxBytes,
		freeMax:  min(max(maxBytes/8, 1<<20), 64<<20),
		inflight: map[K]*call{},
		free:     map[int][][]byte{},
	}
	// The entry count is bounded by bytes, not by simplelru: give it a
	// count it never reaches.
	c.lru, _ = simplelru.NewLRU[K, *Ref](1<<31-1, func(_ K, r *Ref) {
		c.bytes -= int64(cap(r.val))
		if !c.removing {
			c.evictions.Add(1)
		}
		c.dropLocked(r)
	})
	return c
}

// dropLocked marks r as out of the LRU and recycles its bytes if nobody
// pins it.
func (c *Cache[K]) dropLocked(r *Ref) {
	r.evicted = true
	if r.refs == 0 {
		c.recycleLocked(r)
	}
}

// recycleLocked puts r's bytes on the free list, if there is room.
func (c *Cache[K]) recycleLocked(r *Ref) {
	b := r.val[:cap(r.val)]
	r.val = nil
	if len(b) == 0 || c.freeBytes+int64(len(b)) > c.freeMax {
		return
	}
	c.free[len(b)] = append(c.free[len(b)], b)
	c.freeBytes += int64(len(b))
}

// takeLocked returns a free buffer for n bytes, sliced to n, or nil: one
// of capacity n, else the smallest of up to an eighth more.
func (c *Cache[K]) takeLocked(n int) []byte {
	k := n
	if len(c.free[n]) == 0 {
		k = 0
		for m, l := range c.free {
			if len(l) > 0 && m > n && m <= n+n/8 && (k == 0 || m < k) {
				k = m
			}
		}
		if k == 0 {
			return nil
		}
	}
	l := c.free[k]
	b := l[len(l)-1]
	l[len(l)-1] = nil
	c.free[k] = l[:len(l)-1]
	c.freeBytes -= int64(k)
	return b[:n]
}

func (c *Cache[K]) release(r *Ref) {
	c.mu.Lock()
	if r.refs--; r.refs == 0 && r.evicted {
		c.recycleLocked(r)
	}
	c.mu.Unlock()
}

// Alloc returns a buffer of n bytes for a loader to fill: a released
// value's memory when one of that size, or up to an eighth larger, is
// free (its capacity then exceeds n), else a new slice. Its content is
// undefined.
func (c *Cache[K]) Alloc(n int) []byte {
	c.mu.Lock()
	if b := c.takeLocked(n); b != nil {
		c.mu.Unlock()
		c.reused.Add(1)
		return b
	}
	warm := n >= warmMin && !c.warming
	if warm {
		c.warming = true
	}
	c.mu.Unlock()
	if warm {
		go c.warm(n)
	}
	return make([]byte, n)
}

// warmMin is the smallest buffer that Alloc keeps warm ones of, and
// warmBytes how many bytes of them it keeps at most.
const (
	warmMin   = 64 << 10
	warmBytes = 2 << 20
)

// warm puts pre-faulted buffers of n bytes on the free list, up to
// warmBytes of them (and within freeMax). A new buffer is fresh memory
// whose pages fault in one by one as a decoder first writes them: 64
// faults for a 256 KiB block, the better part of a cold random read's
// latency. Done here, the faults leave the reader's path.
func (c *Cache[K]) warm(n int) {
	defer func() {
		c.mu.Lock()
		c.warming = false
		c.mu.Unlock()
	}()
	for {
		c.mu.Lock()
		full := len(c.free[n])*n >= warmBytes || c.freeBytes+int64(n) > c.freeMax
		c.mu.Unlock()
		if full {
			return
		}
		b := make([]byte, n)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // a write: a read would map the shared zero page
		}
		c.mu.Lock()
		if c.freeBytes+int64(n) > c.freeMax {
			c.mu.Unlock()
			return
		}
		c.free[n] = append(c.free[n], b)
		c.freeBytes += int64(n)
		c.warmed.Add(1)
		c.mu.Unlock()
	}
}

// Acquire returns the value for key, pinned, calling load on a miss.
// Concurrent callers missing the same key share one call of load. The
// value is shared: callers must not modify it, and must release it.
// The slice load returns becomes the cache's, to its whole capacity:
// once the value is evicted and unpinned, that memory is handed out
// again by Alloc. A loader returns memory that nothing else uses (its
// own, or Alloc's), never part of a buffer it keeps.
func (c *Cache[K]) Acquire(key K, load func() ([]byte, error)) (*Ref, error) {
	c.mu.Lock()
	if r, ok := c.lru.Get(key); ok {
		r.refs++
		c.mu.Unlock()
		c.hits.Add(1)
		return r, nil
	}
	c.misses.Add(1)
	if cl, ok := c.inflight[key]; ok {
		cl.waiters++
		c.mu.Unlock()
		<-cl.done
		return cl.ref, cl.err
	}
	cl := &call{done: make(chan struct{})}
	c.inflight[key] = cl
	c.mu.Unlock()

	c.loads.Add(1)
	val, err := load()

	c.mu.Lock()
	delete(c.inflight, key)
	if err == nil {
		r := &Ref{val: val, owner: c, refs: 1 + cl.waiters}
		if int64(cap(val)) <= c.max {
			c.lru.Add(key, r)
			c.bytes += int64(cap(val))
			for c.bytes > c.max && c.lru.Len() > 0 { // charges may exceed max alone
				c.lru.RemoveOldest()
			}
		} else {
			r.evicted = true // handed out, never kept
		}
		cl.ref = r
	}
	cl.err = err
	c.mu.Unlock()
	close(cl.done)
	return cl.ref, cl.err
}

// TryAcquire returns the cached value for key, pinned, counting a hit; a
// miss is not counted (Acquire counts it). It lets callers skip building a
// loader when the value is there.
func (c *Cache[K]) TryAcquire(key K) (*Ref, bool) {
	c.mu.Lock()
	r, ok := c.lru.Get(key)
	if ok {
		r.refs++
	}
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
	}
	return r, ok
}

// Contains reports whether key is cached or being loaded, without
// touching its recency.
func (c *Cache[K]) Contains(key K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, loading := c.inflight[key]
	return loading || c.lru.Contains(key)
}

// Remove drops key from the cache; its memory is reused once nobody pins
// it. Readers that will not come back to a value (a sequential stream
// whose bytes the kernel keeps) remove it, so that streaming a large file
// does not push out what others use.
func (c *Cache[K]) Remove(key K) {
	c.mu.Lock()
	c.removing = true
	c.lru.Remove(key)
	c.removing = false
	c.mu.Unlock()
}

// RemoveRef drops key from the cache if it still holds r (and not a
// value loaded again since r was evicted).
func (c *Cache[K]) RemoveRef(key K, r *Ref) {
	c.mu.Lock()
	if v, ok := c.lru.Peek(key); ok && v == r {
		c.removing = true
		c.lru.Remove(key)
		c.removing = false
	}
	c.mu.Unlock()
}

// MaxBlock returns the largest value a loader should make for this cache:
// an eighth of its size, at most 64 MiB. Larger values would push out
// most of what the cache holds, or not be kept at all and be made again
// for every use.
func (c *Cache[K]) MaxBlock() int { return int(min(c.max/8, 64<<20)) }

// MaxBytes returns the cache's byte budget.
func (c *Cache[K]) MaxBytes() int64 { return c.max }

// Charge counts n bytes of memory held elsewhere on behalf of the cache's
// users (parsed chunk headers) against its budget, evicting values to
// make room; a negative n gives a charge back.
func (c *Cache[K]) Charge(n int64) {
	c.mu.Lock()
	c.bytes += n
	c.charged += n
	for c.bytes > c.max && c.lru.Len() > 0 {
		c.lru.RemoveOldest()
	}
	c.mu.Unlock()
}

// Stats are the cache's counters.
type Stats struct {
	Hits, Misses, Loads, Evictions int64
	// Reused counts Alloc calls served from released or warmed memory.
	Reused int64
	// Warmed counts buffers pre-faulted for Alloc.
	Warmed int64
	// Bytes is the size of the cached values and the charged memory
	// (Charged); FreeBytes the released memory kept for Alloc.
	Bytes, FreeBytes, MaxBytes, Charged int64
	Entries                             int
}

// Stats returns the counters.
func (c *Cache[K]) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Loads: c.loads.Load(), Evictions: c.evictions.Load(),
		Reused: c.reused.Load(), Warmed: c.warmed.Load(), Bytes: c.bytes, FreeBytes: c.freeBytes, MaxBytes: c.max, Charged: c.charged, Entries: c.lru.Len(),
	}
}

// Purge drops every entry and the free list.
func (c *Cache[K]) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removing = true
	c.lru.Purge()
	c.removing = false
	clear(c.free)
	c.freeBytes = 0
}
