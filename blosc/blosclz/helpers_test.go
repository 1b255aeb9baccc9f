package blosclz

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// Test data generators. All are deterministic.

func genZeros(n int, _ uint64) []byte { return make([]byte, n) }

// genRuns makes runs of random bytes with random lengths (1..300).
func genRuns(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, 0, n)
	for len(b) < n {
		c := byte(r.IntN(256))
		k := 1 + r.IntN(300)
		for i := 0; i < k && len(b) < n; i++ {
			b = append(b, c)
		}
	}
	return b
}

var words = strings.Fields(`the of and to in is was for on that with as by at from
	error warning info debug request response server client timeout retry
	connection established closed user session token value key index block
	chunk frame header offset length compress decompress shuffle blosc lz`)

// genText makes log-like text lines.
func genText(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, 0, n+64)
	for len(b) < n {
		b = fmt.Appendf(b, "2024-%02d-%02d %02d:%02d:%02d.%03d [%s] ",
			1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000),
			strings.ToUpper(words[10+r.IntN(4)]))
		for k := 3 + r.IntN(10); k > 0; k-- {
			b = append(b, words[r.IntN(len(words))]...)
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(r.IntN(100000)), 10)
		b = append(b, '\n')
	}
	return b[:n]
}

// genFloats makes the little-endian float64 series sin(i*0.001)*1000.
func genFloats(n int, _ uint64) []byte {
	b := make([]byte, (n+7)/8*8)
	for i := 0; i < len(b)/8; i++ {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(math.Sin(float64(i)*0.001)*1000))
	}
	return b[:n]
}

// genShuffledFloats is genFloats byte-shuffled with typesize 8, as Blosc
// feeds it to the codec.
func genShuffledFloats(n int, seed uint64) []byte {
	return shuffleBytes(genFloats(n, seed), 8)
}

func genRandom(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// genMixed alternates text and random stretches, with some exact repeats.
func genMixed(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 4))
	b := make([]byte, 0, n)
	for len(b) < n {
		k := 1 + r.IntN(2000)
		switch r.IntN(4) {
		case 0:
			b = append(b, genText(k, r.Uint64())...)
		case 1:
			b = append(b, genRandom(k, r.Uint64())...)
		case 2:
			if len(b) > 0 {
				off := r.IntN(len(b))
				for i := 0; i < k; i++ {
					b = append(b, b[off+i])
				}
			}
		case 3:
			p := 1 + r.IntN(16)
			for i := 0; i < k; i++ {
				b = append(b, byte(i%p))
			}
		}
	}
	return b[:n]
}

// genPeriodic repeats a short random pattern (period 2..40).
func genPeriodic(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 5))
	p := genRandom(2+r.IntN(39), seed)
	b := make([]byte, n)
	for i := range b {
		b[i] = p[i%len(p)]
	}
	return b
}

type generator struct {
	name string
	gen  func(n int, seed uint64) []byte
}

var generators = []generator{
	{"zeros", genZeros},
	{"runs", genRuns},
	{"text", genText},
	{"floats", genFloats},
	{"shuffled-floats", genShuffledFloats},
	{"random", genRandom},
	{"mixed", genMixed},
	{"periodic", genPeriodic},
}

// shuffleBytes is Blosc's byte shuffle: byte j of element i goes to
// j*q+i; trailing bytes of a partial element stay in place.
func shuffleBytes(src []byte, ts int) []byte {
	out := make([]byte, len(src))
	q := len(src) / ts
	for i := 0; i < q; i++ {
		for j := 0; j < ts; j++ {
			out[j*q+i] = src[i*ts+j]
		}
	}
	copy(out[q*ts:], src[q*ts:])
	return out
}

func unshuffleBytes(src []byte, ts int) []byte {
	out := make([]byte, len(src))
	q := len(src) / ts
	for i := 0; i < q; i++ {
		for j := 0; j < ts; j++ {
			out[i*ts+j] = src[j*q+i]
		}
	}
	copy(out[q*ts:], src[q*ts:])
	return out
}

// ---------------------------------------------------------------------------
// Reference decoders.

