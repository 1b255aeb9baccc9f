package pack

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/internal/testkit"
)

// TestReadRuns gathers random runs (rows of an N-D array's chunks, a
// few bytes to a few blocks long, in chunk order, in the reverse order
// and shuffled) and checks each byte against the plain data, with and
// without a cache, for a random and a sequential reader, two gathers at
// a time.
func TestReadRuns(t *testing.T) {
	plain := testPlain(3<<20 + 12345)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 4, Blocksize: 64 << 10}
	p.Filters[4], p.Filters[5] = blosc.FilterDelta, blosc.FilterShuffle // delta: block 0 dependency
	src := newMemSource(t, plain, 1<<20, p)
	plainShuffle := p
	plainShuffle.Filters[4] = 0
	src2 := newMemSource(t, plain, 1<<20, plainShuffle)
	rounds := 60
	if testkit.RaceEnabled {
		rounds = 10
	}
	for _, s := range []*memSource{src, src2} {
		for _, c := range []BlockCache{NoCache{}, cache.New[BlockKey](256 << 10), nil} {
			r := NewChunkReader("mem", s, c)
			rng := rand.New(rand.NewPCG(2, 3))
			for round := range rounds {
				var wg sync.WaitGroup
				errs := make([]error, 2)
				for g := range 2 {
					runs, size := randomRuns(rng, int64(len(plain)), round%3)
					once := rng.IntN(2) == 0
					wg.Go(func() {
						buf := make([]byte, size)
						if err := r.ReadRuns(buf, runs, once); err != nil {
							errs[g] = err
							return
						}
						for _, run := range runs {
							if !bytes.Equal(buf[run.To:run.To+run.N], plain[run.At:run.At+run.N]) {
								errs[g] = fmt.Errorf("run %+v (once %v): wrong bytes", run, once)
								return
							}
						}
					})
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// randomRuns returns runs over size plain bytes into a buffer of the
// returned length: rows of stride bytes at a random start, cut into
// pieces, ordered by offset (order 0), by offset downwards (1) or
// shuffled (2).
func randomRuns(rng *rand.Rand, size int64, order int) ([]Run, int64) {
	n := 1 + rng.IntN(300)
	scale := []int64{64, 4 << 10, 100 << 10}[rng.IntN(3)] // many rows to a block, or few
	row := 1 + rng.Int64N(scale)
	stride := row + rng.Int64N(2*scale)
	at := rng.Int64N(size)
	var runs []Run
	to := int64(0)
	for range n {
		if at >= size {
			break
		}
		k := min(row, size-at)
		runs = append(runs, Run{At: at, To: to, N: k})
		to += k + rng.Int64N(3)
		at += stride
	}
	switch order {
	case 1:
		slices.Reverse(runs)
	case 2:
		rng.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
	}
	return runs, to
}
