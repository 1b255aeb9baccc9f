package fs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// zarrManifest reads a zarr fixture manifest: array path → sha256.
func zarrManifest(t *testing.T, path string) map[string]string {
	t.Helper()
	m, err := testkit.ReadZarrManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// dirBytes returns the bytes of the regular files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkStoredXattrs checks the stored size and ratio attributes of the
// array view against its files on disk.
func checkStoredXattrs(t *testing.T, view, dir string) {
	t.Helper()
	var x [64]byte
	want := dirBytes(t, dir)
	n, err := syscall.Getxattr(view, "user.bloscfs.compressed_size", x[:])
	if err != nil || string(x[:n]) != fmt.Sprint(want) {
		t.Errorf("%s: compressed_size = %q, %v; want %d", view, x[:max(n, 0)], err, want)
	}
	st, _ := os.Stat(view)
	n, err = syscall.Getxattr(view, "user.bloscfs.ratio", x[:])
	if err != nil || string(x[:n]) != fmt.Sprintf("%.3f", float64(st.Size())/float64(want)) {
		t.Errorf("%s: ratio = %q, %v; want %.3f", view, x[:max(n, 0)], err, float64(st.Size())/float64(want))
	}
	var l [4096]byte
	n, err = syscall.Listxattr(view, l[:])
	if err != nil || !strings.Contains(string(l[:n]), "user.bloscfs.ratio\x00") {
		t.Errorf("%s: listxattr %q, %v", view, l[:max(n, 0)], err)
	}
}

// zarrSource writes the Zarr stores of the mount tests in a temporary
// directory (it skips without root or python3-zarr): the v2 stores
// python3-zarr writes, the committed zarrita v3 stores, and broken.zarr,
// a store that does not parse. It returns the directory and the sha256
// of each array's .npy by its path.
func zarrSource(t *testing.T) (string, map[string]string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	if exec.Command("/usr/bin/python3", "-c", "import zarr, numcodecs").Run() != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3-zarr is missing (make deps)")
		}
		t.Skip("python3-zarr is not installed")
	}
	src := filepath.Join(t.TempDir(), "src")
	if out, err := exec.Command("/usr/bin/python3", "../testdata/zarr/gen_v2.py", src).CombinedOutput(); err != nil {
		t.Fatalf("gen_v2.py: %v: %s", err, out)
	}
	copyDir(t, "../testdata/zarr/zarrita/v3", filepath.Join(src, "v3"))
	// A store that does not parse stays a directory.
	os.MkdirAll(filepath.Join(src, "broken.zarr"), 0o755)
	os.WriteFile(filepath.Join(src, "broken.zarr", ".zarray"), []byte(`{"zarr_format":2,"shape":[3],"chunks":[1],"dtype":"|O","compressor":null,"fill_value":0,"order":"C","filters":null}`), 0o644)
	want := zarrManifest(t, filepath.Join(src, "MANIFEST.tsv"))
	for k, v := range zarrManifest(t, "../testdata/zarr/zarrita/MANIFEST.tsv") {
		want[k] = v
	}
	return src, want
}