// refDecompress is a plain byte-at-a-time decoder written from FORMATS.md
// §3.1, used to cross-check the optimised Decompress. It executes a final
// match like Decompress does.
func refDecompress(dst, src []byte) (int, error) {
	if len(src) == 0 {
		if len(dst) == 0 {
			return 0, nil
		}
		return 0, ErrCorrupt
	}
	ip, op := 1, 0
	ctrl := int(src[0] & 31)
	for {
		if ctrl < 32 {
			for k := 0; k <= ctrl; k++ {
				if ip >= len(src) || op >= len(dst) {
					return op, ErrCorrupt
				}
				dst[op] = src[ip]
				op++
				ip++
			}
		} else {
			length := ctrl>>5 - 1
			if length == 6 {
				for {
					if ip >= len(src) {
						return op, ErrCorrupt
					}
					c := int(src[ip])
					ip++
					length += c
					if c != 255 {
						break
					}
				}
			}
			if ip >= len(src) {
				return op, ErrCorrupt
			}
			code := int(src[ip])
			ip++
			length += 3
			dist := (ctrl&31)<<8 + code + 1
			if code == 255 && ctrl&31 == 31 {
				if ip+2 > len(src) {
					return op, ErrCorrupt
				}
				dist = int(src[ip])<<8 | int(src[ip+1]) + 8192
				ip += 2
			}
			if dist > op {
				return op, ErrCorrupt
			}
			for k := 0; k < length; k++ {
				if op >= len(dst) {
					return op, ErrCorrupt
				}
				dst[op] = dst[op-dist]
				op++
			}
		}
		if ip >= len(src) {
			break
		}
		ctrl = int(src[ip])
		ip++
	}
	if op != len(dst) {
		return op, ErrCorrupt
	}
	return op, nil
}

// cblosc2Decompress mirrors the control flow and every check of the
// c-blosc2 (3.x) blosclz_decompress, including its quirks: a match that
// is the last token is dropped, and the byte after a match's length bytes
// (and after a far distance) must not be the last one of the stream. It
// returns the number of bytes produced, or 0 where the C code returns 0.
func cblosc2Decompress(dst, src []byte) int {
	n := len(src)
	if n == 0 {
		return 0
	}
	ip, op := 0, 0
	ctrl := int(src[ip] & 31)
	ip++
	for {
		if ctrl >= 32 {
			length := ctrl>>5 - 1
			ofs := (ctrl & 31) << 8
			if length == 6 {
				for {
					if ip+1 >= n {
						return 0
					}
					code := int(src[ip])
					ip++
					length += code
					if code != 255 {
						break
					}
				}
			} else if ip+1 >= n {
				return 0
			}
			code := int(src[ip])
			ip++
			length += 3
			ref := op - ofs - code // ref-1 is the first source byte
			if code == 255 && ofs == 31<<8 {
				if ip+1 >= n {
					return 0
				}
				ofs = int(src[ip])<<8 | int(src[ip+1])
				ip += 2
				ref = op - ofs - 8191
			}
			if op+length > len(dst) {
				return 0
			}
			if ref-1 < 0 {
				return 0
			}
			if ip >= n {
				break // the trailing match is dropped
			}
			ctrl = int(src[ip])
			ip++
			ref--
			for k := 0; k < length; k++ {
				dst[op+k] = dst[ref+k]
			}
			op += length
		} else {
			ctrl++
			if op+ctrl > len(dst) || ip+ctrl > n {
				return 0
			}
			copy(dst[op:], src[ip:ip+ctrl])
			op += ctrl
			ip += ctrl
			if ip >= n {
				break
			}
			ctrl = int(src[ip])
			ip++
		}
	}
	return op
}

// streamStats walks a stream and reports its tokens.
type streamStats struct {
	literals, matches, farMatches int
	minMatch, maxMatch, maxDist   int
	lastIsLiteral                 bool
	lastLiteralLen                int
}

func analyzeStream(src []byte) (st streamStats, err error) {
	if len(src) == 0 {
		return st, fmt.Errorf("empty stream")
	}
	if src[0]>>5 != 1 {
		return st, fmt.Errorf("first byte %#x lacks the 001 marker", src[0])
	}
	st.minMatch = math.MaxInt
	ip := 1
	ctrl := int(src[0] & 31)
	op := 0
	for {
		if ctrl < 32 {
			st.literals++
			st.lastIsLiteral = true
			st.lastLiteralLen = ctrl + 1
			ip += ctrl + 1
			op += ctrl + 1
		} else {
			st.matches++
			st.lastIsLiteral = false
			length := ctrl>>5 - 1
			if length == 6 {
				for {
					c := int(src[ip])
					ip++
					length += c
					if c != 255 {
						break
					}
				}
			}
			code := int(src[ip])
			ip++
			length += 3
			dist := (ctrl&31)<<8 + code + 1
			if code == 255 && ctrl&31 == 31 {
				dist = int(src[ip])<<8 | int(src[ip+1]) + 8192
				ip += 2
				st.farMatches++
			}
			if dist > op {
				return st, fmt.Errorf("distance %d before start at output %d", dist, op)
			}
			op += length
			st.minMatch = min(st.minMatch, length)
			st.maxMatch = max(st.maxMatch, length)
			st.maxDist = max(st.maxDist, dist)
		}
		if ip > len(src) {
			return st, fmt.Errorf("truncated")
		}
		if ip == len(src) {
			break
		}
		ctrl = int(src[ip])
		ip++
	}
	return st, nil
}

