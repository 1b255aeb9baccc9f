//go:build cgo && !purego && linux

package blosc

import (
	"bytes"
	"io"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"
)

// deep recurses n frames of 256 bytes each, growing the goroutine's stack
// (which the runtime may shrink again at the next collection).
func deep(n int) int {
	var pad [256]byte
	pad[n%256] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%256])
}

// TestLibzstdUnderGC decodes zstd chunks through libzstd on several
// goroutines, at GOMAXPROCS 1 and 2, while other goroutines collect
// garbage, the decoding goroutines' stacks grow and shrink between calls,
// and the CPU profiler's signals land in the C code: every decode must
// come out right, and a corrupt stream must be an error.
func TestLibzstdUnderGC(t *testing.T) {
	if libzstd() == nil {
		t.Skip("libzstd.so.1 does not load here")
	}
	if err := pprof.StartCPUProfile(io.Discard); err == nil {
		defer pprof.StopCPUProfile()
	}

	plain := benchWalk(4 << 20)
	type tcase struct {
		comp  []byte
		plain []byte
	}
	var cases []tcase
	for _, p := range []Params{
		{Codec: CodecZstd, Clevel: 3, Typesize: 8, Blocksize: 128 << 10, Split: SplitAlways},
		{Codec: CodecZstd, Clevel: 3, Typesize: 8, Blocksize: 128 << 10, Split: SplitNever},
		{Codec: CodecZstd, Clevel: 1, Typesize: 8, Blocksize: 2 << 20, Split: SplitNever},
	} {
		p.Filters[5] = FilterShuffle
		comp, err := Compress(nil, plain, p)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, tcase{comp, plain})
	}
	// A corrupt copy of the never-split chunk: the zstd magic of its
	// first block's stream (after the stream's 4-byte size) flipped.
	bad := bytes.Clone(cases[1].comp)
	c0, err := NewChunkBytes(bad)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c0.CompressedExtent(0)
	for i := s + 4; i < s+8; i++ {
		bad[i] ^= 0x5a
	}

	iters := 30
	if testing.Short() {
		iters = 8
	}
	for _, procs := range []int{1, 2} {
		old := runtime.GOMAXPROCS(procs)
		stop := make(chan struct{})
		var bg sync.WaitGroup
		for _, work := range []func(){
			runtime.GC,                          // collections, each a stop-the-world
			func() { _ = make([]byte, 64<<10) }, // garbage
		} {
			bg.Add(1)
			go func() {
				defer bg.Done()
				for {
					select {
					case <-stop:
						return
					default:
						work()
					}
				}
			}()
		}
		var wg sync.WaitGroup
		errs := make(chan string, 16)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := make([]byte, len(plain))
				for i := range iters {
					deep(100 + 50*(i%8))
					tc := cases[(g+i)%len(cases)]
					c, err := NewChunkBytes(tc.comp)
					if err == nil {
						clear(got)
						err = c.Decode(got)
					}
					if err != nil {
						errs <- err.Error()
						return
					}
					if !bytes.Equal(got, tc.plain) {
						errs <- "decoded bytes differ"
						return
					}
					if i%5 == 0 {
						c, err := NewChunkBytes(bad)
						if err == nil {
							err = c.Decode(got)
						}
						if err == nil {
							errs <- "a corrupt stream decoded without error"
							return
						}
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
