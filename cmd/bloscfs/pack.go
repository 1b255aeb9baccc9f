package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/ordered"
	"github.com/bloscfs/bloscfs/pack/bloscpack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// parseFilters reads a filter pipeline such as "shuffle", "bitshuffle",
// "none", "delta,shuffle", "shuffle,bytedelta" or "truncprec:20,shuffle".
// Filters fill the slots so that the last one named sits in slot 5, as
// the reference libraries place a single shuffle.
func parseFilters(s string, typesize int) (f, meta [6]uint8, err error) {
	if s == "" || s == "none" || s == "noshuffle" {
		return f, meta, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > 6 {
		return f, meta, fmt.Errorf("%w: at most 6 filters, not %d", errUsage, len(parts))
	}
	slot := 6 - len(parts)
	for _, p := range parts {
		name, arg, hasArg := strings.Cut(strings.TrimSpace(p), ":")
		var id uint8
		switch name {
		case "shuffle":
			id = blosc.FilterShuffle
		case "bitshuffle":
			id = blosc.FilterBitShuffle
		case "delta":
			id = blosc.FilterDelta
		case "truncprec", "trunc_prec":
			id = blosc.FilterTruncPrec
			if !hasArg {
				return f, meta, fmt.Errorf("%w: truncprec needs the bits to keep, e.g. truncprec:20", errUsage)
			}
		case "bytedelta":
			id = blosc.FilterByteDelta
			meta[slot] = uint8(typesize)
		default:
			return f, meta, fmt.Errorf("%w: unknown filter %q (shuffle, bitshuffle, delta, truncprec:N, bytedelta, none)", errUsage, name)
		}
		if hasArg {
			v, err := strconv.Atoi(arg)
			if err != nil || v < -128 || v > 255 {
				return f, meta, fmt.Errorf("%w: bad filter parameter %q", errUsage, p)
			}
			meta[slot] = uint8(v)
		}
		f[slot] = id
		slot++
	}
	return f, meta, nil
}

func cmdPack(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("pack", stderr)
	format := fs.String("format", "", "output format: b2frame, blp, or b2nd for a .npy input (default: from the file names, else b2frame)")
	chunkShape := fs.String("chunkshape", "", "b2nd: chunk shape, e.g. 100,200 (default: about 4 MiB chunks)")
	blockShape := fs.String("blockshape", "", "b2nd: block shape (default: about 128 KiB blocks)")
	codec := fs.String("codec", "", "codec: blosclz, lz4, lz4hc, zlib, zstd (default: zstd for b2frame, blosclz for blp)")
	clevel := fs.Int("clevel", -1, "compression level 0-9 (default: 5 for b2frame, 7 for blp)")
	filter := fs.String("filter", "shuffle", "filters: shuffle, bitshuffle, none, delta,shuffle, shuffle,bytedelta, truncprec:N,shuffle")
	typesize := fs.Int("typesize", 8, "element size in bytes (1-255)")
	chunkSize := fs.String("chunk-size", "1MiB", "plain bytes per chunk")
	checksum := fs.String("checksum", "adler32", "blp chunk checksum: None, adler32, crc32, md5, sha1, sha224, sha256, sha384, sha512")
	force := fs.Bool("f", false, "overwrite OUT")
	addRemoteFlags(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return fmt.Errorf("%w: pack IN [OUT]", errUsage)
	}
	in, out := pos[0], ""
	if len(pos) > 1 {
		out = pos[1]
	}
	if *format == "" {
		switch {
		case strings.HasSuffix(out, ".blp"):
			*format = "blp"
		case strings.HasSuffix(out, ".b2nd"), out == "" && strings.HasSuffix(in, ".npy"):
			*format = "b2nd"
		default:
			*format = "b2frame"
		}
	}
	if *format != "b2frame" && *format != "blp" && *format != "b2nd" {
		return fmt.Errorf("%w: format %q (b2frame, blp or b2nd)", errUsage, *format)
	}
	if out == "" {
		out = in + "." + *format
		if *format == "b2nd" {
			out = strings.TrimSuffix(in, ".npy") + ".b2nd"
		}
	}
	cs, err := parseSize(*chunkSize)
	if err != nil || cs <= 0 || cs > 1<<31-64 {
		return fmt.Errorf("%w: --chunk-size %q", errUsage, *chunkSize)
	}
	p := blosc.Params{Typesize: *typesize, Split: blosc.SplitAuto}
	if *format == "blp" {
		p.Codec, p.Clevel, p.Blosc1, p.Split = blosc.CodecBloscLZ, 7, true, blosc.SplitForwardCompat
	} else {
		p.Codec, p.Clevel = blosc.CodecZstd, 5
	}
	if *codec != "" {
		c, ok := blosc.CodecByName(*codec)
		if !ok || c > blosc.CodecZstd || c == blosc.CodecSnappy {
			return fmt.Errorf("%w: codec %q (blosclz, lz4, lz4hc, zlib, zstd)", errUsage, *codec)
		}
		p.Codec = c
	}
	if *clevel >= 0 {
		p.Clevel = *clevel
	}
	if p.Filters, p.FiltersMeta, err = parseFilters(*filter, *typesize); err != nil {
		return err
	}
	if err := blosc.ValidateParams(p); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}

	src, err := os.Open(in)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", in)
	}
	size := st.Size()
	dst, err := createAtomic(out, *force, st.Mode())
	if err != nil {
		return err
	}
	defer dst.Abort()

	if *format == "b2nd" {
		if err := packArray(src, in, dst, p, *chunkShape, *blockShape); err != nil {
			return err
		}
		return dst.Commit()
	}

	var add func(raw []byte) error
	var closeW func() error
	if *format == "blp" {
		bp := bloscpack.DefaultParams()
		bp.Blosc, bp.ChunkSize = p, cs
		id, ok := bloscpack.ChecksumID(*checksum)
		if !ok {
			return fmt.Errorf("%w: checksum %q", errUsage, *checksum)
		}
		bp.Checksum = id
		w, err := bloscpack.NewWriter(dst, size, bp)
		if err != nil {
			return fmt.Errorf("%s: %w", out, err)
		}
		add = func(raw []byte) error { return w.AddRawChunk(raw, nil) }
		closeW = w.Close
		if size == 0 {
			cs = 0
		} else {
			cs = min(cs, size) // bloscpack shrinks the chunk size to the data
		}
	} else {
		w, err := frame.NewWriter(dst, frame.Params{Chunk: p, ChunkSize: int(cs)})
		if err != nil {
			return fmt.Errorf("%s: %w", out, err)
		}
		add = w.AddRawChunk
		closeW = w.Close
	}
	n := 0
	if size > 0 {
		n = int((size + cs - 1) / cs)
	}
	pb := newBar(stderr, size, "pack "+filepath.Base(in))
	err = ordered.Run(n, func(i int) ([]byte, error) {
		plain := make([]byte, min(cs, size-int64(i)*cs))
		if _, err := src.ReadAt(plain, int64(i)*cs); err != nil {
			return nil, fmt.Errorf("%s: %w", in, err)
		}
		return blosc.Compress(nil, plain, p)
	}, func(i int, raw []byte) error {
		if err := add(raw); err != nil {
			return fmt.Errorf("%s: %w", out, err)
		}
		pb.Add(min(cs, size-int64(i)*cs))
		return nil
	})
	if err != nil {
		return err
	}
	if err := closeW(); err != nil {
		return fmt.Errorf("%s: %w", out, err)
	}
	pb.Finish()
	return dst.Commit()
}

