package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/spf13/pflag"
	"io"
	"log"
	"os"
	"path"
	"path/filepath"
	rdebug "runtime/debug"
	"sort"
	"strings"
	"time"

	bfs "github.com/bloscfs/bloscfs/fs"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/remote"
)

// remoteFlags are the object-store flags of the commands that take
// s3://BUCKET/KEY locations. Credentials have no flags: they come from the
// environment or the AWS profile files, so that they never show in ps.
type remoteFlags struct {
	endpoint  *string
	pathStyle *pathStyle
	anonymous *bool
	region    *string
	dirCache  *time.Duration
	cacheSize *sizeFlag
	timeout   *time.Duration
	cacheDir  *absPath
	dirSize   *sizeFlag
}

// sizeFlag is a size of at least min bytes, checked as the flags are
// parsed (a mount checks it before it looks at SOURCE).
type sizeFlag struct {
	s   string
	min int64
}

// newSizeFlag adds a size flag to fs.
func newSizeFlag(fs *pflag.FlagSet, name, def string, min int64, usage string) *sizeFlag {
	f := &sizeFlag{def, min}
	fs.Var(f, name, usage)
	return f
}

func (f *sizeFlag) String() string { return f.s }

// Type names the value in the help (pflag.Value).
func (f *sizeFlag) Type() string { return "SIZE" }

func (f *sizeFlag) Set(s string) error {
	if n, err := parseSize(s); err != nil || n < f.min {
		return fmt.Errorf("takes %s, at least %s", sizeHint, humanBytes(f.min))
	}
	f.s = s
	return nil
}

// pathStyle is --s3-path-style: "", or true or false.
type pathStyle string

func (p *pathStyle) String() string { return string(*p) }

// Type names the value in the help (pflag.Value).
func (p *pathStyle) Type() string { return "BOOL" }

func (p *pathStyle) Set(s string) error {
	switch s {
	case "true", "1", "yes", "false", "0", "no":
		*p = pathStyle(s)
		return nil
	}
	return errors.New("takes true or false")
}

// absPath is a flag holding a path made absolute when it is parsed (the
// mount daemon runs in /).
type absPath string

func (a *absPath) String() string { return string(*a) }

// Type names the value in the help (pflag.Value).
func (a *absPath) Type() string { return "DIR" }

func (a *absPath) Set(s string) error {
	if s == "" {
		*a = ""
		return nil
	}
	p, err := filepath.Abs(s)
	*a = absPath(p)
	return err
}

// Which object-store flags a command takes: each lists only those it
// uses.
const (
	// remoteConn: where the store is and how to talk to it (every command
	// with an s3:// location: pack's upload, info's one-shot reads).
	remoteConn = iota
	// remoteRead: and the caches of fetched ranges (unpack and verify
	// read whole objects).
	remoteRead
	// remoteMount: and how long listings are reused (a mount).
	remoteMount
)

// addRemoteFlagsFor adds the object-store flags of level (remoteConn,
// remoteRead or remoteMount) to a command's flag set, and returns them,
// to be read once the flags are parsed (config).
func addRemoteFlagsFor(fs *pflag.FlagSet, level int) *remoteFlags {
	rflags := &remoteFlags{
		endpoint:  fs.String("endpoint", "", "S3 endpoint URL for s3:// locations (default: AWS_ENDPOINT_URL)"),
		anonymous: fs.Bool("anonymous", false, "send unsigned requests (public buckets)"),
		region:    fs.String("region", "", "S3 region (default: AWS_REGION, the profile's, or us-east-1)"),
		pathStyle: new(pathStyle),
	}
	fs.Var(rflags.pathStyle, "s3-path-style", "path-style addressing: true or false (default: true with a custom endpoint)")
	if level >= remoteMount {
		rflags.dirCache = fs.Duration("dir-cache", 60*time.Second, "how long a remote listing is reused")
	}
	if level >= remoteRead {
		rflags.cacheSize = newSizeFlag(fs, "remote-cache-size", "256MiB", 1<<20, "memory for fetched compressed ranges")
	}
	rflags.timeout = fs.Duration("request-timeout", 30*time.Second, "deadline of one request to the store")
	if level >= remoteRead {
		rflags.dirSize = newSizeFlag(fs, "cache-dir-size", "4GiB", 1<<20, "bound of --cache-dir")
		rflags.cacheDir = new(absPath)
		fs.Var(rflags.cacheDir, "cache-dir", "keep fetched ranges of remote objects in this directory too, across mounts")
	}
	return rflags
}

