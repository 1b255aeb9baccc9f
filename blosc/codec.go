package blosc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/bloscfs/bloscfs/blosc/blosclz"
	"github.com/bloscfs/bloscfs/blosc/lz4fast"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec compcodes (c-blosc2 API numbering, also used in frame headers).
const (
	CodecBloscLZ = 0
	CodecLZ4     = 1
	CodecLZ4HC   = 2
	CodecSnappy  = 3 // c-blosc 1.x only
	CodecZlib    = 4
	CodecZstd    = 5
)

// chunk-flag format numbers (flags >> 5) of the built-in codecs.
var codecFormat = map[int]uint8{
	CodecBloscLZ: 0, CodecLZ4: 1, CodecLZ4HC: 1, CodecSnappy: 2, CodecZlib: 3, CodecZstd: 4,
}

var codecNames = map[int]string{
	CodecBloscLZ: "blosclz", CodecLZ4: "lz4", CodecLZ4HC: "lz4hc", CodecSnappy: "snappy",
	CodecZlib: "zlib", CodecZstd: "zstd",
	32: "ndlz", 33: "zfp_acc", 34: "zfp_prec", 35: "zfp_rate", 36: "openhtj2k",
	37: "grok", 38: "openzl", 39: "j2k", 40: "htj2k",
}

// CodecName returns the usual name of a compcode, or "codec-N".
func CodecName(code int) string {
	if n, ok := codecNames[code]; ok {
		return n
	}
	return fmt.Sprintf("codec-%d", code)
}

// CodecByName returns the compcode of a codec name as CodecName spells it.
func CodecByName(name string) (int, bool) {
	for c, n := range codecNames {
		if n == name {
			return c, true
		}
	}
	return 0, false
}

// A Decompressor decodes one codec stream. dst has exactly the expected
// uncompressed length and must be filled completely; any other outcome is
// an error. dict is the chunk's dictionary, or nil. A Decompressor must be
// safe for concurrent use. It may use the spare capacity of dst, up to
// cap(dst), as scratch (zstd's fast copies overshoot the end of the
// output by up to 16 bytes, and take their fast path only with room to
// spare), and must write nothing beyond cap(dst). The chunk decoder hands
// it a dst capped at its length wherever dst is the caller's memory, which
// may be a window of a buffer that other goroutines are filling at the
// same time, and spare capacity only of its own scratch buffers.
type Decompressor func(dst, src, dict []byte) error

// A Compressor encodes one stream into dst and returns the number of bytes
// written, or 0 when the output would not fit in len(dst). A Compressor
// must be safe for concurrent use and write nothing outside dst[:len(dst)].
type Compressor func(dst, src []byte, clevel int) (int, error)

var (
	decompressors sync.Map // int → Decompressor
	compressors   sync.Map // int → Compressor
)

// RegisterDecompressor makes a decoder available for a compcode, such as
// a registered plugin codec (32–159). It panics if one is already
// registered for that id.
func RegisterDecompressor(code int, d Decompressor) {
	if _, dup := decompressors.LoadOrStore(code, d); dup {
		panic(fmt.Sprintf("blosc: decompressor for codec %d already registered", code))
	}
}

// RegisterCompressor makes an encoder available for a compcode. It panics
// if one is already registered for that id.
func RegisterCompressor(code int, c Compressor) {
	if _, dup := compressors.LoadOrStore(code, c); dup {
		panic(fmt.Sprintf("blosc: compressor for codec %d already registered", code))
	}
}

func decompressor(code int) Decompressor {
	if d, ok := decompressors.Load(code); ok {
		return d.(Decompressor)
	}
	return nil
}

func compressor(code int) Compressor {
	if c, ok := compressors.Load(code); ok {
		return c.(Compressor)
	}
	return nil
}

func init() {
	RegisterDecompressor(CodecBloscLZ, decodeBloscLZ)
	RegisterDecompressor(CodecLZ4, decodeLZ4)
	RegisterDecompressor(CodecSnappy, decodeSnappy)
	RegisterDecompressor(CodecZlib, decodeZlib)
	RegisterDecompressor(CodecZstd, decodeZstd)

	RegisterCompressor(CodecBloscLZ, encodeBloscLZ)
	RegisterCompressor(CodecLZ4, encodeLZ4)
	RegisterCompressor(CodecLZ4HC, encodeLZ4HC)
	RegisterCompressor(CodecZlib, encodeZlib)
	RegisterCompressor(CodecZstd, encodeZstd)
}

var errShort = errors.New("stream decodes to a different size")

func decodeBloscLZ(dst, src, _ []byte) error {
	_, err := blosclz.Decompress(dst, src)
	return err
}

func decodeLZ4(dst, src, dict []byte) error {
	var n int
	var err error
	if dict != nil {
		n, err = lz4.UncompressBlockWithDict(src, dst, dict)
	} else {
		n, err = lz4.UncompressBlock(src, dst)
	}
	if err != nil {
		return err
	}
	if n != len(dst) {
		return errShort
	}
	return nil
}

