package main

import (
	"bufio"
	"encoding/json"
	"errors"
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
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// notifyEnv tells a re-executed child which fd reports readiness.
const notifyEnv = "BLOSCFS_NOTIFY_FD"

// mountHelp is the description in `bloscfs help mount`.
const mountHelp = `Show SOURCE at MOUNTPOINT with every Blosc container decompressed.
The mount runs in the background once ready (-f: in the foreground, where
SIGINT and SIGTERM unmount). mount.fuse3, /etc/fstab and
'mount -t fuse.bloscfs SOURCE MOUNTPOINT -o OPTIONS' run
'bloscfs SOURCE MOUNTPOINT -o OPTIONS', which is the same command.

-o OPTIONS (comma-separated, may be repeated, may follow the operands):
  ro, rw                  refuse every change / allow changes (default)
  allow_other             let other users in (adds default_permissions)
  nonempty                mount over a directory that is not empty
  debug                   as --debug
  cache_size=, read_ahead=, new_format=, log=, codec=, clevel=, filter=
  (a + for a comma: filter=delta+shuffle), typesize=, chunk_size=
                          as the flags of the same names
  fsname=NAME             the source shown in /proc/mounts
  noatime, nodiratime, relatime, strictatime, lazytime, sync, dirsync,
  nosuid, nodev, noexec   mount flags
  defaults, auto, noauto, nofail, _netdev, user, users, nouser, owner,
  group, dev, suid, exec, x-*, comment=*
                          mount(8)'s and systemd's options: ignored
  auto_unmount            should the daemon die (kill -9, out of memory),
                          unmount the dead mount, leaving the mountpoint
                          an empty directory again (through fusermount3,
                          which stays beside the daemon to do it)
  others                  passed to the kernel (e.g. max_read=N)
Logs go to --log; else to stderr with -f, else to syslog, else to a file
($XDG_STATE_HOME/bloscfs/bloscfs.log, /var/log/bloscfs/bloscfs.log for
root); mount says where. SIGUSR1 writes the mount's statistics (as
'bloscfs stats --json' prints them) to the log.
SIGTERM or SIGINT unmounts; if files are open there, the mount is
detached at once, commits that are running finish, writes not yet
committed (no fsync or close) fail with EIO, and the daemon exits 0.`

// ignoredOptions are mount(8)'s, fstab's and systemd's options, which
// mean nothing to a FUSE mount (dev, suid and exec: a FUSE mount stays
// nodev and nosuid).
var ignoredOptions = map[string]bool{
	"defaults": true, "auto": true, "noauto": true, "nofail": true, "_netdev": true,
	"user": true, "users": true, "nouser": true, "owner": true, "group": true,
	"dev": true, "suid": true, "exec": true, "rw": true, "default_permissions": true,
	"async": true, "loud": true, "nomand": true, "atime": true, "diratime": true,
	"norelatime": true, "nostrictatime": true, "nolazytime": true,
}

// flagOptions are mount flags: bits of mount(2) as root, strings for
// fusermount3 otherwise.
var flagOptions = map[string]uintptr{
	"noatime": syscall.MS_NOATIME, "nodiratime": syscall.MS_NODIRATIME,
	"relatime": syscall.MS_RELATIME, "strictatime": syscall.MS_STRICTATIME,
	"lazytime": 1 << 25, // MS_LAZYTIME
	"sync":     syscall.MS_SYNCHRONOUS, "dirsync": syscall.MS_DIRSYNC,
	"silent": syscall.MS_SILENT,
}

// mountFlags are the -o options that are neither bfs.Options nor flags.
type mountFlags struct {
	nonempty    bool // mount over a directory that is not empty
	autoUnmount bool // a watcher unmounts the mount if the daemon dies
}

// mountOptions applies the -o options to o and to the flags of fs (an
// option named as a flag, with _ for -, sets it). It returns the options
// that are neither, and those that did not set a flag (for the daemon,
// which gets the flags as set).
func mountOptions(list []string, o *bfs.Options, fs *pflag.FlagSet) (mf mountFlags, rest []string, err error) {
	for _, item := range list {
		for _, opt := range strings.Split(item, ",") {
			opt = strings.TrimSpace(opt)
			key, val, hasVal := strings.Cut(opt, "=")
			flag := fs.Lookup(strings.ReplaceAll(key, "_", "-"))
			if flag != nil && (flag.Name == "foreground" || flag.Name == "options") {
				flag = nil
			}
			if flag == nil && opt != "" {
				rest = append(rest, opt)
			}
			switch {
			case opt == "" || ignoredOptions[opt] || strings.HasPrefix(opt, "x-") || key == "comment":
			case opt == "ro":
				o.ReadOnly = true
			case opt == "allow_other":
				o.AllowOther = true
			case opt == "nonempty":
				mf.nonempty = true
			case opt == "auto_unmount":
				mf.autoUnmount = true
			case opt == "nosuid" || opt == "nodev" || opt == "noexec":
				o.ExtraOptions = append(o.ExtraOptions, opt) // go-fuse turns these into flags
			case flagOptions[opt] != 0:
				if os.Geteuid() == 0 {
					o.MountFlags |= flagOptions[opt]
				} else {
					o.ExtraOptions = append(o.ExtraOptions, opt) // fusermount3 knows them
				}
			case key == "fsname" && hasVal:
				o.FsName = val
			case key == "subtype":
				// always bloscfs
			case flag != nil:
				if !hasVal {
					if flag.Value.Type() != "bool" {
						return mf, nil, fmt.Errorf("%w: -o %s needs a value (%s=...)", errUsage, key, key)
					}
					val = "true"
				}
				if flag.Name == "filter" {
					val = strings.ReplaceAll(val, "+", ",")
				}
				if err := fs.Set(flag.Name, val); err != nil {
					return mf, nil, usageError(fmt.Sprintf("-o %s: %s", opt, optionValueError(flag, err)))
				}
			default:
				o.ExtraOptions = append(o.ExtraOptions, opt)
			}
		}
	}
	return mf, rest, nil
}

// mountConfig is what a mount command line asks for, parsed and checked
// (runMount does everything that looks at the system or mounts).
type mountConfig struct {
	source     string // an absolute path, or an s3:// location as given
	mountpoint string // absolute
	// given are SOURCE and MOUNTPOINT as given: what a foreground mount
	// mounts, and names in its log.
	given      [2]string
	foreground bool
	// logFile is --log: syslog, stderr, a path (absolute when the mount
	// goes to the background), or "" for the default.
	logFile     string
	nonempty    bool // -o nonempty
	autoUnmount bool // -o auto_unmount
	fs          bfs.Options
	store       remote.Config // for an s3:// source (without a logger)
	// daemon is the command line of the background daemon, after
	// `mount -f`: the flags as parsed, -o's options that set no flag,
	// then -- SOURCE MOUNTPOINT.
	daemon []string
}

func cmdMount(args []string, stdout, stderr io.Writer) error {
	c, err := parseMount(args, stdout)
	if err != nil {
		return err
	}
	return runMount(c, stderr)
}

// parseMount parses and checks a mount command line, without looking at
// SOURCE or MOUNTPOINT on disk.
func parseMount(args []string, stdout io.Writer) (*mountConfig, error) {
	fs := newFlags("mount", stdout)
	fg := fs.BoolP("foreground", "f", false, "stay in the foreground")
	opts := fs.StringArrayP("options", "o", nil, "mount `OPTIONS`, comma-separated (see above)")
	cacheSize := fs.String("cache-size", "512MiB", "`SIZE` of the decoded-block cache")
	readAhead := fs.String("read-ahead", "0", "`BYTES` decoded ahead of a sequential reader, beyond the kernel's read-ahead")
	readOnly := fs.Bool("read-only", false, "refuse every change (as -o ro)")
	logFile := fs.String("log", "", "log to this `FILE`, or to syslog or stderr (default: stderr with -f, else syslog, else a file)")
	debug := fs.BoolP("debug", "d", false, "log every FUSE request")
	newFormat := fs.String("new-format", "b2frame", "`FORMAT` of files created in the mount: b2frame, blp, or none (plain)")
	codec := fs.String("codec", "zstd", "`CODEC` of new files: blosclz, lz4, lz4hc, zlib, zstd")
	clevel := fs.Int("clevel", 5, "compression `LEVEL` of new files, 0-9")
	filter := fs.String("filter", "shuffle", "`FILTERS` of new files (as for pack)")
	typesize := fs.Int("typesize", 8, "element `SIZE` of new files")
	chunkSize := fs.String("chunk-size", "1MiB", "chunk `SIZE` of new files")
	rf := addRemoteFlagsFor(fs, remoteMount)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != 2 {
		return nil, fmt.Errorf("%w: mount [flags] SOURCE MOUNTPOINT", errUsage)
	}
	c := &mountConfig{fs: bfs.DefaultOptions()}
	o := &c.fs
	o.Logger = nil        // the mount's own, opened by runMount
	o.NoSelfAccess = true // the daemon never opens a file of its own mount
	mf, passOn, err := mountOptions(*opts, o, fs)
	if err != nil {
		return nil, err
	}
	c.nonempty, c.autoUnmount = mf.nonempty, mf.autoUnmount
	if o.CacheSize, err = parseSize(*cacheSize); err != nil || o.CacheSize < 1<<20 {
		return nil, badFlag("cache-size", *cacheSize, "takes "+sizeHint+", at least 1MiB")
	}
	if o.ReadAhead, err = parseSize(*readAhead); err != nil {
		return nil, badFlag("read-ahead", *readAhead, "takes "+sizeHint+", or 0 for none")
	}
	o.ReadOnly = o.ReadOnly || *readOnly
	o.Debug = *debug
	switch bfs.NewFormat(*newFormat) {
	case bfs.NewB2Frame, bfs.NewBlp, bfs.NewPlain:
		o.NewFormat = bfs.NewFormat(*newFormat)
	default:
		return nil, badFlag("new-format", *newFormat, "not a format for new files: b2frame, blp or none")
	}
	codecID, err := newCodec(*codec)
	if err != nil {
		return nil, err
	}
	if err := checkLevels(*clevel, *typesize); err != nil {
		return nil, err
	}
	o.NewParams = blosc.Params{Codec: codecID, Clevel: *clevel, Typesize: *typesize, Split: blosc.SplitAuto}
	if o.NewParams.Filters, o.NewParams.FiltersMeta, err = parseFilters(*filter, *typesize); err != nil {
		return nil, err
	}
	if o.NewFormat == bfs.NewBlp {
		o.NewParams.Blosc1, o.NewParams.Split = true, blosc.SplitForwardCompat
	}
	if err := validParams(o.NewParams); err != nil {
		return nil, err
	}
	if o.NewChunkSize, err = parseSize(*chunkSize); err != nil || o.NewChunkSize <= 0 || o.NewChunkSize > 1<<31-64 {
		return nil, badFlag("chunk-size", *chunkSize, chunkSizeHint)
	}
	if o.NewFormat == bfs.NewB2Frame {
		o.NewParams.Blocksize = defaultBlocksize(o.NewParams, int(o.NewChunkSize))
	}
	if c.store, err = rf.config(); err != nil {
		return nil, err
	}
	c.source, c.given = pos[0], [2]string{pos[0], pos[1]}
	if !remote.IsURL(pos[0]) {
		if c.source, err = filepath.Abs(pos[0]); err != nil {
			return nil, err
		}
	}
	// The mountpoint as the mount table shows it (symbolic links
	// resolved): the daemon mounts there and finds its mount there, the
	// watcher and `bloscfs unmount` too.
	if c.mountpoint, err = bfs.ResolveMountpoint(pos[1]); err != nil {
		return nil, err
	}
	if err := checkOutsideMount(c.mountpoint, *logFile, c.store.CacheDir); err != nil {
		return nil, err
	}
	c.foreground, c.logFile = *fg, *logFile
	if !c.foreground && c.logFile == "stderr" {
		return nil, fmt.Errorf("%w: --log stderr needs -f (in the background stderr goes nowhere once the mount is ready)", errUsage)
	}
	if !c.foreground {
		// The daemon runs in /, so that it holds no directory busy: hand
		// it absolute paths and the flags as parsed.
		if c.logFile != "" && c.logFile != "syslog" && c.logFile != "stderr" {
			if c.logFile, err = filepath.Abs(c.logFile); err != nil {
				return nil, err
			}
			fs.Set("log", c.logFile)
		}
		fs.Visit(func(f *pflag.Flag) {
			if f.Name == "options" {
				if len(passOn) > 0 {
					c.daemon = append(c.daemon, "-o", strings.Join(passOn, ","))
				}
				return
			}
			c.daemon = append(c.daemon, "--"+f.Name+"="+f.Value.String())
		})
		c.daemon = append(c.daemon, "--", c.source, c.mountpoint)
	}
	return c, nil
}

// runMount mounts what c describes: in the background (a daemon started
// with c.daemon, which reports when the mount is ready), or in this
// process with -f.
func runMount(c *mountConfig, stderr io.Writer) error {
	src, mnt, o := c.source, c.mountpoint, c.fs
	if err := checkEmpty(mnt, c.nonempty); err != nil {
		return err
	}
	if busy, _ := bfs.IsMountpoint(mnt); !busy && os.Getenv(notifyEnv) == "" {
		if other := mountedAt(src); len(other) > 0 {
			fmt.Fprintf(stderr, "bloscfs mount: warning: %s is already mounted at %s; changes made through one mount are not seen at once through the other\n", src, strings.Join(other, ", "))
		}
	}
	if !c.foreground {
		return daemonize(c.daemon, stderr)
	}
	// Decoded blocks are garbage once evicted; without a limit the Go heap
	// grows to about twice the live cache before collecting. Keep it near
	// the cache size (unless GOMEMLIMIT says otherwise).
	if os.Getenv("GOMEMLIMIT") == "" {
		rdebug.SetMemoryLimit(o.CacheSize + 48<<20)
	}
	notify := notifier()
	logger, logDest, closeLog, err := openLog(c.logFile, notify != nil, stderr)
	if err != nil {
		notify.fail(err)
		return err
	}
	defer closeLog()
	prefixMount(logger, mnt)
	o.Logger = logger
	// The signals that stop the mount, and SIGUSR1 (whose default would
	// kill the daemon), are caught from before the mount is made: one
	// that arrives while it is made, or between mount(2) and the
	// handlers, is handled once it is served, instead of killing the
	// daemon and leaving its mount behind, dead.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	statSigs := make(chan os.Signal, 1)
	signal.Notify(statSigs, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	defer signal.Stop(statSigs)
	if c.autoUnmount {
		// Started before the mount is made, so that a daemon killed
		// at any moment after mount(2) is cleaned up after.
		if err := startWatcher(mnt); err != nil {
			err = fmt.Errorf("auto_unmount: %w", err)
			notify.fail(err)
			return err
		}
	}
	var server *bfs.Server
	var stats statser
	shutdown := func() {} // stops the write path of a busy mount before exit
	if remote.IsURL(c.given[0]) {
		var r *bfs.RemoteFS
		server, r, err = mountRemote(c.given[0], mnt, o, c.store)
		stats = r
	} else {
		var f *bfs.FS
		server, f, err = bfs.Mount(c.given[0], mnt, o)
		stats = f
		if f != nil {
			shutdown = f.Shutdown
		}
	}
	if err != nil {
		if watchPipe != nil {
			// No mount of this daemon's: a mount at the mountpoint
			// now, even one made since the watcher started, is
			// another's.
			fmt.Fprintln(watchPipe)
		}
		err = helperError(err)
		notify.fail(err)
		return err
	}
	// The mount's device: it names the connection, which a detached
	// mount aborts before the daemon exits.
	mi, mounted, _ := bfs.MountAt(mnt)
	mounted = mounted && mi.FSType == "fuse.bloscfs"
	if watchPipe != nil {
		dev := ""
		if mounted {
			dev = mi.Dev()
		}
		fmt.Fprintln(watchPipe, dev) // the watcher unmounts only this mount
	}
	logger.Printf("serving %s at %s", c.given[0], c.given[1])
	notify.ready(logDest)

	logStatsOn(statSigs, stats, logger)

	detached := make(chan struct{})
	go func() {
		for s := range sigs {
			logger.Printf("%v: unmounting %s", s, c.given[1])
			err := server.Unmount()
			if err == nil {
				return
			}
			if !errors.Is(err, syscall.EBUSY) {
				logger.Printf("could not unmount %s: %v", c.given[1], err)
				continue
			}
			// Files are open there: a daemon asked to stop must stop
			// (systemd, a shutdown), not wait for every program to
			// close its files. The mount leaves the namespace now;
			// the programs that hold files there get errors once the
			// daemon has exited.
			if err := server.Detach(); err != nil {
				logger.Printf("could not detach %s: %v", c.given[1], err)
				continue
			}
			logger.Printf("%s is busy: detached it; files still open there fail from now on", c.given[1])
			shutdown()
			close(detached)
			return
		}
	}()
	served := make(chan struct{})
	go func() {
		server.Wait()
		close(served)
	}()
	select {
	case <-served:
	case <-detached:
		// Programs still hold files in the detached mount. End the
		// connection before exiting, so that every request waiting on
		// it fails now. Exiting alone is not enough: the kernel ends
		// the connection when the last thread of this process has let
		// go of /dev/fuse, and a thread that waits on the connection
		// itself would hold the process, unkillable. One does: a
		// notification that drops a file's cached pages (a writer's
		// uncommitted writes, see fs's Release) waits for a page
		// locked by a read that only this process could answer.
		if mounted {
			// Its own connection: the mount left the table when it
			// was detached.
			if err := abortConnection(mi); err != nil {
				logger.Printf("could not end the connection of the detached mount: %v", err)
			}
		}
	}
	logger.Printf("unmounted %s", c.given[1])
	return nil
}

// watchEnv, set in the environment, makes this program the watcher of a
// mount made with auto_unmount (see startWatcher).
const watchEnv = "BLOSCFS_AUTO_UNMOUNT_WATCH"

// watchBelowEnv passes the watcher the stamp of the topmost mount at the
// mountpoint before the daemon mounts there (bfs.MountInfo.Stamp, or
// bfs.NothingBelow).
const watchBelowEnv = "BLOSCFS_AUTO_UNMOUNT_BELOW"

// watchPipe is the daemon's end of the pipe to its watcher. It is never
// closed (and kept here, so that no finalizer closes it): the daemon's
// exit closes it, which wakes the watcher.
var watchPipe *os.File

// startWatcher starts the watcher of the mount at mnt: this program
// again, in a session of its own, which waits for the daemon to exit and
// then unmounts the mount if it is dead (bfs.WatchAutoUnmount). It runs
// as the daemon's user, and unmounts as the daemon would: umount2(2) as
// root, fusermount3 -u otherwise. It must be called before the mount is
// made: it notes what is mounted at mnt before, so that the watcher knows
// the daemon's mount even if the daemon dies before it can say which it
// is.
func startWatcher(mnt string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	below := bfs.NothingBelow
	if m, ok, err := bfs.MountAt(mnt); err != nil {
		return err
	} else if ok {
		below = m.Stamp()
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), watchEnv+"="+mnt, watchBelowEnv+"="+below)
	cmd.ExtraFiles = []*os.File{r} // fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		w.Close()
		return err
	}
	go cmd.Wait()
	watchPipe = w
	return nil
}

