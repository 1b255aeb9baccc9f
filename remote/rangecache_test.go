package remote

import (
	"bytes"
	"testing"
)

// cached returns whether the range cache holds obj at off, releasing the
// reference it took.
func cached(c *rangeCache, obj string, off int64) bool {
	_, r := c.get(obj, off)
	if r != nil {
		r.release()
	}
	return r != nil
}

// TestDropBefore: a sequential reader's ranges behind it leave the cache,
// and only those.
func TestDropBefore(t *testing.T) {
	c := newRangeCache(1 << 20)
	p := newBufPool(1 << 20)
	for _, r := range [][2]int64{{0, 10}, {10, 20}, {15, 30}, {40, 50}} {
		b := p.get(int(r[1] - r[0]))
		c.put("o", r[0], b)
		b.release()
	}
	b := p.get(10)
	c.put("other", 0, b)
	b.release()
	c.dropBefore("o", 20)
	if got := c.size(); got != 15+10+10 {
		t.Errorf("%d bytes held, want 35", got)
	}
	if cached(c, "o", 5) || cached(c, "o", 12) {
		t.Error("a range before 20 is still cached")
	}
	if !cached(c, "o", 20) || !cached(c, "o", 45) || !cached(c, "other", 0) {
		t.Error("a range reaching past 20, or of another object, was dropped")
	}
}

// TestBufferReuse: a range's slab is reused only once the cache and
// every reader have released it.
func TestBufferReuse(t *testing.T) {
	c := newRangeCache(4 << 20)
	p := newBufPool(8 << 20)
	a := p.get(slabSize - 100)
	for i := range a.b {
		a.b[i] = 'a'
	}
	c.put("o", 0, a)
	a.release() // the fetcher's reference
	data, held := c.get("o", 100)
	c.drop("o") // evicted while a reader copies
	if p.size() != 0 {
		t.Fatal("a slab a reader holds went back to the pool")
	}
	if x := p.get(slabSize); &x.b[0] == &a.b[0] {
		t.Fatal("a slab a reader holds was handed out again")
	} else {
		x.release()
	}
	if !bytes.Equal(data[:10], []byte("aaaaaaaaaa")) {
		t.Fatal("a held slab was overwritten")
	}
	held.release()
	if got := p.size(); got != 2*slabSize {
		t.Errorf("pool holds %d bytes, want %d", got, 2*slabSize)
	}
	// A piece of a slab's size or a little less takes a free slab; a
	// small one does not.
	if small := p.get(minPooled - 1); cap(small.b) != minPooled-1 {
		t.Errorf("a %d-byte piece got a %d-byte buffer", minPooled-1, cap(small.b))
	}
	if again := p.get(minPooled); cap(again.b) != slabSize {
		t.Errorf("a %d-byte piece got a %d-byte buffer, not a slab", minPooled, cap(again.b))
	}
	if got := p.size(); got != slabSize {
		t.Errorf("pool holds %d bytes after one reuse, want %d", got, slabSize)
	}
}

// TestPoolBound: the pool keeps at most its bound; small pieces are not
// pooled.
func TestPoolBound(t *testing.T) {
	p := newBufPool(3 * slabSize)
	var bs []*rbuf
	for range 5 {
		bs = append(bs, p.get(slabSize))
	}
	bs = append(bs, p.get(2<<10))
	releaseAll(bs)
	if got := p.size(); got != 3*slabSize {
		t.Errorf("pool holds %d bytes, want %d", got, 3*slabSize)
	}
}

// TestSkip: skip passes over the cached ranges that follow on from off
// (overlapping ones included), and stops at the first byte none holds,
// or at limit.
func TestSkip(t *testing.T) {
	c := newRangeCache(1 << 20)
	p := newBufPool(1 << 20)
	for _, r := range [][2]int64{{0, 10}, {10, 20}, {15, 30}, {40, 50}} {
		b := p.get(int(r[1] - r[0]))
		c.put("o", r[0], b)
		b.release()
	}
	for _, tc := range []struct{ off, limit, want int64 }{
		{0, 100, 30}, {5, 100, 30}, {0, 12, 12}, {30, 100, 30}, {35, 100, 35}, {40, 100, 50}, {0, 0, 0},
	} {
		if got := c.skip("o", tc.off, tc.limit); got != tc.want {
			t.Errorf("skip(%d, %d) = %d, want %d", tc.off, tc.limit, got, tc.want)
		}
	}
	if got := c.skip("none", 3, 100); got != 3 {
		t.Errorf("skip of an object with nothing cached: %d, want 3", got)
	}
}