func decodeSnappy(dst, src, _ []byte) error {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return err
	}
	if n != len(dst) {
		return errShort
	}
	out, err := s2.Decode(dst, src)
	if err != nil {
		return err
	}
	if len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
		return errShort
	}
	return nil
}

type zlibReader struct {
	br bytes.Reader
	zr io.ReadCloser
}

var zlibReaders sync.Pool

func decodeZlib(dst, src, _ []byte) error {
	z, _ := zlibReaders.Get().(*zlibReader)
	if z == nil {
		z = new(zlibReader)
	}
	defer zlibReaders.Put(z)
	z.br.Reset(src)
	if z.zr == nil {
		zr, err := zlib.NewReader(&z.br)
		if err != nil {
			return err
		}
		z.zr = zr
	} else if err := z.zr.(zlib.Resetter).Reset(&z.br, nil); err != nil {
		return err
	}
	if _, err := io.ReadFull(z.zr, dst); err != nil {
		return err
	}
	// The stream must end exactly here (and its Adler-32 must match).
	var one [1]byte
	if n, err := z.zr.Read(one[:]); n != 0 || err != io.EOF {
		if err != nil && err != io.EOF {
			return err
		}
		return errShort
	}
	return nil
}

var (
	zstdDecOnce sync.Once
	zstdDec     *zstd.Decoder
)

func sharedZstdDecoder() *zstd.Decoder {
	zstdDecOnce.Do(func() {
		zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0),
			zstd.WithDecodeAllCapLimit(true), zstd.IgnoreChecksum(false))
	})
	return zstdDec
}

// libzstdDecode is libzstd's decoder when the binary is built with cgo
// and the system's libzstd.so.1 loads (zstd_c.go), else nil; libzstdName
// names it. libzstdLoad, set by zstd_c.go, loads the library: it runs on
// the first zstd stream (or ZstdDecoder), not at start, so that a process
// that decodes no zstd does not pay for the dlopen. useLibzstd says
// whether streams without a dictionary go to it (BLOSCFS_ZSTD=go in the
// environment keeps them on klauspost's decoder).
var (
	libzstdLoad   func()
	libzstdOnce   sync.Once
	libzstdDecode func(dst, src []byte) error
	libzstdName   string
	useLibzstd    atomic.Bool
)

func init() { useLibzstd.Store(os.Getenv("BLOSCFS_ZSTD") != "go") }

// libzstdLoaded loads libzstd once and reports whether it loaded.
func libzstdLoaded() bool {
	libzstdOnce.Do(func() {
		if libzstdLoad != nil {
			libzstdLoad()
		}
	})
	return libzstdDecode != nil
}

// libzstd returns libzstd's decoder when it is loaded and in use, else nil.
func libzstd() func(dst, src []byte) error {
	if !libzstdLoaded() || !useLibzstd.Load() {
		return nil
	}
	return libzstdDecode
}

// ZstdDecoder names the decoder that zstd streams without a dictionary go
// to: libzstd (with its version) or klauspost/compress's pure-Go decoder.
func ZstdDecoder() string {
	if libzstd() != nil {
		return libzstdName + " (cgo, run-time loaded)"
	}
	return "klauspost/compress (pure Go)"
}

func decodeZstd(dst, src, dict []byte) error {
	if dict == nil {
		if dec := libzstd(); dec != nil {
			return dec(dst, src)
		}
	}
	d := sharedZstdDecoder()
	if dict != nil {
		var err error
		d, err = dictZstdDecoder(dict)
		if err != nil {
			return err
		}
	}
	return zstdDecodeInto(d, dst, src)
}

// zstdDecodeInto decodes src into exactly dst. DecodeAll appends to its
// destination and, with WithDecodeAllCapLimit, writes anywhere up to
// cap(dst) but never past it: its sequence copies overshoot the end of the
// output when there is room, and it uses the slower exact copies when
// there is not (see Decompressor). A stream longer than cap(dst) fails
// instead of growing dst.
func zstdDecodeInto(d *zstd.Decoder, dst, src []byte) error {
	out, err := d.DecodeAll(src, dst[:0])
	if err != nil {
		return err
	}
	if len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
		return errShort
	}
	return nil
}

// zstd decoders with a dictionary, keyed by the dictionary bytes. Chunks of
// one frame usually share their dictionary's content; the cache is small
// and bounded.
var (
	zstdDictMu   sync.Mutex
	zstdDictDecs = map[string]*zstd.Decoder{}
)

const maxZstdDictDecoders = 64

