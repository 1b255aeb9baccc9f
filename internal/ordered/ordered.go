// Package ordered runs numbered jobs on all cores and delivers their results in order.
package ordered

import (
	"runtime"
	"sync"
)

// Run runs work(i) for i in [0,n) on all cores and hands the results
// to emit in order. At most 2×GOMAXPROCS results are in flight, which
// bounds memory; nothing is allocated per job up front, so n may be
// huge. It stops at the first error and returns it.
func Run(n int, work func(i int) ([]byte, error), emit func(i int, b []byte) error) error {
	i := 0
	return Stream(func() (int, bool) {
		if i >= n {
			return 0, false
		}
		i++
		return i - 1, true
	}, func(_ int, i int) ([]byte, error) { return work(i) }, emit)
}

// Window returns how many jobs Run and Stream plan or hold at most at
// once: two per core (GOMAXPROCS), so that each worker has the next job
// at hand while the results before it wait to be emitted.
func Window() int { return 2 * Workers() }

// Workers returns how many workers Run and Stream start: one per core
// (GOMAXPROCS).
func Workers() int { return max(runtime.GOMAXPROCS(0), 1) }

// Stream runs work on the jobs that next hands out, in order, until it
// reports false, on Workers() goroutines, and hands each job's result to
// emit in the order next gave them. work is told which worker runs it
// (0 ≤ w < Workers()), so that a worker can keep memory of its own. next
// is called from one goroutine at a time and only when a result slot is
// free: at most Window() jobs are planned or in flight, so the work is
// planned lazily and memory does not grow with the number of jobs. It
// stops at the first error and returns it.
//
// Each job costs a few channel operations (one to hand it out, one for
// its result, one to free its slot); nothing else is shared between the
// workers, so jobs of a megabyte or so keep many cores busy.
func Stream[J, R any](next func() (J, bool), work func(w int, j J) (R, error), emit func(J, R) error) error {
	workers := Workers()
	window := Window()
	type result struct {
		j   J
		r   R
		err error
		end bool // next reported the end: no job at this position
	}
	type task struct {
		seq int
		j   J
	}
	// Result slots, reused in turn: position seq uses slot seq%window,
	// and a position is handed out only once the one window earlier
	// has been emitted, so a worker never blocks on its slot.
	slots := make([]chan result, window)
	for i := range slots {
		slots[i] = make(chan result, 1)
	}
	tasks := make(chan task)
	stop := make(chan struct{})
	inflight := make(chan struct{}, window)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range tasks {
				r, err := work(w, t.j)
				slots[t.seq%window] <- result{j: t.j, r: r, err: err}
			}
		}()
	}
	go func() {
		defer close(tasks)
		for seq := 0; ; seq++ {
			select {
			case inflight <- struct{}{}:
			case <-stop:
				return
			}
			j, ok := next()
			if !ok {
				slots[seq%window] <- result{end: true}
				return
			}
			select {
			case tasks <- task{seq, j}:
			case <-stop:
				return
			}
		}
	}()
	var err error
	for seq := 0; err == nil; seq++ {
		r := <-slots[seq%window]
		<-inflight
		if r.end {
			break
		}
		if err = r.err; err == nil {
			err = emit(r.j, r.r)
		}
	}
	close(stop)
	wg.Wait()
	return err
}
