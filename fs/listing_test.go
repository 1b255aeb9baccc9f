package fs

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
)

func listNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, e := range ents {
		m[e.Name()] = true
	}
	return m
}

// noSettle keeps the names of a listing however recent the directory's
// last change (the fixtures were just copied), until the test ends.
func noSettle(t *testing.T) {
	old := settleTime
	settleTime = 0
	t.Cleanup(func() { settleTime = old })
}

// TestListingNotKeptMostlyPlain: the kernel is not told to keep the
// listing of a directory whose entries are mostly plain files (their
// names expire within a second, and a kept listing would look each up
// alone): each listing is made anew, and a compressed file in it is not
// probed again.
func TestListingNotKeptMostlyPlain(t *testing.T) {
	noSettle(t)
	src := t.TempDir()
	frameData, err := os.ReadFile(filepath.Join(fixtures.Dir(), "blocksize_16384.b2frame"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "f.b2frame"), frameData, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.txt", "b.txt", "c.txt"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mnt, _ := mountSource(t, src)
	if names := listNames(t, mnt); len(names) != 4 || !names["f"] {
		t.Fatalf("listing: %v", names)
	}
	s1 := mountStats(t, mnt)
	listNames(t, mnt)
	listNames(t, mnt)
	s2 := mountStats(t, mnt)
	if s2.Listing.Kept != s1.Listing.Kept {
		t.Errorf("the kernel was told to keep the listing of a directory of mostly plain files: %+v then %+v", s1.Listing, s2.Listing)
	}
	if s2.Listing.Listed < s1.Listing.Listed+2 {
		t.Errorf("the directory was not listed anew: %+v then %+v", s1.Listing, s2.Listing)
	}
	if s2.Listing.Probed != s1.Listing.Probed {
		t.Errorf("files probed again: %+v then %+v", s1.Listing, s2.Listing)
	}
}

// TestListingKept: a directory listed once is not listed again while it
// is unchanged, and the kept names never hide a change of the source:
// an entry added behind the mount is found by lookup and by the next
// listing, and a name that now leads to another disk entry shows it.
func TestListingKept(t *testing.T) {
	noSettle(t)
	src, mnt, _ := mountFixtures(t, DefaultOptions())
	first := listNames(t, mnt)
	if !first["codec_zstd"] || first["codec_zstd.blp"] {
		t.Fatalf("codec_zstd.blp not shown as codec_zstd: %v", first)
	}
	// Read codec_zstd through its name: the kernel holds the name.
	before, err := os.ReadFile(filepath.Join(mnt, "codec_zstd"))
	if err != nil {
		t.Fatal(err)
	}
	s1 := mountStats(t, mnt)
	listNames(t, mnt)
	listNames(t, mnt)
	s2 := mountStats(t, mnt)
	if s2.Listing.Listed != s1.Listing.Listed {
		t.Errorf("an unchanged directory was listed again: %+v then %+v", s1.Listing, s2.Listing)
	}
	if s2.Listing.Kept < s1.Listing.Kept+2 {
		t.Errorf("the kernel was not told to keep the listing: %+v then %+v", s1.Listing, s2.Listing)
	}
	if s2.Listing.Probed != s1.Listing.Probed {
		t.Errorf("files probed again: %+v then %+v", s1.Listing, s2.Listing)
	}

	// Behind the mount: a new file, found by lookup at once (the kept
	// names are for the old directory).
	if err := os.WriteFile(filepath.Join(src, "added.txt"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "added.txt")); err != nil || string(got) != "new" {
		t.Errorf("added.txt: %q, %v", got, err)
	}
	// A plain file that takes codec_zstd's name: the listing shows both
	// under their full names, and the name codec_zstd, held by the
	// kernel for an hour as the compressed file, now leads to the
	// plain file.
	if err := os.WriteFile(filepath.Join(src, "codec_zstd"), []byte("plain"), 0o644); err != nil {
		t.Fatal(err)
	}
	names := listNames(t, mnt)
	for _, want := range []string{"added.txt", "codec_zstd", "codec_zstd.blp"} {
		if !names[want] {
			t.Errorf("%s missing from the listing after changes behind the mount", want)
		}
	}
	// The name is dropped right after the listing.
	var got []byte
	if !testkit.Eventually(t, 5*time.Second, func() bool {
		got, err = os.ReadFile(filepath.Join(mnt, "codec_zstd"))
		return err == nil && string(got) == "plain"
	}) {
		t.Fatalf("codec_zstd still shows the compressed file after a listing: %d bytes, %v", len(got), err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "codec_zstd.blp")); err != nil || string(got) != string(before) {
		t.Errorf("codec_zstd.blp: %d bytes, %v; want the %d bytes codec_zstd showed", len(got), err, len(before))
	}
	// Removed behind the mount: gone from lookup and listing.
	if err := os.Remove(filepath.Join(src, "added.txt")); err != nil {
		t.Fatal(err)
	}
	if names := listNames(t, mnt); names["added.txt"] {
		t.Error("added.txt still listed after its removal")
	}
}

// TestListingThroughMount: changes made through the mount show in the
// next listing and lookup, with the directory's names kept.
func TestListingThroughMount(t *testing.T) {
	noSettle(t)
	_, mnt, _ := mountFixtures(t, DefaultOptions())
	listNames(t, mnt)
	listNames(t, mnt)
	p := filepath.Join(mnt, "made")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if names := listNames(t, mnt); !names["made"] {
		t.Error("a file made through the mount is not listed")
	}
	if err := os.WriteFile(p, []byte("0123456789abcdef"), 0o644); err != nil {
		t.Fatal(err)
	}
	listNames(t, mnt)
	if st, err := os.Stat(p); err != nil || st.Size() != 16 {
		t.Errorf("made after a rewrite: %v, %v; want 16 bytes", st, err)
	}
	if err := os.Rename(p, filepath.Join(mnt, "moved")); err != nil {
		t.Fatal(err)
	}
	names := listNames(t, mnt)
	if names["made"] || !names["moved"] {
		t.Errorf("after a rename through the mount: made %v, moved %v", names["made"], names["moved"])
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "moved")); err != nil || string(got) != "0123456789abcdef" {
		t.Errorf("moved: %q, %v", got, err)
	}
}

// TestEdgeReader: a probe's reader returns the file's bytes wherever it
// is read, whatever the file's size against the copies it keeps.
func TestEdgeReader(t *testing.T) {
	for _, size := range []int64{0, 1, probeEdge - 1, probeEdge, 2 * probeEdge, 2*probeEdge + 1, 5*probeEdge + 7} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + i>>8)
		}
		r, err := newEdgeReader(bytes.NewReader(data), size)
		if err != nil {
			t.Fatal(err)
		}
		if err := iotest.TestReader(io.NewSectionReader(r, 0, size), data); err != nil {
			t.Errorf("size %d: %v", size, err)
		}
	}
}