// checkStream asserts that stream decodes to want with Decompress, the
// reference decoder and the c-blosc2 emulation, and that it follows the
// rules an encoder must keep for the C decoders.
func checkStream(t testing.TB, stream, want []byte) {
	t.Helper()
	st, err := analyzeStream(stream)
	if err != nil {
		t.Fatalf("bad stream: %v", err)
	}
	if !st.lastIsLiteral {
		t.Fatalf("stream ends with a match")
	}
	if st.matches > 0 && (st.minMatch < 3 || st.maxDist >= 73725) {
		t.Fatalf("bad match: min length %d, max distance %d", st.minMatch, st.maxDist)
	}
	if len(stream) >= len(want) {
		t.Fatalf("stream of %d bytes for %d input bytes", len(stream), len(want))
	}
	got := make([]byte, len(want))
	n, err := Decompress(got, stream)
	if err != nil || n != len(want) {
		t.Fatalf("Decompress: n=%d err=%v", n, err)
	}
	if !equalBytes(got, want) {
		t.Fatalf("Decompress: data differ at %d", firstDiff(got, want))
	}
	clear(got)
	if n := cblosc2Decompress(got, stream); n != len(want) || !equalBytes(got, want) {
		t.Fatalf("c-blosc2 emulation: n=%d, want %d (first diff %d)", n, len(want), firstDiff(got, want))
	}
}

func equalBytes(a, b []byte) bool { return string(a) == string(b) }

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// ---------------------------------------------------------------------------
// Fixtures.

const fixtureDir = "../../testdata/fixtures"

type manifestEntry struct {
	file, kind, params string
	plainSize          int
	sha                string
}

func readManifest(t testing.TB) []manifestEntry {
	t.Helper()
	f, err := os.Open(filepath.Join(fixtureDir, "MANIFEST.tsv"))
	if err != nil {
		t.Fatalf("fixtures: %v", err)
	}
	defer f.Close()
	var out []manifestEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for first := true; sc.Scan(); first = false {
		if first {
			continue
		}
		c := strings.Split(sc.Text(), "\t")
		if len(c) < 6 {
			continue
		}
		size, _ := strconv.Atoi(c[4])
		out = append(out, manifestEntry{file: c[0], kind: c[1], params: c[3], plainSize: size, sha: c[5]})
	}
	return out
}

// cStream is one BloscLZ stream written by a C library.
type cStream struct {
	name string
	data []byte
	size int // decoded size
}

