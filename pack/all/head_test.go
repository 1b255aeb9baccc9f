package all

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/internal/testkit/hostile"
	"github.com/bloscfs/bloscfs/npy"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// probeHeadLen is the head a remote listing fetches (fs.probeHead).
const probeHeadLen = 64 << 10

// headOf runs pack.OpenHead on the first n bytes of b, and again on as
// many as a *pack.HeadShortError asks for (at most twice, as the remote
// probe does). It returns the head, the error, and the bytes it read.
func headOf(b []byte, n int) (pack.Head, error, int) {
	n = min(n, len(b))
	for range 4 {
		h, err := pack.OpenHead(b[:n], int64(len(b)), "head")
		var short *pack.HeadShortError
		if !errors.As(err, &short) {
			return h, err, n
		}
		if short.N <= int64(n) || short.N > int64(len(b)) || short.N > pack.MaxHead {
			return h, err, n
		}
		n = int(short.N)
	}
	return pack.Head{}, errors.New("a head asked for more four times"), n
}

// checkHead compares what the head of b tells with what a full open of
// b gives: the same format, size and NPY flag where the open succeeds
// (or pack.ErrNoHead), and no more bytes read than the header takes.
func checkHead(t *testing.T, b []byte, n int) (ok, noHead bool, read int) {
	t.Helper()
	h, herr, read := headOf(b, n)
	v, err := OpenViewReader(bytes.NewReader(b), int64(len(b)), "full", pack.NoCache{})
	if err != nil {
		if herr == nil {
			t.Logf("the head passes (%s, %d bytes) but the full open fails: %v", h.Format, h.Size, err)
		}
		return herr == nil, false, read
	}
	if errors.Is(herr, pack.ErrNoHead) {
		return false, true, read
	}
	if herr != nil {
		t.Fatalf("first %d bytes: %v; the full open gives %s of %d bytes", n, herr, v.Container.Info().Format, v.Size)
	}
	if h.Size != v.Size || h.NPY != v.NPY || h.Format != v.Container.Info().Format {
		t.Fatalf("first %d bytes: head %+v; the full open gives %s of %d bytes (npy %v)", n, h, v.Container.Info().Format, v.Size, v.NPY)
	}
	return true, false, read
}

// TestHeadEveryFixture: for every fixture file, the head a listing
// fetches (64 KiB, and shorter ones down to a few bytes, which take the
// fallback of a second read of the header) tells the format and the
// view's size a full open gives, or says that the format cannot tell
// (pack.ErrNoHead: Bloscpack files without recorded sizes); it never
// accepts a valid file the full open reads differently.
func TestHeadEveryFixture(t *testing.T) {
	fxs, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	var checked, noHead, fallback, beyond int
	for _, fx := range fxs {
		if fx.IsDir {
			continue
		}
		b, err := os.ReadFile(fx.Path)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fx.Name, func(t *testing.T) {
			for _, n := range []int{probeHeadLen, 4096, 200, 87, 32, 16, 1} {
				ok, nh, read := checkHead(t, b, n)
				if fx.ValidPlain && !ok && !nh {
					t.Fatalf("first %d bytes: a valid fixture is not recognised", n)
				}
				if n == probeHeadLen && ok {
					checked++
					if read > n {
						beyond++
					}
				}
				if n == probeHeadLen && nh {
					noHead++
				}
				if ok && read > n {
					fallback++
				}
			}
		})
	}
	t.Logf("%d fixtures told by their first 64 KiB (%d of them with a second read), %d by their whole only (pack.ErrNoHead); %d second reads of a header over all head lengths", checked, beyond, noHead, fallback)
	if checked < 50 || fallback == 0 {
		t.Errorf("only %d fixtures told by their head, %d fallbacks", checked, fallback)
	}
}

