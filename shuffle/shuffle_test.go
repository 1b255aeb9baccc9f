package shuffle

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// testTypesizes are the typesizes of the differential tests.
var testTypesizes = func() []int {
	var ts []int
	for t := 1; t <= 33; t++ {
		ts = append(ts, t)
	}
	return append(ts, 64, 255)
}()

// testLengths are every length up to 600 plus some larger ones.
var testLengths = func() []int {
	var ls []int
	for n := 0; n <= 600; n++ {
		ls = append(ls, n)
	}
	for k := 0; k <= 40; k++ {
		ls = append(ls, 4096+k)
	}
	// 9525 and 16011 give the typesize-16 kernels, which work in chunks,
	// whole chunks followed by a partial one.
	return append(ls, 9525, 16011, 65536+7, 262144+3)
}()

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// testFlavours returns every implementation, each to be forced explicitly,
// and reports those the CPU cannot run as skipped subtests.
func testFlavours(t *testing.T) []*flavour {
	var fs []*flavour
	for _, fl := range flavours {
		if !fl.available {
			t.Run(fl.name, func(t *testing.T) { t.Skipf("%s not supported by this CPU", fl.name) })
			continue
		}
		fs = append(fs, fl)
	}
	return fs
}

// check runs one transform of every flavour on src and compares it with
// want.
func check(t *testing.T, what string, fs []*flavour, pick func(*flavour) func(dst, src []byte, ts int), want, src []byte, ts int) {
	t.Helper()
	got := make([]byte, len(src))
	for _, fl := range fs {
		sentinel(got)
		pick(fl)(got, src, ts)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s %s ts=%d len=%d: first difference at byte %d", fl.name, what, ts, len(src), firstDiff(got, want))
		}
	}
}

var (
	pickShuffle      = func(f *flavour) func(dst, src []byte, ts int) { return f.shuffle }
	pickUnshuffle    = func(f *flavour) func(dst, src []byte, ts int) { return f.unshuffle }
	pickBitShuffle   = func(f *flavour) func(dst, src []byte, ts int) { return f.bitShuffle }
	pickBitUnshuffle = func(f *flavour) func(dst, src []byte, ts int) { return f.bitUnshuffle }
)

// sentinel fills dst with a pattern, so a kernel that skips bytes fails.
func sentinel(b []byte) {
	for i := range b {
		b[i] = byte(0xa5 ^ i)
	}
}

func TestByteShuffleDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fs := testFlavours(t)
	for _, ts := range testTypesizes {
		for _, n := range testLengths {
			if n > 5000 && ts > 16 && ts != 64 {
				continue // keep the largest cases to the interesting typesizes
			}
			src := randomBytes(r, n)
			want := make([]byte, n)
			shuffleRef(want, src, ts)
			check(t, "shuffle", fs, pickShuffle, want, src, ts)
			unshuffleRef(want, src, ts)
			check(t, "unshuffle", fs, pickUnshuffle, want, src, ts)
		}
	}
}

func TestByteShuffleRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, ts := range testTypesizes {
		for _, n := range []int{0, 1, 31, 32 * ts, 32*ts + 17, 1000, 4099, 65543} {
			src := randomBytes(r, n)
			mid, back := make([]byte, n), make([]byte, n)
			Shuffle(mid, src, ts)
			Unshuffle(back, mid, ts)
			if !bytes.Equal(back, src) {
				t.Fatalf("ts=%d len=%d: Unshuffle(Shuffle(x)) != x", ts, n)
			}
		}
	}
}

// bitLengths returns the lengths, multiples of 8*ts, of the bit shuffle
// tests: every one up to about 3 KiB, plus 256 KiB and an odd multiple above
// the scratch block size.
func bitLengths(ts int) []int {
	var ls []int
	for n := 0; n <= 3072 || n <= 16*8*ts; n += 8 * ts {
		ls = append(ls, n)
	}
	big := 256 << 10
	odd := blockBytes*3 + 8*ts*5
	ls = append(ls, big-big%(8*ts), odd-odd%(8*ts))
	return ls
}

func TestBitShuffleDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	fs := testFlavours(t)
	for _, ts := range testTypesizes {
		for _, n := range bitLengths(ts) {
			src := randomBytes(r, n)
			want := make([]byte, n)
			bitShuffleRef(want, src, ts)
			check(t, "bitshuffle", fs, pickBitShuffle, want, src, ts)
			bitUnshuffleRef(want, src, ts)
			check(t, "bitunshuffle", fs, pickBitUnshuffle, want, src, ts)
		}
	}
}

func TestBitShuffleRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, ts := range append(testTypesizes, 1000, 3000) {
		for _, n := range []int{0, 8 * ts, 64 * ts, 8 * ts * min(1001, 65536/ts)} {
			src := randomBytes(r, n)
			mid, back := make([]byte, n), make([]byte, n)
			BitShuffle(mid, src, ts)
			BitUnshuffle(back, mid, ts)
			if !bytes.Equal(back, src) {
				t.Fatalf("ts=%d len=%d: BitUnshuffle(BitShuffle(x)) != x", ts, n)
			}
		}
	}
}

// TestBitShuffleLargeTypesize checks the path where a block of 8 elements
// does not fit the scratch buffer.
func TestBitShuffleLargeTypesize(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, ts := range []int{blockBytes/8 - 1, blockBytes / 8, blockBytes/8 + 3} {
		n := 8 * ts * 3
		src := randomBytes(r, n)
		want, got := make([]byte, n), make([]byte, n)
		bitShuffleRef(want, src, ts)
		BitShuffle(got, src, ts)
		if !bytes.Equal(got, want) {
			t.Fatalf("bitshuffle ts=%d: first difference at %d", ts, firstDiff(got, want))
		}
		bitUnshuffleRef(want, src, ts)
		BitUnshuffle(got, src, ts)
		if !bytes.Equal(got, want) {
			t.Fatalf("bitunshuffle ts=%d: first difference at %d", ts, firstDiff(got, want))
		}
	}
}

func TestPanics(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"length mismatch", func() { Shuffle(make([]byte, 3), make([]byte, 4), 1) }},
		{"typesize 0", func() { Unshuffle(nil, nil, 0) }},
		{"bit length", func() { BitShuffle(make([]byte, 12), make([]byte, 12), 1) }},
		{"rows past the planes", func() { UnshufflePlanesRows(make([]byte, 4096), 256, make([]byte, 4*100), 4, 100, 0, 40, 3, 40) }},
		{"rows past dst", func() { UnshufflePlanesRows(make([]byte, 400), 256, make([]byte, 4*400), 4, 400, 0, 40, 3, 40) }},
		{"negative stride", func() { UnshufflePlanesRows(make([]byte, 4096), -1, make([]byte, 4*400), 4, 400, 0, 40, 3, 40) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			c.f()
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func FuzzShuffleRoundTrip(f *testing.F) {
	f.Add([]byte("hello, shuffle world: 0123456789abcdef"), uint8(4))
	f.Add(make([]byte, 1000), uint8(8))
	f.Add(bytes.Repeat([]byte{1, 2, 3}, 300), uint8(16))
	f.Fuzz(func(t *testing.T, data []byte, ts8 uint8) {
		ts := int(ts8)%40 + 1
		n := len(data)
		want, got, back := make([]byte, n), make([]byte, n), make([]byte, n)
		shuffleRef(want, data, ts)
		for _, fl := range flavours {
			if !fl.available {
				continue
			}
			fl.shuffle(got, data, ts)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s shuffle ts=%d len=%d differs from reference", fl.name, ts, n)
			}
			fl.unshuffle(back, got, ts)
			if !bytes.Equal(back, data) {
				t.Fatalf("%s unshuffle ts=%d len=%d does not round-trip", fl.name, ts, n)
			}
		}
		m := n - n%(8*ts)
		bitShuffleRef(want[:m], data[:m], ts)
		for _, fl := range flavours {
			if !fl.available {
				continue
			}
			fl.bitShuffle(got[:m], data[:m], ts)
			if !bytes.Equal(got[:m], want[:m]) {
				t.Fatalf("%s bitshuffle ts=%d len=%d differs from reference", fl.name, ts, m)
			}
			fl.bitUnshuffle(back[:m], got[:m], ts)
			if !bytes.Equal(back[:m], data[:m]) {
				t.Fatalf("%s bitunshuffle ts=%d len=%d does not round-trip", fl.name, ts, m)
			}
		}
	})
}

// TestFlavours: the tests that force each flavour (testFlavours) skip
// those the CPU cannot run, so a flavour marked unavailable by mistake
// would go untested without a failure. The portable flavour, last, and
// SSE2, where the build has it (every amd64 CPU has SSE2), must run;
// each flavour is listed once. It logs which ran.
func TestFlavours(t *testing.T) {
	seen := map[string]bool{}
	for _, fl := range flavours {
		t.Logf("%s available=%v", fl.name, fl.available)
		if seen[fl.name] {
			t.Errorf("flavour %s listed twice", fl.name)
		}
		seen[fl.name] = true
		if (fl.name == "generic" || fl.name == "sse2") && !fl.available {
			t.Errorf("flavour %s is marked unavailable: its tests would skip it", fl.name)
		}
	}
	if last := flavours[len(flavours)-1]; last != &flavourGeneric {
		t.Errorf("the last flavour is %s, want the portable one (generic)", last.name)
	}
}