// runWatcher is the watcher's main: SIGINT, SIGTERM and SIGHUP (a ^C
// meant for the daemon, the end of a terminal) do not stop it.
func runWatcher(dir string) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	// Unset (a daemon older than the variable, its binary replaced on
	// disk since): "", which keeps the older rule.
	if err := bfs.WatchAutoUnmount(dir, os.Getenv(watchBelowEnv), os.NewFile(3, "daemon")); err != nil {
		return 1
	}
	return 0
}

// statser is a mount that counts what it does: a local or a remote one.
type statser interface{ Stats() bfs.Stats }

// logStatsOn writes the mount's statistics (as bloscfs stats --json
// prints them) to the log on each signal that c delivers.
func logStatsOn(c <-chan os.Signal, f statser, logger *log.Logger) {
	go func() {
		for range c {
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			enc.Encode(f.Stats())
			logger.Printf("stats: %s", strings.TrimSpace(b.String()))
		}
	}()
}

// helperError rewords go-fuse's "fusermount exited with code 256": the
// helper's own message has gone to stderr just before.
func helperError(err error) error {
	if strings.Contains(err.Error(), "fusermount exited with code") {
		return fmt.Errorf("%s (the message above is fusermount3's)", strings.TrimSpace(err.Error()))
	}
	return err
}

