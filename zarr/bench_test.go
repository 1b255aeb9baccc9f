package zarr_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/pack/frame"
)

const (
	benchChunks    = 64      // chunks of the benchmark array
	benchChunkSize = 1 << 20 // plain bytes per chunk (Zarr v2's usual order of size)
)

// benchData fills chunk i of a float64 random walk.
func benchData(i int, b []byte, rng *rand.Rand, x *float64) {
	for k := 0; k < len(b); k += 8 {
		*x += rng.NormFloat64()
		binary.LittleEndian.PutUint64(b[k:], math.Float64bits(math.Round(*x*100)/100))
	}
}

// writeBenchStores writes the same float64 random walk as a Zarr v2
// array (Blosc lz4, shuffle, 1 MiB chunks of one 1 MiB block, as
// numcodecs' default Blosc with c-blosc 1.21 writes them) and as a
// .b2frame of the same chunks (with the frame writer's blocks, 256 KiB).
func writeBenchStores(b *testing.B) (store, b2frame string) {
	b.Helper()
	dir := b.TempDir()
	store = filepath.Join(dir, "walk.zarr")
	os.MkdirAll(store, 0o755)
	n := benchChunks * benchChunkSize / 8
	meta := fmt.Sprintf(`{"zarr_format":2,"shape":[%d],"chunks":[%d],"dtype":"<f8","compressor":{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1,"blocksize":0},"fill_value":0.0,"order":"C","filters":null}`, n, benchChunkSize/8)
	os.WriteFile(filepath.Join(store, ".zarray"), []byte(meta), 0o644)
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: benchChunkSize, Blosc1: true}
	p.Filters[5] = blosc.FilterShuffle
	f, err := os.Create(filepath.Join(dir, "walk.b2frame"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w, err := frame.NewWriter(f, frame.Params{Chunk: blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Filters: p.Filters}, ChunkSize: benchChunkSize})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var x float64
	chunk := make([]byte, benchChunkSize)
	for i := range benchChunks {
		benchData(i, chunk, rng, &x)
		c, err := blosc.Compress(nil, chunk, p)
		if err != nil {
			b.Fatal(err)
		}
		os.WriteFile(filepath.Join(store, fmt.Sprint(i)), c, 0o644)
		if err := w.AddChunk(chunk); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return store, f.Name()
}

// BenchmarkSequential reads the whole array in 1 MiB reads, cold (a
// fresh cache each time), as the Zarr .npy view and as the same data in
// a .b2frame.
func BenchmarkSequential(b *testing.B) {
	store, b2 := writeBenchStores(b)
	for _, kind := range []string{"zarr", "b2frame"} {
		b.Run(kind, func(b *testing.B) {
			b.SetBytes(benchChunks * benchChunkSize)
			buf := make([]byte, 1<<20)
			defer cpuMetric(b)()
			for b.Loop() {
				path := store
				if kind == "b2frame" {
					path = b2
				}
				v, err := all.OpenView(path, cache.New[pack.BlockKey](256<<20))
				if err != nil {
					b.Fatal(err)
				}
				for off := int64(0); off < v.Size; off += int64(len(buf)) {
					if _, err := v.ReadAt(buf, off); err != nil && err != io.EOF {
						b.Fatal(err)
					}
				}
				v.Close()
			}
		})
	}
}

// BenchmarkRandom4K reads 4 KiB at random offsets through a warm mount's
// view (the cache holds what earlier reads decoded).
func BenchmarkRandom4K(b *testing.B) {
	store, b2 := writeBenchStores(b)
	for _, kind := range []string{"zarr", "b2frame"} {
		b.Run(kind, func(b *testing.B) {
			path := store
			if kind == "b2frame" {
				path = b2
			}
			v, err := all.OpenView(path, cache.New[pack.BlockKey](16<<20))
			if err != nil {
				b.Fatal(err)
			}
			defer v.Close()
			rng := rand.New(rand.NewPCG(3, 4))
			buf := make([]byte, 4096)
			b.SetBytes(4096)
			for b.Loop() {
				if _, err := v.ReadAt(buf, rng.Int64N(v.Size-4096)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCold4K reads 4 KiB at a random offset of a chunk that no read
// touched before, as a mount's first read of a region does: each read
// opens its chunk and decodes the Blosc block under it.
func BenchmarkCold4K(b *testing.B) {
	store, b2 := writeBenchStores(b)
	for _, kind := range []string{"zarr", "b2frame"} {
		b.Run(kind, func(b *testing.B) {
			path := store
			if kind == "b2frame" {
				path = b2
			}
			coldReads(b, path, benchChunks, 0)
		})
	}
}

// coldReads times 4 KiB reads of the view of path, each at a random
// offset of one of its nchunks chunks of benchChunkSize (after hdr bytes)
// that no read of the view touched before: the view is opened anew, with
// a fresh cache, once every chunk was read.
func coldReads(b *testing.B, path string, nchunks int, hdr int64) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 4096)
	b.SetBytes(4096)
	var v *all.View
	var todo []int
	defer func() {
		if v != nil {
			v.Close()
		}
	}()
	for b.Loop() {
		if len(todo) == 0 {
			b.StopTimer()
			if v != nil {
				v.Close()
			}
			var err error
			if v, err = all.OpenView(path, cache.New[pack.BlockKey](256<<20)); err != nil {
				b.Fatal(err)
			}
			todo = rng.Perm(nchunks)
			b.StartTimer()
		}
		c := todo[0]
		todo = todo[1:]
		off := hdr + int64(c)*benchChunkSize + rng.Int64N(benchChunkSize-4096)
		if _, err := v.ReadAt(buf, off); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCold4KStore is BenchmarkCold4K on a store and a frame named
// by the environment: BLOSCFS_BENCH_ZARR, a Zarr v2 array of 1 MiB
// chunks, and BLOSCFS_BENCH_FRAME, the same data as a .b2frame, e.g. the
// ones BenchmarkZarrTable (integration/) has python3-zarr and `bloscfs
// pack` write. The chunks of this package's benchmark come from our own
// LZ4 compressor, whose streams differ from c-blosc 1.21's (it finds
// matches in the low mantissa bytes of a random walk where c-blosc's
// stores them nearly as literals), so the cold reads of a store written
// by numcodecs are timed on one. Skipped when they are not set.
func BenchmarkCold4KStore(b *testing.B) {
	store, b2 := os.Getenv("BLOSCFS_BENCH_ZARR"), os.Getenv("BLOSCFS_BENCH_FRAME")
	if store == "" || b2 == "" {
		b.Skip("BLOSCFS_BENCH_ZARR and BLOSCFS_BENCH_FRAME not set")
	}
	for _, kind := range []string{"zarr", "b2frame"} {
		b.Run(kind, func(b *testing.B) {
			path := store
			if kind == "b2frame" {
				path = b2
			}
			v, err := all.OpenView(path, cache.New[pack.BlockKey](256<<20))
			if err != nil {
				b.Fatal(err)
			}
			size, hdr := v.Size, v.Size%benchChunkSize // the NPY header in front of the chunks
			v.Close()
			coldReads(b, path, int(size/benchChunkSize), hdr)
		})
	}
}

// ndCase is an N-D array of the N-D benchmarks: its shape and chunk
// shape, item size (4: float32, 8: float64) and Blosc codec.
type ndCase struct {
	name          string
	shape, chunks []int64
	itemsize      int
	codec         int
}

// ndCases are arrays chunked as real Zarr data are: a 2-D float64 field
// in 128×1024 chunks (1 MiB) and a 3-D float32 cube in (24, 90, 180)
// chunks (1.5 MiB), each with Blosc LZ4 clevel 5 and zstd clevel 1,
// byte shuffle, and in the other float type, with the blocks c-blosc
// 1.21 chooses for them (numcodecs' Blosc): LZ4 split into one stream
// per byte in blocks of 128 KiB × the item size, zstd unsplit in
// blocks of 32 KiB.
var ndCases = func() []ndCase {
	var cs []ndCase
	for _, g := range []struct {
		name          string
		shape, chunks []int64
	}{
		{"2d", []int64{1024, 8192}, []int64{128, 1024}},
		{"3d", []int64{48, 360, 720}, []int64{24, 90, 180}},
	} {
		for _, it := range []int{8, 4} {
			for _, codec := range []int{blosc.CodecLZ4, blosc.CodecZstd} {
				cs = append(cs, ndCase{fmt.Sprintf("%s-f%d-%s", g.name, it, blosc.CodecName(codec)), g.shape, g.chunks, it, codec})
			}
		}
	}
	return cs
}()

// writeNDStore writes a Zarr v2 array of the case's geometry into dir
// (a random walk along the last dimension, as gen.py's walk and cube)
// and returns its path and its bytes in C order.
func writeNDStore(b testing.TB, dir string, nc ndCase) (string, []byte) {
	b.Helper()
	store := filepath.Join(dir, nc.name+".zarr")
	os.MkdirAll(store, 0o755)
	dims := func(v []int64) string {
		s := ""
		for i, d := range v {
			if i > 0 {
				s += ","
			}
			s += fmt.Sprint(d)
		}
		return s
	}
	cname := blosc.CodecName(nc.codec)
	clevel := 5
	if nc.codec == blosc.CodecZstd {
		clevel = 1
	}
	meta := fmt.Sprintf(`{"zarr_format":2,"shape":[%s],"chunks":[%s],"dtype":"<f%d","compressor":{"id":"blosc","cname":"%s","clevel":%d,"shuffle":1,"blocksize":0},"fill_value":0.0,"order":"C","filters":null}`,
		dims(nc.shape), dims(nc.chunks), nc.itemsize, cname, clevel)
	os.WriteFile(filepath.Join(store, ".zarray"), []byte(meta), 0o644)
	nd := len(nc.shape)
	// The whole array, C order, then cut into chunks.
	n := int64(1)
	for _, d := range nc.shape {
		n *= d
	}
	rng := rand.New(rand.NewPCG(5, 6))
	data := make([]byte, n*int64(nc.itemsize))
	last := nc.shape[nd-1]
	x := 0.0
	for i := int64(0); i < n; i++ {
		if i%last == 0 {
			x = 0
		}
		x += rng.NormFloat64()
		if nc.itemsize == 8 {
			binary.LittleEndian.PutUint64(data[i*8:], math.Float64bits(x))
		} else {
			binary.LittleEndian.PutUint32(data[i*4:], math.Float32bits(float32(x)))
		}
	}
	p := blosc.Params{Codec: nc.codec, Clevel: clevel, Typesize: nc.itemsize, Blosc1: true, Split: blosc.SplitAlways,
		Blocksize: min(128<<10*nc.itemsize, 1<<20)}
	if nc.codec == blosc.CodecZstd {
		p.Split, p.Blocksize = blosc.SplitNever, 32<<10
	}
	p.Filters[5] = blosc.FilterShuffle
	cb := int64(nc.itemsize)
	nchunks := make([]int64, nd)
	for d := range nd {
		cb *= nc.chunks[d]
		nchunks[d] = (nc.shape[d] + nc.chunks[d] - 1) / nc.chunks[d]
	}
	chunk := make([]byte, cb)
	c := make([]int64, nd)
	for {
		// Gather the chunk at grid coordinates c (edge chunks padded).
		clear(chunk)
		rows := cb / (nc.chunks[nd-1] * int64(nc.itemsize))
		for r := int64(0); r < rows; r++ {
			// r is the row index within the chunk: its coordinates.
			idx := make([]int64, nd)
			rem := r
			for d := nd - 2; d >= 0; d-- {
				idx[d] = rem % nc.chunks[d]
				rem /= nc.chunks[d]
			}
			off, ok := int64(0), true
			for d := range nd - 1 {
				g := c[d]*nc.chunks[d] + idx[d]
				ok = ok && g < nc.shape[d]
				off = off*nc.shape[d] + g
			}
			if !ok {
				continue
			}
			g0 := c[nd-1] * nc.chunks[nd-1]
			k := min(nc.chunks[nd-1], nc.shape[nd-1]-g0)
			off = (off*nc.shape[nd-1] + g0) * int64(nc.itemsize)
			copy(chunk[r*nc.chunks[nd-1]*int64(nc.itemsize):], data[off:off+k*int64(nc.itemsize)])
		}
		enc, err := blosc.Compress(nil, chunk, p)
		if err != nil {
			b.Fatal(err)
		}
		name := ""
		for d := range nd {
			if d > 0 {
				name += "."
			}
			name += fmt.Sprint(c[d])
		}
		os.WriteFile(filepath.Join(store, name), enc, 0o644)
		d := nd - 1
		for ; d >= 0; d-- {
			if c[d]++; c[d] < nchunks[d] {
				break
			}
			c[d] = 0
		}
		if d < 0 {
			break
		}
	}
	return store, data
}

// BenchmarkSequentialND reads N-D arrays (ndCases) whole through their
// .npy view in 1 MiB reads, as a mount's sequential reader does
// (ReadAtOnce), cold (a fresh cache each time). BLOSCFS_BENCH_STORE
// names an array or container to read so instead (a python3-zarr store,
// a frame), for profiling the read path on real data (-cpuprofile)
// without the writing of the others in the profile.
func BenchmarkSequentialND(b *testing.B) {
	dir := b.TempDir()
	type input struct{ name, path string }
	var ins []input
	if p := os.Getenv("BLOSCFS_BENCH_STORE"); p != "" {
		// Only the store given: its profile is not mixed with the
		// writing of the others.
		ins = append(ins, input{"store", p})
	} else {
		for _, nc := range ndCases {
			store, _ := writeNDStore(b, dir, nc)
			ins = append(ins, input{nc.name, store})
		}
	}
	for _, in := range ins {
		store := in.path
		b.Run(in.name, func(b *testing.B) {
			buf := make([]byte, 1<<20)
			defer cpuMetric(b)()
			for b.Loop() {
				v, err := all.OpenView(store, cache.New[pack.BlockKey](256<<20))
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(v.Size)
				for off := int64(0); off < v.Size; off += int64(len(buf)) {
					if _, err := v.ReadAtOnce(buf, off); err != nil && err != io.EOF {
						b.Fatal(err)
					}
				}
				v.Close()
			}
		})
	}
}

// cpuMetric reports the process's CPU time per op (user and system, all
// threads) when the returned func is called: on a shared machine it
// moves less with the load than the wall time does.
func cpuMetric(b *testing.B) func() {
	t0 := cpuNow()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuNow()-t0)/1e6/float64(b.N), "cpu-ms/op")
		}
	}
}

// cpuNow returns the process's CPU time so far.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
