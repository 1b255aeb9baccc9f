package fs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/gridfiles"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
)

// decodeSource decodes a container in the source directory.
func decodeSource(t *testing.T, path string) []byte {
	t.Helper()
	v, err := all.OpenView(path, pack.NoCache{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer v.Close()
	var b bytes.Buffer
	if _, err := v.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// noTempFiles checks that no temp or staging file stays in dir. The
// kernel sends RELEASE (which removes the stage) after close returns, so
// it waits a little.
func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	var left []string
	if !testkit.Eventually(t, 5*time.Second, func() bool {
		left = nil
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if hiddenName(e.Name()) {
				left = append(left, e.Name())
			}
		}
		return len(left) == 0
	}) {
		t.Errorf("temp files left: %v", left)
	}
}

// TestAppendAcrossLookup: a program keeps a compressed file open for
// appending while the kernel looks its name up again; the LOOKUP's reply
// carries the staged size, not the committed one, so a stat by name shows
// the appended bytes and the second append lands after the first. The
// kernel keeps the name and attributes of a compressed file for an hour
// by default; this mount says 1 s, and the test stats the name until the
// kernel looks it up again (the debug log shows the LOOKUP): that stat
// shows the size the LOOKUP gave, cached with it.
func TestAppendAcrossLookup(t *testing.T) {
	opts := DefaultOptions()
	opts.AttrTimeout, opts.CompressedTimeout, opts.Debug = time.Second, time.Second, true
	src, mnt, logs := mountFixtures(t, opts)
	name, disk := "default_api_f64", "default_api_f64.blp"
	path := filepath.Join(mnt, name)
	want := decodeSource(t, filepath.Join(src, disk))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, b := bytes.Repeat([]byte("A"), 1000), bytes.Repeat([]byte("B"), 1000)
	if _, err := f.Write(a); err != nil {
		t.Fatal(err)
	}
	before := len(logs.String())
	var st os.FileInfo
	if !testkit.Eventually(t, 10*time.Second, func() bool {
		st, err = os.Stat(path)
		return err != nil || lookupsOf(logs.String()[before:], name) > 0
	}) {
		t.Fatalf("the kernel did not look %s up again within 10 s", name)
	}
	size := int64(len(want) + len(a))
	if err != nil || st.Size() != size {
		t.Errorf("stat by name that looked the name up again (file still open): %v; want size %d", sizeOrErr(st, err), size)
	}
	if st, err := f.Stat(); err != nil || st.Size() != size {
		t.Errorf("fstat after that stat: %v; want size %d", sizeOrErr(st, err), size)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want = append(append(want, a...), b...)
	// The commit may come with the RELEASE, after close returned.
	if !testkit.Eventually(t, 5*time.Second, func() bool { return bytes.Equal(decodeSource(t, filepath.Join(src, disk)), want) }) {
		got := decodeSource(t, filepath.Join(src, disk))
		t.Fatalf("the source holds %d bytes, want %d (the appends in order); first difference at %d", len(got), len(want), gridfiles.FirstDiff(got, want))
	}
}

// sizeOrErr says what a stat gave: the size, or the error.
func sizeOrErr(st os.FileInfo, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("size %d", st.Size())
}

// lookupsOf counts the LOOKUP requests of name in go-fuse's debug log.
func lookupsOf(log, name string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "LOOKUP") && strings.Contains(line, `"`+name+`"`) {
			n++
		}
	}
	return n
}

