// Package ordered runs numbered jobs on all cores and delivers their results in order.
package ordered

import (
	"runtime"
	"sync"
)

// Run runs work(i) for i in [0,n) on all cores and hands the results
// to emit in order. At most 2×GOMAXPROCS results are in flight, which
// bounds memory. It stops at the first error and returns it.
func Run(n int, work func(i int) ([]byte, error), emit func(i int, b []byte) error) error {
	workers := runtime.GOMAXPROCS(0)
	type result struct {
		b   []byte
		err error
	}
	slots := make([]chan result, n) // buffered: a worker never blocks on its result
	for i := range slots {
		slots[i] = make(chan result, 1)
	}
	next := make(chan int)
	stop := make(chan struct{})
	inflight := make(chan struct{}, 2*workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				b, err := work(i)
				slots[i] <- result{b, err}
			}
		}()
	}
	go func() {
		defer close(next)
		for i := 0; i < n; i++ {
			select {
			case inflight <- struct{}{}:
			case <-stop:
				return
			}
			select {
			case next <- i:
			case <-stop:
				return
			}
		}
	}()
	var err error
	for i := 0; i < n && err == nil; i++ {
		r := <-slots[i]
		<-inflight
		if err = r.err; err == nil {
			err = emit(i, r.b)
		}
	}
	close(stop)
	wg.Wait()
	return err
}
