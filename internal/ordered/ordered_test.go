package ordered

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
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