func dictZstdDecoder(dict []byte) (*zstd.Decoder, error) {
	zstdDictMu.Lock()
	defer zstdDictMu.Unlock()
	if d, ok := zstdDictDecs[string(dict)]; ok {
		return d, nil
	}
	opts := []zstd.DOption{zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true)}
	if len(dict) >= 8 && dict[0] == 0x37 && dict[1] == 0xA4 && dict[2] == 0x30 && dict[3] == 0xEC {
		opts = append(opts, zstd.WithDecoderDicts(dict))
	} else {
		opts = append(opts, zstd.WithDecoderDictRaw(0, dict))
	}
	d, err := zstd.NewReader(nil, opts...)
	if err != nil {
		return nil, err
	}
	if len(zstdDictDecs) >= maxZstdDictDecoders {
		// Forget one; it may still be decoding in another goroutine, so
		// it is not closed (DecodeAll-only decoders hold no goroutines,
		// and the garbage collector frees it).
		for k := range zstdDictDecs {
			delete(zstdDictDecs, k)
			break
		}
	}
	zstdDictDecs[string(dict)] = d
	return d, nil
}

func encodeBloscLZ(dst, src []byte, clevel int) (int, error) {
	return blosclz.Compress(dst, src, clevel), nil
}

// LZ4 streams are written by lz4fast, our port of lz4's
// LZ4_compress_fast, which c-blosc2 calls with acceleration 1 at every
// clevel: chunks come out byte for byte as c-blosc2 2.23 writes them
// (TestLZ4AsCBlosc2), at c-blosc2's speed (docs/PERFORMANCE.md, "Our LZ4
// compressor"). pierrec/lz4 decodes them, and writes LZ4HC.
func encodeLZ4(dst, src []byte, clevel int) (int, error) {
	return lz4fast.Compress(dst, src), nil
}

// LZ4HC compressors are reused: each holds its hash tables, which a
// fresh one per stream would allocate and zero for every stream.
var lz4HCCompressors = sync.Pool{New: func() any { return new(lz4.CompressorHC) }}

func encodeLZ4HC(dst, src []byte, clevel int) (int, error) {
	c := lz4HCCompressors.Get().(*lz4.CompressorHC)
	defer lz4HCCompressors.Put(c)
	c.Level = lz4.CompressionLevel(1 << (8 + clevel))
	n, err := c.CompressBlock(src, dst)
	if err != nil {
		return 0, nil
	}
	return n, nil
}

type limitedWriter struct {
	buf []byte
	n   int
	err bool
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.n+len(p) > len(w.buf) {
		w.err = true
		return 0, io.ErrShortWrite
	}
	w.n += copy(w.buf[w.n:], p)
	return len(p), nil
}

var zlibWriters [10]sync.Pool

func encodeZlib(dst, src []byte, clevel int) (int, error) {
	if clevel < 1 {
		clevel = 1
	}
	if clevel > 9 {
		clevel = 9
	}
	lw := &limitedWriter{buf: dst}
	zw, _ := zlibWriters[clevel].Get().(*zlib.Writer)
	if zw == nil {
		var err error
		zw, err = zlib.NewWriterLevel(lw, clevel)
		if err != nil {
			return 0, err
		}
	} else {
		zw.Reset(lw)
	}
	defer zlibWriters[clevel].Put(zw)
	if _, err := zw.Write(src); err != nil {
		return 0, nil
	}
	if err := zw.Close(); err != nil || lw.err {
		return 0, nil
	}
	return lw.n, nil
}

var (
	zstdEncMu sync.Mutex
	zstdEncs  [10]*zstd.Encoder
)

func zstdEncoder(clevel int) *zstd.Encoder {
	zstdEncMu.Lock()
	defer zstdEncMu.Unlock()
	if zstdEncs[clevel] == nil {
		level := 2*clevel - 1 // c-blosc2's mapping
		if clevel == 9 {
			level = 22
		}
		// EncodeAll runs on as many goroutines at once as the
		// concurrency allows, each with its own encoder state; with 1,
		// as before, the workers of `pack` compressed zstd blocks one
		// at a time. A state keeps a history buffer of twice the
		// window (8 MiB) unless told to keep less: the lower setting
		// took a mount's peak during a 1 GiB cp from 94 to 81 MiB
		// (BenchmarkWrite), with the same output bytes.
		zstdEncs[clevel], _ = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithEncoderCRC(false),
			zstd.WithLowerEncoderMem(true),
			zstd.WithZeroFrames(true))
	}
	return zstdEncs[clevel]
}

func encodeZstd(dst, src []byte, clevel int) (int, error) {
	if clevel < 1 {
		clevel = 1
	}
	if clevel > 9 {
		clevel = 9
	}
	// Capped as in zstdDecodeInto: the encoder appends, and may write up
	// to cap(dst); output that does not fit lands in a new slice.
	out := zstdEncoder(clevel).EncodeAll(src, dst[:0:len(dst)])
	if len(out) > len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
		return 0, nil
	}
	return len(out), nil
}
