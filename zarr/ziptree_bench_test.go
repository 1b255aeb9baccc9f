package zarr_test

import (
	"archive/zip"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	_ "github.com/bloscfs/bloscfs/zarr"
)

// zipDir zips the directory dir into out, members stored, in name
// order (archive/zip: data descriptors, no ZIP64).
func zipDir(b *testing.B, dir, out string) {
	b.Helper()
	f, err := os.Create(out)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := zip.NewWriter(f)
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		m, err := w.CreateHeader(&zip.FileHeader{Name: filepath.ToSlash(rel), Method: zip.Store})
		if err != nil {
			b.Fatal(err)
		}
		m.Write(data)
		return nil
	})
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// opened is the benchmark array opened as a directory or, zipped, as
// the root of its tree.
type opened struct {
	c interface {
		io.ReaderAt
		Size() int64
	}
	close func()
}

// viewSized is an all.View with a Size method.
type viewSized struct{ *all.View }

func (v viewSized) Size() int64 { return v.View.Size }

// openBench opens the benchmark array at path.
func openBench(b *testing.B, path string, c pack.BlockCache) opened {
	b.Helper()
	if filepath.Ext(path) == ".zip" {
		t, err := all.OpenTree(path, c)
		if err != nil {
			b.Fatal(err)
		}
		a, err := t.Open("")
		if err != nil {
			b.Fatal(err)
		}
		return opened{a, func() { t.Close() }}
	}
	v, err := all.OpenView(path, c)
	if err != nil {
		b.Fatal(err)
	}
	return opened{viewSized{v}, func() { v.Close() }}
}

// BenchmarkZipSequential reads the benchmark array whole in 1 MiB reads,
// cold, from its directory and zipped (members stored).
func BenchmarkZipSequential(b *testing.B) {
	store, _ := writeBenchStores(b)
	zp := store + ".zip"
	zipDir(b, store, zp)
	for _, path := range []string{store, zp} {
		b.Run(filepath.Ext(path)[1:], func(b *testing.B) {
			b.SetBytes(benchChunks * benchChunkSize)
			buf := make([]byte, 1<<20)
			for b.Loop() {
				o := openBench(b, path, cache.New[pack.BlockKey](256<<20))
				for off := int64(0); off < o.c.Size(); off += int64(len(buf)) {
					if _, err := o.c.ReadAt(buf, off); err != nil && err != io.EOF {
						b.Fatal(err)
					}
				}
				o.close()
			}
		})
	}
}

// BenchmarkZipCold4K reads 4 KiB at a random offset of a chunk no read
// touched before, from the directory and zipped.
func BenchmarkZipCold4K(b *testing.B) {
	store, _ := writeBenchStores(b)
	zp := store + ".zip"
	zipDir(b, store, zp)
	for _, path := range []string{store, zp} {
		b.Run(filepath.Ext(path)[1:], func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 4))
			buf := make([]byte, 4096)
			b.SetBytes(4096)
			var o opened
			var todo []int
			for b.Loop() {
				if len(todo) == 0 {
					b.StopTimer()
					if o.close != nil {
						o.close()
					}
					o = openBench(b, path, cache.New[pack.BlockKey](256<<20))
					todo = rng.Perm(benchChunks)
					b.StartTimer()
				}
				c := todo[0]
				todo = todo[1:]
				hdr := o.c.Size() - benchChunks*benchChunkSize
				if _, err := o.c.ReadAt(buf, hdr+int64(c)*benchChunkSize+rng.Int64N(benchChunkSize-4096)); err != nil {
					b.Fatal(err)
				}
			}
			o.close()
		})
	}
}

// BenchmarkZipList opens a zipped group of 1,000 small v2 arrays and
// lists it (each array's .zarray, read together).
func BenchmarkZipList(b *testing.B) {
	dir := b.TempDir()
	g := filepath.Join(dir, "g.zarr")
	os.MkdirAll(g, 0o755)
	os.WriteFile(filepath.Join(g, ".zgroup"), []byte(`{"zarr_format":2}`), 0o644)
	for i := range 1000 {
		a := filepath.Join(g, fmt.Sprintf("a%04d", i))
		os.MkdirAll(a, 0o755)
		os.WriteFile(filepath.Join(a, ".zarray"), []byte(`{"zarr_format":2,"shape":[4096],"chunks":[4096],"dtype":"<f8","compressor":{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1,"blocksize":0},"fill_value":0.0,"order":"C","filters":null}`), 0o644)
		os.WriteFile(filepath.Join(a, "0"), make([]byte, 2048), 0o644)
	}
	zp := g + ".zip"
	zipDir(b, g, zp)
	for b.Loop() {
		t, err := all.OpenTree(zp, nil)
		if err != nil {
			b.Fatal(err)
		}
		if ents, err := t.ReadDir(""); err != nil || len(ents) != 1001 {
			b.Fatalf("%d entries, %v", len(ents), err)
		}
		t.Close()
	}
}
