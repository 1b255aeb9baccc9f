package fs

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestStageModel applies random writes and truncations to a stage and to
// a plain byte slice, and compares every read.
func TestStageModel(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for it := 0; it < 40; it++ {
		base := make([]byte, r.IntN(200000))
		for i := range base {
			base[i] = byte(r.Uint32())
		}
		f, err := os.Create(filepath.Join(t.TempDir(), "stage"))
		if err != nil {
			t.Fatal(err)
		}
		s := newStage(f, bytes.NewReader(base), int64(len(base)))
		model := bytes.Clone(base)
		for op := 0; op < 300; op++ {
			switch r.IntN(5) {
			case 0, 1:
				off := r.Int64N(int64(len(model)) + 5000)
				p := make([]byte, r.IntN(20000))
				for i := range p {
					p[i] = byte(r.Uint32())
				}
				if _, err := s.WriteAt(p, off); err != nil {
					t.Fatal(err)
				}
				if need := off + int64(len(p)); need > int64(len(model)) {
					model = append(model, make([]byte, need-int64(len(model)))...)
				}
				copy(model[off:], p)
			case 2:
				n := r.Int64N(int64(len(model)) + 10000)
				if err := s.truncate(n); err != nil {
					t.Fatal(err)
				}
				if n < int64(len(model)) {
					model = model[:n]
				} else {
					model = append(model, make([]byte, n-int64(len(model)))...)
				}
			default:
				off := r.Int64N(int64(len(model)) + 100)
				p := make([]byte, r.IntN(50000))
				n, err := s.ReadAt(p, off)
				want := max(0, min(int64(len(p)), int64(len(model))-off))
				if int64(n) != want || (want < int64(len(p)) && err != io.EOF) || (want == int64(len(p)) && err != nil) {
					t.Fatalf("it %d op %d: ReadAt(%d at %d) = %d, %v (size %d)", it, op, len(p), off, n, err, len(model))
				}
				if !bytes.Equal(p[:n], model[off:off+int64(n)]) {
					t.Fatalf("it %d op %d: ReadAt(%d at %d) differs", it, op, len(p), off)
				}
			}
			if s.size != int64(len(model)) {
				t.Fatalf("size %d, model %d", s.size, len(model))
			}
		}
		f.Close()
	}
}
