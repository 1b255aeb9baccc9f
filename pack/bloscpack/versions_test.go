package bloscpack

import (
	"bytes"
	"encoding/binary"
	"io"
	"path/filepath"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
)

// olderFormats rewraps the chunks of a format-3 fixture in the layouts of
// formats 1 and 2 (FORMATS §9.1): format 1 is a 16-byte header ("blpk",
// version 1, 3 reserved bytes, int64 nchunks) and the chunks back to back,
// without checksums; format 2 has the 32-byte header, an offsets section
// of exactly nchunks entries, and a checksum after each chunk.
func olderFormats(t *testing.T, f *File) (v1, v2 []byte, plain []byte) {
	plain = readAll(t, f, f.Size())
	var chunks [][]byte
	for i := 0; i < f.NumChunks(); i++ {
		cb, err := f.rawChunk(i)
		if err != nil {
			t.Fatal(err)
		}
		c := make([]byte, cb)
		if err := f.readAt(c, f.offsets[i], "chunk"); err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, c)
	}
	n := int64(len(chunks))
	v1 = append([]byte("blpk\x01\x00\x00\x00"), binary.LittleEndian.AppendUint64(nil, uint64(n))...)
	for _, c := range chunks {
		v1 = append(v1, c...)
	}
	h := make([]byte, 32)
	copy(h, "blpk")
	h[4], h[5], h[6], h[7] = 2, optOffsets, 2 /* crc32 */, byte(f.Header.Typesize)
	binary.LittleEndian.PutUint32(h[8:], uint32(f.Header.ChunkSize))
	binary.LittleEndian.PutUint32(h[12:], uint32(f.Header.LastChunk))
	binary.LittleEndian.PutUint64(h[16:], uint64(n))
	pos := int64(32 + 8*n)
	offs := make([]byte, 0, 8*n)
	var body []byte
	for _, c := range chunks {
		offs = binary.LittleEndian.AppendUint64(offs, uint64(pos))
		body = append(append(body, c...), digest(2, c)...)
		pos += int64(len(c)) + 4
	}
	v2 = append(append(h, offs...), body...)
	return v1, v2, plain
}

func TestFormats1And2(t *testing.T) {
	for _, name := range []string{"checksum_adler32.blp", "default_api_f64.blp", "odd_size_ts8.blp"} {
		f, _ := openFile(t, filepath.Join(fixtures.Dir(), name))
		v1, v2, plain := olderFormats(t, f)
		for ver, b := range map[int][]byte{1: v1, 2: v2} {
			g, err := Open(bytes.NewReader(b), int64(len(b)), name, nil, Options{})
			if err != nil {
				t.Fatalf("%s as format %d: %v", name, ver, err)
			}
			if g.Header.Version != ver || !bytes.Equal(readAll(t, g, g.Size()), plain) {
				t.Fatalf("%s as format %d: version %d, content differs", name, ver, g.Header.Version)
			}
			// A damaged checksum is caught in format 2.
			if ver == 2 {
				bad := bytes.Clone(b)
				bad[len(bad)-1] ^= 0xFF
				g, _ := Open(bytes.NewReader(bad), int64(len(bad)), name, nil, Options{})
				if _, err := g.ReadAt(make([]byte, g.Size()), 0); err == nil || err == io.EOF {
					t.Fatalf("%s: bad checksum in format 2 not reported", name)
				}
			}
		}
	}
}
