//go:build linux

package shuffle

import (
	"bytes"
	"math/rand/v2"
	"syscall"
	"testing"
)

// TestUnshuffleStreamsGuardPages puts each stream at the very end of a
// readable page, followed by a page that faults on any access, so that a
// kernel reading one byte past a stream crashes the test; the output
// must equal Unshuffle's.
func TestUnshuffleStreamsGuardPages(t *testing.T) {
	page := syscall.Getpagesize()
	for _, ts := range []int{4, 8} {
		if !CanUnshuffleStreams(ts) {
			t.Logf("typesize %d: no fast kernel on this CPU or build; checking the portable loop", ts)
		}
		rng := rand.New(rand.NewPCG(uint64(ts), 9))
		for _, n := range []int{31, 32, 33, 64, 95, 1000, page} {
			shuffled, want := randomShuffled(rng, n, ts)
			streams := make([][]byte, ts)
			for j := range streams {
				pages := (n + page - 1) / page
				m, err := syscall.Mmap(-1, 0, (pages+1)*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
				if err != nil {
					t.Fatal(err)
				}
				defer syscall.Munmap(m)
				if err := syscall.Mprotect(m[pages*page:], syscall.PROT_NONE); err != nil {
					t.Fatal(err)
				}
				s := m[pages*page-n : pages*page : pages*page]
				copy(s, shuffled[j*n:(j+1)*n])
				streams[j] = s
			}
			got := make([]byte, n*ts)
			UnshuffleStreams(got, streams)
			if !bytes.Equal(got, want) {
				t.Fatalf("typesize %d, %d elements: wrong bytes", ts, n)
			}
		}
	}
}