// parseShape reads "100,200" (empty: nil).
func parseShape(s string) ([]int32, error) {
	if s == "" {
		return nil, nil
	}
	var out []int32
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 || v > 1<<30 {
			return nil, fmt.Errorf("%w: bad shape %q", errUsage, s)
		}
		out = append(out, int32(v))
	}
	return out, nil
}

// packArray writes a .npy file as a .b2nd array.
func packArray(src *os.File, in string, dst io.WriteSeeker, p blosc.Params, chunks, blocks string) error {
	info, err := frame.ReadNPYHeader(src)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	cs, err := parseShape(chunks)
	if err != nil {
		return err
	}
	bs, err := parseShape(blocks)
	if err != nil {
		return err
	}
	a, err := frame.NewArray(info.Shape, info.Descr, info.Itemsize, cs, bs)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	size := int64(info.Itemsize)
	for _, d := range info.Shape {
		size *= d
	}
	st, err := src.Stat()
	if err != nil {
		return err
	}
	if st.Size() < info.DataOff+size {
		return fmt.Errorf("%s: truncated: %d data bytes for shape %v of %s", in, st.Size()-info.DataOff, info.Shape, info.Descr)
	}
	if err := frame.WriteArray(dst, io.NewSectionReader(src, info.DataOff, size), a, p); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	return nil
}
