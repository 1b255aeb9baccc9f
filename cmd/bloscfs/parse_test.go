package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	bfs "github.com/bloscfs/bloscfs/fs"
	"github.com/bloscfs/bloscfs/pack/bloscpack"
	"github.com/bloscfs/bloscfs/remote"
)

// abs is filepath.Abs, for the tests' expectations.
func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// defaultStore is the store configuration of a mount without
// object-store flags.
var defaultStore = remote.Config{RequestTimeout: 30 * time.Second, DirCache: 60 * time.Second, CacheSize: 256 << 20, CacheDirSize: 4 << 30}

// TestParseMount checks what mount command lines ask for, without
// mounting: the paths, the options of the mount (-o and flags), the store
// of an s3:// source, the daemon's command line; and the mistakes
// refused, as usage errors.
func TestParseMount(t *testing.T) {
	src, mnt := abs(t, "src"), abs(t, "mnt")
	// The mount flags of -o are mount(2)'s as root, fusermount3's options
	// otherwise.
	noatime := func(o *bfs.Options) bool {
		if os.Geteuid() == 0 {
			return o.MountFlags == syscall.MS_NOATIME
		}
		return slices.Contains(o.ExtraOptions, "noatime")
	}
	for _, c := range []struct {
		args   []string
		check  func(c *mountConfig) bool
		daemon []string // nil: not checked
		err    string   // the usage error, or ""
	}{
		{args: []string{"src", "mnt"}, check: func(c *mountConfig) bool {
			o := c.fs
			return c.source == src && c.mountpoint == mnt && c.given == [2]string{"src", "mnt"} && !c.foreground &&
				o.CacheSize == 512<<20 && o.ReadAhead == 0 && !o.ReadOnly && o.Logger == nil && o.NoSelfAccess &&
				o.NewFormat == bfs.NewB2Frame && o.NewParams.Codec == blosc.CodecZstd && o.NewParams.Clevel == 5 &&
				o.NewParams.Typesize == 8 && o.NewParams.Filters[5] == blosc.FilterShuffle && o.NewChunkSize == 1<<20 &&
				o.NewParams.Blocksize == defaultBlocksize(o.NewParams, 1<<20) && o.MountFlags == 0 && o.ExtraOptions == nil &&
				reflect.DeepEqual(c.store, defaultStore)
		}, daemon: []string{"--", src, mnt}},
		{args: []string{"-f", "-o", "ro,noatime,cache_size=64M,nonempty,auto_unmount,fsname=x,max_read=4096,nofail,x-systemd.automount", "s3://b/p", "mnt"}, check: func(c *mountConfig) bool {
			o := c.fs
			return c.foreground && c.source == "s3://b/p" && c.mountpoint == mnt && o.ReadOnly && noatime(&o) &&
				o.CacheSize == 64<<20 && c.nonempty && c.autoUnmount && o.FsName == "x" && slices.Contains(o.ExtraOptions, "max_read=4096") &&
				!slices.Contains(o.ExtraOptions, "nofail") && c.daemon == nil
		}},
		{args: []string{"--log", "m.log", "--read-only", "-o", "allow_other,cache_size=64M,max_read=4096", "src", "mnt"}, check: func(c *mountConfig) bool {
			return c.logFile == abs(t, "m.log") && c.fs.ReadOnly && c.fs.AllowOther
		}, daemon: []string{"--log=" + abs(t, "m.log"), "--read-only=true", "-o", "allow_other,max_read=4096", "--cache-size=64M", "--", src, mnt}},
		{args: []string{"--new-format", "blp", "--codec", "lz4", "--clevel", "3", "--typesize", "4", "--chunk-size", "2MiB", "src", "mnt"}, check: func(c *mountConfig) bool {
			p := c.fs.NewParams
			return c.fs.NewFormat == bfs.NewBlp && p.Blosc1 && p.Split == blosc.SplitForwardCompat && p.Codec == blosc.CodecLZ4 &&
				p.Clevel == 3 && p.Typesize == 4 && p.Blocksize == 0 && c.fs.NewChunkSize == 2<<20
		}},
		{args: []string{"--endpoint", "http://e", "--s3-path-style", "false", "--anonymous", "--region", "r", "--remote-cache-size", "64MiB",
			"--cache-dir", "cd", "--cache-dir-size", "1GiB", "--dir-cache", "0", "--request-timeout", "5s", "s3://b", "mnt"}, check: func(c *mountConfig) bool {
			f := false
			want := remote.Config{Endpoint: "http://e", PathStyle: &f, Anonymous: true, Region: "r", CacheSize: 64 << 20,
				CacheDir: abs(t, "cd"), CacheDirSize: 1 << 30, DirCache: -1, RequestTimeout: 5 * time.Second}
			return reflect.DeepEqual(c.store, want)
		}},
		{args: []string{"src"}, err: "mount [flags] SOURCE MOUNTPOINT"},
		{args: []string{"--log", "stderr", "src", "mnt"}, err: "--log stderr needs -f"},
		{args: []string{"--log", "mnt/x.log", "-f", "src", "mnt"}, err: "is inside the mountpoint"},
		{args: []string{"--cache-dir", "mnt/c", "src", "mnt"}, err: "is inside the mountpoint"},
		{args: []string{"--cache-size", "1K", "src", "mnt"}, err: `--cache-size "1K"`},
		{args: []string{"--new-format", "zip", "src", "mnt"}, err: `--new-format "zip"`},
		{args: []string{"-o", "clevel=foo", "src", "mnt"}, err: "-o clevel=foo"},
		{args: []string{"-o", "clevel", "src", "mnt"}, err: "-o clevel needs a value"},
		{args: []string{"--codec", "snappy", "src", "mnt"}, err: "snappy is read but not written"},
		{args: []string{"--chunk-size", "3GiB", "src", "mnt"}, err: `--chunk-size "3GiB"`},
		{args: []string{"--new-format", "blp", "--filter", "delta,shuffle", "src", "mnt"}, err: "Bloscpack files hold Blosc1 chunks"},
	} {
		got, err := parseMount(c.args, io.Discard)
		if c.err != "" {
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want a usage error with %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if !c.check(got) {
			t.Errorf("%q: %+v", c.args, *got)
		}
		if c.daemon != nil && !slices.Equal(got.daemon, c.daemon) {
			t.Errorf("%q: daemon %q, want %q", c.args, got.daemon, c.daemon)
		}
	}
}

// TestParsePack checks what pack command lines ask for, without reading
// or writing: OUT and the format from the names, the chunk parameters of
// each format, an s3:// OUT and its store; and the mistakes refused.
func TestParsePack(t *testing.T) {
	adler, _ := bloscpack.ChecksumID("adler32")
	sha, _ := bloscpack.ChecksumID("sha256")
	frameDefault := blosc.Params{Codec: blosc.CodecZstd, Clevel: 5, Typesize: 8, Split: blosc.SplitAuto}
	frameDefault.Filters[5] = blosc.FilterShuffle
	frameDefault.Blocksize = defaultBlocksize(frameDefault, 1<<20)
	blpDefault := blosc.Params{Codec: blosc.CodecBloscLZ, Clevel: 7, Typesize: 8, Blosc1: true, Split: blosc.SplitForwardCompat}
	blpDefault.Filters[5] = blosc.FilterShuffle
	oneShot := remote.Config{RequestTimeout: 30 * time.Second} // the store flags of a one-shot command
	for _, c := range []struct {
		args []string
		want *packConfig
		err  string
	}{
		{args: []string{"in"}, want: &packConfig{in: "in", out: "in.b2frame", format: "b2frame", params: frameDefault, chunk: 1 << 20, checksum: adler, store: oneShot}},
		{args: []string{"-q", "in", "out.blp"}, want: &packConfig{in: "in", out: "out.blp", format: "blp", params: blpDefault, chunk: 1 << 20, checksum: adler, quiet: true, store: oneShot}},
		{args: []string{"x.npy", "--chunkshape", "10,20", "--blockshape", "5,5", "-f"}, want: &packConfig{in: "x.npy", out: "x.b2nd", format: "b2nd", params: func() blosc.Params {
			p := frameDefault
			p.Blocksize = 0
			return p
		}(), chunk: 1 << 20, checksum: adler, chunkShape: "10,20", blockShape: "5,5", force: true, store: oneShot}},
		{args: []string{"--format", "blp", "--checksum", "sha256", "--codec", "zstd", "--clevel", "1", "--typesize", "4", "--filter", "bitshuffle", "--chunk-size", "2MiB", "--block-size", "64KiB", "in"},
			want: &packConfig{in: "in", out: "in.blp", format: "blp", params: func() blosc.Params {
				p := blosc.Params{Codec: blosc.CodecZstd, Clevel: 1, Typesize: 4, Blosc1: true, Split: blosc.SplitForwardCompat, Blocksize: 64 << 10}
				p.Filters[5] = blosc.FilterBitShuffle
				return p
			}(), chunk: 2 << 20, checksum: sha, store: oneShot}},
		{args: []string{"-", "s3://b/k.b2frame", "--endpoint", "http://e"}, want: &packConfig{in: "-", out: "s3://b/k.b2frame", format: "b2frame", params: frameDefault, chunk: 1 << 20, checksum: adler,
			store: remote.Config{Endpoint: "http://e", RequestTimeout: 30 * time.Second}}},
		{args: []string{"-"}, err: "needs OUT"},
		{args: []string{"in", "a", "b"}, err: "pack IN [OUT]"},
		{args: []string{"s3://b/k", "out"}, err: "pack reads a local file"},
		{args: []string{"in", "s3://b/"}, err: "name the object"},
		{args: []string{"in", "s3://b"}, err: "name the object"},
		{args: []string{"--format", "zip", "in"}, err: `--format "zip"`},
		{args: []string{"--checksum", "foo", "in"}, err: `--checksum "foo"`},
		{args: []string{"--chunkshape", "1,x", "in"}, err: `--chunkshape "1,x"`},
		{args: []string{"--block-size", "65MiB", "in"}, err: `--block-size "65MiB"`},
		{args: []string{"--clevel", "12", "in"}, err: `--clevel "12"`},
		{args: []string{"--chunk-size", "0", "in"}, err: `--chunk-size "0"`},
		{args: []string{"--filter", "truncprec:20,shuffle", "--typesize", "2", "in"}, err: "trunc_prec needs typesize 4 or 8"},
		{args: []string{"--dir-cache", "1s", "in"}, err: "unknown flag: --dir-cache"},
	} {
		got, err := parsePack(c.args, io.Discard)
		if c.err != "" {
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want a usage error with %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", c.args, *got, *c.want)
		}
	}
}
