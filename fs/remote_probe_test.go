package fs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit/fakes3"
	"github.com/bloscfs/bloscfs/internal/testkit/hostile"
	"github.com/bloscfs/bloscfs/npy"
	"github.com/bloscfs/bloscfs/pack/frame"
	"github.com/bloscfs/bloscfs/remote"
	"golang.org/x/sys/unix"
)

// writeFrame returns a contiguous frame of chunks written with p.
func writeFrame(t *testing.T, p frame.Params, chunks ...[]byte) []byte {
	t.Helper()
	b, err := hostile.FrameBytes(p, chunks...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRemoteListingProbesHeads: `ls -l` of a prefix of N frames of about
// 200 KB (and a .b2nd array of as much) costs one ranged GET of the first
// 64 KiB per object, not the objects: at most N+3 requests and about
// N·64 KiB; an object of at most twice that is fetched whole, and its
// open then costs its HEAD alone. The sizes shown are the plain ones (the .npy's for the
// array). An open then costs a HEAD and one GET of what the probe did
// not fetch, and reads the right bytes; user.bloscfs.etag costs nothing,
// user.bloscfs.codec opens the object once.
func TestRemoteListingProbesHeads(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	const n = 24
	srv := fakes3.New("bkt")
	defer srv.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	plains := map[string][]byte{}
	var stored int64
	for i := range n {
		plain := make([]byte, 200_000+i)
		for j := range plain {
			plain[j] = byte(rng.IntN(256))
		}
		b := writeFrame(t, frame.Params{Chunk: blosc.DefaultParams(8)}, plain[:1<<16], plain[1<<16:2<<16], plain[2<<16:3<<16], plain[3<<16:])
		name := fmt.Sprintf("f%02d", i)
		srv.Put("p/"+name+".b2frame", b)
		plains[name] = plain
		stored += int64(len(b))
	}
	a := frame.Array{Shape: []int64{250, 200}, ChunkShape: []int32{100, 200}, BlockShape: []int32{25, 200}, Dtype: "<i4", Itemsize: 4}
	cb := 100 * 200 * 4
	var chunks [][]byte
	for range 3 {
		c := make([]byte, cb)
		for j := range c {
			c[j] = byte(rng.IntN(256))
		}
		chunks = append(chunks, c)
	}
	arr := writeFrame(t, frame.Params{Chunk: blosc.DefaultParams(4), Metalayers: []frame.Metalayer{{Name: "b2nd", Value: a.MarshalMeta()}}}, chunks...)
	srv.Put("p/arr.b2nd", arr)
	// An object smaller than the probe's head: fetched whole by it.
	small := bytes.Repeat([]byte("small frame "), 2500)
	sb := writeFrame(t, frame.Params{Chunk: blosc.DefaultParams(1)}, small)
	srv.Put("p/small.b2frame", sb)
	stored += int64(len(arr) + len(sb))
	// One of at most twice that: fetched whole by it too.
	medium := make([]byte, 100_000)
	for j := range medium {
		medium[j] = byte(rng.IntN(256))
	}
	mb := writeFrame(t, frame.Params{Chunk: blosc.DefaultParams(1)}, medium)
	if len(mb) <= probeHead || len(mb) > 2*probeHead {
		t.Fatalf("the medium frame has %d bytes", len(mb))
	}
	srv.Put("p/medium.b2frame", mb)
	plains["medium"] = medium
	stored += int64(len(mb))
	plains["small"] = small
	npySize := int64(len(npy.Header("<i4", a.Shape))) + 250*200*4

	mnt, logs, rfs := mountBucket(t, srv, "")

	counts := func() (int64, int64) { s := rfs.Stats().Remote; return s.Requests, s.FetchedBytes }
	r0, b0 := counts()
	ents, err := os.ReadDir(filepath.Join(mnt, "p"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		want := int64(len(plains[e.Name()]))
		if e.Name() == "arr.npy" {
			want = npySize
		}
		if fi.Size() != want || want == 0 {
			t.Errorf("%s: %d bytes, want %d", e.Name(), fi.Size(), want)
		}
	}
	if len(ents) != n+3 {
		t.Fatalf("%d entries, want %d:\n%s", len(ents), n+3, logs)
	}
	r1, b1 := counts()
	objects := int64(n + 3)
	t.Logf("ls -l of %d objects (%d bytes stored): %d requests, %d bytes fetched", objects, stored, r1-r0, b1-b0)
	if r1-r0 > objects+3 {
		t.Errorf("ls -l of %d objects sent %d requests, want at most %d", objects, r1-r0, objects+3)
	}
	if b1-b0 > objects*probeHead {
		t.Errorf("ls -l of %d objects fetched %d bytes, more than %d KiB each", objects, b1-b0, probeHead>>10)
	}

	// A second listing, within --dir-cache: no request.
	if _, err := os.ReadDir(filepath.Join(mnt, "p")); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(mnt, "p", e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if r2, _ := counts(); r2 != r1 {
		t.Errorf("the second ls -l sent %d requests", r2-r1)
	}

	// An open: one HEAD, one GET of the rest, the right bytes.
	r2, b2 := counts()
	got, err := os.ReadFile(filepath.Join(mnt, "p", "f03"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plains["f03"]) {
		t.Errorf("f03: wrong bytes")
	}
	r3, b3 := counts()
	t.Logf("open and read of f03: %d requests, %d bytes", r3-r2, b3-b2)
	if r3-r2 > 2 {
		t.Errorf("open and read of f03: %d requests, want a HEAD and a GET", r3-r2)
	}
	if b3-b2 > 200_003+4096-probeHead {
		t.Errorf("open and read of f03 fetched %d bytes: the probe's %d again", b3-b2, probeHead)
	}
	// The small and medium objects' opens cost their HEAD alone: the
	// probe's GET fetched all of each, and the range cache kept it.
	for _, name := range []string{"small", "medium"} {
		r3, _ := counts()
		if got, err := os.ReadFile(filepath.Join(mnt, "p", name)); err != nil || !bytes.Equal(got, plains[name]) {
			t.Errorf("%s: %d bytes, %v", name, len(got), err)
		}
		if r4, _ := counts(); r4-r3 != 1 {
			t.Errorf("open and read of %s, fetched whole by the listing: %d requests, want its HEAD", name, r4-r3)
		}
	}
	f, err := os.Open(filepath.Join(mnt, "p", "arr.npy"))
	if err != nil {
		t.Fatal(err)
	}
	npy, err := io.ReadAll(f)
	f.Close()
	if err != nil || int64(len(npy)) != npySize {
		t.Errorf("arr.npy: %d bytes, %v; want %d", len(npy), err, npySize)
	}

	// Attributes: the ETag costs nothing, the codec a full probe.
	buf := make([]byte, 256)
	r4, _ := counts()
	if _, err := unix.Getxattr(filepath.Join(mnt, "p", "f05"), "user.bloscfs.etag", buf); err != nil {
		t.Fatal(err)
	}
	if r5, _ := counts(); r5 != r4 {
		t.Errorf("user.bloscfs.etag sent %d requests", r5-r4)
	}
	sz, err := unix.Getxattr(filepath.Join(mnt, "p", "f05"), "user.bloscfs.chunks", buf)
	if err != nil || string(buf[:sz]) != "4" {
		t.Errorf("user.bloscfs.chunks: %q, %v; want 4", buf[:max(sz, 0)], err)
	}
}

// TestRemoteHeadProbeBrokenTail: a frame larger than the probe's head
// whose header parses but whose trailer does not is listed under its
// plain name with its header's size (the listing reads no more); its
// open fails with EIO and records what it found, so that the next
// listing shows it raw under its own name. So does a GETXATTR of
// another such frame.
func TestRemoteHeadProbeBrokenTail(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	srv := fakes3.New("bkt")
	defer srv.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	plain := make([]byte, 150_000)
	for j := range plain {
		plain[j] = byte(rng.IntN(256))
	}
	b := writeFrame(t, frame.Params{Chunk: blosc.DefaultParams(8)}, plain[:1<<16], plain[1<<16:])
	bad := bytes.Clone(b)
	bad[len(bad)-23] = 0 // the trailer's 0xCE marker
	srv.Put("p/bad.b2frame", bad)
	srv.Put("p/bad2.b2frame", bad)
	srv.Put("p/good.b2frame", b)

	mnt, _, _ := mountBucketConfig(t, srv, "", remote.Config{DirCache: -1})
	names := func() map[string]bool {
		ents, err := os.ReadDir(filepath.Join(mnt, "p"))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, e := range ents {
			m[e.Name()] = true
		}
		return m
	}
	if got := names(); !got["bad"] || !got["bad2"] || !got["good"] {
		t.Fatalf("first listing: %v, want bad, bad2 and good", got)
	}
	if st, err := os.Stat(filepath.Join(mnt, "p", "bad")); err != nil || st.Size() != int64(len(plain)) {
		t.Fatalf("bad: %v, %v; want %d bytes", st, err, len(plain))
	}
	if _, err := os.ReadFile(filepath.Join(mnt, "p", "bad")); !errors.Is(err, syscall.EIO) {
		t.Errorf("read of bad: %v, want EIO", err)
	}
	if _, err := unix.Getxattr(filepath.Join(mnt, "p", "bad2"), "user.bloscfs.codec", make([]byte, 64)); !errors.Is(err, syscall.EIO) {
		t.Errorf("user.bloscfs.codec of bad2: %v, want EIO", err)
	}
	if got := names(); !got["bad.b2frame"] || !got["bad2.b2frame"] || !got["good"] {
		t.Errorf("second listing: %v, want bad.b2frame, bad2.b2frame and good", got)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "p", "good")); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("good: %d bytes, %v", len(got), err)
	}
}
