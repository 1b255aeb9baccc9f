// Package cache is a byte-bounded LRU of decoded blocks with single-flight
// loading: concurrent misses for one key wait for one load. It keeps hit,
// miss and eviction counters. It knows nothing of formats; any comparable
// key works (pack uses pack.BlockKey, and *Cache[pack.BlockKey] is a
// pack.BlockCache).
package cache

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Cache holds byte slices up to a total size. It is safe for concurrent use.
type Cache[K comparable] struct {
	max int64

	mu       sync.Mutex
	lru      *simplelru.LRU[K, []byte]
	bytes    int64
	inflight map[K]*call

	hits, misses, evictions, loads atomic.Int64
}

type call struct {
	done chan struct{}
	val  []byte
	err  error
}

// New returns a cache holding at most maxBytes bytes of values. A value
// larger than maxBytes is returned to its caller but not kept.
func New[K comparable](maxBytes int64) *Cache[K] {
	c := &Cache[K]{max: maxBytes, inflight: map[K]*call{}}
	// The entry count is bounded by bytes, not by simplelru: give it a
	// count it never reaches.
	c.lru, _ = simplelru.NewLRU[K, []byte](1<<31-1, func(_ K, v []byte) {
		c.bytes -= int64(cap(v))
		c.evictions.Add(1)
	})
	return c
}

// GetOrLoad returns the value for key, calling load on a miss. Concurrent
// callers missing the same key share one call of load. The returned slice
// is shared: callers must not modify it.
func (c *Cache[K]) GetOrLoad(key K, load func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	if v, ok := c.lru.Get(key); ok {
		c.mu.Unlock()
		c.hits.Add(1)
		return v, nil
	}
	c.misses.Add(1)
	if cl, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		<-cl.done
		return cl.val, cl.err
	}
	cl := &call{done: make(chan struct{})}
	c.inflight[key] = cl
	c.mu.Unlock()

	c.loads.Add(1)
	cl.val, cl.err = load()

	c.mu.Lock()
	delete(c.inflight, key)
	if cl.err == nil && int64(cap(cl.val)) <= c.max {
		c.lru.Add(key, cl.val)
		c.bytes += int64(cap(cl.val))
		for c.bytes > c.max {
			c.lru.RemoveOldest()
		}
	}
	c.mu.Unlock()
	close(cl.done)
	return cl.val, cl.err
}

// Get returns the cached value for key, counting a hit; a miss is not
// counted (GetOrLoad counts it). It lets callers skip building a loader
// when the value is there.
func (c *Cache[K]) Get(key K) ([]byte, bool) {
	c.mu.Lock()
	v, ok := c.lru.Get(key)
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
	}
	return v, ok
}

// Contains reports whether key is cached, without touching its recency.
func (c *Cache[K]) Contains(key K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Contains(key)
}

// Stats are the cache's counters.
type Stats struct {
	Hits, Misses, Loads, Evictions int64
	Bytes, MaxBytes                int64
	Entries                        int
}

// Stats returns the counters.
func (c *Cache[K]) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Loads: c.loads.Load(), Evictions: c.evictions.Load(),
		Bytes: c.bytes, MaxBytes: c.max, Entries: c.lru.Len(),
	}
}

// Purge drops every entry.
func (c *Cache[K]) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Purge()
}
