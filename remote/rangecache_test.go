package remote

import "testing"

// TestDropBefore: a sequential reader's ranges behind it leave the cache,
// and only those.
func TestDropBefore(t *testing.T) {
	c := newRangeCache(1 << 20)
	for _, r := range [][2]int64{{0, 10}, {10, 20}, {15, 30}, {40, 50}} {
		c.put("o", r[0], make([]byte, r[1]-r[0]))
	}
	c.put("other", 0, make([]byte, 10))
	c.dropBefore("o", 20)
	if got := c.size(); got != 15+10+10 {
		t.Errorf("%d bytes held, want 35", got)
	}
	if c.get("o", 5) != nil || c.get("o", 12) != nil {
		t.Error("a range before 20 is still cached")
	}
	if c.get("o", 20) == nil || c.get("o", 45) == nil || c.get("other", 0) == nil {
		t.Error("a range reaching past 20, or of another object, was dropped")
	}
}
