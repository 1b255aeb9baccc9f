package blosc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
)

// goodChunks returns a Blosc1 and a Blosc2 chunk to corrupt.
func goodChunks(t testing.TB) (v2, v5 []byte) {
	src := testData(nil, 0, 100000)
	p := Params{Codec: CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: 16384, Blosc1: true}
	p.Filters[5] = FilterShuffle
	v2, err := Compress(nil, src, p)
	if err != nil {
		t.Fatal(err)
	}
	p.Blosc1 = false
	v5, err = Compress(nil, src, p)
	if err != nil {
		t.Fatal(err)
	}
	return v2, v5
}

func put32(b []byte, off int, v uint32) []byte {
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint32(b[off:], v)
	return b
}

func setByte(b []byte, off int, v byte) []byte {
	b = bytes.Clone(b)
	b[off] = v
	return b
}

// TestBadChunks checks that each kind of damage gives the right sentinel
// error, naming the offending value, without a panic.
func TestBadChunks(t *testing.T) {
	v2, v5 := goodChunks(t)
	cases := []struct {
		name    string
		chunk   []byte
		want    error
		mention string
	}{
		{"short header", v2[:10], ErrCorrupt, "have 10"},
		{"short extended header", v5[:20], ErrCorrupt, "have 20"},
		{"truncated", v2[:len(v2)-100], ErrCorrupt, "cbytes"},
		{"negative nbytes", put32(v2, 4, 0xFFFFFF00), ErrCorrupt, "nbytes -256"},
		{"negative blocksize", put32(v2, 8, 0x80000000), ErrCorrupt, "blocksize -2147483648"},
		{"negative cbytes", put32(v2, 12, 0xFFFFFFF0), ErrCorrupt, "cbytes -16"},
		{"zero blocksize", put32(v2, 8, 0), ErrCorrupt, "blocksize 0"},
		{"huge blocksize v5", put32(v5, 8, 1<<30), ErrCorrupt, "blocksize 1073741824"},
		{"typesize 0", setByte(v2, 3, 0), ErrCorrupt, "typesize 0"},
		{"cbytes below header", put32(v2, 12, 8), ErrCorrupt, "cbytes 8"},
		{"version 1", setByte(v2, 0, 1), ErrUnsupported, "version 1"},
		{"future version with flags2", setByte(setByte(v5, 0, 9), 30, 0x02), ErrUnsupported, "version 9"},
		{"huge nbytes, tiny blocks", put32(put32(v2, 4, 1<<30), 8, 128), ErrCorrupt, "block starts"},
		{"bstart past end", put32(v2, 16, uint32(len(v2)+5)), ErrCorrupt, "block 0 starts at"},
		{"bstart inside header", put32(v2, 20, 3), ErrCorrupt, "block 1 starts at 3"},
		{"unknown codec format", setByte(v2, 2, v2[2]&0x1F|5<<5), ErrUnsupported, "codec format 5"},
		{"unknown user codec", setByte(setByte(v5, 2, v5[2]&0x1F|6<<5), 22, 200), ErrUnsupported, "id 200"},
		{"unknown filter", setByte(v5, 17, 99), ErrUnsupported, "filter id 99"},
		{"ndcell filter", setByte(v5, 17, FilterNDCell), ErrUnsupported, "filter 32"},
		{"reserved special", setByte(v5, 31, 6<<4), ErrCorrupt, "special value kind 6"},
		{"instrumented", setByte(v5, 31, 0x80), ErrUnsupported, "instrumented"},
		{"lazy chunk", setByte(v5, 31, 0x08), ErrCorrupt, "lazy"},
		{"dict flag without dict", setByte(v5, 31, 0x01), ErrCorrupt, ""},
		{"nan with typesize 2", setByte(setByte(v5, 3, 2), 31, SpecialNaN<<4), ErrCorrupt, "typesize 2"},
		{"memcpy longer than chunk", setByte(v2, 2, v2[2]|flagMemcpyed), ErrCorrupt, "memcpyed chunk of 100000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Decompress(tc.chunk)
			if err == nil {
				t.Fatalf("decoded %d bytes, want an error", len(out))
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("err = %q, want it to mention %q", err, tc.mention)
			}
		})
	}
}

// TestBadStreams damages the stream bytes; every block decode must fail
// with ErrCorrupt (or, where the damage is undetectable, succeed) and never
// panic.
func TestBadStreams(t *testing.T) {
	v2, v5 := goodChunks(t)
	for _, chunk := range [][]byte{v2, v5} {
		c, err := NewChunkBytes(chunk)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := c.CompressedExtent(1)
		for _, tc := range []struct {
			name  string
			chunk []byte
		}{
			{"csize huge", put32(chunk, int(s), 1<<30)},
			{"csize negative in v2", put32(chunk, int(s), 0xFFFFFFFE)},
			{"codec garbage", setByte(setByte(chunk, int(s)+4, 0xFF), int(s)+5, 0xFF)},
		} {
			cc, err := NewChunkBytes(tc.chunk)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			dst := make([]byte, cc.BlockLen(1))
			err = cc.DecodeBlock(dst, 1)
			if chunk[0] == VersionStable && tc.name == "csize negative in v2" {
				// A run of 0x02 bytes is valid in Blosc2; the token byte
				// decides. Either result is acceptable, but not a panic.
				continue
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Errorf("v%d %s: err = %v, want ErrCorrupt", chunk[0], tc.name, err)
			}
		}
	}
}

