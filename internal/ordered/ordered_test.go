package ordered

import (
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	var got []int
	err := Run(100, func(i int) ([]byte, error) { return []byte{byte(i)}, nil },
		func(i int, b []byte) error {
			if int(b[0]) != i {
				return fmt.Errorf("result %d at %d", b[0], i)
			}
			got = append(got, i)
			return nil
		})
	if err != nil || len(got) != 100 {
		t.Fatalf("%v, %d results", err, len(got))
	}
	boom := errors.New("boom")
	err = Run(1000, func(i int) ([]byte, error) {
		if i == 17 {
			return nil, boom
		}
		return nil, nil
	}, func(int, []byte) error { return nil })
	if err != boom {
		t.Fatalf("err = %v", err)
	}
	if err := Run(0, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// TestRunLazy is part of finding 5 of issue 11: Run plans its jobs
// lazily, so a huge job count costs nothing up front (it used to make a
// channel per job before starting).
func TestRunLazy(t *testing.T) {
	boom := errors.New("boom")
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	err := Run(1<<40, func(i int) ([]byte, error) {
		if i == 1000 {
			return nil, boom
		}
		return []byte{byte(i)}, nil
	}, func(i int, b []byte) error {
		if b[0] != byte(i) {
			return fmt.Errorf("result %d at %d", b[0], i)
		}
		return nil
	})
	if err != boom {
		t.Fatalf("err = %v", err)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("Run of 2^40 jobs stopped at job 1000 allocated %d bytes", grew)
	}
	// Stream with an end that next decides.
	k, sum := 0, 0
	err = Stream(func() (int, bool) { k++; return k, k <= 500 }, func(w, j int) ([]byte, error) {
		if w < 0 || w >= Workers() {
			return nil, fmt.Errorf("worker %d of %d", w, Workers())
		}
		return []byte{byte(j)}, nil
	}, func(j int, b []byte) error {
		sum += j
		return nil
	})
	if err != nil || sum != 500*501/2 {
		t.Fatalf("Stream: %v, sum %d", err, sum)
	}
}

// TestStreamContract runs Stream with jobs of uneven length on more
// workers than cores: results are emitted in order, by one goroutine at a
// time; next runs by one goroutine at a time and only with fewer than
// Window() jobs planned and not yet emitted; each worker index is in use
// by one job at a time.
func TestStreamContract(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const n = 3000
	var (
		planned, emitted atomic.Int64
		inNext, inEmit   atomic.Int32
		busy             [64]atomic.Int32
		bad              atomic.Value
	)
	fail := func(format string, a ...any) { bad.CompareAndSwap(nil, fmt.Sprintf(format, a...)) }
	k := 0
	err := Stream(func() (int, bool) {
		if inNext.Add(1) != 1 {
			fail("next called concurrently")
		}
		defer inNext.Add(-1)
		if p := planned.Load() - emitted.Load(); p >= int64(Window()) {
			fail("next called with %d jobs planned and not emitted, window %d", p, Window())
		}
		if k == n {
			return 0, false
		}
		k++
		planned.Add(1)
		return k - 1, true
	}, func(w, j int) (int, error) {
		if busy[w].Add(1) != 1 {
			fail("worker %d runs two jobs at once", w)
		}
		defer busy[w].Add(-1)
		if j%7 == 0 {
			time.Sleep(time.Duration(j%5) * 50 * time.Microsecond)
		}
		for i := 0; i < (j%13)*200; i++ {
			runtime.Gosched()
		}
		return j * 3, nil
	}, func(j, r int) error {
		if inEmit.Add(1) != 1 {
			fail("emit called concurrently")
		}
		defer inEmit.Add(-1)
		if int64(j) != emitted.Load() || r != j*3 {
			fail("emitted job %d (result %d) at position %d", j, r, emitted.Load())
		}
		emitted.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if b := bad.Load(); b != nil {
		t.Fatal(b)
	}
	if emitted.Load() != n {
		t.Fatalf("%d of %d results emitted", emitted.Load(), n)
	}
}

// TestStreamFirstErrorInOrder: the error returned is that of the first
// failing job in job order, even when a later job fails first in time,
// and nothing from the failing job on is emitted.
func TestStreamFirstErrorInOrder(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	early, late := errors.New("job 40"), errors.New("job 41")
	release := make(chan struct{})
	var emittedMax atomic.Int64
	emittedMax.Store(-1)
	err := Run(1000, func(i int) ([]byte, error) {
		switch i {
		case 40:
			<-release // fails only after job 41 has failed
			return nil, early
		case 41:
			defer close(release)
			return nil, late
		}
		return []byte{1}, nil
	}, func(i int, _ []byte) error {
		emittedMax.Store(int64(i))
		return nil
	})
	if err != early {
		t.Fatalf("err = %v, want %v", err, early)
	}
	if m := emittedMax.Load(); m != 39 {
		t.Fatalf("last job emitted %d, want 39", m)
	}
	// An error of emit stops the stream too.
	stop := errors.New("emit")
	calls := 0
	err = Run(1000, func(i int) ([]byte, error) { return nil, nil }, func(i int, _ []byte) error {
		calls++
		if i == 10 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 11 {
		t.Fatalf("err = %v after %d emits, want %v after 11", err, calls, stop)
	}
}

// BenchmarkStream measures what a job costs Stream itself: jobs of about
// 2 µs of work each (a CRC of 64 KiB), on every core. Run it with
// -cpu 1,2: the time per job at 2 should be about half that at 1 (it was
// no less when a planning and an emitting goroutine handed jobs and
// results on through channels).
func BenchmarkStream(b *testing.B) {
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i)
	}
	b.SetBytes(int64(len(buf)))
	i := 0
	err := Stream(func() (int, bool) { i++; return i, i <= b.N }, func(w, j int) (uint32, error) {
		return crc32.ChecksumIEEE(buf), nil
	}, func(int, uint32) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
}

// TestStreamPanicKept: a panic of work reaches the caller as itself (on
// one core, where the caller's goroutine runs every job), not as a fatal
// error of the stream's mutex.
func TestStreamPanicKept(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("recovered %v, want the panic of work", r)
		}
	}()
	Run(10, func(i int) ([]byte, error) {
		if i == 3 {
			panic("boom")
		}
		return nil, nil
	}, func(int, []byte) error { return nil })
	t.Fatal("Run returned")
}
