package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/syslog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	rdebug "runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	bfs "github.com/bloscfs/bloscfs/fs"
	"github.com/bloscfs/bloscfs/remote"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// notifyEnv tells a re-executed child which fd reports readiness.
const notifyEnv = "BLOSCFS_NOTIFY_FD"

// parseInterspersed parses flags that may come before, between or after
// the positional arguments, and returns the positionals.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func cmdMount(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("mount", stderr)
	fg := fs.Bool("f", false, "stay in the foreground")
	opts := fs.String("o", "", "mount options: ro, allow_other, and options for the kernel (comma-separated)")
	cacheSize := fs.String("cache-size", "512MiB", "size of the decoded-block cache")
	readOnly := fs.Bool("read-only", false, "refuse every change (as -o ro)")
	logFile := fs.String("log", "", "log to this file (default: stderr in the foreground, syslog in the background)")
	debug := fs.Bool("debug", false, "log every FUSE request")
	readAhead := fs.String("read-ahead", "4MiB", "bytes decoded ahead of a sequential reader")
	newFormat := fs.String("new-format", "b2frame", "how files created in the mount are stored: b2frame, blp, or none (plain)")
	codec := fs.String("codec", "zstd", "codec of new files: blosclz, lz4, lz4hc, zlib, zstd")
	clevel := fs.Int("clevel", 5, "compression level of new files, 0-9")
	filter := fs.String("filter", "shuffle", "filters of new files (as for pack)")
	typesize := fs.Int("typesize", 8, "element size of new files")
	chunkSize := fs.String("chunk-size", "1MiB", "chunk size of new files")
	addRemoteFlags(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return fmt.Errorf("%w: mount [flags] SOURCE MOUNTPOINT", errUsage)
	}
	o := bfs.DefaultOptions()
	if o.CacheSize, err = parseSize(*cacheSize); err != nil || o.CacheSize < 1<<20 {
		return fmt.Errorf("%w: --cache-size %q (at least 1MiB)", errUsage, *cacheSize)
	}
	if o.ReadAhead, err = parseSize(*readAhead); err != nil {
		return fmt.Errorf("%w: --read-ahead %q", errUsage, *readAhead)
	}
	o.ReadOnly, o.Debug = *readOnly, *debug
	switch bfs.NewFormat(*newFormat) {
	case bfs.NewB2Frame, bfs.NewBlp, bfs.NewPlain:
		o.NewFormat = bfs.NewFormat(*newFormat)
	default:
		return fmt.Errorf("%w: --new-format %q (b2frame, blp or none)", errUsage, *newFormat)
	}
	c, ok := blosc.CodecByName(*codec)
	if !ok || c > blosc.CodecZstd || c == blosc.CodecSnappy {
		return fmt.Errorf("%w: --codec %q", errUsage, *codec)
	}
	o.NewParams = blosc.Params{Codec: c, Clevel: *clevel, Typesize: *typesize, Split: blosc.SplitAuto}
	if o.NewParams.Filters, o.NewParams.FiltersMeta, err = parseFilters(*filter, *typesize); err != nil {
		return err
	}
	if o.NewFormat == bfs.NewBlp {
		o.NewParams.Blosc1, o.NewParams.Split = true, blosc.SplitForwardCompat
	}
	if err := blosc.ValidateParams(o.NewParams); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if o.NewChunkSize, err = parseSize(*chunkSize); err != nil || o.NewChunkSize <= 0 || o.NewChunkSize > 1<<31-64 {
		return fmt.Errorf("%w: --chunk-size %q", errUsage, *chunkSize)
	}
	for _, opt := range strings.Split(*opts, ",") {
		switch opt = strings.TrimSpace(opt); opt {
		case "":
		case "ro":
			o.ReadOnly = true
		case "rw":
			o.ReadOnly = false
		case "allow_other":
			o.AllowOther = true
		case "default_permissions":
			// implied by allow_other
		case "debug":
			o.Debug = true
		default:
			o.ExtraOptions = append(o.ExtraOptions, opt)
		}
	}
	if !*fg {
		// The daemon runs in /, so that it holds no directory busy: hand
		// it absolute paths and the flags as parsed.
		if *logFile != "" {
			if *logFile, err = filepath.Abs(*logFile); err != nil {
				return err
			}
		}
		var child []string
		fs.Visit(func(f *flag.Flag) { child = append(child, "-"+f.Name+"="+f.Value.String()) })
		src, err := filepath.Abs(pos[0])
		if err != nil {
			return err
		}
		if remote.IsURL(pos[0]) {
			src = pos[0]
		}
		mnt, err := filepath.Abs(pos[1])
		if err != nil {
			return err
		}
		return daemonize(append(child, "--", src, mnt), stderr)
	}
	// Decoded blocks are garbage once evicted; without a limit the Go heap
	// grows to about twice the live cache before collecting. Keep it near
	// the cache size (unless GOMEMLIMIT says otherwise).
	if os.Getenv("GOMEMLIMIT") == "" {
		rdebug.SetMemoryLimit(o.CacheSize + 48<<20)
	}
	notify := notifier()
	logger, closeLog, err := openLog(*logFile, notify != nil, stderr)
	if err != nil {
		notify.fail(err)
		return err
	}
	defer closeLog()
	o.Logger = logger
	var server *fuse.Server
	if remote.IsURL(pos[0]) {
		server, err = mountRemote(pos[0], pos[1], o)
	} else {
		server, _, err = bfs.Mount(pos[0], pos[1], o)
	}
	if err != nil {
		notify.fail(err)
		return err
	}
	logger.Printf("serving %s at %s", pos[0], pos[1])
	notify.ready()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			logger.Printf("%v: unmounting %s", s, pos[1])
			if err := server.Unmount(); err != nil {
				logger.Printf("could not unmount %s: %v (close the files open there and try again)", pos[1], err)
				continue
			}
			return
		}
	}()
	server.Wait()
	logger.Printf("unmounted %s", pos[1])
	return nil
}

