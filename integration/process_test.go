package integration

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
)

// TestCorruptAndInvalid reads the broken fixtures: one whose header parses
// but whose chunk 0 fails its checksum is shown decompressed under its
// stem and gives EIO, with a log line naming file and chunk, and the
// daemon keeps serving; files that do not parse are shown raw under their
// own names.
func TestCorruptAndInvalid(t *testing.T) {
	requireTool(t, "cat")
	src := copyFixtures(t)
	m := mountDaemon(t, src)
	fxs := loadFixtures(t)
	names := viewNames(t, src)

	bad := m.Path("invalid_blp_bad_checksum")
	if _, err := os.Stat(m.Path("invalid_blp_bad_checksum.blp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("invalid_blp_bad_checksum.blp visible under its full name (stat: %v); it parses, so it is shown as its stem", err)
	}
	for range 2 {
		b, err := os.ReadFile(bad)
		if !errors.Is(err, syscall.EIO) {
			t.Errorf("reading %s: %d bytes, %v; want EIO", bad, len(b), err)
		}
	}
	r := testkit.Run(cmdTimeout, "cat", bad)
	if r.Code == 0 || !strings.Contains(string(r.Stderr), "Input/output error") {
		t.Errorf("cat %s: %v; want a failure with Input/output error", bad, r)
	}
	var line string
	for _, l := range strings.Split(m.LogText(), "\n") {
		if strings.Contains(l, "invalid_blp_bad_checksum.blp") && strings.Contains(l, "chunk 0") {
			line = l
		}
	}
	if line == "" {
		t.Errorf("no log line names invalid_blp_bad_checksum.blp and chunk 0:\n%s", m.LogText())
	} else {
		t.Logf("log: %s", line)
	}

	// The daemon keeps serving.
	good := fixtureByName(t, fxs, "codec_zstd.blp")
	if b, err := os.ReadFile(m.Path("codec_zstd")); err != nil || sha(b) != good.PlainSHA {
		t.Errorf("after the EIO, codec_zstd reads %d bytes, %v (sha %s, want %s)", len(b), err, sha(b), good.PlainSHA)
	}

	// Files that do not parse: raw, under their own names, logged.
	raw := 0
	for _, fx := range fxs {
		if !fx.IsInvalid || isContainer(fx.Path) {
			continue
		}
		raw++
		want, err := os.ReadFile(fx.Path)
		if err != nil {
			t.Fatal(err)
		}
		if e := names[fx.Name]; e.view != fx.Name || e.compressed {
			t.Errorf("%s: expected view %+v", fx.Name, e)
		}
		got, err := os.ReadFile(m.Path(fx.Name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s through the mount: %d bytes, %v; want its %d raw bytes", fx.Name, len(got), err, len(want))
		}
	}
	if raw < 5 {
		t.Errorf("only %d fixtures fail to parse", raw)
	}
	if !strings.Contains(m.LogText(), "invalid_bad_magic.b2frame: shown raw") {
		t.Errorf("no log line for invalid_bad_magic.b2frame being shown raw:\n%s", m.LogText())
	}
	if _, err := os.Stat(m.Path("invalid_bad_magic")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("invalid_bad_magic (stem of a file that does not parse) exists: %v", err)
	}
}

// TestMountBusyMountpoint mounts twice on one mountpoint: the second
// `bloscfs mount` exits 1 with one line naming the mountpoint, and the
// first mount keeps working.
func TestMountBusyMountpoint(t *testing.T) {
	src := copyFixtures(t)
	m := mountDaemon(t, src)
	r := testkit.Run(30*time.Second, bin, "mount", "--log", filepath.Join(t.TempDir(), "log2"), src, m.Dir)
	msg := strings.TrimSpace(string(r.Stderr))
	if r.Code != 1 || !strings.Contains(msg, m.Dir) || !strings.Contains(msg, "busy") || strings.Contains(msg, "\n") {
		t.Errorf("second mount on %s: %v; want exit 1 and one line naming the mountpoint as busy", m.Dir, r)
	}
	// The second daemon reported its error; give it time to exit.
	testkit.Eventually(t, 5*time.Second, func() bool { return countServers(m.Dir) <= 1 })
	if n := countServers(m.Dir); n != 1 {
		t.Errorf("%d processes serve %s after the failed mount, want 1", n, m.Dir)
	}
	fx := fixtureByName(t, loadFixtures(t), "codec_lz4.blp")
	if b, err := os.ReadFile(m.Path("codec_lz4")); err != nil || sha(b) != fx.PlainSHA {
		t.Errorf("first mount after the failed second one: %d bytes, %v", len(b), err)
	}
}

// countServers counts the processes serving mnt.
func countServers(mnt string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && mounttest.ServesMount(pid, mnt) {
			n++
		}
	}
	return n
}

// TestReadOnly mounts with -o ro and with --read-only: creating, writing
// and removing fail with EROFS and the source is untouched; reads work and
// the log gets the "serving" line.
func TestReadOnly(t *testing.T) {
	requireTool(t, "touch")
	for _, flags := range [][]string{{"-o", "ro"}, {"--read-only"}} {
		t.Run(strings.Join(flags, ""), func(t *testing.T) {
			src := copyFixtures(t)
			m := mountDaemon(t, src, flags...)
			if !slices.Contains(mounttest.Options(m.Dir), "ro") {
				t.Errorf("/proc/mounts options of %s: %v, want ro", m.Dir, mounttest.Options(m.Dir))
			}
			r := testkit.Run(cmdTimeout, "touch", m.Path("newfile"))
			if r.Code == 0 || !strings.Contains(string(r.Stderr), "Read-only file system") {
				t.Errorf("touch on a read-only mount: %v; want Read-only file system", r)
			}
			if err := os.WriteFile(m.Path("newfile2"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
				t.Errorf("create: %v, want EROFS", err)
			}
			if f, err := os.OpenFile(m.Path("MANIFEST.tsv"), os.O_WRONLY, 0); !errors.Is(err, syscall.EROFS) {
				t.Errorf("open a plain file for writing: %v, want EROFS", err)
				if f != nil {
					f.Close()
				}
			}
			if f, err := os.OpenFile(m.Path("codec_zstd"), os.O_RDWR, 0); !errors.Is(err, syscall.EROFS) {
				t.Errorf("open a compressed file for writing: %v, want EROFS", err)
				if f != nil {
					f.Close()
				}
			}
			if err := os.Remove(m.Path("codec_zstd")); !errors.Is(err, syscall.EROFS) {
				t.Errorf("unlink: %v, want EROFS", err)
			}
			if err := os.Mkdir(m.Path("d"), 0o755); !errors.Is(err, syscall.EROFS) {
				t.Errorf("mkdir: %v, want EROFS", err)
			}
			for _, n := range []string{"newfile", "newfile2", "newfile.b2frame", "newfile2.b2frame", "d"} {
				if _, err := os.Lstat(filepath.Join(src, n)); err == nil {
					t.Errorf("%s appeared in the source of a read-only mount", n)
				}
			}
			if _, err := os.Stat(filepath.Join(src, "codec_zstd.blp")); err != nil {
				t.Errorf("source file gone: %v", err)
			}
			fx := fixtureByName(t, loadFixtures(t), "codec_zstd.blp")
			if b, err := os.ReadFile(m.Path("codec_zstd")); err != nil || sha(b) != fx.PlainSHA {
				t.Errorf("read on a read-only mount: %d bytes, %v", len(b), err)
			}
			if want := "serving " + src + " at " + m.Dir; !strings.Contains(m.LogText(), want) {
				t.Errorf("--log file has no %q:\n%s", want, m.LogText())
			}
		})
	}
}

// TestForegroundSIGTERM runs `bloscfs mount -f`, reads through it, sends
// SIGTERM: the process unmounts, logs it and exits 0.
func TestForegroundSIGTERM(t *testing.T) {
	src := copyFixtures(t)
	m := mountForeground(t, bin, src)
	fx := fixtureByName(t, loadFixtures(t), "default_api_f64.blp")
	if b, err := os.ReadFile(m.Path("default_api_f64")); err != nil || sha(b) != fx.PlainSHA {
		t.Errorf("read through the -f mount: %d bytes, %v", len(b), err)
	}
	if err := m.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !m.WaitExit(15 * time.Second) {
		t.Fatal("bloscfs mount -f still runs 15s after SIGTERM")
	}
	if m.ExitErr != nil {
		out, _ := os.ReadFile(m.Out)
		t.Errorf("bloscfs mount -f exited with %v after SIGTERM, want 0:\n%s", m.ExitErr, out)
	}
	if mounttest.IsMounted(m.Dir) {
		t.Errorf("%s still mounted after SIGTERM", m.Dir)
	}
	if !strings.Contains(m.LogText(), "unmounted "+m.Dir) {
		t.Errorf("the log does not say the mount was unmounted:\n%s", m.LogText())
	}
}

// TestForegroundSIGTERMAtOnce sends `bloscfs mount -f` SIGTERM the
// moment its mount appears, ten times: the signal must be handled (the
// mount unmounted, exit 0) however early it comes. Handlers installed
// after the mount was made left a window in which SIGTERM killed the
// daemon and left its mount behind, dead (TestForegroundSIGTERM met it
// once in CI).
func TestForegroundSIGTERMAtOnce(t *testing.T) {
	setup.Require(t)
	src := copyFixtures(t)
	for round := range 10 {
		dir := mounttest.NewMountpoint(t)
		m := mounttest.Expect(t, bin, src, dir)
		cmd := exec.Command(bin, "mount", "-f", "--log", filepath.Join(t.TempDir(), "log"), src, dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		m.PID = cmd.Process.Pid
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		deadline := time.Now().Add(30 * time.Second)
		for !mounttest.IsMounted(dir) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("round %d: %s not mounted after 30s:\n%s", round, dir, out.String())
			}
			time.Sleep(20 * time.Microsecond)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("round %d: bloscfs mount -f exited with %v after SIGTERM at once, want 0:\n%s", round, err, out.String())
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("round %d: bloscfs mount -f still runs 15s after SIGTERM", round)
		}
		if mounttest.IsMounted(dir) {
			t.Errorf("round %d: %s still mounted after SIGTERM at once", round, dir)
		}
	}
}

// TestAllowOther checks that another user (nobody) cannot read a default
// mount but can read one made with -o allow_other, which also carries
// default_permissions.
func TestAllowOther(t *testing.T) {
	requireTool(t, "cat")
	uid, gid := uint32(65534), uint32(65534)
	if u, err := user.Lookup("nobody"); err == nil {
		if v, err := strconv.Atoi(u.Uid); err == nil {
			uid = uint32(v)
		}
		if v, err := strconv.Atoi(u.Gid); err == nil {
			gid = uint32(v)
		}
	}
	fx := fixtureByName(t, loadFixtures(t), "codec_lz4.blp")
	catAs := func(path string) testkit.Result {
		cmd := exec.Command("cat", path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		return testkit.RunCmd(cmdTimeout, cmd)
	}
	// nobody must be able to walk down to the mountpoints.
	openUp := func(m *mount) {
		for d := filepath.Dir(m.Dir); d != os.TempDir() && d != "/" && len(d) > 1; d = filepath.Dir(d) {
			os.Chmod(d, 0o755)
		}
	}
	src := copyFixtures(t)

	plain := mountDaemon(t, src)
	openUp(plain)
	if r := catAs(plain.Path("codec_lz4")); r.Code == 0 || !strings.Contains(string(r.Stderr), "Permission denied") {
		t.Errorf("nobody reading a mount without allow_other: %v; want Permission denied", r)
	}

	m := mountDaemon(t, src, "-o", "allow_other")
	openUp(m)
	opts := mounttest.Options(m.Dir)
	for _, want := range []string{"allow_other", "default_permissions"} {
		if !slices.Contains(opts, want) {
			t.Errorf("/proc/mounts options of %s: %v; want %s", m.Dir, opts, want)
		}
	}
	r := catAs(m.Path("codec_lz4"))
	if r.Err != nil || sha(r.Stdout) != fx.PlainSHA {
		t.Errorf("nobody reading with allow_other: %v, %d bytes (sha %s, want %s)", r, len(r.Stdout), sha(r.Stdout), fx.PlainSHA)
	}
	// default_permissions: the source's mode bits apply to nobody.
	if err := os.Chmod(filepath.Join(src, "codec_zstd.blp"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := catAs(m.Path("codec_zstd")); r.Code == 0 {
		t.Errorf("nobody read a 0600 root file through allow_other,default_permissions: %v", r)
	}
}

// TestStatfsLsXattrs checks df (statfs reports the source filesystem),
// ls -l (plain sizes) and the user.bloscfs.* extended attributes.
func TestStatfsLsXattrs(t *testing.T) {
	requireTool(t, "df")
	requireTool(t, "ls")
	src := copyFixtures(t)
	m := mountDaemon(t, src)
	fxs := loadFixtures(t)
	names := viewNames(t, src)

	// df: the mount's size is the source filesystem's.
	out := mustRun(t, "df", "-P", "-k", m.Dir)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 6 || f[5] != m.Dir {
		t.Fatalf("df -P %s:\n%s", m.Dir, out)
	}
	kb, _ := strconv.ParseInt(f[1], 10, 64)
	var sm, ss unix.Statfs_t
	if err := unix.Statfs(m.Dir, &sm); err != nil {
		t.Fatal(err)
	}
	if err := unix.Statfs(src, &ss); err != nil {
		t.Fatal(err)
	}
	if kb <= 0 || sm.Blocks != ss.Blocks || sm.Bsize != ss.Bsize {
		t.Errorf("df shows %d KiB; statfs of the mount %d blocks of %d, of the source %d of %d", kb, sm.Blocks, sm.Bsize, ss.Blocks, ss.Bsize)
	}

	// ls -l: the plain size of every compressed file.
	out = mustRun(t, "ls", "-ln", "--time-style=+", m.Dir)
	sizes := map[string]int64{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 && strings.HasPrefix(f[0], "-") {
			n, _ := strconv.ParseInt(f[4], 10, 64)
			sizes[f[len(f)-1]] = n
		}
	}
	checked := 0
	for _, fx := range fxs {
		if !fx.ValidPlain {
			continue
		}
		view := names[diskName(fx)].view
		want := fx.PlainSize
		if fx.Kind == "b2nd" {
			want = int64(len(unpacked(t, fx.Path)))
		}
		if got, ok := sizes[view]; !ok || got != want {
			t.Errorf("ls -l %s: size %d (listed %v), want %d", view, got, ok, want)
		}
		checked++
	}

	// user.bloscfs.* attributes against the manifest.
	xattr := func(path, name string) string {
		buf := make([]byte, 256)
		n, err := unix.Getxattr(path, "user.bloscfs."+name, buf)
		if err != nil {
			return "error: " + err.Error()
		}
		return string(buf[:n])
	}
	cases := []struct {
		disk  string
		attrs map[string]string
	}{
		{"codec_zstd_l5.b2frame", map[string]string{"format": "b2frame", "codec": "zstd", "clevel": "5", "typesize": "8", "filters": "shuffle", "chunksize": "65536"}},
		{"filter_bitshuffle.b2frame", map[string]string{"filters": "bitshuffle"}},
		{"checksum_sha256.blp", map[string]string{"checksum": "sha256", "codec": "blosclz"}},
		{"chunks_5000.b2frame", map[string]string{"chunks": "5000", "chunksize": "256", "typesize": "4", "codec": "blosclz"}},
		{"sparse_frame.b2frame", map[string]string{"chunks": "4"}},
		{"nd_i32_2d.b2nd", map[string]string{"codec": "lz4", "typesize": "4"}},
	}
	for _, c := range cases {
		fx := fixtureByName(t, fxs, c.disk)
		p := m.Path(names[c.disk].view)
		for k, want := range c.attrs {
			if got := xattr(p, k); got != want {
				t.Errorf("%s user.bloscfs.%s = %q, want %q", p, k, got, want)
			}
		}
		if fx.Kind != "b2nd" {
			if got := xattr(p, "size"); got != strconv.FormatInt(fx.PlainSize, 10) {
				t.Errorf("%s user.bloscfs.size = %q, want %d", p, got, fx.PlainSize)
			}
		}
		if !fx.IsDir {
			st, _ := os.Stat(fx.Path)
			if got := xattr(p, "compressed_size"); got != strconv.FormatInt(st.Size(), 10) {
				t.Errorf("%s user.bloscfs.compressed_size = %q, want the source's %d", p, got, st.Size())
			}
		}
		buf := make([]byte, 4096)
		n, err := unix.Listxattr(p, buf)
		if err != nil || !slices.Contains(strings.Split(string(buf[:n]), "\x00"), "user.bloscfs.format") {
			t.Errorf("listxattr %s: %q, %v; want user.bloscfs.format among them", p, buf[:max(n, 0)], err)
		}
	}
	// Blosc2 frames record codec (lz4 and lz4hc apart, unlike Blosc1
	// chunks and Bloscpack files), clevel and typesize in their header:
	// every frame fixture's attributes match the parameters it was
	// written with.
	frames := 0
	for _, fx := range fxs {
		if fx.Kind != "b2frame" && fx.Kind != "sframe" {
			continue
		}
		p := m.Path(names[diskName(fx)].view)
		for _, k := range []string{"codec", "clevel", "typesize"} {
			if want, ok := fx.Params[k]; ok {
				if got := xattr(p, k); got != want {
					t.Errorf("%s user.bloscfs.%s = %q; %s was written with %s=%s", p, k, got, fx.Name, k, want)
				}
			}
		}
		frames++
	}
	t.Logf("ls -l sizes of %d files, xattrs of %d files and %d frames", checked, len(cases), frames)
}
