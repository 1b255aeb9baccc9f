package zipread

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// FuzzOpen opens arbitrary bytes as an archive and reads up to 64 of
// its members whole (each at most 64 KiB; one by one, and together with
// ReadFiles) and in place. Nothing may
// panic or allocate past the bound of every parser's fuzz target, and a
// member that reads must read as archive/zip reads it.
func FuzzOpen(f *testing.F) {
	for _, path := range fixtures(f) {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(build(f, []zm{{Name: "a", Data: []byte("abc")}, {Name: "a", Data: []byte("d")}, {Name: "../x", Data: []byte("e")}}, nil))
	f.Add(build(f, []zm{{Name: "x", Data: deflate(f, make([]byte, 1<<20)), Method: Deflate, Plain: []byte("tiny")}}, nil))
	f.Add(build(f, []zm{{Name: "x", Data: []byte("xx")}, {Name: "y", Data: []byte("y"), HeaderOf: 1}}, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := testkit.StartAlloc()
		defer mem.Check(t, len(data), 0)
		a, err := Open(bytes.NewReader(data), int64(len(data)), "fuzz")
		if err != nil {
			return
		}
		zr, zerr := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		for i := range min(a.Len(), 64) {
			m := a.Member(i)
			got, err := a.ReadFile(i, 64<<10)
			if err == nil && zerr == nil && i < len(zr.File) && zr.File[i].Name == m.Name {
				if rc, err := zr.File[i].Open(); err == nil {
					want, err := io.ReadAll(io.LimitReader(rc, 64<<10+1))
					rc.Close()
					if err == nil && !bytes.Equal(got, want) {
						t.Fatalf("member %q: %d bytes, archive/zip reads %d", m.Name, len(got), len(want))
					}
				}
			}
			if r, err := a.Open(i); err == nil {
				p := make([]byte, min(r.Size(), 4096))
				n, err := r.ReadAt(p, r.Size()-int64(len(p)))
				if err == nil && got != nil && !bytes.Equal(p[:n], got[len(got)-n:]) {
					t.Fatalf("member %q: ReadAt and ReadFile differ", m.Name)
				}
			}
		}
		for _, p := range []string{"", "a", "a/b"} {
			a.List(p)
		}
		// ReadFiles answers each member once, as ReadFile reads it.
		idx := make([]int, min(a.Len(), 64))
		for i := range idx {
			idx[i] = i
		}
		seen := map[int]bool{}
		a.ReadFiles(idx, 64<<10, 4096, 1<<20, func(i int, b []byte, err error) {
			if seen[i] {
				t.Fatalf("member %d answered twice", i)
			}
			seen[i] = true
			if w, werr := a.ReadFile(i, 64<<10); err == nil && werr == nil && !bytes.Equal(b, w) {
				t.Fatalf("member %d: ReadFiles and ReadFile differ", i)
			}
		})
		if len(seen) != len(idx) {
			t.Fatalf("%d of %d members answered", len(seen), len(idx))
		}
	})
}
