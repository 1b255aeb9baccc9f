package fs

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestProbeEach checks the listings' probe fan-out: every entry probed
// once, never more than the bound at once, and nothing for fewer than
// two entries (the mapping then probes the one itself).
func TestProbeEach(t *testing.T) {
	for _, c := range []struct{ n, parallel int }{{0, 8}, {1, 8}, {2, 8}, {5, 2}, {100, 8}, {100, 16}} {
		var running, most atomic.Int64
		seen := make([]atomic.Int64, c.n)
		probeEach(c.n, c.parallel, func(i int) {
			r := running.Add(1)
			for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
			}
			time.Sleep(100 * time.Microsecond)
			seen[i].Add(1)
			running.Add(-1)
		})
		for i := range seen {
			if got, want := seen[i].Load(), int64(min(1, c.n/2)); got != want {
				t.Errorf("n=%d: entry %d probed %d times, want %d", c.n, i, got, want)
			}
		}
		if most.Load() > int64(c.parallel) {
			t.Errorf("n=%d: %d probes at once, bound %d", c.n, most.Load(), c.parallel)
		}
	}
}
