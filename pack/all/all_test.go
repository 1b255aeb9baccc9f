package all

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"testing/iotest"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// TestEveryFixture opens every valid fixture by content and checks its
// view: sha256 against the manifest, and iotest.TestReader (under the
// race detector, on views up to 512 KiB).
func TestEveryFixture(t *testing.T) {
	fx, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	formats := map[string]int{}
	for _, f := range fx {
		if !f.ValidPlain {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			v, err := OpenView(f.Path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			formats[v.Container.Info().Format]++
			var buf bytes.Buffer
			if _, err := v.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			if int64(len(got)) != v.Size {
				t.Fatalf("WriteTo gave %d bytes, Size %d", len(got), v.Size)
			}
			data := got
			if v.NPY {
				hl := int(binary.LittleEndian.Uint16(got[8:]))
				data = got[10+hl:]
			}
			if s := sha256.Sum256(data); hex.EncodeToString(s[:]) != f.PlainSHA || int64(len(data)) != f.PlainSize {
				t.Fatalf("%d bytes, sha %x; want %d %s", len(data), s, f.PlainSize, f.PlainSHA)
			}
			// TestReader reads byte by byte, which takes minutes under the
			// race detector: there, only the views up to 64 KiB (the
			// sha256 above checks every view whole; make purego runs
			// TestReader on every view).
			if v.Size <= 64<<10 || !(testkit.RaceEnabled || testing.Short()) {
				if err := iotest.TestReader(io.NewSectionReader(v, 0, v.Size), got); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	for _, want := range []string{"chunk", "bloscpack", "b2frame", "b2nd", "sframe"} {
		if formats[want] == 0 {
			t.Errorf("no fixture opened as %q (%v)", want, formats)
		}
	}
}

// TestUnknown refuses files that are no container.
func TestUnknown(t *testing.T) {
	p := filepath.Join(fixtures.Dir(), "MANIFEST.tsv")
	if _, err := OpenView(p, nil); err == nil {
		t.Fatal("MANIFEST.tsv opened as a container")
	}
}

// BenchmarkUnpackVsDecode measures, in one run, the single-goroutine
// decode of every chunk of a 256 MiB LZ4+shuffle frame (the codec's own
// speed) and View.WriteTo of the same frame (what `bloscfs unpack` does,
// on all cores); it reports both and their ratio.
func BenchmarkUnpackVsDecode(b *testing.B) {
	const size, cs = 256 << 20, 4 << 20
	path := filepath.Join(b.TempDir(), "f.b2frame")
	writeFrame(b, path, blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Split: blosc.SplitAuto}, cs, size/cs,
		func(i int, chunk []byte) {
			for k := 0; k < cs; k += 8 {
				x := float64(i*cs/8 + k/8)
				binary.LittleEndian.PutUint64(chunk[k:], math.Float64bits(math.Round(math.Sin(x*0.0007)*800*1024)/1024))
			}
		})
	v, err := OpenView(path, pack.NoCache{})
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	fr := v.Container.(*frame.Frame)
	out := make([]byte, cs)
	var decode, unpack float64
	b.ResetTimer()
	for b.Loop() {
		t := time.Now()
		for i := 0; i < fr.NumChunks(); i++ {
			c, err := fr.OpenChunk(i)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Decode(out[:c.Nbytes]); err != nil {
				b.Fatal(err)
			}
		}
		decode = size / time.Since(t).Seconds() / 1e9
		t = time.Now()
		if _, err := v.WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
		unpack = size / time.Since(t).Seconds() / 1e9
	}
	b.ReportMetric(decode, "decode-1core-GB/s")
	b.ReportMetric(unpack, "unpack-GB/s")
	b.ReportMetric(unpack/decode, "unpack/decode")
	b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "cores")
}

// TestPiecesBounded: a tiny frame of huge special chunks is read in
// bounded pieces (it used to allocate whole chunks, gigabytes each).
func TestPiecesBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "zeros.b2frame")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 1 << 30
	w, err := frame.NewWriter(f, frame.Params{Chunk: blosc.DefaultParams(8), ChunkSize: chunk})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := w.AddSpecial(frame.SpecialZero, chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	v, err := OpenView(path, pack.NoCache{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var total int64
	for _, p := range v.pieces() {
		if p.Len > pieceMax {
			t.Fatalf("piece of %d bytes", p.Len)
		}
		total += p.Len
	}
	if total != 2*chunk {
		t.Fatalf("pieces cover %d bytes", total)
	}
	if testing.Short() {
		return
	}
	n, err := v.WriteTo(zeroCheck{t})
	if err != nil || n != 2*chunk {
		t.Fatalf("WriteTo: %d, %v", n, err)
	}
}

type zeroCheck struct{ t *testing.T }

func (z zeroCheck) Write(p []byte) (int, error) {
	if !allZero(p) {
		z.t.Fatal("non-zero byte")
	}
	return len(p), nil
}

// zeros is what allZero compares with.
var zeros = make([]byte, 64<<10)

// allZero reports whether p is all zero bytes. It compares with
// bytes.Equal, not a loop over the bytes: the race detector checks each
// byte a loop reads, and these tests read gigabytes of zeros.
func allZero(p []byte) bool {
	for len(p) > 0 {
		n := min(len(p), len(zeros))
		if !bytes.Equal(p[:n], zeros[:n]) {
			return false
		}
		p = p[n:]
	}
	return true
}