// config returns the store configuration the parsed flags ask for
// (without a logger: openStore's default, or the mount's).
func (f *remoteFlags) config() (remote.Config, error) {
	var cfg remote.Config
	cfg.Endpoint, cfg.Anonymous, cfg.Region = *f.endpoint, *f.anonymous, *f.region
	cfg.RequestTimeout = *f.timeout
	if f.dirCache != nil {
		if cfg.DirCache = *f.dirCache; cfg.DirCache == 0 {
			cfg.DirCache = -1
		}
	}
	switch string(*f.pathStyle) {
	case "":
	case "true", "1", "yes":
		t := true
		cfg.PathStyle = &t
	case "false", "0", "no":
		t := false
		cfg.PathStyle = &t
	default:
		return cfg, badFlag("s3-path-style", string(*f.pathStyle), "takes true or false")
	}
	if f.cacheSize == nil {
		return cfg, nil // the store's defaults: a one-shot command
	}
	var err error
	if cfg.CacheSize, err = parseSize(f.cacheSize.s); err != nil {
		return cfg, badFlag("remote-cache-size", f.cacheSize.s, err.Error())
	}
	cfg.CacheDir = string(*f.cacheDir)
	if cfg.CacheDirSize, err = parseSize(f.dirSize.s); err != nil {
		return cfg, badFlag("cache-dir-size", f.dirSize.s, err.Error())
	}
	return cfg, nil
}

// openStore returns the store of an s3:// location and the key in it;
// without a logger in cfg, the store logs to stderr.
func openStore(u string, cfg remote.Config) (*remote.Store, string, error) {
	bucket, key, ok := remote.ParseURL(u)
	if !ok {
		return nil, "", fmt.Errorf("%w: %q is not s3://BUCKET[/KEY]", errUsage, u)
	}
	if cfg.Logger == nil {
		cfg.Logger = log.New(os.Stderr, "bloscfs: ", 0)
	}
	s, err := remote.New(context.Background(), bucket, cfg)
	if err != nil {
		return nil, "", err
	}
	return s, key, nil
}

// openRemoteContainer opens the container in an object.
func openRemoteContainer(u string, cfg remote.Config, cache pack.BlockCache) (pack.Container, *remote.Object, error) {
	s, key, err := openStore(u, cfg)
	if err != nil {
		return nil, nil, err
	}
	o, err := s.Open(context.Background(), key)
	if err != nil {
		return nil, nil, err
	}
	c, err := pack.Open(o, o.Size, o.Name(), cache)
	o.Opened()
	return c, o, err
}

// openView opens the view of a local path or an s3:// object (through the
// store cfg configures).
func openView(p string, cfg remote.Config, cache pack.BlockCache) (*all.View, error) {
	if !remote.IsURL(p) {
		return all.OpenView(followArg(p), cache)
	}
	s, key, err := openStore(p, cfg)
	if err != nil {
		return nil, err
	}
	o, err := s.Open(context.Background(), key)
	if err != nil {
		return nil, err
	}
	v, err := all.OpenViewReader(o, o.Size, o.Name(), cache)
	o.Opened()
	return v, err
}

// openContainer opens the container of a local path or an s3:// object
// (through the store cfg configures).
func openContainer(p string, cfg remote.Config, cache pack.BlockCache) (pack.Container, io.Closer, error) {
	if !remote.IsURL(p) {
		return pack.OpenPath(followArg(p), cache)
	}
	c, _, err := openRemoteContainer(p, cfg, cache)
	if err != nil {
		return nil, nil, err
	}
	return c, io.NopCloser(nil), nil
}

// remoteUnpackName is unpack's default output for an object: its plain
// name in the current directory.
func remoteUnpackName(u string) string {
	_, key, _ := remote.ParseURL(u)
	base := path.Base(strings.TrimRight(key, "/"))
	if name, ok := all.PlainName(base); ok {
		return name
	}
	return base + ".out"
}

