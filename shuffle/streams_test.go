package shuffle

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestUnshuffleStreams checks UnshuffleStreams against Unshuffle at every
// element count around the kernel's group sizes, with the streams at
// their own addresses, for typesizes with and without a fast kernel.
func TestUnshuffleStreams(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, ts := range []int{1, 2, 4, 8, 16} {
		for n := 0; n <= 200; n++ {
			if n > 70 && n%7 != 0 {
				continue
			}
			shuffled, want := randomShuffled(rng, n, ts)
			// Each stream in a buffer of its own, with guard bytes
			// around it that must stay untouched.
			streams := make([][]byte, ts)
			for j := range streams {
				buf := make([]byte, n+64)
				copy(buf[32:], shuffled[j*n:(j+1)*n])
				streams[j] = buf[32 : 32+n]
			}
			got := make([]byte, n*ts+32)
			for i := range got {
				got[i] = 0xa5
			}
			UnshuffleStreams(got[:n*ts], streams)
			if !bytes.Equal(got[:n*ts], want) {
				t.Fatalf("typesize %d, %d elements: wrong bytes", ts, n)
			}
			for _, b := range got[n*ts:] {
				if b != 0xa5 {
					t.Fatalf("typesize %d, %d elements: wrote past dst", ts, n)
				}
			}
		}
	}
}

func TestUnshuffleStreamsArgs(t *testing.T) {
	for _, tc := range []struct {
		dst     int
		streams []int
	}{{16, []int{2, 2, 2, 2, 2, 2, 2, 3}}, {17, []int{2, 2, 2, 2, 2, 2, 2, 2}}, {0, nil}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("dst %d, streams %v: no panic", tc.dst, tc.streams)
				}
			}()
			s := make([][]byte, len(tc.streams))
			for j, n := range tc.streams {
				s[j] = make([]byte, n)
			}
			UnshuffleStreams(make([]byte, tc.dst), s)
		}()
	}
}

// BenchmarkUnshuffleStreams compares unshuffling 8 streams that lie apart
// in place with copying them together first and unshuffling, for a
// 256 KiB float64 block: hot (the same streams each time, in the CPU's
// caches) and cold (streams spread over 128 MiB, as stored streams read
// from a file's mapping are), where the copy takes the cache misses.
func BenchmarkUnshuffleStreams(b *testing.B) {
	const n = 32 << 10
	dst := make([]byte, 8*n)
	tmp := make([]byte, 8*n)
	hot := make([][]byte, 8)
	for j := range hot {
		hot[j] = make([]byte, n+4096)[:n]
	}
	pool := make([]byte, 128<<20)
	for i := range pool {
		pool[i] = byte(i * 7)
	}
	const span = 8 * (n + 1000)
	region := 0
	cold := func() [][]byte {
		if (region+1)*span > len(pool) {
			region = 0
		}
		s := make([][]byte, 8)
		for j := range s {
			off := region*span + j*(n+1000)
			s[j] = pool[off : off+n]
		}
		region++
		return s
	}
	for _, tc := range []struct {
		name    string
		streams func() [][]byte
	}{{"hot", func() [][]byte { return hot }}, {"cold", cold}} {
		b.Run(tc.name+"/streams", func(b *testing.B) {
			b.SetBytes(8 * n)
			for b.Loop() {
				UnshuffleStreams(dst, tc.streams())
			}
		})
		b.Run(tc.name+"/copy+unshuffle", func(b *testing.B) {
			b.SetBytes(8 * n)
			for b.Loop() {
				for j, s := range tc.streams() {
					copy(tmp[j*n:], s)
				}
				Unshuffle(dst, tmp, 8)
			}
		})
	}
}

// BenchmarkUnshufflePlanesRows unshuffles the rows a READ of an N-D
// view takes of a block kept as byte planes: a 512 KiB float32 block as
// 728 rows of 180 items (a (24, 90, 180) chunk's rows), to rows 2880
// bytes apart (its view's), one call per row (UnshufflePlanes) and one
// call for them all; the whole block at once for comparison.
func BenchmarkUnshufflePlanesRows(b *testing.B) {
	const t, n, row, stride = 4, 128 << 10, 180, 2880
	rows := n / row
	planes := make([]byte, t*n)
	for i := range planes {
		planes[i] = byte(i * 7)
	}
	dst := make([]byte, (rows-1)*stride+row*t)
	b.Run("per-row", func(b *testing.B) {
		b.SetBytes(int64(rows * row * t))
		for b.Loop() {
			for r := range rows {
				UnshufflePlanes(dst[r*stride:r*stride+row*t], planes, t, n, r*row, row)
			}
		}
	})
	b.Run("rows", func(b *testing.B) {
		b.SetBytes(int64(rows * row * t))
		for b.Loop() {
			UnshufflePlanesRows(dst, stride, planes, t, n, 0, row, rows, row)
		}
	})
	b.Run("whole", func(b *testing.B) {
		b.SetBytes(int64(t * n))
		for b.Loop() {
			UnshufflePlanes(dst[:t*n], planes, t, n, 0, n)
		}
	})
}

