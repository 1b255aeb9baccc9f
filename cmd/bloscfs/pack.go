package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/bufs"
	"github.com/bloscfs/bloscfs/internal/localwrite"
	"github.com/bloscfs/bloscfs/internal/mmapfile"
	"github.com/bloscfs/bloscfs/internal/ordered"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/pack/bloscpack"
	"github.com/bloscfs/bloscfs/pack/frame"
	"github.com/bloscfs/bloscfs/remote"
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
		return f, meta, badFlag("filter", s, fmt.Sprintf("at most 6 filters, not %d", len(parts)))
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
				return f, meta, badFlag("filter", s, "truncprec needs the bits to keep, e.g. truncprec:20,shuffle")
			}
		case "bytedelta":
			id = blosc.FilterByteDelta
			meta[slot] = uint8(typesize)
		default:
			return f, meta, badFlag("filter", s, fmt.Sprintf("%q is not a filter: use %s", name, filterNames))
		}
		if hasArg {
			v, err := strconv.Atoi(arg)
			if err != nil || v < -128 || v > 255 {
				return f, meta, badFlag("filter", s, fmt.Sprintf("%q: the parameter after : is a number from -128 to 255", p))
			}
			meta[slot] = uint8(v)
		}
		f[slot] = id
		slot++
	}
	return f, meta, nil
}

// maxDefaultBlock caps the block size of new frames: a cold random read
// decodes a whole block, and c-blosc2's choice for clevel 4 and up at
// typesize 8 (512 KiB and more) doubles its latency for a ratio 0-4 %
// better (fs BenchmarkBlockSize, docs/PERFORMANCE.md).
const maxDefaultBlock = 256 << 10

// defaultBlocksize is the block size of new frames: c-blosc2's choice
// for p and chunks of cs bytes, at most maxDefaultBlock.
func defaultBlocksize(p blosc.Params, cs int) int {
	return min(p.AutoBlocksize(cs), maxDefaultBlock)
}

// maxPackBlock bounds --block-size: a mount decodes blocks of up to an
// eighth of its cache, and at most 64 MiB.
const maxPackBlock = 64 << 20

// packHelp is the description in `bloscfs help pack`.
const packHelp = `Compress a plain file on all cores into a Blosc2 frame (default), a
Bloscpack file, or (for a .npy input) a .b2nd array. OUT defaults to
IN.b2frame (IN.blp; x.b2nd for x.npy); with IN - (standard input) OUT is
required. Defaults: b2frame with zstd, clevel 5, shuffle, typesize 8
(python-blosc2's codec, filter and typesize, c-blosc2's default level;
python-blosc2's is 1), blp with bloscpack's parameters (blosclz, clevel 7,
shuffle, adler32); 1 MiB chunks.`

// packConfig is what a pack command line asks for, parsed and checked
// (runPack reads IN and writes OUT).
type packConfig struct {
	in, out  string // IN ("-": standard input) and OUT (a path, or s3://BUCKET/KEY)
	format   string // b2frame, blp or b2nd
	params   blosc.Params
	chunk    int64 // plain bytes per chunk
	checksum int   // blp: the chunk checksum (bloscpack.Checksums)
	// chunkShape and blockShape are b2nd's --chunkshape and
	// --blockshape, checked (packArray parses them).
	chunkShape, blockShape string
	force, quiet           bool
	store                  remote.Config // for an s3:// OUT
}

func cmdPack(args []string, stdout, stderr io.Writer) error {
	c, err := parsePack(args, stdout)
	if err != nil {
		return err
	}
	if remote.IsURL(c.out) {
		return runPackRemote(c, stderr)
	}
	return runPack(c, stderr)
}

