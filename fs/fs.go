// Package fs is the go-fuse node tree of a bloscfs mount: a loopback of
// the source directory in which every Blosc container (Bloscpack, Blosc2
// frame, sparse frame, .b2nd array, bare chunk) is shown as the plain
// bytes it holds.
//
// The tree is built over a backend (backend.go), which the source
// directory and a bucket (remote.go) both satisfy: the name mapping (see
// mapNames: x.blp is shown as x, x.b2nd as x.npy, a sparse frame
// directory as a file) and the read path of a compressed file
// (viewHandle: reads through pack's random-access readers and a shared
// cache of decoded blocks, with read-ahead) are written once over it.
// Locally, directories and plain files are go-fuse loopback nodes whose
// names, contents and metadata pass through, and a compressed file is a
// blobNode with the write path. This package is a thin adapter: it turns
// pack's errors into errno values (corrupt data → EIO, with one log line
// naming file and chunk) and knows nothing of codecs.
package fs

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
	_ "github.com/bloscfs/bloscfs/pack/all" // every container format
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sys/unix"
)

// Options configure a mount.
type Options struct {
	// CacheSize bounds the decoded-block cache shared by all files.
	CacheSize int64
	// ReadOnly refuses every change (mount option ro).
	ReadOnly bool
	// AllowOther lets other users in (with default_permissions).
	AllowOther bool
	// AttrTimeout is how long the kernel caches attributes and names of
	// plain files and directories; compressed files are cached longer
	// (CompressedTimeout) since they change only through the mount.
	AttrTimeout       time.Duration
	CompressedTimeout time.Duration
	// ReadAhead is how many bytes past a sequential read are decoded in
	// the background, beyond the kernel's own read-ahead. The default is
	// none: the kernel's read-ahead READs of 1 MiB, whose blocks decode
	// in parallel straight into the reply, kept both cores busy with less
	// work than decoding ahead into the cache and copying out of it
	// (docs/PERFORMANCE.md, "Decoding ahead in the daemon").
	ReadAhead int64
	// Debug logs every FUSE request.
	Debug bool
	// Logger receives warnings (files that fail to parse, corrupt chunks).
	Logger *log.Logger
	// FsName is shown as the mount's source in /proc/mounts.
	FsName string
	// ExtraOptions are passed to the kernel as mount options.
	ExtraOptions []string
	// MountFlags are mount(2) flags (MS_NOATIME, …) added to nosuid and
	// nodev when mounting directly (as root).
	MountFlags uintptr
	// NoSelfAccess says that this process never opens files of the
	// mount it serves, as the bloscfs daemon: go-fuse's poll hack is then
	// left out at mount time (see serve). Unset (in-process mounts, as in
	// tests), the hack runs, without which the process's first open of a
	// file of its own mount can hang.
	NoSelfAccess bool
	// NewFormat is how files created through the mount are stored, and
	// NewParams and NewChunkSize the codec parameters they get.
	NewFormat    NewFormat
	NewParams    blosc.Params
	NewChunkSize int64

	noStream   bool         // tests: stage new files as any other (no streamer)
	failCommit func() error // tests: a commit fails with this once its temp file is complete
}

// DefaultOptions returns the options of a default mount.
func DefaultOptions() Options {
	return Options{
		CacheSize:         512 << 20,
		AttrTimeout:       time.Second,
		CompressedTimeout: time.Hour,
		ReadAhead:         0,
		Logger:            log.New(os.Stderr, "bloscfs: ", log.LstdFlags),
		NewFormat:         NewB2Frame,
		NewParams:         blosc.DefaultParams(8),
		NewChunkSize:      1 << 20,
	}
}

