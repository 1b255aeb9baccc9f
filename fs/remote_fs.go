package fs

import (
	"context"
	"hash/fnv"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/remote"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	lru "github.com/hashicorp/golang-lru/v2"
)

// The remote view shows a bucket (or a prefix of it) read-only:
// prefixes are directories, objects are files, named by the same rule as
// the local view (mapNames: x.blp → x, x.b2nd → x.npy, collisions keep
// full names, objects that do not parse are shown raw). The bucket is a
// backend (bucketBackend), as the local directory is: the name mapping
// and lookup (viewEntries, lookupEntry), the read path of a compressed
// file (viewHandle, over an openState), the probe record and the xattrs
// are the local view's. What is the bucket's own is here: its directory
// and file nodes (read-only, without the local write path), the probes
// keyed by ETag, and opening an object's current version.

// RemoteFS is the state shared by the nodes of a remote mount.
type RemoteFS struct {
	f      *FS // options, block cache, log
	store  *remote.Store
	prefix string // "" or ending in "/"
	probes *lru.Cache[string, *probe]
	// zprobes are the Zarr probes of prefixes (see probeZarr).
	zprobes *lru.Cache[string, *zarrProbe]
	// cons are the consolidated metadata of groups, by object version.
	cons *lru.Cache[string, *remoteCons]
	uid  uint32
	gid  uint32

	staleMu sync.Mutex
	stale   map[uint64]*staleBurst // by inode number (see answerStale)

	treeMu    sync.Mutex
	treeLists map[string]*prefixTree // listings of tree prefixes (remote_tree.go)
}

// staleBurst is a run of ESTALE answers to opens of one name (inode
// number), each within staleWindow of the last, and when the kernel
// looked up the name's nodes (by generation) since it began.
type staleBurst struct {
	last    time.Time
	lookups map[uint64]bool
}

// staleWindow ends a burst of ESTALE answers for a name: longer than the
// kernel takes to look the name up again after one, a slow LIST included.
const staleWindow = 10 * time.Second

// answerStale reports whether an open of node id, which found the object
// replaced since the node's open version, is to be answered ESTALE, so
// that the kernel looks the name up again and opens a node of the new
// version. An open on a node the kernel looked up after a burst of such
// answers for the name began is not: it is the kernel's retry (or comes
// after one), and the kernel retries only once, so a second ESTALE would
// reach the program, even if the object was replaced again meanwhile
// (then it is opened on the node it reached). Opens through names the
// kernel resolved before the burst, several at once among them, all get
// ESTALE.
func (r *RemoteFS) answerStale(id gofs.StableAttr) bool {
	r.staleMu.Lock()
	defer r.staleMu.Unlock()
	now := time.Now()
	if b := r.stale[id.Ino]; b != nil && now.Sub(b.last) < staleWindow {
		if b.lookups[id.Gen] {
			return false
		}
		b.last = now
		return true
	}
	if len(r.stale) >= 1024 {
		for k, b := range r.stale {
			if now.Sub(b.last) >= staleWindow {
				delete(r.stale, k)
			}
		}
	}
	if r.stale == nil {
		r.stale = map[uint64]*staleBurst{}
	}
	r.stale[id.Ino] = &staleBurst{last: now, lookups: map[uint64]bool{}}
	return true
}

// lookedUp records, while a burst of ESTALE answers for the name is
// under way, that the kernel looked up the node of id (the node the
// kernel gets is the one registered under id, which need not be the one
// Lookup made), and returns that node.
func (r *RemoteFS) lookedUp(ctx context.Context, d *gofs.Inode, n gofs.InodeEmbedder, id gofs.StableAttr) *gofs.Inode {
	r.staleMu.Lock()
	if b := r.stale[id.Ino]; b != nil && time.Since(b.last) < staleWindow {
		b.lookups[id.Gen] = true
	}
	r.staleMu.Unlock()
	return d.NewInode(ctx, n, id)
}

// NewRemote returns the root node of a read-only view of the objects
// under prefix in store.
func NewRemote(store *remote.Store, prefix string, opts Options) (gofs.InodeEmbedder, *RemoteFS) {
	def := DefaultOptions()
	if opts.CacheSize <= 0 {
		opts.CacheSize = def.CacheSize
	}
	if opts.Logger == nil {
		opts.Logger = def.Logger
	}
	if opts.AttrTimeout == 0 {
		opts.AttrTimeout = def.AttrTimeout
	}
	opts.ReadOnly = true
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	f := &FS{opts: opts, source: store.Name(prefix), cache: cache.New[pack.BlockKey](opts.CacheSize)}
	f.stats.start = time.Now()
	f.remote = func() *RemoteStats {
		req, n := store.Stats().Snapshot()
		return &RemoteStats{Requests: req, FetchedBytes: n}
	}
	r := &RemoteFS{
		f:      f,
		store:  store,
		prefix: prefix,
		uid:    uint32(os.Getuid()),
		gid:    uint32(os.Getgid()),
	}
	r.probes, _ = lru.New[string, *probe](maxProbes)
	r.zprobes, _ = lru.New[string, *zarrProbe](1 << 14)
	r.cons, _ = lru.New[string, *remoteCons](64)
	return &remoteDir{r: r, prefix: prefix}, r
}

// Cache returns the decoded-block cache (for statistics).
func (r *RemoteFS) Cache() *cache.Cache[pack.BlockKey] { return r.f.cache }

// Stats returns the mount's counters, with what it asked of the store.
func (r *RemoteFS) Stats() Stats { return r.f.Stats() }

// Store returns the object store.
func (r *RemoteFS) Store() *remote.Store { return r.store }

// ino numbers a key (or prefix) stably.
func ino(s string) uint64 {
	return fnv64(s) | 1<<63 // apart from small numbers (the root is 1)
}

// gen numbers a version of an object (by its ETag): a node is one
// version of one key, so that a replaced object becomes a new node, and
// the kernel gives it a page cache of its own (see remoteFile.Open).
func gen(etag string) uint64 { return fnv64(etag) }

// fnv64 is the FNV-1a hash of s.
func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// prefixOf returns the listing prefix of key.
func (r *RemoteFS) prefixOf(key string) string {
	if i := strings.LastIndex(key, "/"); i >= 0 {
		return key[:i+1]
	}
	return ""
}
