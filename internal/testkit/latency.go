package testkit

import (
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ReadLatencies does n 4 KiB preads of path at random offsets below size
// (the kernel told to expect random reads) and returns the p50 and p99
// latencies. The offsets are the same in every run.
func ReadLatencies(tb testing.TB, path string, size int64, n int) (p50, p99 time.Duration) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 4096)
	ds := make([]time.Duration, n)
	for i := range ds {
		off := rng.Int64N(size/4096) * 4096
		t := time.Now()
		if _, err := f.ReadAt(buf, off); err != nil {
			tb.Fatal(err)
		}
		ds[i] = time.Since(t)
	}
	slices.Sort(ds)
	return ds[n/2], ds[n*99/100]
}