// openLog returns the logger of a mount: --log's file, else stderr in
// the foreground, else syslog (or nothing when syslog is unavailable).
func openLog(path string, background bool, stderr io.Writer) (*log.Logger, func(), error) {
	if path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, err
		}
		return log.New(f, "bloscfs: ", log.LstdFlags), func() { f.Close() }, nil
	}
	if !background {
		return log.New(stderr, "bloscfs: ", log.LstdFlags), func() {}, nil
	}
	if w, err := syslog.New(syslog.LOG_INFO|syslog.LOG_DAEMON, "bloscfs"); err == nil {
		return log.New(w, "", 0), func() { w.Close() }, nil
	}
	return log.New(io.Discard, "", 0), func() {}, nil
}

// readyPipe is the write end of the pipe to the parent that started this
// daemon (nil in a plain foreground run).
type readyPipe struct{ f *os.File }

func notifier() *readyPipe {
	fd := os.Getenv(notifyEnv)
	if fd == "" {
		return nil
	}
	os.Unsetenv(notifyEnv)
	var n int
	if _, err := fmt.Sscan(fd, &n); err != nil {
		return nil
	}
	return &readyPipe{os.NewFile(uintptr(n), "notify")}
}

func (p *readyPipe) ready() {
	if p != nil {
		fmt.Fprintln(p.f, "ok")
		p.f.Close()
	}
}

func (p *readyPipe) fail(err error) {
	if p != nil {
		fmt.Fprintln(p.f, "error:", oneLine(err))
		p.f.Close()
	}
}

// daemonize runs this command again in the foreground, detached, and
// returns once it reports that the mount is ready (as gocryptfs does).
func daemonize(args []string, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer devnull.Close()
	cmd := exec.Command(exe, append([]string{"mount", "-f"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.ExtraFiles = []*os.File{w} // fd 3
	cmd.Env = append(os.Environ(), notifyEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		w.Close()
		return err
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	line, rerr := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case line == "ok":
		cmd.Process.Release()
		return nil
	case strings.HasPrefix(line, "error: "):
		return errors.New(strings.TrimPrefix(line, "error: "))
	}
	select {
	case err := <-exited:
		return fmt.Errorf("the mount process exited before the mount was ready: %v", err)
	case <-time.After(time.Second):
		return fmt.Errorf("the mount process did not report (%v)", rerr)
	}
}

func cmdUnmount(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("unmount", stderr)
	lazy := fs.Bool("l", false, "lazy: detach now, clean up when no longer busy")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: unmount MOUNTPOINT", errUsage)
	}
	mnt := fs.Arg(0)
	flags := 0
	if *lazy {
		flags = syscall.MNT_DETACH
	}
	err := syscall.Unmount(mnt, flags)
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.EPERM) {
		// Not root: the setuid helper of fuse3 can unmount our own mounts.
		args := []string{"-u", mnt}
		if *lazy {
			args = []string{"-uz", mnt}
		}
		if out, ferr := exec.Command("fusermount3", args...).CombinedOutput(); ferr == nil {
			return nil
		} else {
			return fmt.Errorf("%s: %v: %s", mnt, ferr, strings.TrimSpace(string(out)))
		}
	}
	if errors.Is(err, syscall.EBUSY) {
		return fmt.Errorf("%s: busy: files are open there (close them, or use unmount -l)", mnt)
	}
	if errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("%s: not a mountpoint", mnt)
	}
	return fmt.Errorf("%s: %w", mnt, err)
}
