// Package gridfiles writes Bloscpack and frame files over a grid of
// compression parameters, for tests that compare the parallel decode
// paths (WriteTo, unpack, verify, a mount) with a serial decode.
package gridfiles

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/bloscpack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// File is one written file and the plain bytes it holds.
type File struct {
	Name  string // file name, with its container suffix
	Dir   string // "frame" or "blp"
	Stem  string // the name without its suffix: its name in a mount
	Path  string
	Plain []byte
}

// Grid says which parameters to combine.
type Grid struct {
	Codecs     []int
	Filters    []string // "noshuffle", "shuffle", "bitshuffle", "delta"
	Typesizes  []int
	Blocksizes []int // 0: automatic; -1: the whole chunk
	Splits     []blosc.SplitMode
}

// Full is the whole grid of the decoder-overshoot tests.
func Full() Grid {
	return Grid{
		Codecs:     []int{blosc.CodecBloscLZ, blosc.CodecLZ4, blosc.CodecLZ4HC, blosc.CodecZlib, blosc.CodecZstd},
		Filters:    []string{"noshuffle", "shuffle", "bitshuffle", "delta"},
		Typesizes:  []int{1, 2, 4, 8, 3},
		Blocksizes: []int{1 << 10, 16 << 10, 0, -1},
		Splits:     []blosc.SplitMode{blosc.SplitAlways, blosc.SplitNever},
	}
}

// Small is a grid that still has every codec and filter, for tests that
// start a program per file.
func Small() Grid {
	return Grid{
		Codecs:     []int{blosc.CodecBloscLZ, blosc.CodecLZ4, blosc.CodecLZ4HC, blosc.CodecZlib, blosc.CodecZstd},
		Filters:    []string{"noshuffle", "shuffle", "bitshuffle", "delta"},
		Typesizes:  []int{1, 8, 3},
		Blocksizes: []int{1 << 10, -1},
		Splits:     []blosc.SplitMode{blosc.SplitAlways, blosc.SplitNever},
	}
}

// Tiny keeps the shapes that matter most (no shuffle and shuffle, an odd
// typesize, small and whole-chunk blocks) for runs under the race
// detector, where encoding and decoding in Go is an order of magnitude
// slower; the full grids run without it.
func Tiny() Grid {
	return Grid{
		Codecs:     []int{blosc.CodecBloscLZ, blosc.CodecLZ4, blosc.CodecZstd},
		Filters:    []string{"noshuffle", "shuffle", "delta"},
		Typesizes:  []int{1, 3},
		Blocksizes: []int{1 << 10, -1},
		Splits:     []blosc.SplitMode{blosc.SplitNever},
	}
}

// Plain returns n bytes of CSV-like text and float series, the data
// whose decode showed the overshoot; seed varies them.
func Plain(n, seed int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		if (i/500+seed)%2 == 0 {
			fmt.Fprintf(&b, "%d,%.3f,%.4f,%d\n", i, 20+3*math.Sin(float64(i+seed)/40), float64(i%977)/7, i*i%1013)
		} else {
			var w [8]byte
			binary.LittleEndian.PutUint64(w[:], math.Float64bits(math.Round(math.Sin(float64(i)*0.01)*1e4)/64))
			b.Write(w[:])
		}
	}
	return b.Bytes()[:n]
}

