package fs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/remote"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// copyDir copies a directory tree (regular files and directories).
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// mountFixtures mounts a copy of the fixtures and unmounts it when the
// test ends, also after a failure.
func mountFixtures(t *testing.T, opts Options) (src, mnt string, logs *syncBuffer) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("mounting needs root (go-fuse DirectMount)")
	}
	src = filepath.Join(t.TempDir(), "src")
	copyDir(t, fixtures.Dir(), src)
	mnt = filepath.Join(t.TempDir(), "mnt")
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
	return src, mnt, logs
}

func shaFile(t *testing.T, path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// expectedNames maps each fixture to its name in the view, deciding
// which files are containers by opening them with pack (independently of
// the mount) and applying the collision rule.
func expectedNames(t *testing.T, all []fixtures.Fixture) map[string]string {
	var ents []diskEntry
	for _, fx := range all {
		name := strings.TrimSuffix(fx.Name, "/")
		path := fx.Path
		ents = append(ents, diskEntry{name: name, dir: fx.IsDir, container: func() bool {
			v, err := allOpenView(path)
			if err == nil {
				v.Close()
			}
			return err == nil
		}})
	}
	out := map[string]string{}
	for _, e := range mapNames(ents) {
		out[e.disk] = e.view
	}
	return out
}

// TestMountFixtures reads every valid fixture through a mount.
func TestMountFixtures(t *testing.T) {
	_, mnt, logs := mountFixtures(t, DefaultOptions())
	all, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	view := expectedNames(t, all)
	for _, fx := range all {
		if !fx.ValidPlain {
			continue
		}
		p := filepath.Join(mnt, view[strings.TrimSuffix(fx.Name, "/")])
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", fx.Name, err)
			continue
		}
		sum, n, err := shaFile(t, p)
		if err != nil {
			t.Errorf("%s: %v", fx.Name, err)
			continue
		}
		if fx.Kind == "b2nd" {
			// The .npy view: check the size against the array.
			if st.Size() <= fx.PlainSize || n != st.Size() {
				t.Errorf("%s: npy view of %d bytes (stat %d) for %d data bytes", fx.Name, n, st.Size(), fx.PlainSize)
			}
			continue
		}
		if st.Size() != fx.PlainSize || sum != fx.PlainSHA {
			t.Errorf("%s: stat size %d, read %d bytes sha %s; want %d %s", fx.Name, st.Size(), n, sum, fx.PlainSize, fx.PlainSHA)
		}
	}
	// Invalid fixtures are there, under their own names, raw.
	for _, fx := range all {
		if !fx.IsInvalid {
			continue
		}
		raw, _ := os.ReadFile(fx.Path)
		got, err := os.ReadFile(filepath.Join(mnt, view[fx.Name]))
		if err == nil && bytes.Equal(got, raw) {
			continue
		}
		// Files whose header parses but whose data are corrupt are shown
		// decompressed and fail with EIO on the bad chunk.
		if errors.Is(err, syscall.EIO) {
			continue
		}
		t.Errorf("%s: %v (%d bytes)", fx.Name, err, len(got))
	}
	if !strings.Contains(logs.String(), "invalid_bad_magic.b2frame: shown raw") {
		t.Errorf("no log line for a file that does not parse:\n%s", logs.String())
	}
}