// parsePack parses and checks a pack command line, without opening IN or
// OUT.
func parsePack(args []string, stdout io.Writer) (*packConfig, error) {
	fs := newFlags("pack", stdout)
	format := fs.String("format", "", "output `FORMAT`: b2frame, blp, or b2nd for a .npy input (default: from the file names, else b2frame)")
	chunkShape := fs.String("chunkshape", "", "b2nd: chunk `SHAPE`, e.g. 100,200 (default: about 4 MiB chunks)")
	blockShape := fs.String("blockshape", "", "b2nd: block `SHAPE` (default: about 128 KiB blocks)")
	codec := fs.String("codec", "", "`CODEC`: blosclz, lz4, lz4hc, zlib, zstd (default: zstd for b2frame, blosclz for blp)")
	clevel := fs.Int("clevel", 0, "compression `LEVEL` 0-9 (default: 5 for b2frame, 7 for blp)")
	filter := fs.String("filter", "shuffle", "`FILTERS`: shuffle, bitshuffle, none, delta,shuffle, shuffle,bytedelta, truncprec:N,shuffle")
	typesize := fs.Int("typesize", 8, "element `SIZE` in bytes (1-255)")
	chunkSize := fs.String("chunk-size", "1MiB", "plain `BYTES` per chunk")
	blockSize := fs.String("block-size", "", "plain `BYTES` per block, the unit a random read decodes, or auto for c-blosc2's choice (default: b2frame at most 256KiB, blp auto)")
	checksum := fs.String("checksum", "adler32", "blp chunk `CHECKSUM`: None, adler32, crc32, md5, sha1, sha224, sha256, sha384, sha512")
	force := fs.BoolP("force", "f", false, "overwrite OUT; pack IN even if it is a container already")
	quiet := fs.BoolP("quiet", "q", false, "print no summary")
	rf := addRemoteFlagsFor(fs, remoteConn)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return nil, fmt.Errorf("%w: pack IN [OUT]", errUsage)
	}
	in, out := pos[0], ""
	if len(pos) > 1 {
		out = pos[1]
	}
	if in == "-" && out == "" {
		return nil, fmt.Errorf("%w: pack - (standard input) needs OUT", errUsage)
	}
	if remote.IsURL(in) {
		return nil, fmt.Errorf("%w: %s: pack reads a local file or standard input (OUT may be s3://BUCKET/KEY)", errUsage, in)
	}
	if remote.IsURL(out) {
		if _, key, ok := remote.ParseURL(out); !ok || key == "" || strings.HasSuffix(key, "/") {
			return nil, fmt.Errorf("%w: %s: name the object (s3://BUCKET/KEY)", errUsage, out)
		}
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
		return nil, badFlag("format", *format, "not a format: b2frame, blp or b2nd")
	}
	sum, ok := bloscpack.ChecksumID(*checksum)
	if !ok {
		return nil, badFlag("checksum", *checksum, "not a checksum: "+checksumNames())
	}
	for flag, shape := range map[string]string{"chunkshape": *chunkShape, "blockshape": *blockShape} {
		if _, err := parseShape(flag, shape); err != nil {
			return nil, err
		}
	}
	if out == "" {
		out = in + "." + *format
		if *format == "b2nd" {
			out = strings.TrimSuffix(in, ".npy") + ".b2nd"
		}
	}
	cs, err := parseSize(*chunkSize)
	if err != nil || cs <= 0 || cs > 1<<31-64 {
		return nil, badFlag("chunk-size", *chunkSize, chunkSizeHint)
	}
	p := blosc.Params{Typesize: *typesize, Split: blosc.SplitAuto}
	if *blockSize != "auto" && *blockSize != "" {
		bs, err := parseSize(*blockSize)
		// A mount decodes blocks of up to an eighth of its cache (64 MiB
		// at most); larger blocks would be readable by unpack only.
		if err != nil || bs <= 0 || bs > maxPackBlock {
			return nil, badFlag("block-size", *blockSize, "takes "+sizeHint+", from 1 byte to 64MiB, or auto")
		}
		p.Blocksize = int(bs)
	}
	if *format == "blp" {
		p.Codec, p.Clevel, p.Blosc1, p.Split = blosc.CodecBloscLZ, 7, true, blosc.SplitForwardCompat
	} else {
		p.Codec, p.Clevel = blosc.CodecZstd, 5
	}
	if *codec != "" {
		if p.Codec, err = newCodec(*codec); err != nil {
			return nil, err
		}
	}
	if fs.Changed("clevel") {
		p.Clevel = *clevel
	}
	if err := checkLevels(p.Clevel, *typesize); err != nil {
		return nil, err
	}
	if p.Filters, p.FiltersMeta, err = parseFilters(*filter, *typesize); err != nil {
		return nil, err
	}
	if *blockSize == "" && *format == "b2frame" {
		p.Blocksize = defaultBlocksize(p, int(cs))
	}
	if err := validParams(p); err != nil {
		return nil, err
	}
	store, err := rf.config()
	if err != nil {
		return nil, err
	}
	return &packConfig{
		in: in, out: out, format: *format, params: p, chunk: cs, checksum: sum,
		chunkShape: *chunkShape, blockShape: *blockShape, force: *force, quiet: *quiet, store: store,
	}, nil
}