// blosc1Chunk decodes a version-2 (16-byte header) Blosc chunk whose codec
// is BloscLZ. It returns its codec streams and, unless the chunk is
// bit-shuffled, the chunk's decoded bytes.
func blosc1Chunk(name string, chunk []byte) (streams []cStream, plain []byte, err error) {
	if len(chunk) < 16 {
		return nil, nil, fmt.Errorf("short chunk")
	}
	flags := chunk[2]
	ts := int(chunk[3])
	nbytes := int(binary.LittleEndian.Uint32(chunk[4:]))
	bs := int(binary.LittleEndian.Uint32(chunk[8:]))
	cbytes := int(binary.LittleEndian.Uint32(chunk[12:]))
	if chunk[0] != 2 || cbytes > len(chunk) || ts == 0 {
		return nil, nil, fmt.Errorf("bad header")
	}
	if flags&2 != 0 || nbytes == 0 {
		return nil, chunk[16 : 16+nbytes], nil
	}
	if flags>>5 != 0 {
		return nil, nil, fmt.Errorf("codec format %d is not BloscLZ", flags>>5)
	}
	if bs > nbytes {
		bs = nbytes
	}
	nblocks := (nbytes + bs - 1) / bs
	leftover := nbytes % bs
	for j := range nblocks {
		bsize := bs
		last := j == nblocks-1 && leftover > 0
		if last {
			bsize = leftover
		}
		nstreams := 1
		if flags&0x10 == 0 && ts <= 16 && bsize/ts >= 128 && !last {
			nstreams = ts
		}
		neblock := bsize / nstreams
		pos := int(binary.LittleEndian.Uint32(chunk[16+4*j:]))
		block := make([]byte, 0, bsize)
		for k := range nstreams {
			csize := int(binary.LittleEndian.Uint32(chunk[pos:]))
			pos += 4
			data := chunk[pos : pos+csize]
			pos += csize
			if csize == neblock {
				block = append(block, data...)
				continue
			}
			streams = append(streams, cStream{fmt.Sprintf("%s/b%d/s%d", name, j, k), data, neblock})
			out := make([]byte, neblock)
			if _, err := Decompress(out, data); err != nil {
				return nil, nil, fmt.Errorf("block %d stream %d: %w", j, k, err)
			}
			block = append(block, out...)
		}
		if flags&1 != 0 && ts > 1 {
			block = unshuffleBytes(block, ts)
		}
		plain = append(plain, block...)
	}
	if flags&4 != 0 {
		plain = nil // bit-shuffled: not undone here
	}
	return streams, plain, nil
}

// bloscpackChunks splits a format-3 Bloscpack file into its Blosc chunks.
func bloscpackChunks(b []byte) ([][]byte, error) {
	if len(b) < 32 || string(b[:4]) != "blpk" || b[4] != 3 {
		return nil, fmt.Errorf("not a bloscpack v3 file")
	}
	sums := []int{0, 4, 4, 16, 20, 28, 32, 48, 64}
	opts := b[5]
	sum := sums[b[6]]
	nchunks := int(binary.LittleEndian.Uint64(b[16:]))
	maxApp := int(binary.LittleEndian.Uint64(b[24:]))
	pos := 32
	if opts&2 != 0 {
		maxMeta := int(binary.LittleEndian.Uint32(b[pos+16:]))
		pos += 32 + maxMeta + sums[b[pos+9]]
	}
	if opts&1 != 0 {
		pos += 8 * (nchunks + maxApp)
	}
	var chunks [][]byte
	for range nchunks {
		cb := int(binary.LittleEndian.Uint32(b[pos+12:]))
		chunks = append(chunks, b[pos:pos+cb])
		pos += cb + sum
	}
	return chunks, nil
}

// fixtureStreams returns every BloscLZ stream in the .blosc and .blp
// fixtures, checking each file's decoded sha256 against the manifest
// where the filters can be undone here.
func fixtureStreams(t testing.TB) []cStream {
	t.Helper()
	var all []cStream
	verified := 0
	defer func() {
		t.Logf("fixtures: %d BloscLZ streams, %d files checked against the manifest sha256", len(all), verified)
	}()
	for _, e := range readManifest(t) {
		if !strings.Contains(e.params, "codec=blosclz") || strings.HasPrefix(e.file, "invalid_") {
			continue
		}
		var chunks [][]byte
		raw, err := os.ReadFile(filepath.Join(fixtureDir, e.file))
		if err != nil {
			t.Fatalf("%s: %v", e.file, err)
		}
		switch e.kind {
		case "blosc1chunk":
			chunks = [][]byte{raw}
		case "blp":
			if chunks, err = bloscpackChunks(raw); err != nil {
				t.Fatalf("%s: %v", e.file, err)
			}
		default:
			continue
		}
		var plain []byte
		verifiable := true
		for i, c := range chunks {
			s, p, err := blosc1Chunk(fmt.Sprintf("%s#%d", e.file, i), c)
			if err != nil {
				t.Fatalf("%s chunk %d: %v", e.file, i, err)
			}
			all = append(all, s...)
			if p == nil && len(s) > 0 {
				verifiable = false
			}
			plain = append(plain, p...)
		}
		if !verifiable {
			continue
		}
		sum := sha256.Sum256(plain)
		if len(plain) != e.plainSize || hex.EncodeToString(sum[:]) != e.sha {
			t.Errorf("%s: decoded %d bytes with sha256 %x, manifest says %d bytes, %s",
				e.file, len(plain), sum, e.plainSize, e.sha)
		}
		verified++
	}
	return all
}