// checkEmpty refuses a mountpoint that has entries, unless nonempty: the
// mount would hide them (as gocryptfs and rclone refuse). A mountpoint
// that is already a mount is left to the busy check.
func checkEmpty(mnt string, nonempty bool) error {
	if nonempty {
		return nil
	}
	if mounted, err := bfs.IsMountpoint(mnt); err == nil && mounted {
		return nil
	}
	d, err := os.Open(mnt)
	if err != nil {
		return nil // reported by the mount itself
	}
	defer d.Close()
	names, _ := d.Readdirnames(1)
	if len(names) > 0 {
		return fmt.Errorf("mountpoint %s is not empty (it holds %s...): the mount would hide its files; use -o nonempty to mount over them", mnt, names[0])
	}
	return nil
}

// checkOutsideMount refuses a log file or cache directory inside the
// mountpoint: the daemon would write them through its own mount, where
// each write is a request that only the daemon itself can answer.
func checkOutsideMount(mnt, logFile, cacheDir string) error {
	for _, p := range []struct{ flag, path string }{{"--log", logFile}, {"--cache-dir", cacheDir}} {
		if p.path == "" || p.path == "syslog" || p.path == "stderr" {
			continue
		}
		abs, err := filepath.Abs(p.path)
		if err != nil {
			return err
		}
		if rel, err := filepath.Rel(mnt, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return fmt.Errorf("%w: %s %s is inside the mountpoint %s: the daemon cannot write through its own mount; choose a path outside it", errUsage, p.flag, p.path, mnt)
		}
	}
	return nil
}