// TestMountNames checks the listing: mapped names, the collision rule,
// the sparse frame shown as a file.
func TestMountNames(t *testing.T) {
	src, mnt, _ := mountFixtures(t, DefaultOptions())
	// A plain file that collides with a container's stem.
	if err := os.WriteFile(filepath.Join(src, "codec_lz4"), []byte("plain"), 0o644); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]os.DirEntry{}
	for _, e := range ents {
		names[e.Name()] = e
	}
	for _, want := range []string{"codec_zstd", "nd_f64_1d.npy", "sparse_frame", "empty.blp", "empty.blosc", "codec_lz4", "codec_lz4.blp", "MANIFEST.tsv", "invalid_bad_magic.b2frame"} {
		if _, ok := names[want]; !ok {
			t.Errorf("%q missing from the listing", want)
		}
	}
	for _, gone := range []string{"codec_zstd.blp", "nd_f64_1d.b2nd", "sparse_frame.b2frame", "empty"} {
		if _, ok := names[gone]; ok {
			t.Errorf("%q listed", gone)
		}
	}
	if e := names["sparse_frame"]; e == nil || e.IsDir() {
		t.Error("sparse frame not shown as a file")
	}
	// Lookup agrees with the listing for every name.
	var list []string
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	for _, n := range list {
		if _, err := os.Lstat(filepath.Join(mnt, n)); err != nil {
			t.Errorf("listed %q but stat fails: %v", n, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(mnt, "codec_lz4")); string(got) != "plain" {
		t.Errorf("plain file shadowed: %q", got)
	}
}

// TestMountXattrsAndStatfs checks user.bloscfs.* and statfs.
func TestMountXattrsAndStatfs(t *testing.T) {
	_, mnt, _ := mountFixtures(t, DefaultOptions())
	p := filepath.Join(mnt, "codec_zstd_l5")
	buf := make([]byte, 256)
	for attr, want := range map[string]string{
		"user.bloscfs.format": "b2frame", "user.bloscfs.codec": "zstd", "user.bloscfs.clevel": "5",
		"user.bloscfs.typesize": "8", "user.bloscfs.filters": "shuffle", "user.bloscfs.chunksize": "65536",
	} {
		n, err := unix.Getxattr(p, attr, buf)
		if err != nil || string(buf[:n]) != want {
			t.Errorf("%s = %q, %v; want %q", attr, buf[:max(n, 0)], err, want)
		}
	}
	sz, err := unix.Listxattr(p, nil)
	if err != nil || sz == 0 {
		t.Fatalf("listxattr: %d, %v", sz, err)
	}
	var a, b unix.Statfs_t
	if err := unix.Statfs(mnt, &a); err != nil || unix.Statfs(fixtures.Dir(), &b) != nil {
		t.Fatal(err)
	}
	if a.Blocks == 0 || a.Bsize == 0 {
		t.Errorf("statfs is empty: %+v", a)
	}
}

func allOpenView(path string) (*all.View, error) { return all.OpenView(path, pack.NoCache{}) }

// unmountAtEnd unmounts server's mount at mnt when the test ends, also
// after a failure; a mount that will not go is detached.
func unmountAtEnd(t *testing.T, server *Server, mnt string) {
	t.Cleanup(func() {
		if err := server.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
}

// TestMountOptionsBothBackends checks that a local and a remote mount are
// made with the same options from the same Options: the mount flags
// (noatime, …) over nosuid and nodev, the options for the kernel, ro,
// default_permissions with allow_other, the source shown; and that each
// keeps its own ownership rule (the source's modes locally, the mount's
// user in a bucket).
func TestMountOptionsBothBackends(t *testing.T) {
	opts := Options{
		MountFlags:   syscall.MS_NOATIME | syscall.MS_NODIRATIME,
		ExtraOptions: []string{"noexec", "max_read=131072"},
		AllowOther:   true,
		ReadOnly:     true,
		FsName:       "shown",
		AttrTimeout:  3 * time.Second,
	}
	_, local, err := New(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	store, err := remote.New(context.Background(), "bkt", remote.Config{Endpoint: "http://127.0.0.1:1", Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	_, rfs := NewRemote(store, "pre", opts)
	for name, o := range map[string]*gofs.Options{"local": local.mountOptions(), "remote": rfs.f.mountOptions()} {
		mo := o.MountOptions
		if want := uintptr(syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOATIME | syscall.MS_NODIRATIME); mo.DirectMountFlags != want {
			t.Errorf("%s: mount flags %#x, want %#x", name, mo.DirectMountFlags, want)
		}
		for _, want := range []string{"noexec", "max_read=131072", "default_permissions", "ro"} {
			if !slices.Contains(mo.Options, want) {
				t.Errorf("%s: options %v lack %s", name, mo.Options, want)
			}
		}
		if mo.FsName != "shown" || mo.Name != "bloscfs" || !mo.AllowOther || mo.MaxWrite != preferredIO {
			t.Errorf("%s: fsname %q, name %q, allow_other %v, max_write %d", name, mo.FsName, mo.Name, mo.AllowOther, mo.MaxWrite)
		}
		if *o.AttrTimeout != 3*time.Second || *o.EntryTimeout != 3*time.Second {
			t.Errorf("%s: attribute and entry timeouts %v, %v, want 3s", name, *o.AttrTimeout, *o.EntryTimeout)
		}
	}
	// Without flags, the source shown is the mount's source, and go-fuse
	// chooses the flags (its own nosuid and nodev).
	_, local, _ = New(t.TempDir(), Options{})
	_, rfs = NewRemote(store, "pre", Options{})
	for name, want := range map[string]*FS{local.source: local, "s3://bkt/pre/": rfs.f} {
		if mo := want.mountOptions().MountOptions; mo.FsName != name || mo.DirectMountFlags != 0 {
			t.Errorf("default options: fsname %q (want %q), flags %#x", mo.FsName, name, mo.DirectMountFlags)
		}
	}
}

// TestAttributeFlags: FS_IOC_GETFLAGS (lsattr) of a compressed file
// answers the flags of its source, a container file or a sparse frame
// directory, as a plain file passes them through; FS_IOC_FSGETXATTR
// answers too; an ioctl that would change them is refused.
func TestAttributeFlags(t *testing.T) {
	src, mnt, _ := mountFixtures(t, DefaultOptions())
	getFlags := func(path string) (uint32, error) {
		f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		return unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	}
	// FS_NOATIME_FL ('A') and FS_NODUMP_FL ('d') of linux/fs.h.
	const noatime, nodump = 0x80, 0x40
	for view, disk := range map[string]string{"codec_zstd_l5": "codec_zstd_l5.b2frame", "sparse_frame": "sparse_frame.b2frame", "MANIFEST.tsv": "MANIFEST.tsv"} {
		// The source gets flags of its own (noatime, nodump), so that the
		// answer cannot be the flags of nothing.
		sf, err := os.Open(filepath.Join(src, disk))
		if err != nil {
			t.Fatal(err)
		}
		flags, err := unix.IoctlGetUint32(int(sf.Fd()), unix.FS_IOC_GETFLAGS)
		if err != nil {
			t.Fatalf("%s: the source's flags: %v", disk, err)
		}
		if err := unix.IoctlSetPointerInt(int(sf.Fd()), unix.FS_IOC_SETFLAGS, int(flags|noatime|nodump)); err != nil {
			t.Fatalf("%s: setting the source's flags: %v", disk, err)
		}
		want, _ := unix.IoctlGetUint32(int(sf.Fd()), unix.FS_IOC_GETFLAGS)
		sf.Close()
		got, err := getFlags(filepath.Join(mnt, view))
		if err != nil || got != want || got&noatime == 0 {
			t.Errorf("%s: flags %#x, %v; want the source's %#x", view, got, err, want)
		}
	}
	f, err := os.Open(filepath.Join(mnt, "codec_zstd_l5"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var fsx [28]byte
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFSGetXattr, uintptr(unsafe.Pointer(&fsx[0]))); errno != 0 {
		t.Errorf("FS_IOC_FSGETXATTR: %v", errno)
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, 0); err == nil {
		t.Error("FS_IOC_SETFLAGS on a compressed file succeeded")
	}
}
