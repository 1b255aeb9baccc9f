package cache

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// get acquires key, loading n bytes on a miss, and releases it.
func get[K comparable](t *testing.T, c *Cache[K], key K, n int) []byte {
	t.Helper()
	r, err := c.Acquire(key, func() ([]byte, error) { return make([]byte, n), nil })
	if err != nil {
		t.Fatal(err)
	}
	v := r.Bytes()
	r.Release()
	return v
}

func TestBoundAndEviction(t *testing.T) {
	c := New[int](1000)
	for i := 0; i < 50; i++ {
		if v := get(t, c, i, 100); len(v) != 100 {
			t.Fatalf("value of %d bytes", len(v))
		}
		if s := c.Stats(); s.Bytes > 1000 {
			t.Fatalf("after %d loads the cache holds %d bytes", i+1, s.Bytes)
		}
	}
	s := c.Stats()
	if s.Entries != 10 || s.Evictions != 40 || s.Misses != 50 || s.Hits != 0 {
		t.Fatalf("stats %+v", s)
	}
	// The 10 most recent keys are cached, the older ones are not.
	if !c.Contains(49) || !c.Contains(40) || c.Contains(39) {
		t.Fatal("LRU order wrong")
	}
	r, err := c.Acquire(45, func() ([]byte, error) { t.Fatal("reloaded a cached key"); return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	if c.Stats().Hits != 1 {
		t.Fatal("hit not counted")
	}
	// Too large to keep: returned, not cached.
	if v := get(t, c, -1, 5000); len(v) != 5000 || c.Contains(-1) {
		t.Fatal("oversized value handled wrong")
	}
}

func TestSingleFlight(t *testing.T) {
	c := New[string](1 << 20)
	var calls atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.Acquire("k", func() ([]byte, error) {
				calls.Add(1)
				<-release
				return []byte("value"), nil
			})
			if err != nil || string(r.Bytes()) != "value" {
				t.Error(r, err)
				return
			}
			r.Release()
		}()
	}
	// The loader holds the key until the 15 others wait for it.
	waiting := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		cl := c.inflight["k"]
		return cl != nil && cl.waiters == 15
	}
	if !testkit.Eventually(t, 10*time.Second, waiting) {
		t.Fatal("the 15 other callers did not come to wait for the load")
	}
	close(release)
	wg.Wait()
	if calls.Load() != 1 {
		t.Fatalf("load ran %d times", calls.Load())
	}
	// Every waiter released its pin: removing the value recycles it.
	c.Remove("k")
	if s := c.Stats(); s.FreeBytes != 5 || s.Evictions != 0 {
		t.Fatalf("after remove: %+v", s)
	}
}

func TestErrorsAreNotCached(t *testing.T) {
	c := New[int](1 << 20)
	boom := errors.New("boom")
	if _, err := c.Acquire(1, func() ([]byte, error) { return nil, boom }); err != boom {
		t.Fatal(err)
	}
	if v := get(t, c, 1, 1); len(v) != 1 {
		t.Fatal("error was cached")
	}
}

