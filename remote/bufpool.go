package remote

import (
	"sync"
	"sync/atomic"
)

// The bodies of ranged GETs are read into buffers that are used again
// once no one holds them, instead of fresh memory per GET: a profile of
// the daemon streaming a remote LZ4 frame spent 14 % of its CPU in the
// page faults of fresh body buffers (the kernel zeroing each 4 KiB page
// as the socket read first touched it), and more in the runtime zeroing
// them.
//
// A body is read into slabs of one size (the last one partly filled),
// each kept by the range cache as a range of its own, so that any
// released slab serves any later GET: read-ahead GETs range from 1 to
// 8 MiB and are trimmed to what is missing, and buffers of their exact
// sizes would seldom fit each other. A slab is held by the range cache
// while it keeps the range, and by each reader copying out of it (outside
// the cache's lock), so it carries a count of references and goes back
// to its pool at zero.

// slabSize is the size of pooled buffers.
const slabSize = 1 << 20

// minPooled is the smallest piece that takes a slab: smaller ones (a
// chunk's header and block starts, a block of a random read) are
// ordinary allocations, whose memory the runtime reuses itself.
const minPooled = slabSize / 4

// rbuf is a reference-counted buffer holding one fetched range.
type rbuf struct {
	b    []byte // the range's bytes; cap(b) is the memory held
	refs atomic.Int32
	pool *bufPool // nil: left to the garbage collector
}

// retain adds a reference.
func (r *rbuf) retain() { r.refs.Add(1) }

// release drops a reference; the last one returns the buffer to its pool.
func (r *rbuf) release() {
	switch n := r.refs.Add(-1); {
	case n == 0 && r.pool != nil:
		r.pool.put(r)
	case n < 0:
		panic("remote: range buffer released more often than retained")
	}
}

// releaseAll releases each buffer of rs.
func releaseAll(rs []*rbuf) {
	for _, r := range rs {
		r.release()
	}
}

// bufPool keeps released slabs for the next GETs, up to max bytes.
type bufPool struct {
	mu   sync.Mutex
	free []*rbuf
	max  int
}

func newBufPool(max int64) *bufPool { return &bufPool{max: int(max / slabSize)} }

// get returns a buffer of n ≤ slabSize bytes with one reference. A reused
// slab is not zeroed: the GET fills it whole or it is not used.
func (p *bufPool) get(n int) *rbuf {
	r := &rbuf{}
	if n < minPooled || n > slabSize {
		r.b = make([]byte, n)
	} else {
		p.mu.Lock()
		if k := len(p.free); k > 0 {
			r = p.free[k-1]
			p.free[k-1] = nil
			p.free = p.free[:k-1]
		}
		p.mu.Unlock()
		if r.pool == nil {
			r.b, r.pool = make([]byte, slabSize), p
		}
		r.b = r.b[:n]
	}
	r.refs.Store(1)
	return r
}

// put keeps a released slab, unless max are kept already.
func (p *bufPool) put(r *rbuf) {
	p.mu.Lock()
	if len(p.free) < p.max {
		p.free = append(p.free, r)
	}
	p.mu.Unlock()
}

// size returns the bytes kept for reuse.
func (p *bufPool) size() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int64(len(p.free)) * slabSize
}
