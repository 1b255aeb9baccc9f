package cache

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBoundAndEviction(t *testing.T) {
	c := New[int](1000)
	for i := 0; i < 50; i++ {
		v, err := c.GetOrLoad(i, func() ([]byte, error) { return make([]byte, 100), nil })
		if err != nil || len(v) != 100 {
			t.Fatal(err)
		}
		if s := c.Stats(); s.Bytes > 1000 {
			t.Fatalf("after %d loads the cache holds %d bytes", i+1, s.Bytes)
		}
	}
	s := c.Stats()
	if s.Entries != 10 || s.Evictions != 40 || s.Misses != 50 || s.Hits != 0 {
		t.Fatalf("stats %+v", s)
	}
	// The 10 most recent keys are cached, the older ones are not.
	if !c.Contains(49) || !c.Contains(40) || c.Contains(39) {
		t.Fatal("LRU order wrong")
	}
	if _, err := c.GetOrLoad(45, func() ([]byte, error) { t.Fatal("reloaded a cached key"); return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if c.Stats().Hits != 1 {
		t.Fatal("hit not counted")
	}
	// Too large to keep: returned, not cached.
	v, _ := c.GetOrLoad(-1, func() ([]byte, error) { return make([]byte, 5000), nil })
	if len(v) != 5000 || c.Contains(-1) {
		t.Fatal("oversized value handled wrong")
	}
}

func TestSingleFlight(t *testing.T) {
	c := New[string](1 << 20)
	var calls atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.GetOrLoad("k", func() ([]byte, error) {
				calls.Add(1)
				<-release
				return []byte("value"), nil
			})
			if err != nil || string(v) != "value" {
				t.Error(v, err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	if calls.Load() != 1 {
		t.Fatalf("load ran %d times", calls.Load())
	}
}

func TestErrorsAreNotCached(t *testing.T) {
	c := New[int](1 << 20)
	boom := errors.New("boom")
	if _, err := c.GetOrLoad(1, func() ([]byte, error) { return nil, boom }); err != boom {
		t.Fatal(err)
	}
	v, err := c.GetOrLoad(1, func() ([]byte, error) { return []byte{1}, nil })
	if err != nil || len(v) != 1 {
		t.Fatal("error was cached")
	}
}