// randomShuffled returns n random elements of ts bytes in shuffled form,
// and their unshuffled form, from Unshuffle.
func randomShuffled(rng *rand.Rand, n, ts int) (shuffled, want []byte) {
	shuffled = make([]byte, n*ts)
	for i := range shuffled {
		shuffled[i] = byte(rng.Uint32())
	}
	want = make([]byte, n*ts)
	Unshuffle(want, shuffled, ts)
	return shuffled, want
}

// TestUnshufflePlanes checks UnshufflePlanes against Unshuffle of the
// whole block, for ranges of every length around the kernel's group at
// the start, the middle and the end of blocks shorter and longer than
// two groups, for typesizes with and without a fast kernel; nothing past
// dst[:m*t] is written.
func TestUnshufflePlanes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, ts := range []int{1, 2, 3, 4, 8, 16} {
		for _, n := range []int{0, 1, 31, 32, 33, 40, 63, 64, 65, 100, 200, 1000} {
			planes, want := randomShuffled(rng, n, ts)
			for range 60 {
				m := rng.IntN(n + 1)
				if rng.IntN(3) == 0 {
					m = min(n, 32*(1+rng.IntN(3))+rng.IntN(3)-1)
				}
				e := rng.IntN(n - m + 1)
				got := make([]byte, m*ts+16)
				for i := range got {
					got[i] = 0xa5
				}
				UnshufflePlanes(got[:m*ts], planes, ts, n, e, m)
				if !bytes.Equal(got[:m*ts], want[e*ts:(e+m)*ts]) {
					t.Fatalf("typesize %d, items [%d,+%d) of %d: wrong bytes", ts, e, m, n)
				}
				for _, b := range got[m*ts:] {
					if b != 0xa5 {
						t.Fatalf("typesize %d, items [%d,+%d) of %d: wrote past dst", ts, e, m, n)
					}
				}
			}
		}
	}
}

// TestUnshufflePlanesRows checks UnshufflePlanesRows against a call of
// UnshufflePlanes per row, for rows shorter and longer than the kernel's
// group, at strides that leave gaps between them (as an N-D view's rows
// of one chunk) or none, for typesizes with and without a fast kernel;
// nothing outside the rows is written.
func TestUnshufflePlanesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, ts := range []int{1, 2, 3, 4, 8, 16} {
		for _, n := range []int{31, 32, 33, 64, 100, 200, 1000, 4096} {
			planes, _ := randomShuffled(rng, n, ts)
			for range 40 {
				m := 1 + rng.IntN(min(n, 200))
				if rng.IntN(3) == 0 {
					m = min(n, 32*(1+rng.IntN(3))+rng.IntN(3)-1)
				}
				skip := m + rng.IntN(8)
				if rng.IntN(4) == 0 {
					skip = m
				}
				rows := 1 + rng.IntN(max((n-m)/skip, 0)+1)
				e := rng.IntN(n - m - (rows-1)*skip + 1)
				stride := m*ts + rng.IntN(3)*ts*7
				size := (rows-1)*stride + m*ts + 16
				got, want := make([]byte, size), make([]byte, size)
				for i := range got {
					got[i], want[i] = 0xa5, 0xa5
				}
				for r := range rows {
					UnshufflePlanes(want[r*stride:r*stride+m*ts], planes, ts, n, e+r*skip, m)
				}
				UnshufflePlanesRows(got[:size-16], stride, planes, ts, n, e, m, rows, skip)
				if !bytes.Equal(got, want) {
					t.Fatalf("typesize %d, %d rows of %d items from %d (skip %d) of %d, stride %d: wrong bytes", ts, rows, m, e, skip, n, stride)
				}
			}
		}
	}
}

// TestUnshufflePlanesArgs checks that UnshufflePlanes and
// UnshufflePlanesRows panic, rather than read or write out of range,
// on arguments outside their slices, also where t*n overflows (the
// rows kernel computes plane addresses itself: a check that wrapped
// let it read at n bytes past planes).
func TestUnshufflePlanesArgs(t *testing.T) {
	dst, planes := make([]byte, 256), make([]byte, 64)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"rows, t*n wraps", func() { UnshufflePlanesRows(dst, 0, planes, 8, 1<<61, 0, 32, 1, 0) }},
		{"rows, n past planes", func() { UnshufflePlanesRows(dst, 0, planes, 2, 33, 0, 32, 1, 0) }},
		{"rows, past dst", func() { UnshufflePlanesRows(dst, 240, planes, 1, 64, 0, 32, 2, 32) }},
		{"rows, past planes by skip", func() { UnshufflePlanesRows(dst, 64, planes, 1, 64, 0, 32, 2, 33) }},
		{"planes, t*n wraps", func() { UnshufflePlanes(dst, planes, 8, 1<<61, 0, 32) }},
		{"planes, n past planes", func() { UnshufflePlanes(dst, planes, 4, 17, 0, 16) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tc.name)
				}
			}()
			tc.f()
		}()
	}
}