// bloscfsMount is a bloscfs mount listed in /proc/self/mountinfo.
type bloscfsMount struct{ source, dir string }

// bloscfsMounts lists the bloscfs mounts.
func bloscfsMounts() []bloscfsMount {
	ms, _ := bfs.Mounts()
	var out []bloscfsMount
	for _, m := range ms {
		if m.FSType == "fuse.bloscfs" {
			out = append(out, bloscfsMount{source: m.Source, dir: m.Dir})
		}
	}
	return out
}

// mountedAt returns the mountpoints where bloscfs already shows source.
func mountedAt(source string) []string {
	var out []string
	for _, m := range bloscfsMounts() {
		if m.source == source {
			out = append(out, m.dir)
		}
	}
	return out
}

// openLog returns the logger of a mount and says where it writes: to
// --log's file (or "syslog", "stderr"); by default to stderr in the
// foreground, else to syslog, else (no syslog socket) to a file in the
// state directory, so that no line is lost.
func openLog(path string, background bool, stderr io.Writer) (*log.Logger, string, func(), error) {
	switch {
	case path == "stderr" || path == "" && !background:
		return log.New(stderr, "bloscfs: ", log.LstdFlags), "stderr", func() {}, nil
	case path == "syslog" || path == "":
		if w, err := syslog.New(syslog.LOG_INFO|syslog.LOG_DAEMON, "bloscfs"); err == nil {
			return log.New(w, "", 0), "syslog", func() { w.Close() }, nil
		} else if path == "syslog" {
			return nil, "", nil, fmt.Errorf("--log syslog: %w", err)
		}
		dir := logDir()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			// No writable state directory (a user without a home):
			// a private directory in the temp dir.
			dir = filepath.Join(os.TempDir(), fmt.Sprintf("bloscfs-%d", os.Geteuid()))
			if err2 := os.MkdirAll(dir, 0o700); err2 != nil {
				return nil, "", nil, fmt.Errorf("no syslog, and no log directory: %w", err)
			}
		}
		path = filepath.Join(dir, "bloscfs.log")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, "", nil, err
	}
	prefix := fmt.Sprintf("bloscfs[%d]: ", os.Getpid())
	return log.New(f, prefix, log.LstdFlags), path, func() { f.Close() }, nil
}