// runPack compresses c.in into the local file c.out.
func runPack(c *packConfig, stderr io.Writer) error {
	in, out, p, cs := c.in, c.out, c.params, c.chunk
	// A FIFO or socket cannot take a container, whose header is completed
	// after its chunks by seeking back: refused before standard input is
	// spooled, and before an open that would wait for a reader.
	if st, err := os.Stat(out); err == nil && st.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0 {
		return fmt.Errorf("%s: %w", out, errUnseekable)
	}
	start := time.Now()
	var src *os.File
	var st os.FileInfo
	var err error
	if in == "-" {
		if src, err = spoolStdin(out); err != nil {
			return err
		}
		if st, err = src.Stat(); err != nil {
			src.Close()
			return err
		}
	} else if src, st, err = pack.OpenSource(followArg(in), false); err != nil {
		// A FIFO or device is refused at once, without blocking on it.
		return err
	}
	defer src.Close()
	if name := containerName(src, in); name != "" && !c.force {
		return fmt.Errorf("%s is already a %s: packing it would compress compressed bytes (unpack it first, or use -f)", in, name)
	}
	size := st.Size()
	perm := st.Mode()
	if in == "-" {
		perm = 0o644
	}
	dst, err := createAtomic(out, c.force, perm)
	if err != nil {
		return err
	}
	defer dst.Abort()
	// A device is written in place. One that cannot seek (a terminal) is
	// refused; one that can (a disk, /dev/null) is not cut to the
	// container's length at the end, as a file is.
	var w io.WriteSeeker = dst
	if dst.inPlace {
		if _, err := dst.Seek(0, io.SeekCurrent); err != nil {
			return fmt.Errorf("%s: %w", out, errUnseekable)
		}
		w = struct{ io.WriteSeeker }{dst}
	} else {
		// Where the temp file lies on a local disk, it is written with
		// raw system calls, which the scheduler does not hand the
		// processor off around (internal/localwrite).
		w = localwrite.New(dst.File)
	}
	summary := func() error {
		if c.quiet {
			return nil
		}
		return printSummary(stderr, "packed", in, out, size, -1, start)
	}

	if c.format == "b2nd" {
		if err := packArray(src, in, w, p, c.chunkShape, c.blockShape, stderr); err != nil {
			return err
		}
		if err := dst.Commit(); err != nil {
			return err
		}
		return summary()
	}

	var add func(raw []byte) error
	var closeW func() error
	if c.format == "blp" {
		bp := bloscpack.DefaultParams()
		bp.Blosc, bp.ChunkSize = p, cs
		bp.Checksum = c.checksum
		bw, err := bloscpack.NewWriter(w, size, bp)
		if err != nil {
			return fmt.Errorf("%s: %w", out, err)
		}
		add = func(raw []byte) error { return bw.AddRawChunk(raw, nil) }
		closeW = bw.Close
		if size == 0 {
			cs = 0
		} else {
			cs = min(cs, size) // bloscpack shrinks the chunk size to the data
		}
	} else {
		fw, err := frame.NewWriter(w, frame.Params{Chunk: p, ChunkSize: int(cs)})
		if err != nil {
			return fmt.Errorf("%s: %w", out, err)
		}
		add = fw.AddRawChunk
		closeW = fw.Close
	}
	n := 0
	if size > 0 {
		n = int((size + cs - 1) / cs)
	}
	pb := newBar(stderr, size, "pack "+filepath.Base(in))
	// A chunk's plain bytes and its compressed form go into buffers used
	// again once it is compressed and written (internal/bufs): fresh ones
	// cost a fifth of the CPU of packing a float64 series with LZ4.
	var plains, raws bufs.Pool
	// The plain bytes are read first from the page cache with a raw
	// system call (mmapfile.Pread), the rest the ordinary way: with the
	// raw writes, a tenth of pack's CPU time on one core, where the
	// scheduler handed the processor off around every read and write of
	// a chunk (docs/PERFORMANCE.md). rd is not closed: src is, after the
	// last read.
	rd := mmapfile.NewPread(src)
	err = ordered.Run(n, func(i int) ([]byte, error) {
		bp := plains.Get(int(min(cs, size-int64(i)*cs)))
		defer plains.Put(bp)
		if _, err := rd.ReadAt(*bp, int64(i)*cs); err != nil {
			return nil, fmt.Errorf("%s: %w", in, err)
		}
		return blosc.Compress((*raws.Get(0))[:0], *bp, p)
	}, func(i int, raw []byte) error {
		if err := add(raw); err != nil {
			return fmt.Errorf("%s: %w", out, err)
		}
		raws.Put(&raw)
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
	if err := dst.Commit(); err != nil {
		return err
	}
	return summary()
}

// errUnseekable refuses an OUT that pack cannot seek in.
var errUnseekable = errors.New("cannot seek in it: a container's header is completed after its chunks, so pack writes to a file or a device it can seek in")

// spoolStdin copies standard input into an unlinked temp file beside
// out, which the writers can read at any offset and know the size of.
func spoolStdin(out string) (*os.File, error) {
	f, err := os.CreateTemp(filepath.Dir(out), ".bloscfs-stdin-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	if _, err := io.Copy(f, os.Stdin); err != nil {
		f.Close()
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	return f, nil
}

// containerName names the container format of a file about to be packed
// ("" for a plain file): its magic, else its suffix.
func containerName(f *os.File, name string) string {
	head := make([]byte, pack.HeadLen)
	n, _ := f.ReadAt(head, 0)
	if fm := pack.Sniff(head[:n]); fm != nil && fm.Name != "chunk" {
		return fm.Name + " container"
	}
	if _, ok := all.PlainName(filepath.Base(name)); ok {
		return "container by its suffix " + filepath.Ext(name)
	}
	return ""
}

// printSummary prints what pack or unpack made: names, sizes, ratio and
// speed. plain is the plain size; stored is the container's size, or -1
// for pack, whose output's size is then taken from the file it made (a
// device or a pipe has none to tell, and the line leaves it out).
func printSummary(w io.Writer, verb, in, out string, plain, stored int64, start time.Time) error {
	d := time.Since(start).Seconds()
	if stored < 0 {
		if st, err := os.Stat(out); err == nil && st.Mode().IsRegular() {
			stored = st.Size()
		}
	}
	if in == "-" {
		in = "standard input"
	}
	sizes := humanBytes(plain) + " plain"
	if stored >= 0 {
		ratio := 0.0
		if stored > 0 {
			ratio = float64(plain) / float64(stored)
		}
		sizes += fmt.Sprintf(", %s stored (ratio %.2f)", humanBytes(stored), ratio)
	}
	fmt.Fprintf(w, "%s %s → %s: %s in %.2f s (%s/s)\n",
		verb, in, out, sizes, d, humanBytes(int64(float64(plain)/max(d, 1e-9))))
	return nil
}

// humanBytes formats a size with a binary unit.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// progressReaderAt advances a bar by the bytes read (each byte of the
// array is read once).
type progressReaderAt struct {
	r  io.ReaderAt
	pb *bar
}

func (p progressReaderAt) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.r.ReadAt(b, off)
	p.pb.Add(int64(n))
	return n, err
}

// parseShape reads "100,200" (empty: nil).
func parseShape(flag, s string) ([]int32, error) {
	if s == "" {
		return nil, nil
	}
	var out []int32
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 || v > 1<<30 {
			return nil, badFlag(flag, s, "a shape is whole numbers from 1 to 2^30 separated by commas, e.g. 100,200")
		}
		out = append(out, int32(v))
	}
	return out, nil
}

// packArray writes a .npy file as a .b2nd array.
func packArray(src *os.File, in string, dst io.WriteSeeker, p blosc.Params, chunks, blocks string, stderr io.Writer) error {
	info, err := frame.ReadNPYHeader(src)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	cs, err := parseShape("chunkshape", chunks)
	if err != nil {
		return err
	}
	bs, err := parseShape("blockshape", blocks)
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
	pb := newBar(stderr, size, "pack "+filepath.Base(in))
	data := progressReaderAt{io.NewSectionReader(src, info.DataOff, size), pb}
	if err := frame.WriteArray(dst, data, a, p); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	pb.Finish()
	return nil
}
