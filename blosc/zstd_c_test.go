//go:build cgo && !purego && linux

package blosc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
)

// deep recurses n frames of 256 bytes each, growing the goroutine's stack
// (which the runtime may shrink again at the next collection).
func deep(n int) int {
	var pad [256]byte
	pad[n%256] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%256])
}

// TestLibzstdUnderGC decodes zstd chunks through libzstd on several
// goroutines, at GOMAXPROCS 1 and 2, while other goroutines collect
// garbage, the decoding goroutines' stacks grow and shrink between calls,
// and the CPU profiler's signals land in the C code: every decode must
// come out right, and a corrupt stream must be an error.
func TestLibzstdUnderGC(t *testing.T) {
	if libzstd() == nil {
		t.Skip("libzstd.so.1 does not load here")
	}
	if err := pprof.StartCPUProfile(io.Discard); err == nil {
		defer pprof.StopCPUProfile()
	}

	plain := benchWalk(4 << 20)
	type tcase struct {
		comp  []byte
		plain []byte
	}
	var cases []tcase
	for _, p := range []Params{
		{Codec: CodecZstd, Clevel: 3, Typesize: 8, Blocksize: 128 << 10, Split: SplitAlways},
		{Codec: CodecZstd, Clevel: 3, Typesize: 8, Blocksize: 128 << 10, Split: SplitNever},
		{Codec: CodecZstd, Clevel: 1, Typesize: 8, Blocksize: 2 << 20, Split: SplitNever},
	} {
		p.Filters[5] = FilterShuffle
		comp, err := Compress(nil, plain, p)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, tcase{comp, plain})
	}
	// A corrupt copy of the never-split chunk: the zstd magic of its
	// first block's stream (after the stream's 4-byte size) flipped.
	bad := bytes.Clone(cases[1].comp)
	c0, err := NewChunkBytes(bad)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c0.CompressedExtent(0)
	for i := s + 4; i < s+8; i++ {
		bad[i] ^= 0x5a
	}

	iters := 30
	if testing.Short() {
		iters = 8
	}
	for _, procs := range []int{1, 2} {
		old := runtime.GOMAXPROCS(procs)
		stop := make(chan struct{})
		var bg sync.WaitGroup
		for _, work := range []func(){
			runtime.GC,                          // collections, each a stop-the-world
			func() { _ = make([]byte, 64<<10) }, // garbage
		} {
			bg.Add(1)
			go func() {
				defer bg.Done()
				for {
					select {
					case <-stop:
						return
					default:
						work()
					}
				}
			}()
		}
		var wg sync.WaitGroup
		errs := make(chan string, 16)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := make([]byte, len(plain))
				for i := range iters {
					deep(100 + 50*(i%8))
					tc := cases[(g+i)%len(cases)]
					c, err := NewChunkBytes(tc.comp)
					if err == nil {
						clear(got)
						err = c.Decode(got)
					}
					if err != nil {
						errs <- err.Error()
						return
					}
					if !bytes.Equal(got, tc.plain) {
						errs <- "decoded bytes differ"
						return
					}
					if i%5 == 0 {
						c, err := NewChunkBytes(bad)
						if err == nil {
							err = c.Decode(got)
						}
						if err == nil {
							errs <- "a corrupt stream decoded without error"
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		bg.Wait()
		runtime.GOMAXPROCS(old)
		close(errs)
		for e := range errs {
			t.Errorf("GOMAXPROCS=%d: %s", procs, e)
		}
	}
}

// TestDecodeZstdChunk checks that Decode of a zstd chunk whose filters
// change no byte hands libzstd all its streams in one call, straight into
// the output, and that every chunk decodes the same bytes as a decode
// block by block: small and large blocks, split and not, typesizes 1
// (whose byte shuffle changes nothing), 4 and 8, each filter pipeline,
// c-blosc 1.x chunks whose blocks may be split either way (decoded
// alone), from memory and through a reader.
func TestDecodeZstdChunk(t *testing.T) {
	if libzstd() == nil {
		t.Skip("libzstd.so.1 does not load here")
	}
	const size = 3<<20 + 1000 // a short last block
	plain := countsData(size)
	type tcase struct {
		name string
		p    Params
	}
	var cases []tcase
	for _, bs := range []int{4 << 10, 32 << 10, 256 << 10, 2 << 20} {
		for _, ts := range []int{1, 4, 8} {
			for _, split := range []SplitMode{SplitAlways, SplitNever} {
				for _, filt := range []string{"shuffle", "bitshuffle", "delta", "none"} {
					p := Params{Codec: CodecZstd, Clevel: 1, Typesize: ts, Blocksize: bs, Split: split}
					switch filt {
					case "shuffle":
						p.Filters[5] = FilterShuffle
					case "bitshuffle":
						p.Filters[5] = FilterBitShuffle
					case "delta":
						p.Filters[4], p.Filters[5] = FilterDelta, FilterShuffle
					}
					cases = append(cases, tcase{fmt.Sprintf("bs%d-ts%d-split%d-%s", bs, ts, split, filt), p})
				}
			}
		}
	}
	// c-blosc 1.x splits blocks of items over 16 bytes either way: those
	// decode alone, the others in the one call.
	for _, ts := range []int{8, 32} {
		cases = append(cases, tcase{fmt.Sprintf("blosc1-ts%d", ts), Params{Codec: CodecZstd, Clevel: 1, Typesize: ts, Blocksize: 64 << 10, Split: SplitAlways, Blosc1: true}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			comp, err := Compress(nil, plain, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			mem, err := NewChunkBytes(comp)
			if err != nil {
				t.Fatal(err)
			}
			if mem.Memcpyed() {
				t.Fatal("the chunk is stored as is: no zstd streams to test")
			}
			rd, err := NewChunk(bytes.NewReader(comp), int64(len(comp)))
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, size)
			for i := range mem.NumBlocks() {
				off := mem.BlockOffset(i)
				if err := mem.DecodeBlock(want[off:off+int64(mem.BlockLen(i))], i); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(want, plain) {
				t.Fatal("block by block: decoded bytes differ")
			}
			for name, c := range map[string]*Chunk{"memory": mem, "reader": rd} {
				got := make([]byte, size)
				before := libzstdBatchCalls.Load()
				if err := c.Decode(got); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				calls := libzstdBatchCalls.Load() - before
				if !bytes.Equal(got, plain) {
					t.Fatalf("%s: decoded bytes differ", name)
				}
				if !c.bytesFiltered() && c.NumBlocks() > 1 && calls != 1 {
					t.Errorf("%s: %d libzstd calls for %d unfiltered blocks, want 1", name, calls, c.NumBlocks())
				}
			}
		})
	}
}

// TestDecodeZstdChunkErrors checks that a corrupt stream in a decode in
// one call is reported as a decode block by block reports it: the block
// and stream named, ErrCorrupt, and the first failing block first, also
// when a later block's stream header is broken.
func TestDecodeZstdChunkErrors(t *testing.T) {
	if libzstd() == nil {
		t.Skip("libzstd.so.1 does not load here")
	}
	plain := countsData(1 << 20)
	for _, split := range []SplitMode{SplitAlways, SplitNever} {
		p := Params{Codec: CodecZstd, Clevel: 1, Typesize: 4, Blocksize: 32 << 10, Split: split} // no filter: one call
		comp, err := Compress(nil, plain, p)
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewChunkBytes(comp)
		if err != nil {
			t.Fatal(err)
		}
		// A zstd stream in block 5 that libzstd rejects (its magic
		// flipped), and block 9's first stream size made larger than its
		// block.
		bad := bytes.Clone(comp)
		s5 := zstdStreamAt(t, c, 5)
		for i := s5; i < s5+4; i++ {
			bad[i] ^= 0x5a
		}
		s9, _ := c.CompressedExtent(9)
		binary.LittleEndian.PutUint32(bad[s9:], 1<<30)
		cb, err := NewChunkBytes(bad)
		if err != nil {
			t.Fatal(err)
		}
		err = cb.Decode(make([]byte, len(plain)))
		want := cb.DecodeBlock(make([]byte, cb.BlockLen(5)), 5)
		if !errors.Is(err, ErrCorrupt) || want == nil || err.Error() != want.Error() {
			t.Errorf("split %d: Decode: %v\nwant the block decode's %v", split, err, want)
		}
		if !strings.Contains(fmt.Sprint(err), "block 5: ") {
			t.Errorf("split %d: Decode: %v, want block 5 named", split, err)
		}
		// Block 5 repaired: block 9's header is the first error.
		copy(bad[s5:s5+4], comp[s5:s5+4])
		cb, _ = NewChunkBytes(bad)
		err = cb.Decode(make([]byte, len(plain)))
		want = cb.DecodeBlock(make([]byte, cb.BlockLen(9)), 9)
		if !errors.Is(err, ErrCorrupt) || want == nil || err.Error() != want.Error() {
			t.Errorf("split %d: Decode: %v\nwant the block decode's %v", split, err, want)
		}
	}
}

// countsData returns n bytes of slowly rising int32 counts with noise in
// their low bits: they compress with every filter and none, into zstd
// streams (not stored ones).
func countsData(n int) []byte {
	b := make([]byte, n)
	for i := 0; i+4 <= n; i += 4 {
		binary.LittleEndian.PutUint32(b[i:], uint32(i/64)+uint32(i*2654435761>>27)&7)
	}
	return b
}

// zstdStreamAt returns where the first zstd stream of block i of c (one
// neither stored nor a run) starts, after its 4-byte size.
func zstdStreamAt(t *testing.T, c *Chunk, i int) int64 {
	t.Helper()
	pos, end := c.CompressedExtent(i)
	n, _ := c.blockStreams(i, c.BlockLen(i))
	neblock := int32(c.BlockLen(i) / n)
	for range n {
		csize := int32(binary.LittleEndian.Uint32(c.data[pos:]))
		switch {
		case csize > 0 && csize < neblock:
			return pos + 4
		case csize > 0:
			pos += 4 + int64(csize)
		case csize < 0:
			pos += 5
		default:
			pos += 4
		}
		if pos >= end {
			break
		}
	}
	t.Fatalf("block %d has no zstd stream", i)
	return 0
}
