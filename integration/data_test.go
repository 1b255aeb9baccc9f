package integration

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// series generates float64 values, little-endian: a random walk on a
// 1/1024 grid with a little noise, deterministic. With shuffle it
// compresses about 5:1, like real measurements; it is not trivial.
type series struct {
	k uint64
	x float64
}

// fill writes the next len(b)/8 values to b; trailing bytes that do not
// make a whole value get their index. It is not instrumented by -race:
// the tests generate hundreds of MiB with it, in one goroutine.
//
//go:norace
func (g *series) fill(b []byte) {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		h := g.k * 0x9E3779B97F4A7C15
		h ^= h >> 29
		g.x += float64(int64(h%17)-8) / 1024
		v := g.x + float64((h>>8)%64)/65536
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
		g.k++
	}
	for ; i < len(b); i++ {
		b[i] = byte(i)
	}
}

// seriesBytes returns size bytes of the series.
func seriesBytes(size int) []byte {
	b := make([]byte, size)
	new(series).fill(b)
	return b
}

// writeSeries writes size bytes of the series to path in 4 MiB pieces and
// returns their sha256.
func writeSeries(t testing.TB, path string, size int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	w := io.MultiWriter(f, h)
	buf := make([]byte, 4<<20)
	var g series
	for off := int64(0); off < size; off += int64(len(buf)) {
		n := min(int64(len(buf)), size-off)
		g.fill(buf[:n])
		if _, err := w.Write(buf[:n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// packFile compresses plain into out with `bloscfs pack flags…`.
func packFile(t testing.TB, plain, out string, flags ...string) {
	t.Helper()
	args := append(append([]string{"pack"}, flags...), plain, out)
	mustRun(t, bin, args...)
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("bloscfs pack wrote no %s: %v", out, err)
	}
}

// packedSource makes a source directory holding name.b2frame, the packed
// form of plain (written to a temp file that is removed afterwards).
func packedSource(t testing.TB, name string, plain []byte, flags ...string) string {
	t.Helper()
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(tmp, "plain")
	if err := os.WriteFile(p, plain, 0o644); err != nil {
		t.Fatal(err)
	}
	packFile(t, p, filepath.Join(src, name+".b2frame"), flags...)
	os.Remove(p)
	return src
}