// logDir is where a background mount logs without syslog:
// $XDG_STATE_HOME/bloscfs, else /var/log/bloscfs for root, else
// ~/.local/state/bloscfs (openLog falls back to $TMPDIR/bloscfs-UID).
func logDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "bloscfs")
	}
	if os.Geteuid() == 0 {
		return "/var/log/bloscfs"
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "bloscfs")
	}
	return filepath.Join(home, ".local", "state", "bloscfs")
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

// ready tells the parent that the mount is ready and where logs go. The
// daemon's stderr, relayed by the parent until now, goes to /dev/null.
func (p *readyPipe) ready(logDest string) {
	if p != nil {
		detachStderr()
		fmt.Fprintln(p.f, "ok", logDest)
		p.f.Close()
	}
}

// fail tells the parent why the mount failed; the parent prints it.
func (p *readyPipe) fail(err error) {
	if p != nil {
		detachStderr()
		fmt.Fprintln(p.f, "error:", oneLine(err))
		p.f.Close()
	}
}

// detachStderr points fd 2 at /dev/null, which closes the daemon's end of
// the pipe through which the parent relays its stderr.
func detachStderr() {
	if devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		unix.Dup2(int(devnull.Fd()), 2)
		devnull.Close()
	}
}

// daemonize runs this command again in the foreground, detached, and
// returns once it reports that the mount is ready (as gocryptfs does).
// Until then the child's stderr (where fusermount3 writes its errors) is
// copied to ours.
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
	er, ew, err := os.Pipe()
	if err != nil {
		w.Close()
		return err
	}
	defer er.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		w.Close()
		ew.Close()
		return err
	}
	defer devnull.Close()
	cmd := exec.Command(exe, append([]string{"mount", "-f"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, ew
	cmd.ExtraFiles = []*os.File{w} // fd 3
	cmd.Env = append(os.Environ(), notifyEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	err = cmd.Start()
	w.Close()
	ew.Close()
	if err != nil {
		return err
	}
	relayed := make(chan struct{})
	go func() {
		io.Copy(stderr, er)
		close(relayed)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	line, rerr := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSpace(line)
	// The child closes its stderr before it reports; a grandchild that
	// kept it open (it should not) must not hold us.
	select {
	case <-relayed:
	case <-time.After(5 * time.Second):
	}
	switch {
	case line == "ok" || strings.HasPrefix(line, "ok "):
		cmd.Process.Release()
		if dest := strings.TrimPrefix(strings.TrimPrefix(line, "ok"), " "); dest != "" {
			fmt.Fprintf(stderr, "bloscfs: mounted %s at %s; log: %s\n", args[len(args)-2], args[len(args)-1], dest)
		}
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