// Write writes every combination of g as a contiguous frame in dir/frame
// and, for the filters Blosc1 chunks hold, as a Bloscpack file in
// dir/blp, each with several chunks of a size that is not a power of two,
// and returns them. Both files of a combination have the same stem.
func Write(dir string, g Grid) ([]File, error) {
	for _, sub := range []string{"frame", "blp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	var out []File
	k := 0
	for _, codec := range g.Codecs {
		for _, fl := range g.Filters {
			for _, ts := range g.Typesizes {
				for _, bs := range g.Blocksizes {
					for _, sp := range g.Splits {
						k++
						cs := 3*16384 + 1000*ts + 7 // odd, not a power of two
						p := blosc.Params{Codec: codec, Clevel: 1 + k%9, Typesize: ts, Blocksize: bs, Split: sp}
						if bs < 0 {
							p.Blocksize = cs
						}
						if codec == blosc.CodecZstd && p.Clevel > 6 {
							p.Clevel = 4 // level 22 is slow; the canary tests cover it
						}
						switch fl {
						case "shuffle":
							p.Filters[5] = blosc.FilterShuffle
						case "bitshuffle":
							p.Filters[5] = blosc.FilterBitShuffle
						case "delta":
							p.Filters[4], p.Filters[5] = blosc.FilterDelta, blosc.FilterShuffle
						}
						plain := Plain(3*cs+cs/3, k)
						stem := fmt.Sprintf("%s_%s_ts%d_bs%d_split%d", blosc.CodecName(codec), fl, ts, bs, sp)
						f, err := writeFrame(filepath.Join(dir, "frame"), stem, plain, p, cs)
						if err != nil {
							return nil, err
						}
						out = append(out, f)
						if fl != "delta" {
							f, err := writeBloscpack(filepath.Join(dir, "blp"), stem, plain, p, cs)
							if err != nil {
								return nil, err
							}
							out = append(out, f)
						}
					}
				}
			}
		}
	}
	return out, nil
}

// chunkWriter is what both container writers offer.
type chunkWriter interface {
	AddChunk(plain []byte) error
	Close() error
}

// writeFile writes plain in chunks of cs bytes into dir/stem+suffix
// through the writer that open makes.
func writeFile(dir, stem, suffix string, plain []byte, cs int, open func(f *os.File) (chunkWriter, error)) (File, error) {
	path := filepath.Join(dir, stem+suffix)
	f, err := os.Create(path)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	w, err := open(f)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	for off := 0; off < len(plain); off += cs {
		if err := w.AddChunk(plain[off:min(off+cs, len(plain))]); err != nil {
			return File{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := w.Close(); err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	return File{Name: stem + suffix, Dir: filepath.Base(dir), Stem: stem, Path: path, Plain: plain}, f.Close()
}

func writeFrame(dir, stem string, plain []byte, p blosc.Params, cs int) (File, error) {
	return writeFile(dir, stem, ".b2frame", plain, cs, func(f *os.File) (chunkWriter, error) {
		return frame.NewWriter(f, frame.Params{Chunk: p, ChunkSize: cs})
	})
}

func writeBloscpack(dir, stem string, plain []byte, p blosc.Params, cs int) (File, error) {
	return writeFile(dir, stem, ".blp", plain, cs, func(f *os.File) (chunkWriter, error) {
		bp := bloscpack.DefaultParams()
		p.Blosc1 = true
		bp.Blosc, bp.ChunkSize = p, int64(cs)
		return bloscpack.NewWriter(f, int64(len(plain)), bp)
	})
}

// SerialDecode decodes a container chunk by chunk, each into a buffer of
// its own, on the calling goroutine: the reference for the parallel paths.
func SerialDecode(path string) ([]byte, error) {
	c, closer, err := pack.OpenPath(path, pack.NoCache{})
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	src, ok := c.(pack.ChunkSource)
	if !ok {
		return nil, fmt.Errorf("%s: %T has no chunks", path, c)
	}
	var out []byte
	for i := 0; i < src.NumChunks(); i++ {
		ch, err := src.OpenChunk(i)
		if err != nil {
			return nil, fmt.Errorf("%s: chunk %d: %w", path, i, err)
		}
		b := make([]byte, ch.Nbytes)
		if err := ch.Decode(b); err != nil {
			return nil, fmt.Errorf("%s: chunk %d: %w", path, i, err)
		}
		out = append(out, b...)
	}
	return out, nil
}

// FirstDiff returns the first offset where a and b differ, or -1.
func FirstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
