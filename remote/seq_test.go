package remote_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit/fakes3"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/pack/frame"
	"github.com/bloscfs/bloscfs/remote"
)

// TestSequentialGETs: a sequential read of a frame goes out in large
// read-ahead GETs, not one per block.
func TestSequentialGETs(t *testing.T) {
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: 256 << 10}
	p.Filters[5] = blosc.FilterShuffle
	path := filepath.Join(t.TempDir(), "f.b2frame")
	f, _ := os.Create(path)
	w, _ := frame.NewWriter(f, frame.Params{Chunk: p, ChunkSize: 4 << 20})
	rng := rand.New(rand.NewPCG(1, 1))
	for range 32 {
		plain := make([]byte, 4<<20)
		for i := 0; i < len(plain); i += 8 {
			plain[i], plain[i+1] = byte(rng.IntN(256)), byte(i>>10)
		}
		w.AddChunk(plain)
	}
	w.Close()
	f.Close()
	data, _ := os.ReadFile(path)
	srv := fakes3.New("bkt")
	defer srv.Close()
	srv.Put("f", data)
	s := newStore(t, srv.URL, "bkt", remote.Config{})
	o, err := s.Open(context.Background(), "f")
	if err != nil {
		t.Fatal(err)
	}
	v, err := all.OpenViewReader(o, o.Size, "f", pack.NoCache{})
	if err != nil {
		t.Fatal(err)
	}
	o.Opened()
	srv.ResetCounts()
	b := make([]byte, 1<<20)
	for off := int64(0); off < v.Size; off += 1 << 20 {
		if _, err := v.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	req, byt := srv.Counts()
	t.Logf("%d bytes stored, sequential read: %d requests, %d bytes", len(data), req, byt)
	if req > int64(len(data))/(256<<10) {
		t.Errorf("%d GETs for %d bytes: read-ahead does not work", req, len(data))
	}
}