// FS is the state shared by the nodes of one mount.
type FS struct {
	opts   Options
	source string
	root   *gofs.LoopbackRoot
	cache  *cache.Cache[pack.BlockKey]
	probes *lru.Cache[probeKey, *probe]
	cons   *consCache // consolidated Zarr metadata (zarr_local.go)
	warned sync.Map   // messages already logged
	token  string     // names this mount's temp files

	// inoMu guards inoMap: a compressed file keeps its inode number
	// across the rename of a recompression, which gives the disk file a
	// new one (and frees the old one for reuse).
	inoMu  sync.Mutex
	inoMap map[gofs.StableAttr]gofs.StableAttr // disk identity → the node's
	idSeq  atomic.Uint64                       // for newID
	// links holds, by disk inode number, the nodes of the names of
	// hard-linked compressed files (one node per name): a change of the
	// disk file's metadata through one name must reach the kernel's
	// cached attributes of the others.
	links map[uint64]map[*blobNode]bool

	// nsMu orders the namespace changes made through the mount (rename,
	// unlink, link) against the last step of a commit (finding the disk
	// name and renaming the new file over it): a commit holds it for
	// reading, a namespace change for writing. Without it a commit could
	// rename its new file over a name that a rename had just given to
	// another file, or bring back a name just unlinked.
	nsMu sync.RWMutex

	stats  counters
	remote func() *RemoteStats // a remote mount's store counters; nil for a local mount

	// stages holds the nodes that have a stage (*blobNode → struct{}),
	// for Shutdown; stopping is set once Shutdown has begun.
	stages   sync.Map
	stopping atomic.Bool
	// creating counts the new, empty containers being written beside
	// the originals (writeEmpty), whose temp files Shutdown waits for;
	// createMu orders their start against stopping.
	createMu sync.Mutex
	creating sync.WaitGroup
}

// diskID returns the identity of a disk file: the inode number as the
// loopback composes it and, as generation, its birth time, so that a
// recycled inode number is a new identity.
func (f *FS) diskID(path string, st *syscall.Stat_t) gofs.StableAttr {
	id := gofs.StableAttr{Mode: syscall.S_IFREG, Ino: f.idFromStat(st).Ino, Gen: 1}
	var stx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx) == nil && stx.Mask&unix.STATX_BTIME != 0 {
		id.Gen = uint64(stx.Btime.Sec)*1e9 + uint64(stx.Btime.Nsec)
	}
	return id
}

// blobID returns the identity of a compressed file's node.
func (f *FS) blobID(path string, st *syscall.Stat_t) gofs.StableAttr {
	d := f.diskID(path, st)
	f.inoMu.Lock()
	defer f.inoMu.Unlock()
	if s, ok := f.inoMap[d]; ok {
		return s
	}
	return d
}

// newID returns an identity no disk file has (the top bit of the inode
// number is set): for one name of a hard-linked compressed file (see
// dirNode.Lookup), and for a disk file replaced by a commit under one of
// its names that lives on under others (see orphanID).
func (f *FS) newID() gofs.StableAttr {
	return gofs.StableAttr{Mode: syscall.S_IFREG, Ino: f.idSeq.Add(1) | 1<<63, Gen: 1}
}

// addLink records that node n shows a name of the hard-linked disk file
// of inode number ino.
func (f *FS) addLink(ino uint64, n *blobNode) {
	f.inoMu.Lock()
	defer f.inoMu.Unlock()
	if f.links == nil {
		f.links = map[uint64]map[*blobNode]bool{}
	}
	if f.links[ino] == nil {
		f.links[ino] = map[*blobNode]bool{}
	}
	f.links[ino][n] = true
}

// dropLink forgets node n (forgotten by the kernel).
func (f *FS) dropLink(n *blobNode) {
	f.inoMu.Lock()
	defer f.inoMu.Unlock()
	for ino, ns := range f.links {
		if delete(ns, n); len(ns) == 0 {
			delete(f.links, ino)
		}
	}
}

// linksChanged drops the kernel's cached attributes of every node that
// shows a name of the disk file of inode number ino: its mode, owner,
// times or link count changed through one of them.
func (f *FS) linksChanged(ino uint64) {
	f.inoMu.Lock()
	var ns []*blobNode
	for n := range f.links[ino] {
		ns = append(ns, n)
	}
	f.inoMu.Unlock()
	for _, n := range ns {
		n.NotifyContent(-1, 0) // attributes only
	}
}

// orphanID gives a disk file that a commit replaced under one of its
// names, but that lives on under others, an identity of its own: the
// node of the commit keeps the old identity and now shows the new file.
func (f *FS) orphanID(d gofs.StableAttr) {
	id := f.newID()
	f.inoMu.Lock()
	defer f.inoMu.Unlock()
	f.inoMap[d] = id
}

