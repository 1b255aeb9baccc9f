package zarr

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestInflateCache: members are kept up to the budget in bytes and in
// number, the most recent first; one larger than half the budget is not
// kept; a kept one is not loaded again.
func TestInflateCache(t *testing.T) {
	var c inflateCache
	loads := 0
	load := func(n int) func() ([]byte, error) {
		return func() ([]byte, error) { loads++; return make([]byte, n), nil }
	}
	for i := range 100 {
		c.get(inflateKey{"a", i}, load(1<<20))
	}
	if len(c.ents) != maxInflated || c.bytes != maxInflated<<20 {
		t.Errorf("%d members, %d bytes kept", len(c.ents), c.bytes)
	}
	loads = 0
	c.get(inflateKey{"a", 99}, load(1<<20))
	c.get(inflateKey{"b", 99}, load(1<<20))
	if loads != 1 {
		t.Errorf("%d loads, want 1 (a kept member, then another archive's)", loads)
	}
	c.get(inflateKey{"a", 1000}, load(inflateBudget/2+1))
	for _, e := range c.ents {
		if e.i.i == 1000 {
			t.Error("a member over half the budget is kept")
		}
	}
	for range 3 {
		c.get(inflateKey{"big", len(c.ents)}, load(inflateBudget/2))
	}
	if c.bytes > inflateBudget {
		t.Errorf("%d bytes kept, over %d", c.bytes, inflateBudget)
	}
}

// TestInflateCacheOneFlight: readers that ask for a member while it is
// being inflated wait for that inflation and share it (a kept member is
// inflated once for eight readers, whenever they come); a member too
// large to keep is shared too; a failed inflation is not kept.
func TestInflateCacheOneFlight(t *testing.T) {
	var c inflateCache
	for _, n := range []int{1 << 10, inflateBudget/2 + 1} {
		var loads atomic.Int32
		release := make(chan struct{})
		load := func() ([]byte, error) {
			loads.Add(1)
			<-release
			return make([]byte, n), nil
		}
		key := inflateKey{"one", n}
		var wg sync.WaitGroup
		got := make([][]byte, 8)
		for k := range got {
			wg.Go(func() { got[k], _ = c.get(key, load) })
		}
		// Let the readers arrive, then the first inflation end.
		for {
			c.mu.Lock()
			busy := c.busy[key] != nil
			c.mu.Unlock()
			if busy {
				break
			}
			runtime.Gosched()
		}
		time.Sleep(10 * time.Millisecond) // most readers wait by now
		close(release)
		wg.Wait()
		// A reader that comes after the inflation ended finds a kept
		// member kept, and inflates one too large to keep again.
		if l := loads.Load(); l != 1 && n <= inflateBudget/2 || l < 1 {
			t.Errorf("%d bytes: %d inflations for 8 readers at once", n, l)
		}
		for k, b := range got {
			if len(b) != n {
				t.Errorf("%d bytes: reader %d got %d bytes", n, k, len(b))
			}
		}
		if len(c.busy) != 0 {
			t.Errorf("%d members still marked as being inflated", len(c.busy))
		}
	}
	fail := errors.New("no")
	if _, err := c.get(inflateKey{"bad", 0}, func() ([]byte, error) { return nil, fail }); err != fail {
		t.Fatalf("got %v, want the load's error", err)
	}
	if _, err := c.get(inflateKey{"bad", 0}, func() ([]byte, error) { return []byte{1}, nil }); err != nil {
		t.Fatalf("a failed inflation was kept: %v", err)
	}
}