// verifyRemote verifies an object, or every container under a prefix
// (an object with a container suffix or magic bytes).
func verifyRemote(u string, cfg remote.Config, stderr io.Writer) []verifyRecord {
	if src, inner, ok := treeArg(u); ok {
		recs, _ := verifyTree(src, inner, cfg, stderr)
		return recs
	}
	s, key, err := openStore(u, cfg)
	if err != nil {
		return []verifyRecord{{Path: u, Error: oneLine(err)}}
	}
	ctx := context.Background()
	if key != "" && !strings.HasSuffix(key, "/") {
		if _, err := s.Stat(ctx, key); err == nil {
			return []verifyRecord{verifyOne(u, cfg, stderr)}
		}
		key += "/"
	}
	var recs []verifyRecord
	var walk func(prefix string) error
	walk = func(prefix string) error {
		l, err := s.List(ctx, prefix)
		if err != nil {
			return err
		}
		names := make([]string, 0, len(l.Objects))
		for n := range l.Objects {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			info := l.Objects[n]
			if treeNamed(n, false) {
				if trs, err := verifyTree(s.Name(info.Key), "", cfg, stderr); !errors.Is(err, pack.ErrFormat) {
					recs = append(recs, trs...)
				}
				continue
			}
			if _, ok := all.PlainName(n); !ok {
				o := s.OpenInfo(info)
				head := make([]byte, min(info.Size, pack.HeadLen))
				if _, err := o.ReadAt(head, 0); err != nil && err != io.EOF {
					recs = append(recs, verifyRecord{Path: s.Name(info.Key), Error: oneLine(err)})
					continue
				}
				if fm := pack.Sniff(head); fm == nil || fm.Name == "chunk" {
					continue
				}
			}
			recs = append(recs, verifyOne(s.Name(info.Key), cfg, stderr))
		}
		subs := make([]string, 0, len(l.Prefixes))
		for p := range l.Prefixes {
			subs = append(subs, p)
		}
		sort.Strings(subs)
		for _, p := range subs {
			if treeNamed(p, true) {
				if trs, err := verifyTree(s.Name(prefix+p+"/"), "", cfg, stderr); !errors.Is(err, pack.ErrFormat) {
					recs = append(recs, trs...)
					continue
				}
			}
			if err := walk(prefix + p + "/"); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(key); err != nil {
		recs = append(recs, verifyRecord{Path: u, Error: oneLine(err)})
	}
	if len(recs) == 0 {
		recs = append(recs, verifyRecord{Path: u, Error: "no object or container under this location"})
	}
	return recs
}

// runPackRemote runs pack to an s3:// OUT: the container is written to a
// temporary local file (the writers seek back to fill their headers),
// then uploaded (in parts when large; a failed upload leaves no object).
func runPackRemote(c *packConfig, stderr io.Writer) error {
	_, key, _ := remote.ParseURL(c.out) // checked by parsePack
	tmpDir, err := os.MkdirTemp("", "bloscfs-pack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmpDir)
	local := *c
	local.out = filepath.Join(tmpDir, path.Base(key))
	if err := runPack(&local, stderr); err != nil {
		return err
	}
	s, _, err := openStore(c.out, c.store)
	if err != nil {
		return err
	}
	f, err := os.Open(local.out)
	if err != nil {
		return err
	}
	defer f.Close()
	return s.Upload(context.Background(), key, f)
}

// mountRemote mounts s3://BUCKET[/PREFIX] in the foreground process, with
// the store cfg configures.
func mountRemote(u, mnt string, o bfs.Options, cfg remote.Config) (*bfs.Server, *bfs.RemoteFS, error) {
	cfg.Logger = o.Logger
	s, prefix, err := openStore(u, cfg)
	if err != nil {
		return nil, nil, err
	}
	o.FsName = strings.ReplaceAll(u, ",", "_")
	// The heap also holds fetched ranges and read-ahead GETs in flight.
	if os.Getenv("GOMEMLIMIT") == "" {
		rdebug.SetMemoryLimit(o.CacheSize + cfg.CacheSize + 48<<20)
	}
	return bfs.MountRemote(s, prefix, mnt, o)
}
