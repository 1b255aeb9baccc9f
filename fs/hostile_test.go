package fs

import (
	"bytes"
	"context"
	"errors"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/internal/testkit/hostile"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// mountSrc mounts src at a new mountpoint under base and unmounts it when
// the test ends, also after a failure. Tests that mount must run, not
// skip, in CI.
func mountSrc(t *testing.T, src, base string, opts Options) (mnt string, logs *syncBuffer) {
	t.Helper()
	if skip, fail := testkit.MountPrereqs("these tests"); fail != "" {
		t.Fatal(fail)
	} else if skip != "" {
		t.Skip(skip)
	}
	mnt = filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	logs = &syncBuffer{}
	opts.Logger = log.New(logs, "", 0)
	server, _, err := Mount(src, mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	unmountAtEnd(t, server, mnt)
	return mnt, logs
}

// worldDir makes a directory every user can enter (t.TempDir's parents
// are private), removed when the test ends.
func worldDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "bloscfs-hostile-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// otherUID is the user the tests act as: no account is needed for a uid.
const otherUID = 64123

// asOther runs a shell command as otherUID, with a timeout that only
// guards against a hang.
func asOther(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestAllowOtherSparseSymlinks is finding 1 of issue 11: with
// allow_other, a user who may write a directory of the source must not
// read, through a sparse frame whose parts are symlinks, a file only root
// may read. The parts of a sparse frame must be regular files in the
// frame's own directory.
func TestAllowOtherSparseSymlinks(t *testing.T) {
	base := worldDir(t)
	src := filepath.Join(base, "src")
	fx := filepath.Join(fixtures.Dir(), "sparse_frame.b2frame")
	// root's secret: a valid chunk in a directory only root may enter.
	secretDir := filepath.Join(base, "secret")
	if err := os.Mkdir(secretDir, 0o700); err != nil {
		t.Fatal(err)
	}
	chunk0, err := os.ReadFile(filepath.Join(fx, "00000000.chunk"))
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(secretDir, "s.chunk")
	if err := os.WriteFile(secret, chunk0, 0o600); err != nil {
		t.Fatal(err)
	}
	// The user's own files: the index of a sparse frame.
	userDir := filepath.Join(base, "user")
	if err := os.Mkdir(userDir, 0o755); err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(fx, "chunks.b2frame"))
	if err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(userDir, "idx")
	if err := os.WriteFile(idx, index, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{userDir, idx} {
		if err := os.Chown(p, otherUID, otherUID); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(src, "d"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "d"), 0o777); err != nil {
		t.Fatal(err)
	}
	// The user cannot read the secret directly.
	if out, err := asOther("head -c 16 " + secret); err == nil {
		t.Fatalf("the test's second user can read root's file: %q", out)
	}

	opts := DefaultOptions()
	opts.AllowOther = true
	mnt, logs := mountSrc(t, src, base, opts)

	// a: everything a symlink, made through the mount.
	out, err := asOther(strings.Join([]string{
		"set -e", "cd " + filepath.Join(mnt, "d"),
		"mkdir e.b2frame",
		"ln -s " + idx + " e.b2frame/chunks.b2frame",
		"ln -s " + secret + " e.b2frame/00000000.chunk",
		"ln -s ../../secret/s.chunk e.b2frame/00000001.chunk",
	}, "\n"))
	if err != nil {
		t.Fatalf("setting up as the second user: %v: %s", err, out)
	}
	// b: chunk files that are symlinks, made through the mount, then a
	// real index owned by the user.
	fdir := filepath.Join(src, "d", "f.b2frame")
	if out, err := asOther("set -e; cd " + filepath.Join(mnt, "d") + "; mkdir f.b2frame; ln -s " + secret + " f.b2frame/00000000.chunk"); err != nil {
		t.Fatalf("setting up as the second user: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(fdir, "chunks.b2frame"), index, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(filepath.Join(fdir, "chunks.b2frame"), otherUID, otherUID)
	plain, err := readPlainFixture(fx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"e", "f", "e.b2frame/00000000.chunk", "f.b2frame/00000000.chunk"} {
		out, err := asOther("head -c 65536 " + filepath.Join(mnt, "d", name))
		if err == nil && strings.Contains(out, string(plain[:4096])) {
			t.Errorf("the second user read root's secret through %s", name)
		}
		if bytes.Contains([]byte(out), chunk0[32:96]) {
			t.Errorf("the second user read root's secret chunk through %s", name)
		}
	}
	t.Logf("log: %s", logs.String())
}

// readPlainFixture returns the plain bytes of a fixture as the reference
// decoder recorded them: here, decoded through the package under test
// only to compare.
func readPlainFixture(path string) ([]byte, error) {
	v, err := allOpenView(path)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	b := make([]byte, v.Size)
	_, err = v.ReadAt(b, 0)
	return b, err
}

// TestProbeTransient is finding 8 of issue 11: a probe that fails because
// the daemon is out of descriptors must not make a valid container be
// shown raw afterwards. Only a fact about the file decides.
func TestProbeTransient(t *testing.T) {
	src := t.TempDir()
	fx := filepath.Join(fixtures.Dir(), "data_zeros.b2frame")
	b, err := os.ReadFile(fx)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(src, "x.b2frame")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, f, err := New(src, Options{Logger: log.New(&syncBuffer{}, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	// The lowest free descriptor: with the limit there, no open succeeds.
	free, err := syscall.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(free)
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// No descriptor left: the next open fails with EMFILE.
	lim := old
	lim.Cur = uint64(free)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	pr, perr := f.probe(p, &st)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	t.Logf("limit %d: ok=%v err=%v", lim.Cur, pr.ok, perr)
	if perr == nil && !pr.ok {
		t.Errorf("out of descriptors, the probe says x.b2frame is no container, without an error")
	}
	if perr != nil && errnoOf(perr) != syscall.EMFILE {
		t.Errorf("probe error %v gives errno %v, want EMFILE", perr, errnoOf(perr))
	}
	pr, perr = f.probe(p, &st)
	if perr != nil || !pr.ok {
		t.Fatalf("after the descriptors are back, the probe says ok=%v, %v: the passing error was remembered", pr.ok, perr)
	}
}

// TestPlainSwappedForFIFO is finding 7 of issue 11 for passed-through
// files: a plain file replaced by a FIFO after the kernel looked it up
// must not block the daemon's open.
func TestPlainSwappedForFIFO(t *testing.T) {
	base := worldDir(t)
	src := filepath.Join(base, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(src, "f")
	if err := os.WriteFile(p, []byte("plain"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.AttrTimeout = time.Hour // the kernel keeps seeing a regular file
	mnt, _ := mountSrc(t, src, base, opts)
	if _, err := os.Stat(filepath.Join(mnt, "f")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := os.Open(filepath.Join(mnt, "f"))
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("opening a FIFO through a regular file's node succeeded")
		}
	case <-time.After(20 * time.Second): // only against a hang
		t.Errorf("the daemon blocks opening a FIFO")
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		<-done
	}
}

// TestHostileHugeChunkWrite is the write path of issue 11's finding 5: a
// one-byte write into a frame of 2 GiB special-zero chunks makes the
// commit recompress one 2 GiB chunk. It is read from the stage one block
// at a time as it is compressed (blosc.CompressReaderAt), so the
// daemon's memory stays far below the chunk's size; it used to hold the
// chunk whole, and more.
func TestHostileHugeChunkWrite(t *testing.T) {
	if testkit.RaceEnabled {
		// Compressing 2 GiB through instrumented code takes minutes,
		// and one commit is one goroutine's work.
		t.Skip("runs without the race detector (make canary)")
	}
	base := t.TempDir()
	src := filepath.Join(base, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	const cs = 1<<31 - 33 // the largest Blosc2 chunk
	f, err := os.Create(filepath.Join(src, "zeros.b2frame"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := frame.NewWriter(f, frame.Params{Chunk: blosc.DefaultParams(1), ChunkSize: cs})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := w.AddSpecial(blosc.SpecialZero, cs); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	opts := DefaultOptions()
	opts.CacheSize = 64 << 20
	mnt, _ := mountSrc(t, src, base, opts)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	g, err := os.OpenFile(filepath.Join(mnt, "zeros"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	const off = cs + 12345
	if _, err := g.WriteAt([]byte{42}, off); err != nil {
		g.Close()
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	// The reads of the stage go through the 64 MiB block cache: what it
	// holds, and little else.
	if a := after.TotalAlloc - before.TotalAlloc; a > 256<<20 {
		t.Errorf("a one-byte write into a 2 GiB chunk allocated %d MiB in the daemon (64 MiB cache)", a>>20)
	} else {
		t.Logf("a one-byte write into a 2 GiB chunk allocated %d MiB in the daemon (64 MiB cache)", a>>20)
	}
	v, err := all.OpenView(filepath.Join(src, "zeros.b2frame"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.Size != 3*cs {
		t.Fatalf("size %d after the write, want %d", v.Size, 3*cs)
	}
	b := make([]byte, 3)
	if _, err := v.ReadAt(b, off-1); err != nil || b[0] != 0 || b[1] != 42 || b[2] != 0 {
		t.Fatalf("stored bytes around the write: %v, %v", b, err)
	}

	// A frame claiming 32 PiB in 2^24 such chunks: a write is refused at
	// once (more chunks than a file written through the mount may have),
	// or done in the same bounded memory; never 4 GiB and counting.
	zf, err := hostile.ZeroFrame()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "huge.b2frame"), zf, 0o644); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&before)
	g, err = os.OpenFile(filepath.Join(mnt, "huge"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, werr := g.WriteAt([]byte{42}, 5<<30)
	cerr := g.Close()
	runtime.ReadMemStats(&after)
	if a := after.TotalAlloc - before.TotalAlloc; a > 256<<20 {
		t.Errorf("a one-byte write into a 32 PiB frame allocated %d MiB in the daemon (write: %v, close: %v)", a>>20, werr, cerr)
	}
	if werr == nil && cerr == nil {
		t.Log("the write into the 32 PiB frame was committed")
	} else if !errors.Is(werr, syscall.EFBIG) && !errors.Is(cerr, syscall.EFBIG) {
		t.Errorf("a write into a 32 PiB frame: write %v, close %v; want success or EFBIG", werr, cerr)
	}
}
