package bufs

import (
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

func TestPool(t *testing.T) {
	var p Pool
	b := p.Get(100)
	if len(*b) != 100 {
		t.Fatalf("Get(100): len %d", len(*b))
	}
	(*b)[0] = 7
	p.Put(b)
	// A kept buffer with room serves a smaller request, one without room
	// does not: whichever Get returns, its length is what was asked.
	for _, n := range []int{10, 100, 1000} {
		c := p.Get(n)
		if len(*c) != n || cap(*c) < n {
			t.Errorf("Get(%d): len %d cap %d", n, len(*c), cap(*c))
		}
		p.Put(c)
	}
}

// TestPoolAllocs: a kept buffer comes back without an allocation (under
// the race detector sync.Pool drops a share of what it is given, on
// purpose, so this runs without it).
func TestPoolAllocs(t *testing.T) {
	if testkit.RaceEnabled {
		t.Skip("under the race detector sync.Pool drops what it is given at random")
	}
	var p Pool
	p.Put(p.Get(1 << 20))
	// The sync.Pool may still drop what it keeps at a collection: an
	// average over many rounds, not an exact count.
	if n := testing.AllocsPerRun(100, func() { p.Put(p.Get(1 << 20)) }); n > 0.5 {
		t.Errorf("%.1f allocations per Get/Put of a kept buffer", n)
	}
}
