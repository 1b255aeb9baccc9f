package fs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenameBehindTheMount: a source file renamed outside the mount is
// found under its new name (the node used to keep the old disk name).
func TestRenameBehindTheMount(t *testing.T) {
	src, mnt, _ := mountFixtures(t, DefaultOptions())
	want, err := os.ReadFile(filepath.Join(mnt, "codec_zstd"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(src, "codec_zstd.blp"), filepath.Join(src, "renamed.blp")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(mnt, "renamed"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("renamed: %v (%d bytes, want %d)", err, len(got), len(want))
	}
}

// TestRecycledInode: after a recompression frees a file's inode, a new
// file that gets the same inode number is a new file, not the old node.
func TestRecycledInode(t *testing.T) {
	src, mnt, _ := mountFixtures(t, DefaultOptions())
	for i := 0; i < 20; i++ {
		if err := os.WriteFile(filepath.Join(mnt, "codec_zstd"), []byte("HELLO"), 0o644); err != nil {
			t.Fatal(err)
		}
		other := filepath.Join(src, "other"+string(rune('a'+i))+".txt")
		if err := os.WriteFile(other, []byte("plain text"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(mnt, filepath.Base(other)))
		if err != nil || string(got) != "plain text" {
			t.Fatalf("round %d: %s reads %q, %v", i, filepath.Base(other), got, err)
		}
		if got, _ := os.ReadFile(filepath.Join(mnt, "codec_zstd")); string(got) != "HELLO" {
			t.Fatalf("round %d: codec_zstd reads %q", i, got)
		}
	}
}

// TestDotStem: a file named ..blp stays ..blp (a stem of "." or ".."
// would make it a second "." entry).
func TestDotStem(t *testing.T) {
	src, mnt, _ := mountFixtures(t, DefaultOptions())
	raw, _ := os.ReadFile(filepath.Join(src, "tiny_1byte.blp"))
	os.WriteFile(filepath.Join(src, "..blp"), raw, 0o644)
	ents, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range ents {
		if e.Name() == "." || e.Name() == ".." {
			t.Fatalf("listing has %q", e.Name())
		}
		found = found || e.Name() == "..blp"
	}
	if !found {
		t.Fatal("..blp is not listed")
	}
	if _, err := os.Stat(filepath.Join(mnt, "..blp")); err != nil {
		t.Fatal(err)
	}
}

// TestMountpointAboveSource: the daemon must never serve its own mount.
func TestMountpointAboveSource(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root")
	}
	top := t.TempDir()
	src := filepath.Join(top, "src")
	os.Mkdir(src, 0o755)
	for _, mnt := range []string{top, filepath.Join(src, "inside")} {
		os.MkdirAll(mnt, 0o755)
		server, _, err := Mount(src, mnt, DefaultOptions())
		if err == nil {
			server.Unmount()
			t.Fatalf("mounted %s over its own source %s", mnt, src)
		}
		if !strings.Contains(err.Error(), "inside") {
			t.Errorf("%s: %v", mnt, err)
		}
	}
}
