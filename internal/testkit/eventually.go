package testkit

import (
	"testing"
	"time"
)

// Eventually calls cond until it returns true or timeout has passed, and
// reports whether it did; it is how a test waits for what another
// goroutine or process does in its own time (a daemon that exits, a
// RELEASE the kernel sends after close returns), instead of sleeping for
// a guessed while. The pauses between calls grow from 1 ms to 20 ms. cond
// is called once more after the deadline, so that a condition met during
// the last pause counts. tb may be nil (in a TestMain). The caller says
// what did not happen:
//
//	if !testkit.Eventually(t, 10*time.Second, func() bool { return done.Load() }) {
//		t.Fatal("not done after 10 s")
//	}
func Eventually(tb testing.TB, timeout time.Duration, cond func() bool) bool {
	if tb != nil {
		tb.Helper()
	}
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(pause, left))
		pause = min(2*pause, 20*time.Millisecond)
	}
}