// TestPinnedMemoryIsNotReused checks that an evicted value's memory goes
// back to Alloc only after its last pin is released.
func TestPinnedMemoryIsNotReused(t *testing.T) {
	c := New[int](1000)
	fill := func(b byte) func() ([]byte, error) {
		return func() ([]byte, error) {
			v := c.Alloc(500)
			for i := range v {
				v[i] = b
			}
			return v, nil
		}
	}
	pinned, err := c.Acquire(1, fill(1))
	if err != nil {
		t.Fatal(err)
	}
	for k := 2; k < 10; k++ { // evicts 1 while it is pinned
		r, err := c.Acquire(k, fill(byte(k)))
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	if c.Contains(1) {
		t.Fatal("key 1 not evicted")
	}
	if !bytes.Equal(pinned.Bytes(), bytes.Repeat([]byte{1}, 500)) {
		t.Fatal("a pinned value was overwritten after eviction")
	}
	before := c.Stats().FreeBytes
	pinned.Release()
	if after := c.Stats().FreeBytes; after != before+500 {
		t.Fatalf("release of an evicted value: free bytes %d -> %d", before, after)
	}
	reused := c.Stats().Reused
	if v := c.Alloc(500); len(v) != 500 || c.Stats().Reused != reused+1 {
		t.Fatal("Alloc did not reuse a released buffer")
	}
	if v := c.Alloc(123); len(v) != 123 || c.Stats().Reused != reused+1 {
		t.Fatal("Alloc of another length reused a buffer")
	}
}

// TestAllocReusesLarger checks that Alloc hands out a released buffer up
// to an eighth larger than asked for, the smallest that fits, and that
// the cache charges a value by its capacity and recycles it whole.
func TestAllocReusesLarger(t *testing.T) {
	c := New[int](1 << 20)
	for _, n := range []int{1000, 1100, 1200} {
		r, err := c.Acquire(n, func() ([]byte, error) { return c.Alloc(n), nil })
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
		c.Remove(n)
	}
	if s := c.Stats(); s.FreeBytes != 3300 {
		t.Fatalf("free bytes %d, want 3300", s.FreeBytes)
	}
	b := c.Alloc(980) // 1000 and 1100 fit; 1000 is the smaller
	if len(b) != 980 || cap(b) != 1000 {
		t.Fatalf("Alloc(980): %d/%d bytes, want 980/1000", len(b), cap(b))
	}
	if b := c.Alloc(900); b == nil || cap(b) != 900 { // 1100 and 1200 are more than an eighth larger
		t.Fatalf("Alloc(900) reused a buffer of %d", cap(b))
	}
	r, err := c.Acquire(1, func() ([]byte, error) { return b, nil })
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Bytes != 1000 || s.FreeBytes != 2300 {
		t.Fatalf("a value of 980/1000 bytes: charged %d, free %d; want 1000, 2300", s.Bytes, s.FreeBytes)
	}
	r.Release()
	c.Remove(1)
	if s := c.Stats(); s.Bytes != 0 || s.FreeBytes != 3300 {
		t.Fatalf("after removal: charged %d, free %d; want 0, 3300", s.Bytes, s.FreeBytes)
	}
	if b := c.Alloc(1000); len(b) != 1000 || cap(b) != 1000 {
		t.Fatalf("the recycled buffer came back as %d/%d bytes", len(b), cap(b))
	}
}

// TestFreeListBound checks that released memory kept for reuse stays
// within its bound.
func TestFreeListBound(t *testing.T) {
	c := New[int](64 << 20) // free list bound: 8 MiB
	for k := 0; k < 64; k++ {
		r, err := c.Acquire(k, func() ([]byte, error) { return c.Alloc(1 << 20), nil })
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	for k := 0; k < 64; k++ {
		c.Remove(k)
	}
	s := c.Stats()
	if s.Entries != 0 || s.Bytes != 0 || s.FreeBytes != 8<<20 {
		t.Fatalf("after removing all: %+v", s)
	}
	c.Purge()
	if s := c.Stats(); s.FreeBytes != 0 {
		t.Fatalf("after purge: %+v", s)
	}
}

// TestConcurrentPins hammers one small cache from many goroutines; each
// checks its pinned value keeps the content it was loaded with. Run it
// with -race.
func TestConcurrentPins(t *testing.T) {
	c := New[int](8 << 10)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				k := (i*7 + g) % 40
				r, err := c.Acquire(k, func() ([]byte, error) {
					v := c.Alloc(1024)
					for j := range v {
						v[j] = byte(k)
					}
					return v, nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				for _, b := range r.Bytes() {
					if b != byte(k) {
						t.Errorf("key %d holds %d", k, b)
						return
					}
				}
				if i%3 == 0 {
					c.Remove(k)
				}
				r.Release()
			}
		}()
	}
	wg.Wait()
	if s := c.Stats(); s.Reused == 0 {
		t.Fatalf("no buffer was reused: %+v", s)
	}
}

// TestRemoveRef checks that RemoveRef drops the value it names and not
// a copy loaded again after that one was evicted.
func TestRemoveRef(t *testing.T) {
	c := New[int](1000)
	load := func() ([]byte, error) { return c.Alloc(600), nil }
	old, err := c.Acquire(1, load)
	if err != nil {
		t.Fatal(err)
	}
	get(t, c, 2, 600) // evicts 1 while old pins it
	fresh, err := c.Acquire(1, load)
	if err != nil {
		t.Fatal(err)
	}
	c.RemoveRef(1, old)
	if !c.Contains(1) {
		t.Fatal("RemoveRef of an evicted value dropped the copy loaded since")
	}
	c.RemoveRef(1, fresh)
	if c.Contains(1) {
		t.Fatal("RemoveRef did not drop the value it named")
	}
	old.Release()
	fresh.Release()
}

// TestAllocWarms: after a first Alloc of a block-sized buffer, later
// ones come from pre-faulted memory, within the free list's bound.
func TestAllocWarms(t *testing.T) {
	c := New[int](64 << 20)
	const n = 256 << 10
	b := c.Alloc(n)
	if len(b) != n {
		t.Fatalf("Alloc(%d) gave %d bytes", n, len(b))
	}
	if !testkit.Eventually(t, 10*time.Second, func() bool { return c.Stats().Warmed >= warmBytes/n }) {
		t.Fatalf("warmed %d buffers in 10 s, want %d", c.Stats().Warmed, warmBytes/n)
	}
	for range warmBytes / n {
		if b := c.Alloc(n); len(b) != n || cap(b) != n {
			t.Fatalf("a warm buffer of %d/%d bytes", len(b), cap(b))
		}
	}
	if st := c.Stats(); st.Reused != warmBytes/n || st.FreeBytes > c.freeMax {
		t.Errorf("stats %+v: want %d reused, free bytes within %d", st, warmBytes/n, c.freeMax)
	}
	// Small buffers are not warmed; a tiny cache warms within its bound.
	c = New[int](1 << 20)
	c.Alloc(1024)
	c.Alloc(n)
	warmed := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.warming
	}
	if !testkit.Eventually(t, 10*time.Second, warmed) {
		t.Fatal("the warm goroutine still runs after 10 s")
	}
	c.mu.Lock()
	if c.freeBytes > c.freeMax || len(c.free[1024]) != 0 {
		t.Errorf("free bytes %d (bound %d), %d small buffers warmed", c.freeBytes, c.freeMax, len(c.free[1024]))
	}
	c.mu.Unlock()
}
