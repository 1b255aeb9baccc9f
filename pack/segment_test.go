package pack

import (
	"sync"
	"testing"
)

// TestSegmentsTakeEachPieceOnce: goroutines that take their own share
// from the front and then the others' from the back, as fillParallel's
// do, take every piece exactly once, for any number of pieces and
// goroutines.
func TestSegmentsTakeEachPieceOnce(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 48, 1024} {
		for _, nw := range []int{1, 2, 3, 8} {
			nw := min(nw, n)
			for range 20 {
				segs := make([]segment, nw)
				for w := range segs {
					segs[w].set(w*n/nw, (w+1)*n/nw)
				}
				taken := make([]int32, n)
				var wg sync.WaitGroup
				for w := range nw {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for k, ok := segs[w].front(); ok; k, ok = segs[w].front() {
							taken[k]++ // each index once: no race unless taken twice
						}
						for v := 1; v < nw; v++ {
							s := &segs[(w+v)%nw]
							for k, ok := s.back(); ok; k, ok = s.back() {
								taken[k]++
							}
						}
					}()
				}
				wg.Wait()
				for k, c := range taken {
					if c != 1 {
						t.Fatalf("%d pieces, %d goroutines: piece %d taken %d times", n, nw, k, c)
					}
				}
			}
		}
	}
}
