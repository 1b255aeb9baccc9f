package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/internal/testkit/hostile"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
	"golang.org/x/sys/unix"
)

// callTimeout only guards against a hang of one call; nothing is timed.
const callTimeout = 60 * time.Second

// TestHostileMount is issue 11's acceptance test: a mount with
// --cache-size 64MiB over a directory of every crafted file (huge claimed
// blocks, sizes, chunk counts and metadata), FIFOs where containers, an
// index or a chunk are expected, and a symlink to a root-only file. Each
// file is listed, stat'ed, read with head and with dd at several offsets;
// every call returns (the right bytes, or an error for what is refused),
// and the daemon's peak RSS stays under the cache + 128 MiB.
func TestHostileMount(t *testing.T) {
	setup.Require(t)
	requireTool(t, "dd")
	src := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := hostile.WriteAll(src, 1<<18); err != nil {
		t.Fatal(err)
	}
	// FIFOs: named as a container, as a sparse frame's index, as one of
	// its chunks.
	if err := syscall.Mkfifo(filepath.Join(src, "fifo.blp"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(src, "fifo_index.b2frame"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(src, "fifo_index.b2frame", "chunks.b2frame"), 0o644); err != nil {
		t.Fatal(err)
	}
	fx := filepath.Join(fixtures.Dir(), "sparse_frame.b2frame")
	sdir := filepath.Join(src, "fifo_chunk.b2frame")
	os.Mkdir(sdir, 0o755)
	for _, n := range []string{"chunks.b2frame", "00000000.chunk", "00000002.chunk", "00000003.chunk"} {
		b, err := os.ReadFile(filepath.Join(fx, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sdir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(sdir, "00000001.chunk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/shadow", filepath.Join(src, "shadow.blp")); err != nil {
		t.Fatal(err)
	}

	const cache, slack = 64 << 20, 128 << 20
	m := mountDaemon(t, src, "--cache-size", "64MiB")

	r := testkit.Run(callTimeout, "ls", "-l", m.Dir)
	if r.Err != nil {
		t.Fatalf("ls -l: %v", r)
	}
	t.Logf("ls -l:\n%s", r.Stdout)

	// What each file must read as: zeros, a prefix, or an I/O error.
	type want struct {
		zeros  bool
		prefix []byte
		eio    bool // refused (too large a block) or unreadable (FIFO chunk)
	}
	tiny := make([]byte, 64)
	for i := range tiny {
		tiny[i] = byte(i)
	}
	files := map[string]want{
		"special_huge_block": {zeros: true},
		"big_block":          {eio: true},
		"zero_32pib":         {zeros: true},
		"many_blocks":        {zeros: true},
		"vlmeta_bomb":        {prefix: []byte("hello")},
		"tiny_chunks":        {prefix: tiny},
		"fifo_chunk":         {eio: true},
	}
	for name, w := range files {
		p := m.Path(name)
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Errorf("stat %s: %v", name, err)
			continue
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			t.Errorf("%s: mode %o, want a regular file", name, st.Mode)
			continue
		}
		size := st.Size
		r := testkit.Run(callTimeout, "head", "-c", "4096", p)
		switch {
		case r.Err != nil && ctxTimedOut(r):
			t.Errorf("head %s: %v", name, r)
		case w.eio:
			if r.Err == nil && name != "fifo_chunk" {
				t.Errorf("head %s: read %d bytes, want an I/O error", name, len(r.Stdout))
			}
		case r.Err != nil:
			t.Errorf("head %s: %v", name, r)
		case w.zeros && (len(r.Stdout) != int(min(4096, size)) || bytes.Count(r.Stdout, []byte{0}) != len(r.Stdout)):
			t.Errorf("head %s: %d bytes, not all zero", name, len(r.Stdout))
		case w.prefix != nil && !bytes.HasPrefix(r.Stdout, w.prefix):
			t.Errorf("head %s: %q, want prefix %q", name, r.Stdout[:min(len(r.Stdout), 16)], w.prefix)
		}
		for _, off := range []int64{size / 3, size / 2, max(size-4096, 0)} {
			r := testkit.Run(callTimeout, "dd", "if="+p, "of=/dev/null", "bs=4096", "count=1", "iflag=skip_bytes", "skip="+strconv.FormatInt(off, 10))
			if ctxTimedOut(r) || (r.Err != nil && !w.eio) {
				t.Errorf("dd %s at %d: %v", name, off, r)
			}
		}
	}
	// A 64 MiB direct read of the 2 GiB special block.
	if r := testkit.Run(callTimeout, "dd", "if="+m.Path("special_huge_block"), "of=/dev/null", "bs=64M", "count=1", "iflag=direct"); r.Err != nil {
		t.Errorf("dd iflag=direct: %v", r)
	}
	// A byte of 300 chunks that each parse to 8 MB.
	cs := int64(1 << 30)
	for i := int64(0); i < 300; i++ {
		r := testkit.Run(callTimeout, "dd", "if="+m.Path("many_blocks"), "of=/dev/null", "bs=1", "count=1", "iflag=skip_bytes", fmt.Sprintf("skip=%d", i*cs+777))
		if r.Err != nil {
			t.Fatalf("dd many_blocks chunk %d: %v", i, r)
		}
	}
	// The whole tiny-chunk file.
	if r := testkit.Run(callTimeout, "cat", m.Path("tiny_chunks")); r.Err != nil || len(r.Stdout) != 1<<18 {
		t.Errorf("cat tiny_chunks: %d bytes, %v", len(r.Stdout), r)
	}
	// FIFOs and the symlink are shown as they are.
	for name, typ := range map[string]uint32{"fifo.blp": syscall.S_IFIFO, "fifo_index.b2frame": syscall.S_IFDIR, "shadow.blp": syscall.S_IFLNK} {
		var st syscall.Stat_t
		if err := syscall.Lstat(m.Path(name), &st); err != nil || st.Mode&syscall.S_IFMT != typ {
			t.Errorf("%s: %v, mode %o, want type %o", name, err, st.Mode, typ)
		}
	}
	if r := testkit.Run(callTimeout, "ls", "-l", m.Path("fifo_index.b2frame")); r.Err != nil {
		t.Errorf("ls -l of a sparse frame whose index is a FIFO: %v", r)
	}

	hwm, err := testkit.ProcValue(m.PID, "status", "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("daemon peak RSS (VmHWM) %d MiB with --cache-size 64MiB", hwm>>20)
	if hwm > cache+slack {
		t.Errorf("daemon peak RSS %d MiB, over the cache (64 MiB) + 128 MiB", hwm>>20)
	}
	if log := m.LogText(); !strings.Contains(log, "big_block") {
		t.Errorf("the refused block is not logged:\n%s", log)
	}
}

// ctxTimedOut reports whether a program was killed at its timeout.
func ctxTimedOut(r testkit.Result) bool {
	return r.Err != nil && strings.Contains(r.Err.Error(), "timed out")
}

// TestSourceShrinksUnderMount truncates a container in the source
// directory while a reader has it open through the mount. Blocks decode
// from a pread copy (a short read), or with BLOSCFS_MMAP=1 from the file's
// memory mapping, where the lost pages raise SIGBUS and the rest of the
// page holding the new end reads as zeros: either way the read gets EIO
// and one log line naming the file, never zeros (which it got before the
// mapping checked the size after each read), and the daemon keeps
// serving.
func TestSourceShrinksUnderMount(t *testing.T) {
	setup.Require(t)
	const size = 32 << 20
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(tmp, "plain")
	writeSeries(t, plain, size)
	packFile(t, plain, filepath.Join(src, "s.b2frame"), "--codec", "lz4", "--block-size", "256KiB")
	packFile(t, plain, filepath.Join(src, "other.b2frame"), "--codec", "lz4")
	want, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	m := mountDaemon(t, src)
	f, err := os.Open(m.Path("s"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// No kernel read-ahead: each pread is a READ of its own pages.
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM); err != nil {
		t.Fatal(err)
	}
	// Parse the last chunk (its first block), so that its other blocks
	// decode from the mapping later.
	last := int64(size - 1<<20)
	head := make([]byte, 4096)
	if _, err := f.ReadAt(head, last); err != nil || !bytes.Equal(head, want[last:last+4096]) {
		t.Fatalf("reading the last chunk's start: %v", err)
	}
	st, err := os.Stat(filepath.Join(src, "s.b2frame"))
	if err != nil {
		t.Fatal(err)
	}
	// The last block's compressed bytes end just before the frame's
	// small index and trailer: cutting 64 KiB takes pages of them.
	if err := os.Truncate(filepath.Join(src, "s.b2frame"), st.Size()-64<<10); err != nil {
		t.Fatal(err)
	}
	tail := make([]byte, 64<<10)
	_, err = f.ReadAt(tail, size-int64(len(tail)))
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("reading the lost tail: %v (the right bytes: %v, all zeros: %v), want EIO\nlog:\n%s",
			err, bytes.Equal(tail, want[size-len(tail):]), bytes.Count(tail, []byte{0}) == len(tail), m.LogText())
	}
	if !mounttest.ServesMount(m.PID, m.Dir) {
		t.Fatal("the daemon died")
	}
	if log := m.LogText(); !strings.Contains(log, "s.b2frame") || !(strings.Contains(log, "mapping") || strings.Contains(log, "unexpected EOF")) {
		t.Errorf("no log line names the file and the fault:\n%s", log)
	}
	// The daemon serves on: another file reads whole and right.
	got, err := os.ReadFile(m.Path("other"))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("reading another file after the fault: %v, equal %v", err, bytes.Equal(got, want))
	}
}

// TestHostileZarrMount is issue 33's acceptance test for a local tree: a
// mount with --cache-size 64MiB over a directory of every hostile Zarr
// input (internal/testkit/hostile: codec bombs, huge dictionaries and item
// sizes, sparse metadata and shard indexes, FIFOs as metadata, chunk and
// shard) beside a sound array. Every listing, stat and read returns
// within seconds, hostile data fail with EIO, the daemon's peak RSS
// stays under 512 MiB, and the sound array reads bit-exact afterwards.
func TestHostileZarrMount(t *testing.T) {
	setup.Require(t)
	requireTool(t, "dd")
	src := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	ins, err := hostile.WriteZarr(src, true)
	if err != nil {
		t.Fatal(err)
	}
	want, err := hostile.WriteGoodZarr(filepath.Join(src, "good"))
	if err != nil {
		t.Fatal(err)
	}
	m := mountDaemon(t, src, "--cache-size", "64MiB")
	hostile.CheckZarrMount(t, m.Dir, ins, "good", want, m.PID)
	log := m.LogText()
	for _, name := range []string{"zstd_bomb", "sparse_zattrs", "v_huge_0d"} {
		if !strings.Contains(log, name) {
			t.Errorf("nothing logged of %s:\n%s", name, log)
		}
	}
}