// TestHeadLargeHeader: a frame whose header (a metalayer of 100 KiB)
// reaches past the 64 KiB a listing fetches asks for its whole header
// (*pack.HeadShortError), which then tells the size; a b2nd array's
// view is its .npy size.
func TestHeadLargeHeader(t *testing.T) {
	write := func(_ string, p frame.Params, chunks ...[]byte) []byte {
		b, err := hostile.FrameBytes(p, chunks...)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	big := frame.Params{Chunk: blosc.DefaultParams(1), Metalayers: []frame.Metalayer{{Name: "big", Value: bytes.Repeat([]byte{7}, 100<<10)}}}
	plain := bytes.Repeat([]byte("0123456789abcdef"), 1<<14)
	b := write("big.b2frame", big, plain, plain, plain[:1000])
	if _, err := pack.OpenHead(b[:probeHeadLen], int64(len(b)), "big"); !errors.As(err, new(*pack.HeadShortError)) {
		t.Fatalf("64 KiB of a frame with a 100 KiB header: %v, want a *pack.HeadShortError", err)
	}
	ok, _, read := checkHead(t, b, probeHeadLen)
	if !ok || read <= probeHeadLen || read > 101<<10 {
		t.Fatalf("ok %v after reading %d of %d bytes", ok, read, len(b))
	}

	a := frame.Array{Shape: []int64{300, 7}, ChunkShape: []int32{128, 7}, BlockShape: []int32{32, 7}, Dtype: "<i4", Itemsize: 4}
	nd := frame.Params{Chunk: blosc.DefaultParams(4), Metalayers: []frame.Metalayer{{Name: "b2nd", Value: a.MarshalMeta()}, {Name: "pad", Value: make([]byte, 70<<10)}}}
	cb := 128 * 7 * 4
	b = write("a.b2nd", nd, make([]byte, cb), make([]byte, cb), make([]byte, cb))
	ok, _, read = checkHead(t, b, probeHeadLen)
	if !ok || read <= probeHeadLen {
		t.Fatalf("b2nd: ok %v after reading %d bytes", ok, read)
	}
	h, _, _ := headOf(b, probeHeadLen)
	if !h.NPY || h.Format != "b2nd" || h.Size != int64(len(npy.Header("<i4", a.Shape)))+300*7*4 {
		t.Fatalf("b2nd head %+v", h)
	}
}

// TestHeadBad: what no format recognises, and headers that do not
// parse, are errors of their own, never a size.
func TestHeadBad(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		size int64
		want error
	}{
		{"text", []byte("hello, world: not a container at all, just some text"), 52, pack.ErrUnknownFormat},
		{"empty", nil, 0, pack.ErrUnknownFormat},
		{"frame magic only", []byte(frame.Magic), 1 << 20, nil},
		{"bloscpack v1", append([]byte("blpk\x01\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00"), make([]byte, 64)...), 1 << 20, pack.ErrNoHead},
	} {
		h, err := pack.OpenHead(tc.b, tc.size, tc.name)
		switch {
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: %+v, %v; want %v", tc.name, h, err, tc.want)
		case err == nil:
			t.Errorf("%s: %+v, want an error", tc.name, h)
		}
	}
}

// FuzzOpenHead parses arbitrary bytes, or their first cut bytes, as a
// container's head: nothing may panic or allocate without bound, a
// short head asks for a bounded number of bytes, and where the full open
// of the bytes succeeds the head tells the same size or that it cannot
// (pack.ErrNoHead).
func FuzzOpenHead(f *testing.F) {
	if testkit.RaceEnabled {
		f.Skip("runs without the race detector (make purego, make fuzz)")
	}
	fxs, err := fixtures.Load()
	if err != nil {
		f.Fatal(err)
	}
	for _, fx := range fxs {
		if fx.IsDir {
			continue
		}
		if b, err := os.ReadFile(fx.Path); err == nil && len(b) <= 256<<10 {
			f.Add(b, uint32(probeHeadLen))
			f.Add(b, uint32(100))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, cut uint32) {
		mem := testkit.StartAlloc()
		defer func() { mem.Check(t, len(data), 1<<20) }()
		head := data[:min(int(cut), len(data))]
		h, err := pack.OpenHead(head, int64(len(data)), "fuzz")
		// A short head asks for more, at most three times (the sniffed
		// 64 bytes, a frame's fixed header, its whole header), each
		// time for more than it had.
		var short *pack.HeadShortError
		for asks := 0; errors.As(err, &short); asks++ {
			if short.N <= int64(len(head)) || short.N > pack.MaxHead || asks == 3 {
				t.Fatalf("a head of %d bytes asks for %d (ask %d)", len(head), short.N, asks+1)
			}
			if short.N > int64(len(data)) {
				return // the file ends inside its header: the full open fails too
			}
			head = data[:short.N]
			h, err = pack.OpenHead(head, int64(len(data)), "fuzz")
		}
		if err == nil && h.Size < 0 {
			t.Fatalf("negative size %d", h.Size)
		}
		v, ferr := OpenViewReader(bytes.NewReader(data), int64(len(data)), "fuzz", pack.NoCache{})
		if ferr != nil {
			return
		}
		switch {
		case errors.Is(err, pack.ErrNoHead):
		case err != nil:
			t.Fatalf("head: %v; the full open gives %d bytes", err, v.Size)
		case h.Size != v.Size || h.NPY != v.NPY:
			t.Fatalf("head %+v; the full open gives %d bytes (npy %v)", h, v.Size, v.NPY)
		}
	})
}
