package blosc

import (
	"math/bits"
	"sync"
)

// Scratch buffers in power-of-two size classes, so the decode path does
// not allocate per call.
var bufPools [40]sync.Pool

func getBuf(n int) *[]byte {
	class := bits.Len(uint(n))
	if n > 0 && n&(n-1) == 0 {
		class--
	}
	if bp, ok := bufPools[class].Get().(*[]byte); ok {
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n, 1<<class)
	return &b
}

func putBuf(bp *[]byte) {
	c := cap(*bp)
	if c == 0 || c&(c-1) != 0 {
		return
	}
	bufPools[bits.Len(uint(c))-1].Put(bp)
}
