package fs

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/gridfiles"
	"golang.org/x/sys/unix"
)

// temps describes the temp files of one kind in a directory.
type temps struct {
	n    int   // how many
	size int64 // their total size
}

// tempFiles returns the temp files in dir by kind ("stage" or "tmp").
func tempFiles(t *testing.T, dir string) map[string]temps {
	t.Helper()
	out := map[string]temps{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !hiddenName(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		kind, _, _ := strings.Cut(strings.TrimPrefix(e.Name(), TempPrefix), "-")
		out[kind] = temps{out[kind].n + 1, out[kind].size + info.Size()}
	}
	// Stage files have no name (O_TMPFILE): the daemon runs in this
	// process, so they are among its descriptors.
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err != nil || !strings.HasPrefix(target, dir+"/#") || !strings.HasSuffix(target, " (deleted)") {
			continue
		}
		if info, err := os.Stat(filepath.Join("/proc/self/fd", fd.Name())); err == nil {
			out["stage"] = temps{out["stage"].n + 1, out["stage"].size + info.Size()}
		}
	}
	return out
}

// TestStreamNewFile writes new files from their start, in order, and then
// does each thing that ends a stream (a read, a write elsewhere, a
// truncation, fsync and more writes, another handle's append, an unlink),
// checking that a stream really ran (nothing staged, the frame growing in
// its temp file), that what it held moved to the stage, and that the
// file holds the right bytes after the close.
func TestStreamNewFile(t *testing.T) {
	opts := DefaultOptions()
	opts.NewChunkSize = 64 << 10
	src, mnt, logs := mountFixtures(t, opts)
	rng := rand.New(rand.NewPCG(7, 7))
	data := make([]byte, 1<<20+12345) // 16 chunks and a partial one
	for i := range data {
		data[i] = byte(i / 8 % 61) // compressible, so that the frame is small
		if rng.IntN(50) == 0 {
			data[i] = byte(rng.Uint32())
		}
	}

	// writeStream creates name and writes data in pieces of varied size,
	// in order, and checks that it streamed.
	writeStream := func(t *testing.T, name string) *os.File {
		t.Helper()
		f, err := os.Create(filepath.Join(mnt, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() }) // before the unmount, also after a failure
		for off := 0; off < len(data); {
			n := min(len(data)-off, 1+rng.IntN(100<<10))
			if _, err := f.WriteAt(data[off:off+n], int64(off)); err != nil {
				t.Fatal(err)
			}
			off += n
		}
		if tf := tempFiles(t, filepath.Dir(filepath.Join(src, name))); tf["stage"].size != 0 || tf["tmp"].n != 1 {
			t.Fatalf("after writing %d bytes in order: temp files %v, want an empty stage and the frame being written", len(data), tf)
		}
		if st, err := f.Stat(); err != nil || st.Size() != int64(len(data)) {
			t.Fatalf("fstat while streaming: %v, %v", st.Size(), err)
		}
		return f
	}
	closeAndCheck := func(t *testing.T, f *os.File, name string, want []byte) {
		t.Helper()
		if err := f.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		// With two writable handles, the commit may come with the
		// RELEASE of the other, which the kernel sends after its close
		// returned.
		var got []byte
		if !testkit.Eventually(t, 5*time.Second, func() bool {
			got = decodeSource(t, filepath.Join(src, name+".b2frame"))
			return bytes.Equal(got, want)
		}) {
			t.Fatalf("%s: the source holds %d bytes, want %d (equal prefix: %v)", name, len(got), len(want), bytes.HasPrefix(want, got))
		}
		got, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s through the mount: %d bytes, %v", name, len(got), err)
		}
		noTempFiles(t, src)
	}
	// demoted checks that the stream ended and its bytes are staged.
	demoted := func(t *testing.T) {
		t.Helper()
		if tf := tempFiles(t, src); tf["tmp"].n != 0 || tf["stage"].size < int64(len(data)) {
			t.Fatalf("after the stream ended: temp files %v, want the %d bytes staged", tf, len(data))
		}
	}

	t.Run("in order, then close", func(t *testing.T) {
		f := writeStream(t, "plain")
		closeAndCheck(t, f, "plain", data)
	})
	t.Run("a read ends the stream", func(t *testing.T) {
		f := writeStream(t, "read")
		// Drop the kernel's copy of the written pages, so that the read
		// reaches the daemon.
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 5000)
		if _, err := f.ReadAt(got, 70000); err != nil || !bytes.Equal(got, data[70000:75000]) {
			t.Fatalf("read while streaming: %v", err)
		}
		demoted(t)
		more := []byte("and more after the stream")
		if _, err := f.WriteAt(more, int64(len(data))); err != nil {
			t.Fatal(err)
		}
		closeAndCheck(t, f, "read", append(append([]byte(nil), data...), more...))
	})
	t.Run("a write elsewhere ends the stream", func(t *testing.T) {
		f := writeStream(t, "patch")
		patch := []byte("PATCH")
		if _, err := f.WriteAt(patch, 100); err != nil {
			t.Fatal(err)
		}
		demoted(t)
		want := append([]byte(nil), data...)
		copy(want[100:], patch)
		closeAndCheck(t, f, "patch", want)
	})
	t.Run("a truncation ends the stream", func(t *testing.T) {
		f := writeStream(t, "trunc")
		if err := f.Truncate(300000); err != nil {
			t.Fatal(err)
		}
		if tf := tempFiles(t, src); tf["tmp"].n != 0 {
			t.Fatalf("after truncate: temp files %v, want no frame", tf)
		}
		closeAndCheck(t, f, "trunc", data[:300000])
	})
	t.Run("fsync commits the stream; later writes go on", func(t *testing.T) {
		f := writeStream(t, "fsync")
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if got := decodeSource(t, filepath.Join(src, "fsync.b2frame")); !bytes.Equal(got, data) {
			t.Fatalf("after fsync the source holds %d bytes, want %d", len(got), len(data))
		}
		if _, err := f.WriteAt(data[:70000], int64(len(data))); err != nil {
			t.Fatal(err)
		}
		closeAndCheck(t, f, "fsync", append(append([]byte(nil), data...), data[:70000]...))
	})
	t.Run("another handle's appends go on streaming", func(t *testing.T) {
		f := writeStream(t, "append")
		g, err := os.OpenFile(filepath.Join(mnt, "append"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		if _, err := g.Write(data[:200000]); err != nil {
			t.Fatal(err)
		}
		if tf := tempFiles(t, src); tf["stage"].size != 0 || tf["tmp"].n != 1 {
			t.Fatalf("after an append through another handle: temp files %v, want nothing staged", tf)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		closeAndCheck(t, f, "append", append(append([]byte(nil), data...), data[:200000]...))
	})
	t.Run("unlink while streaming", func(t *testing.T) {
		f := writeStream(t, "gone")
		if err := os.Remove(filepath.Join(mnt, "gone")); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("close of an unlinked file: %v", err)
		}
		if _, err := os.Stat(filepath.Join(src, "gone.b2frame")); !os.IsNotExist(err) {
			t.Fatalf("gone.b2frame after unlink and close: %v", err)
		}
		noTempFiles(t, src)
	})
	t.Run("truncation to zero drops the stream", func(t *testing.T) {
		f := writeStream(t, "zero")
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if tf := tempFiles(t, src); tf["tmp"].n != 0 || tf["stage"].size != 0 {
			t.Fatalf("after truncate to 0: temp files %v, want nothing", tf)
		}
		closeAndCheck(t, f, "zero", []byte{})
	})
	t.Run("the directory is renamed while streaming", func(t *testing.T) {
		if err := os.Mkdir(filepath.Join(mnt, "d1"), 0o755); err != nil {
			t.Fatal(err)
		}
		f := writeStream(t, "d1/moved")
		if err := os.Rename(filepath.Join(mnt, "d1"), filepath.Join(mnt, "d2")); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(data[:1000], int64(len(data))); err != nil {
			t.Fatal(err)
		}
		closeAndCheck(t, f, "d2/moved", append(append([]byte(nil), data...), data[:1000]...))
		noTempFiles(t, filepath.Join(src, "d2"))
	})
	if strings.Contains(logs.String(), "stream") {
		t.Errorf("log: %s", logs.String())
	}
}

// TestStreamCommitFailure makes the commit of a stream fail once the
// frame in its temp file is complete (as a failed fsync of it would):
// close must report the error, the file keep its old content (empty),
// and no later commit write what the stream no longer holds.
func TestStreamCommitFailure(t *testing.T) {
	opts := DefaultOptions()
	var fails atomic.Int32
	opts.failCommit = func() error {
		fails.Add(1)
		return syscall.EIO
	}
	src, mnt, logs := mountFixtures(t, opts)
	f, err := os.Create(filepath.Join(mnt, "lost"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	data := bytes.Repeat([]byte("streamed data "), 200000)
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if tf := tempFiles(t, src); tf["tmp"].n != 1 {
		t.Fatalf("not streaming: temp files %v", tf)
	}
	if err := f.Close(); err == nil {
		t.Error("close of a file whose commit failed returned no error")
	}
	noTempFiles(t, src) // after RELEASE, which tries to commit again
	if got := decodeSource(t, filepath.Join(src, "lost.b2frame")); len(got) != 0 {
		t.Errorf("lost.b2frame holds %d bytes after its only commit failed, want its old content (none)", len(got))
	}
	if n := fails.Load(); n != 1 {
		t.Errorf("the commit reached its end %d times, want 1: a later commit ran without the stream's data", n)
	}
	if !strings.Contains(logs.String(), "lost.b2frame") {
		t.Errorf("no log line names the file: %q", logs.String())
	}
}

// TestStreamDemoteUnshuffled ends streams of new zstd files with no
// shuffle, several blocks a chunk, by a write elsewhere: the demote
// decodes the streamed frame back into the stage, the blocks of a chunk
// in parallel into one buffer, and the commit recompresses what it
// decoded. Before decoders were kept inside their output, zstd's copies
// past a block's end could land in the next block after it was written,
// and the commit stored those bytes.
func TestStreamDemoteUnshuffled(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4)) // goroutines interleave even on 2 cores
	opts := DefaultOptions()
	opts.NewParams = blosc.Params{Codec: blosc.CodecZstd, Clevel: 9, Typesize: 1, Blocksize: 8 << 10, Split: blosc.SplitNever}
	opts.NewChunkSize = 100000
	src, mnt, _ := mountFixtures(t, opts)
	var text bytes.Buffer
	for i := 0; text.Len() < 450000; i++ {
		fmt.Fprintf(&text, "%d,%.3f,%.4f,%d\n", i, 20+3*math.Sin(float64(i)/40), float64(i%977)/7, i*i%1013)
	}
	data := text.Bytes()
	files := 8
	if testkit.RaceEnabled {
		files = 2 // instrumented zstd at clevel 9 is slow; make canary runs all 8
	}
	for k := 0; k < files; k++ {
		name := fmt.Sprintf("csv%d", k)
		f, err := os.Create(filepath.Join(mnt, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("PATCH"), 7); err != nil { // ends the stream: demote
			f.Close()
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		want := bytes.Clone(data)
		copy(want[7:], "PATCH")
		var got []byte // the commit may follow the RELEASE
		testkit.Eventually(t, 5*time.Second, func() bool {
			got = mustSerialDecode(t, filepath.Join(src, name+".b2frame"))
			return len(got) == len(want)
		})
		if i := gridfiles.FirstDiff(got, want); i >= 0 {
			t.Fatalf("%s: stored content differs from what was written at offset %d (%d bytes stored, %d written)", name, i, len(got), len(want))
		}
	}
}

// mustSerialDecode decodes a stored container chunk by chunk on one
// goroutine.
func mustSerialDecode(t *testing.T, path string) []byte {
	t.Helper()
	b, err := gridfiles.SerialDecode(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