// TestInvalidFixtures decodes the manifest's invalid bare chunks.
func TestInvalidFixtures(t *testing.T) {
	want := map[string]string{
		"invalid_negative_nbytes_chunk.blosc": "nbytes -",
		"invalid_truncated_chunk.blosc":       "cbytes 1461, only 1361",
	}
	fx, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range fx {
		if !f.IsInvalid || filepath.Ext(f.Name) != ".blosc" {
			continue
		}
		seen++
		b, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Decompress(b)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", f.Name, err)
			continue
		}
		if m, ok := want[f.Name]; !ok || !strings.Contains(err.Error(), m) {
			t.Errorf("%s: err = %q, want it to mention %q", f.Name, err, m)
		}
	}
	if seen != len(want) {
		t.Errorf("saw %d invalid chunk fixtures, have expectations for %d", seen, len(want))
	}
}

// TestReviewPanics holds two crafted chunks that used to panic: a VL
// block shorter than its size field, and delta on a block shorter than
// one word.
func TestReviewPanics(t *testing.T) {
	vl := extHeader(VersionVLBlocks, flagDontSplit|1<<5, 1, 10, 2, [6]byte{}, flags2VLBlocks, 0)
	vl = binary.LittleEndian.AppendUint32(vl, 40)
	vl = binary.LittleEndian.AppendUint32(vl, 41)
	vl = append(vl, make([]byte, 8)...)
	if _, err := Decompress(finish(vl)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short VL block: %v", err)
	}
	// Delta with typesize 8 over a 4-byte chunk (one block shorter than
	// a word): decodes, without a panic.
	d := extHeader(VersionStable, flagDontSplit, 8, 4, 4, [6]byte{0, 0, 0, 0, FilterDelta, 0}, 0, 0)
	d = binary.LittleEndian.AppendUint32(d, 36)
	d = binary.LittleEndian.AppendUint32(d, 4)
	d = append(d, 1, 2, 3, 4)
	if got, err := Decompress(finish(d)); err != nil || !bytes.Equal(got, []byte{1, 2, 3, 4}) {
		t.Errorf("short delta block: %v, %v", got, err)
	}
}

// TestZstdDictEviction decodes chunks with more distinct dictionaries
// than the decoder cache holds, from several goroutines: evicting a
// decoder must not break one in use (it used to hang).
func TestZstdDictEviction(t *testing.T) {
	var chunks [][]byte
	var plains [][]byte
	for k := 0; k < maxZstdDictDecoders+40; k++ {
		dict := bytes.Repeat([]byte{byte(k), byte(k >> 8), 'd', 'i', 'c', 't'}, 20)
		plain := bytes.Repeat([]byte{byte(k), 'x', 'y'}, 300)
		enc, _ := zstd.NewWriter(nil, zstd.WithEncoderDictRaw(0, dict), zstd.WithEncoderConcurrency(1))
		stream := enc.EncodeAll(plain, nil)
		c := extHeader(VersionStable, flagDontSplit|4<<5, 1, len(plain), len(plain), [6]byte{}, 0, b2flagDict)
		c = binary.LittleEndian.AppendUint32(c, uint32(32+4+4+len(dict)))
		c = binary.LittleEndian.AppendUint32(c, uint32(len(dict)))
		c = append(c, dict...)
		c = binary.LittleEndian.AppendUint32(c, uint32(len(stream)))
		chunks = append(chunks, finish(append(c, stream...)))
		plains = append(plains, plain)
	}
	done := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for rep := 0; rep < 3; rep++ {
				for k := range chunks {
					got, err := Decompress(chunks[(k+g*7)%len(chunks)])
					if err != nil || !bytes.Equal(got, plains[(k+g*7)%len(chunks)]) {
						done <- fmt.Errorf("chunk %d: %v", k, err)
						return
					}
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("decoding hangs")
		}
	}
}

// failingReader fails every read past its first n bytes with err.
type failingReader struct {
	b   []byte
	n   int64
	err error
}

func (r failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > r.n {
		return 0, r.err
	}
	return copy(p, r.b[off:]), nil
}

// TestReadFailed: a block whose bytes cannot be read (the reader's error,
// a short read) is ErrCorrupt and ReadFailed; one whose bytes do not
// decode is ErrCorrupt only, so that readers remember only the latter.
func TestReadFailed(t *testing.T) {
	good, _ := goodChunks(t)
	for _, eio := range []error{errors.New("EIO"), io.EOF} {
		c, err := NewChunk(failingReader{good, HeadRead, eio}, int64(len(good)))
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]byte, c.BlockLen(c.NumBlocks()-1))
		err = c.DecodeBlock(dst, c.NumBlocks()-1)
		if !errors.Is(err, ErrCorrupt) || !ReadFailed(err) {
			t.Errorf("a read failing with %v: %v, want ErrCorrupt and ReadFailed", eio, err)
		}
		if err = c.DecodeBlockRange(dst[:100], c.NumBlocks()-1, 5); !errors.Is(err, ErrCorrupt) || !ReadFailed(err) {
			t.Errorf("a range read failing with %v: %v, want ErrCorrupt and ReadFailed", eio, err)
		}
	}
	if _, err := NewChunk(failingReader{good, 0, errors.New("EIO")}, int64(len(good))); !ReadFailed(err) {
		t.Errorf("a header read failing: %v, want ReadFailed", err)
	}
	c, err := NewChunkBytes(good)
	if err != nil {
		t.Fatal(err)
	}
	start, _ := c.CompressedExtent(1)
	bad, err := NewChunkBytes(put32(good, int(start), 0x7fffffff))
	if err != nil {
		t.Fatal(err)
	}
	err = bad.DecodeBlock(make([]byte, bad.BlockLen(1)), 1)
	if !errors.Is(err, ErrCorrupt) || ReadFailed(err) {
		t.Errorf("a stream that does not decode: %v, want ErrCorrupt, not ReadFailed", err)
	}
}
