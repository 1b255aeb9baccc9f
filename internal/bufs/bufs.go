// Package bufs keeps byte buffers for reuse, for loops that fill a
// buffer of about the same size many times over (a chunk to compress, its
// compressed form): a fresh buffer each time costs the runtime's zeroing
// of it and, at a MiB per chunk, a garbage collection every few chunks.
package bufs

import "sync"

// Pool keeps buffers that were handed back with Put. The zero Pool is
// ready to use; it is safe for concurrent use. Like sync.Pool, it may
// drop what it keeps at any garbage collection.
type Pool struct{ p sync.Pool }

// Get returns a buffer of length n: a kept one if it has the room
// (its bytes are left as they were), else a new one.
func (p *Pool) Get(n int) *[]byte {
	if b, _ := p.p.Get().(*[]byte); b != nil && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n)
	return &b
}

// Put hands b back for a later Get. The caller must not use *b after.
func (p *Pool) Put(b *[]byte) { p.p.Put(b) }
