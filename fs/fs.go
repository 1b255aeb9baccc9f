// Package fs is the go-fuse node tree of a bloscfs mount: a loopback of
// the source directory in which every Blosc container (Bloscpack, Blosc2
// frame, sparse frame, .b2nd array, bare chunk) is shown as the plain
// bytes it holds.
//
// The tree is built over a backend (view.go), which the source directory
// and a bucket both satisfy: the name mapping (names.go, mapNames: x.blp
// is shown as x, x.b2nd as x.npy, a sparse frame directory as a file),
// the read path of a compressed file (view.go, viewHandle: reads through
// pack's random-access readers and a shared cache of decoded blocks,
// with read-ahead), the probe record (probe.go), the attributes
// (xattr.go) and the mount options (mount.go) are written once over it.
// The files named local_* serve the source directory: directories and
// plain files are go-fuse loopback nodes whose names, contents and
// metadata pass through (local_dir.go, local_loopback.go), and a
// compressed file is a blobNode (local_file.go) with the write path
// (local_write.go, local_stage.go, local_stream.go). The files named
// remote_* serve a bucket, read-only. This package is a thin adapter: it
// turns pack's errors into errno values (corrupt data → EIO, with one log
// line naming file and chunk) and knows nothing of codecs.
package fs

import (
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
	_ "github.com/bloscfs/bloscfs/pack/all" // every container format
	gofs "github.com/hanwen/go-fuse/v2/fs"
	lru "github.com/hashicorp/golang-lru/v2"
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
	cons   *consCache // consolidated Zarr metadata (local_zarr.go)
	trees  treeCache  // the trees opened, by version (tree.go)
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

// Cache returns the decoded-block cache (for statistics).
func (f *FS) Cache() *cache.Cache[pack.BlockKey] { return f.cache }

// warnOnce logs a message the first time it is seen.
func (f *FS) warnOnce(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if _, seen := f.warned.LoadOrStore(msg, true); !seen {
		f.opts.Logger.Print(msg)
	}
}

// preferredIO is the st_blksize of compressed files: the mount's largest
// READ and WRITE.
const preferredIO = 1 << 20
