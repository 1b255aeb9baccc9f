//go:build cgo && !purego && linux

package blosc

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
)

// TestFastCallUnderGC decodes zstd chunks through libzstd (fastCall: C
// code run without leaving the Go scheduler's view) on several goroutines
// while others collect garbage and grow their stacks, at GOMAXPROCS 1 and
// 2: every decode must come out right, and a stop-the-world must wait
// for the C calls rather than break them.
func TestFastCallUnderGC(t *testing.T) {
	if libzstd() == nil {
		t.Skip("libzstd.so.1 does not load here: fastCall has nothing to call")
	}
	SetDirectCalls(true)
	defer SetDirectCalls(false)
	plain := benchWalk(1 << 20)
	var chunks [][]byte
	for _, split := range []SplitMode{SplitAlways, SplitNever} {
		p := Params{Codec: CodecZstd, Clevel: 3, Typesize: 8, Blocksize: 128 << 10, Split: split}
		p.Filters[5] = FilterShuffle
		comp, err := Compress(nil, plain, p)
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, comp)
	}
	iters := 100
	if testing.Short() {
		iters = 10
	}
	for _, procs := range []int{1, 2} {
		old := runtime.GOMAXPROCS(procs)
		stop := make(chan struct{})
		var bg sync.WaitGroup
		bg.Add(2)
		go func() { // collections, each a stop-the-world
			defer bg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					runtime.GC()
				}
			}
		}()
		go func() { // garbage and deep stacks
			defer bg.Done()
			var deep func(n int) int
			deep = func(n int) int {
				var pad [256]byte
				pad[n%256] = byte(n)
				if n == 0 {
					return int(pad[0])
				}
				return deep(n-1) + int(pad[n%256])
			}
			for {
				select {
				case <-stop:
					return
				default:
					_ = make([]byte, 64<<10)
					deep(200)
				}
			}
		}()
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := make([]byte, len(plain))
				for i := range iters {
					c, err := NewChunkBytes(chunks[(g+i)%len(chunks)])
					if err == nil {
						clear(got)
						err = c.Decode(got)
					}
					if err != nil {
						errs <- err.Error()
						return
					}
					if !bytes.Equal(got, plain) {
						errs <- "decoded bytes differ"
						return
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		bg.Wait()
		runtime.GOMAXPROCS(old)
		close(errs)
		for e := range errs {
			t.Errorf("GOMAXPROCS=%d: %s", procs, e)
		}
	}
}