// remapID records that the disk file at path now holds the node whose
// identity is id (after a recompression replaced its disk file).
func (f *FS) remapID(path string, st *syscall.Stat_t, id gofs.StableAttr) {
	d := f.diskID(path, st)
	f.inoMu.Lock()
	defer f.inoMu.Unlock()
	for k, v := range f.inoMap {
		if v == id {
			delete(f.inoMap, k)
		}
	}
	if d != id {
		f.inoMap[d] = id
	}
}

// New returns the root node of a view of source.
func New(source string, opts Options) (gofs.InodeEmbedder, *FS, error) {
	abs, err := filepath.Abs(source)
	if err != nil {
		return nil, nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(abs, &st); err != nil {
		return nil, nil, fmt.Errorf("source %s: %w", abs, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, nil, fmt.Errorf("source %s: not a directory", abs)
	}
	if opts.Logger == nil {
		opts.Logger = log.New(os.Stderr, "bloscfs: ", log.LstdFlags)
	}
	def := DefaultOptions()
	if opts.CacheSize <= 0 {
		opts.CacheSize = def.CacheSize
	}
	if opts.NewFormat == "" {
		opts.NewFormat, opts.NewParams = def.NewFormat, def.NewParams
	}
	if opts.NewChunkSize <= 0 {
		opts.NewChunkSize = def.NewChunkSize
	}
	if err := blosc.ValidateParams(opts.NewParams); err != nil && opts.NewFormat != NewPlain {
		return nil, nil, fmt.Errorf("parameters for new files: %w", err)
	}
	f := &FS{opts: opts, source: abs, cache: cache.New[pack.BlockKey](opts.CacheSize), token: newToken(), inoMap: map[gofs.StableAttr]gofs.StableAttr{}}
	f.probes, _ = lru.New[probeKey, *probe](maxProbes)
	f.cons = newConsCache()
	f.stats.start = time.Now()
	f.root = &gofs.LoopbackRoot{Path: abs, Dev: uint64(st.Dev)}
	f.root.NewNode = f.newNode
	rootNode := f.newNode(f.root, nil, "", &st)
	f.root.RootNode = rootNode
	return rootNode, f, nil
}

// Cache returns the decoded-block cache (for statistics).
func (f *FS) Cache() *cache.Cache[pack.BlockKey] { return f.cache }

// newNode makes the node for a loopback child: directories map names,
// other entries pass through.
func (f *FS) newNode(root *gofs.LoopbackRoot, _ *gofs.Inode, _ string, st *syscall.Stat_t) gofs.InodeEmbedder {
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return &dirNode{loopbackNode: loopbackNode{gofs.LoopbackNode{RootData: root}}, fs: f}
	}
	return &plainNode{loopbackNode: loopbackNode{gofs.LoopbackNode{RootData: root}}, fs: f}
}

// warnOnce logs a message the first time it is seen.
func (f *FS) warnOnce(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if _, seen := f.warned.LoadOrStore(msg, true); !seen {
		f.opts.Logger.Print(msg)
	}
}

// diskPath returns the source path of a node of the tree (directories and
// plain files have the same name on disk and in the view).
func (f *FS) diskPath(n *gofs.Inode) string {
	return filepath.Join(f.source, n.Path(nil))
}

// idFromStat composes an inode number as go-fuse's loopback does, so that
// loopback nodes and ours agree.
func (f *FS) idFromStat(st *syscall.Stat_t) gofs.StableAttr {
	swapped := (uint64(st.Dev) << 32) | (uint64(st.Dev) >> 32)
	swappedRootDev := (f.root.Dev << 32) | (f.root.Dev >> 32)
	return gofs.StableAttr{Mode: uint32(st.Mode) & syscall.S_IFMT, Ino: (swapped ^ swappedRootDev) ^ st.Ino}
}

// Mount serves a view of source at mountpoint and returns once the mount
// is ready. The caller waits on the server and unmounts it.
func Mount(source, mountpoint string, opts Options) (*Server, *FS, error) {
	// As the mount table will show it: a mountpoint given through a
	// symbolic link is found there (MountAt), unmounted and aborted.
	mountpoint, err := ResolveMountpoint(mountpoint)
	if err != nil {
		return nil, nil, fmt.Errorf("mountpoint: %w", err)
	}
	root, f, err := New(source, opts)
	if err != nil {
		return nil, nil, err
	}
	if err := checkMountpoint(mountpoint, f.source); err != nil {
		return nil, nil, err
	}
	attr := opts.AttrTimeout
	neg := time.Duration(0)
	mo := fuse.MountOptions{
		FsName:        opts.FsName,
		Name:          "bloscfs",
		MaxWrite:      preferredIO, // 1 MiB READs (with read_ahead_kb raised below)
		DisableSplice: true,        // a 1 MiB reply does not fit the default pipe
		MaxBackground: 64,
		AllowOther:    opts.AllowOther,
		DirectMount:   true,
		Debug:         opts.Debug,
		Logger:        opts.Logger,
		Options:       append([]string(nil), opts.ExtraOptions...),
	}
	if opts.MountFlags != 0 {
		mo.DirectMountFlags = syscall.MS_NOSUID | syscall.MS_NODEV | opts.MountFlags
	}
	if mo.FsName == "" {
		mo.FsName = f.source
	}
	if opts.AllowOther {
		mo.Options = append(mo.Options, "default_permissions")
	}
	if opts.ReadOnly {
		mo.Options = append(mo.Options, "ro")
	}
	server, err := serve(mountpoint, root, &gofs.Options{
		MountOptions:    mo,
		AttrTimeout:     &attr,
		EntryTimeout:    &attr,
		NegativeTimeout: &neg,
		Logger:          opts.Logger,
		// The source's modes, exactly: without this go-fuse shows a
		// mode-000 file as 0644 and lets other users in.
		NullPermissions: true,
	}, !opts.NoSelfAccess)
	if err != nil {
		return nil, nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	raiseReadahead(mountpoint, f.opts.Logger)
	if !opts.ReadOnly {
		go f.cleanTemp()
	}
	return server, f, nil
}

// checkMountpoint refuses a mountpoint that is already a mount, or that
// lies inside the source (the daemon must never serve its own mount).
func checkMountpoint(mnt, source string) error {
	abs, err := filepath.Abs(mnt)
	if err != nil {
		return err
	}
	// Look in the mount table first: a stat of a dead FUSE mount fails
	// with ENOTCONN, which says nothing of how to clear it.
	if m, mounted, err := MountAt(abs); err == nil && mounted {
		if strings.HasPrefix(m.FSType, "fuse") && deadMount(abs) {
			return fmt.Errorf("mountpoint %s is a dead FUSE mount (%s): its daemon has exited; clear it with 'bloscfs unmount %s', then mount again", abs, m.Source, abs)
		}
		return fmt.Errorf("mountpoint %s is busy: something is already mounted there (bloscfs unmount %s)", abs, abs)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("mountpoint %s: %w", abs, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("mountpoint %s: not a directory", abs)
	}
	// The daemon reads the source by path: a mountpoint inside it, or
	// above it, would send the daemon through its own mount.
	realMnt, err1 := filepath.EvalSymlinks(abs)
	realSrc, err2 := filepath.EvalSymlinks(source)
	if err1 == nil && err2 == nil {
		if within(realMnt, realSrc) {
			return fmt.Errorf("mountpoint %s is inside the source %s", abs, source)
		}
		if within(realSrc, realMnt) {
			return fmt.Errorf("the source %s is inside the mountpoint %s", source, abs)
		}
	}
	return nil
}

// deadMount reports whether the FUSE mount at dir has lost its daemon.
func deadMount(dir string) bool { return ProbeMount(dir, 2*time.Second) == MountDead }

// MountState is what a look at a FUSE mount finds.
type MountState int

// What ProbeMount finds.
const (
	MountAlive MountState = iota // it answers
	MountDead                    // its daemon is gone: ENOTCONN
	MountHung                    // no answer within the time given
)

// ProbeMount stats dir aside, waiting at most d: a mount whose daemon
// hangs holds the stat until its connection is aborted. It is for looking
// at other mounts (or at this mountpoint before it is mounted): never at
// the mount this process serves.
func ProbeMount(dir string, d time.Duration) MountState {
	done := make(chan error, 1)
	go func() {
		var st unix.Stat_t
		done <- unix.Stat(dir, &st)
	}()
	select {
	case err := <-done:
		if errors.Is(err, syscall.ENOTCONN) {
			return MountDead
		}
		return MountAlive
	case <-time.After(d):
		return MountHung
	}
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
