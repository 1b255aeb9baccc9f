package bufs

import "testing"

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
