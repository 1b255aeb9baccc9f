//go:build !race

package bufs

import "testing"

// TestPoolAllocs: a kept buffer comes back without an allocation (under
// the race detector sync.Pool drops a share of what it is given, on
// purpose, so this runs without it).
func TestPoolAllocs(t *testing.T) {
	var p Pool
	p.Put(p.Get(1 << 20))
	// The sync.Pool may still drop what it keeps at a collection: an
	// average over many rounds, not an exact count.
	if n := testing.AllocsPerRun(100, func() { p.Put(p.Get(1 << 20)) }); n > 0.5 {
		t.Errorf("%.1f allocations per Get/Put of a kept buffer", n)
	}
}
