package fs

import (
	"context"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fakes3"
	"github.com/bloscfs/bloscfs/pack/frame"
	"github.com/bloscfs/bloscfs/remote"
)

// TestRemoteSequentialGETs: dd of a 1 GiB remote frame through an
// in-process mount goes out in read-ahead GETs of a MiB or more, not one
// per block (once the window stopped growing, it once did).
func TestRemoteSequentialGETs(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	if testkit.RaceEnabled {
		// 1 GiB through instrumented decoders takes minutes; the
		// read-ahead's goroutines run under the detector in the other
		// remote tests. make canary runs this one without it.
		t.Skip("runs without the race detector (make canary)")
	}
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Blocksize: 256 << 10}
	p.Filters[5] = blosc.FilterShuffle
	path := filepath.Join(t.TempDir(), "f.b2frame")
	f, _ := os.Create(path)
	w, _ := frame.NewWriter(f, frame.Params{Chunk: p, ChunkSize: 4 << 20})
	rng := rand.New(rand.NewPCG(1, 1))
	for range 256 {
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
	srv.Put("f.b2frame", data)
	store, _ := remote.New(context.Background(), "bkt", remote.Config{Endpoint: srv.URL, Anonymous: true})
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	opts := DefaultOptions()
	opts.Logger = log.New(os.Stderr, "", 0)
	server, _, err := MountRemote(store, "", mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if server.Unmount() != nil {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	}()
	srv.ResetCounts()
	out, err := exec.Command("dd", "if="+filepath.Join(mnt, "f"), "of=/dev/null", "bs=1M").CombinedOutput()
	if err != nil {
		t.Fatalf("dd: %v: %s", err, out)
	}
	req, byt := srv.Counts()
	t.Logf("stored %d bytes; dd: %d requests, %d bytes", len(data), req, byt)
	if req > int64(len(data))>>20+16 {
		t.Errorf("%d requests for %d bytes", req, len(data))
	}
	if byt > int64(len(data))*11/10 {
		t.Errorf("%d bytes fetched for %d stored", byt, len(data))
	}
}