// mountSource mounts src and unmounts it when the test ends, also after
// a failure; it returns the mount point and the mount's log.
func mountSource(t *testing.T, src string) (string, *syncBuffer) {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	server, _, err := Mount(src, mnt, Options{Logger: log.New(logs, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	unmountAtEnd(t, server, mnt)
	return mnt, logs
}

// zarrView is the view name of an array directory: its .zarr suffix
// dropped, .npy added.
func zarrView(p string) string { return strings.TrimSuffix(p, ".zarr") + ".npy" }

// TestMountZarr mounts the Zarr stores python3-zarr writes (v2) and the
// committed zarrita stores (v3): each array is one .npy file whose bytes
// are np.save's of zarr.open(path)[...], read with cat, dd at odd offsets
// and np.load(mmap_mode="r").
func TestMountZarr(t *testing.T) {
	src, want := zarrSource(t)
	mnt, logs := mountSource(t, src)

	for p, sum := range want {
		view := filepath.Join(mnt, zarrView(p))
		out, err := exec.Command("sh", "-c", `cat "$1" | sha256sum`, "sh", view).Output()
		if err != nil || !strings.HasPrefix(string(out), sum) {
			t.Errorf("%s: cat | sha256sum = %q (%v), want %s", view, out, err, sum)
		}
	}
	// dd at odd offsets equals the same bytes of the whole file.
	for _, p := range []string{"v2/blosc/default", "v2/order/f3d", "v2/dims/d5", "v3/blosc/zstd_bitshuffle", "v2/fill/nan"} {
		view := filepath.Join(mnt, p+".npy")
		all, err := os.ReadFile(view)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range [][2]int{{1, 7}, {127, 1000}, {4093, 8193}, {len(all) - 5, 5}} {
			if r[0]+r[1] > len(all) {
				continue
			}
			out, err := exec.Command("dd", "if="+view, "bs=4096", "iflag=skip_bytes,count_bytes",
				fmt.Sprintf("skip=%d", r[0]), fmt.Sprintf("count=%d", r[1]), "status=none").Output()
			if err != nil || !bytes.Equal(out, all[r[0]:r[0]+r[1]]) {
				t.Errorf("%s: dd at %d+%d differs (%v)", view, r[0], r[1], err)
			}
		}
	}
	// np.load(mmap_mode="r") through the mount equals zarr.open()[...].
	script := `
import sys, numpy as np, zarr
mnt, src = sys.argv[1], sys.argv[2]
bad = []
for p in sys.argv[3:]:
    a = np.load(mnt + "/" + p + ".npy", mmap_mode="r")
    z = zarr.open(src + "/" + p, mode="r")[...]
    if a.dtype != z.dtype or a.shape != z.shape or a.tobytes() != z.tobytes():
        bad.append(p)
print(" ".join(bad))
`
	var v2 []string
	for p := range want {
		if strings.HasPrefix(p, "v2/") && !strings.HasSuffix(p, ".zarr") && !strings.HasSuffix(p, "d0") {
			v2 = append(v2, p)
		}
	}
	out, err := exec.Command("/usr/bin/python3", append([]string{"-c", script, mnt, src}, v2...)...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("np.load(mmap) differs from zarr.open()[...]: %v: %s", err, out)
	}
	// Groups stay directories with their JSON; arrays are read-only.
	for _, p := range []string{"v2/.zgroup", "v2/.zmetadata", "v2/deep/a/b/.zattrs", "v3/zarr.json", "v3/blosc/zarr.json"} {
		if _, err := os.Stat(filepath.Join(mnt, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if st, err := os.Stat(filepath.Join(mnt, "v2/dims/d2.npy")); err != nil || !st.Mode().IsRegular() {
		t.Errorf("array view: %v, %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "v2/dims/d2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("array directory still visible under its own name: %v", err)
	}
	if _, err := os.OpenFile(filepath.Join(mnt, "v2/dims/d2.npy"), os.O_WRONLY, 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("open for writing: %v, want EROFS", err)
	}
	if st, err := os.Stat(filepath.Join(mnt, "broken.zarr")); err != nil || !st.IsDir() {
		t.Errorf("broken store: %v, %v; want a directory", st, err)
	}
	if !strings.Contains(logs.String(), "broken.zarr") {
		t.Errorf("no log line for the broken store: %s", logs.String())
	}
	var x [64]byte
	n, err := syscall.Getxattr(filepath.Join(mnt, "v2/dims/d2.npy"), "user.bloscfs.format", x[:])
	if err != nil || string(x[:n]) != "zarr2" {
		t.Errorf("user.bloscfs.format = %q, %v", x[:max(n, 0)], err)
	}
	for attr, want := range map[string]string{
		"user.zarr.attrs":         `"units": "m"`,
		"user.bloscfs.chunkshape": "4,5",
		"user.bloscfs.codecs":     "blosc",
		"user.bloscfs.chunks":     "9",
		"user.bloscfs.shape":      "11,13",
	} {
		n, err := syscall.Getxattr(filepath.Join(mnt, "v2/dims/d2.npy"), attr, x[:])
		if err != nil || !strings.Contains(string(x[:n]), want) {
			t.Errorf("%s = %q, %v; want %q", attr, x[:max(n, 0)], err, want)
		}
	}
	checkStoredXattrs(t, filepath.Join(mnt, "v2/dims/d2.npy"), filepath.Join(src, "v2/dims/d2"))
	checkStoredXattrs(t, filepath.Join(mnt, "v3/blosc/lz4_shuffle.npy"), filepath.Join(src, "v3/blosc/lz4_shuffle"))
	n, err = syscall.Getxattr(filepath.Join(mnt, "v3/blosc/lz4_shuffle.npy"), "user.bloscfs.format", x[:])
	if err != nil || string(x[:n]) != "zarr3" {
		t.Errorf("v3 user.bloscfs.format = %q, %v", x[:max(n, 0)], err)
	}
}

// TestMountZarrChecksum reads a v3 array whose chunk fails its crc32c:
// the read is EIO and the log names the chunk. (The good chunk shares the
// file's one page with it, so the kernel never reads it alone; the zarr
// package's tests read good chunks beside bad ones.)
func TestMountZarrChecksum(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	src := filepath.Join(t.TempDir(), "src")
	arr := filepath.Join(src, "crc.zarr")
	os.MkdirAll(filepath.Join(arr, "c"), 0o755)
	os.WriteFile(filepath.Join(arr, "zarr.json"), []byte(`{"zarr_format":3,"node_type":"array","shape":[8],"data_type":"uint8",
"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},
"chunk_key_encoding":{"name":"default"},"fill_value":0,
"codecs":[{"name":"bytes"},{"name":"crc32c"}]}`), 0o644)
	good := []byte{1, 2, 3, 4}
	good = binary.LittleEndian.AppendUint32(good, crc32.Checksum(good[:4], crc32.MakeTable(crc32.Castagnoli)))
	os.WriteFile(filepath.Join(arr, "c", "0"), good, 0o644)
	bad := []byte{5, 6, 7, 8, 0, 0, 0, 0}
	os.WriteFile(filepath.Join(arr, "c", "1"), bad, 0o644)
	mnt, logs := mountSource(t, src)
	f, err := os.Open(filepath.Join(mnt, "crc.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	hdr := st.Size() - 8
	b := make([]byte, 4)
	if _, err := f.ReadAt(b, hdr+4); !errors.Is(err, syscall.EIO) {
		t.Fatalf("chunk with a bad crc32c: %v, want EIO", err)
	}
	if !strings.Contains(logs.String(), "c/1") || !strings.Contains(logs.String(), "checksum") {
		t.Errorf("log does not name the chunk and the checksum: %q", logs.String())
	}
}
