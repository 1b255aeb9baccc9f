package writes

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/bloscpack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// rawChunks returns the stored bytes of every chunk of a container file
// as it is on disk: for Bloscpack the Blosc chunk and its checksum, for
// a frame the Blosc chunk (or "special N" for a special index entry).
func rawChunks(tb testing.TB, data []byte, name string) []string {
	tb.Helper()
	r := bytes.NewReader(data)
	switch {
	case strings.HasSuffix(name, ".blp"):
		f, err := bloscpack.Open(r, int64(len(data)), name, pack.NoCache{}, bloscpack.Options{})
		if err != nil {
			tb.Fatalf("bloscpack.Open %s: %v", name, err)
		}
		cs := int64(bloscpack.Checksums[f.Header.Checksum].Size)
		out := make([]string, f.NumChunks())
		for i := range out {
			off := f.ChunkFileOffset(i)
			if off < 0 || off+16 > int64(len(data)) {
				tb.Fatalf("%s: chunk %d at %d is outside the file (%d bytes)", name, i, off, len(data))
			}
			cb := int64(binary.LittleEndian.Uint32(data[off+12:]))
			if off+cb+cs > int64(len(data)) {
				tb.Fatalf("%s: chunk %d [%d,+%d+%d) is outside the file", name, i, off, cb, cs)
			}
			out[i] = string(data[off : off+cb+cs])
		}
		return out
	default:
		f, err := frame.Open(r, int64(len(data)), name, pack.NoCache{})
		if err != nil {
			tb.Fatalf("frame.Open %s: %v", name, err)
		}
		out := make([]string, f.NumChunks())
		for i := range out {
			b, special, err := f.RawChunk(i)
			if err != nil {
				tb.Fatalf("%s: RawChunk(%d): %v", name, i, err)
			}
			if b == nil {
				out[i] = fmt.Sprintf("special %d", special)
				continue
			}
			out[i] = string(b)
		}
		return out
	}
}

// sameChunks checks that the chunks listed in keep are stored
// byte-identical in the old and the new file, and reports the others.
func sameChunks(tb testing.TB, name string, oldFile, newFile []byte, keep []int) {
	tb.Helper()
	oc, nc := rawChunks(tb, oldFile, name), rawChunks(tb, newFile, name)
	for _, i := range keep {
		if i >= len(oc) || i >= len(nc) {
			tb.Errorf("%s: chunk %d to compare, but the old file has %d chunks and the new %d", name, i, len(oc), len(nc))
			continue
		}
		if oc[i] != nc[i] {
			tb.Errorf("%s: untouched chunk %d was not copied verbatim (%d stored bytes before, %d after)", name, i, len(oc[i]), len(nc[i]))
		}
	}
}

// readFile reads a file, failing the test on error.
func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
