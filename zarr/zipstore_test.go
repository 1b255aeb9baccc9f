package zarr

import "testing"

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