// TestWritePatchAndTruncate patches a Bloscpack and a frame fixture in
// place, truncates and extends, and checks the source after each close.
func TestWritePatchAndTruncate(t *testing.T) {
	src, mnt, _ := mountFixtures(t, DefaultOptions())
	for _, name := range []string{"default_api_f64", "chunks_large_2MB"} {
		disk := map[string]string{"default_api_f64": "default_api_f64.blp", "chunks_large_2MB": "chunks_large_2MB.b2frame"}[name]
		want := decodeSource(t, filepath.Join(src, disk))
		f, err := os.OpenFile(filepath.Join(mnt, name), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		patch := []byte("a patch across whatever boundary lies here")
		off := int64(len(want) / 2)
		if _, err := f.WriteAt(patch, off); err != nil {
			t.Fatal(err)
		}
		copy(want[off:], patch)
		// Reads see the write at once.
		got := make([]byte, len(patch))
		if _, err := f.ReadAt(got, off); err != nil || !bytes.Equal(got, patch) {
			t.Fatalf("%s: read back %q, %v", name, got, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if got := decodeSource(t, filepath.Join(src, disk)); !bytes.Equal(got, want) {
			t.Fatalf("%s: source differs after close", name)
		}
		// Truncate by path (no open handle), shorter then longer.
		if err := os.Truncate(filepath.Join(mnt, name), 1000); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(filepath.Join(mnt, name), 5000); err != nil {
			t.Fatal(err)
		}
		want = append(want[:1000], make([]byte, 4000)...)
		// The kernel sends the RELEASE of the handle closed above after
		// close returned: while it has not arrived, a writable handle is
		// still open, and the truncations are committed with it.
		if !testkit.Eventually(t, 5*time.Second, func() bool { return bytes.Equal(decodeSource(t, filepath.Join(src, disk)), want) }) {
			t.Fatalf("%s: source differs after truncate", name)
		}
		if got, _ := os.ReadFile(filepath.Join(mnt, name)); !bytes.Equal(got, want) {
			t.Fatalf("%s: mount differs after truncate", name)
		}
	}
	noTempFiles(t, src)
}

// TestWriteNewFiles: cp, shell > and O_APPEND make name.b2frame.
func TestWriteNewFiles(t *testing.T) {
	src, mnt, _ := mountFixtures(t, DefaultOptions())
	data := bytes.Repeat([]byte("0123456789abcdef"), 300000)
	in := filepath.Join(t.TempDir(), "in")
	os.WriteFile(in, data, 0o640)
	if out, err := exec.Command("cp", in, filepath.Join(mnt, "copied")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	if out, err := exec.Command("sh", "-c", "echo one > "+mnt+"/log.txt && echo two >> "+mnt+"/log.txt").CombinedOutput(); err != nil {
		t.Fatalf("sh: %v %s", err, out)
	}
	if got := decodeSource(t, filepath.Join(src, "copied.b2frame")); !bytes.Equal(got, data) {
		t.Fatal("copied.b2frame differs")
	}
	if got := decodeSource(t, filepath.Join(src, "log.txt.b2frame")); string(got) != "one\ntwo\n" {
		t.Fatalf("log.txt.b2frame holds %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(mnt, "log.txt")); string(got) != "one\ntwo\n" {
		t.Fatalf("log.txt reads %q", got)
	}
	// The name hidden behind a compressed view cannot be created.
	if _, err := os.Create(filepath.Join(mnt, "copied.b2frame")); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("creating the hidden disk name: %v", err)
	}
	noTempFiles(t, src)
}

// TestWriteRenameUnlinkOpen: an open file follows a rename; an unlinked
// open file is not brought back by its commit.
func TestWriteRenameUnlinkOpen(t *testing.T) {
	src, mnt, _ := mountFixtures(t, DefaultOptions())
	f, err := os.OpenFile(filepath.Join(mnt, "codec_zstd_l1"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mnt, "codec_zstd_l1"), filepath.Join(mnt, "moved")); err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("MOVED"), 0)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := decodeSource(t, filepath.Join(src, "moved.b2frame")); string(got[:5]) != "MOVED" {
		t.Fatalf("moved.b2frame starts %q", got[:5])
	}
	if _, err := os.Stat(filepath.Join(src, "codec_zstd_l1.b2frame")); err == nil {
		t.Fatal("the old name is back")
	}
	g, err := os.OpenFile(filepath.Join(mnt, "codec_zstd_l5"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(mnt, "codec_zstd_l5"))
	g.WriteAt([]byte("x"), 0)
	g.Close()
	if _, err := os.Stat(filepath.Join(src, "codec_zstd_l5.b2frame")); err == nil {
		t.Fatal("an unlinked file was recreated by its commit")
	}
	noTempFiles(t, src)
}

// TestWriteArrayHeader: the .npy view's data can be written, its header
// and size cannot.
func TestWriteArrayHeader(t *testing.T) {
	src, mnt, logs := mountFixtures(t, DefaultOptions())
	p := filepath.Join(mnt, "nd_i32_2d.npy")
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("XX"), 0); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("header write: %v", err)
	}
	st, _ := f.Stat()
	if _, err := f.WriteAt([]byte{1, 2, 3, 4}, st.Size()); err == nil {
		t.Fatal("a write past the array was accepted")
	}
	if err := f.Truncate(10); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("truncate: %v", err)
	}
	hdr := make([]byte, 10)
	f.ReadAt(hdr, 0)
	if _, err := f.WriteAt(hdr, 0); err != nil {
		t.Fatalf("rewriting the header unchanged: %v", err)
	}
	if !strings.Contains(logs.String(), "would change the .npy header") {
		t.Errorf("no log line:\n%s", logs.String())
	}
	_ = src
}
