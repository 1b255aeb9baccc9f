package testkit

import (
	"bytes"
	"fmt"
	"sync"
)

// Canary is a destination slice inside a larger buffer whose bytes in
// front of it and in its spare capacity behind it hold a known pattern.
// A decoder that writes anywhere outside the destination's length, as an
// append-style decoder that writes up to cap does, changes the pattern.
//
// The destination is buf[pre:pre+n] with its capacity running to the end
// of buf, so that a decoder sees the spare room that a window of a larger
// buffer would give it.
type Canary struct {
	buf []byte
	pre int
	n   int
}

// CanaryFront and CanaryBack are the guard sizes: more than any wild copy
// of the decoders (at most 64 bytes) in front, and several kilobytes of
// spare capacity behind.
const (
	CanaryFront = 64
	CanaryBack  = 4 << 10
)

var (
	patternMu sync.Mutex
	patternB  []byte
)

// pattern returns at least n bytes of the guard pattern, whose byte i is
// a function of i alone (period 256).
func pattern(n int) []byte {
	patternMu.Lock()
	defer patternMu.Unlock()
	if len(patternB) < n {
		b := make([]byte, max(n, 1<<20))
		for i := 0; i < 256; i++ {
			b[i] = byte(i*151 + 0x5A)
		}
		for k := 256; k < len(b); k *= 2 {
			copy(b[k:], b[:k])
		}
		patternB = b
	}
	return patternB[:n]
}

// NewCanary returns a destination of n bytes with guards on both sides.
// The destination is filled with the pattern too, so that a decoder that
// leaves part of it unwritten is seen when its result is compared.
func NewCanary(n int) *Canary {
	c := &Canary{buf: make([]byte, CanaryFront+n+CanaryBack), pre: CanaryFront, n: n}
	copy(c.buf, pattern(len(c.buf)))
	return c
}

// Dst returns the destination: n bytes, with spare capacity behind.
func (c *Canary) Dst() []byte { return c.buf[c.pre : c.pre+c.n] }

// Check reports a write outside the destination, or nil.
func (c *Canary) Check() error {
	want := pattern(len(c.buf))
	if !bytes.Equal(c.buf[:c.pre], want[:c.pre]) {
		i := 0
		for c.buf[i] == want[i] {
			i++
		}
		return fmt.Errorf("wrote %d bytes before the destination's start", c.pre-i)
	}
	end := c.pre + c.n
	if !bytes.Equal(c.buf[end:], want[end:]) {
		i := len(c.buf) - 1
		for c.buf[i] == want[i] {
			i--
		}
		first := end
		for c.buf[first] == want[first] {
			first++
		}
		return fmt.Errorf("wrote past the destination's end: guard bytes end+%d to end+%d changed", first-end, i-end)
	}
	return nil
}
