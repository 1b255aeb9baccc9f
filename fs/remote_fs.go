package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/pack/frame"
	"github.com/bloscfs/bloscfs/remote"
	"github.com/bloscfs/bloscfs/zarr"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
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
	cons *lru.Cache[string, *consolidated]
	uid  uint32
	gid  uint32

	staleMu sync.Mutex
	stale   map[uint64]*staleBurst // by inode number (see answerStale)
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
	r.cons, _ = lru.New[string, *consolidated](64)
	return &remoteDir{r: r, prefix: prefix}, r
}

// Cache returns the decoded-block cache (for statistics).
func (r *RemoteFS) Cache() *cache.Cache[pack.BlockKey] { return r.f.cache }

// Stats returns the mount's counters, with what it asked of the store.
func (r *RemoteFS) Stats() Stats { return r.f.Stats() }

// Store returns the object store.
func (r *RemoteFS) Store() *remote.Store { return r.store }

// MountRemote serves a read-only view of prefix in store at mountpoint
// and returns once the mount is ready. It first checks that the bucket
// exists and the credentials are accepted, and lists the prefix, so that
// a mount that cannot work refuses to start.
func MountRemote(store *remote.Store, prefix, mountpoint string, opts Options) (*Server, *RemoteFS, error) {
	ctx := context.Background()
	if err := store.Check(ctx); err != nil {
		return nil, nil, err
	}
	root, r := NewRemote(store, prefix, opts)
	if _, err := store.List(ctx, r.prefix); err != nil {
		return nil, nil, err
	}
	if err := checkMountpoint(mountpoint, ""); err != nil {
		return nil, nil, err
	}
	attr := opts.AttrTimeout
	if attr == 0 {
		attr = time.Second
	}
	neg := time.Duration(0)
	mo := fuse.MountOptions{
		FsName:        opts.FsName,
		Name:          "bloscfs",
		MaxWrite:      preferredIO,
		DisableSplice: true,
		MaxBackground: 64,
		AllowOther:    opts.AllowOther,
		DirectMount:   true,
		Debug:         opts.Debug,
		Logger:        opts.Logger,
		Options:       append(append([]string(nil), opts.ExtraOptions...), "ro"),
	}
	if mo.FsName == "" {
		mo.FsName = store.Name(r.prefix)
	}
	if opts.AllowOther {
		mo.Options = append(mo.Options, "default_permissions")
	}
	server, err := serve(mountpoint, root, &gofs.Options{
		MountOptions:    mo,
		AttrTimeout:     &attr,
		EntryTimeout:    &attr,
		NegativeTimeout: &neg,
		Logger:          opts.Logger,
		UID:             r.uid,
		GID:             r.gid,
	}, !opts.NoSelfAccess)
	if err != nil {
		return nil, nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	raiseReadahead(mountpoint, opts.Logger)
	return server, r, nil
}

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

// probeHead is how many leading bytes of an object a probe fetches, in
// one ranged GET: a container's header lies there (a frame's, metalayers
// included, a Bloscpack file's, a chunk's). An object of at most twice
// that is fetched whole by the GET instead (as a local probe reads a
// small file whole): at most 64 KiB more, where the open would cost a
// GET of its own.
const probeHead = 64 << 10

// probe probes an object version once and records whether it is a
// readable container, and the size of its view. A failure is logged
// once: the object is then shown raw under its own name. A failure to
// reach the object is not recorded: it is probed again next time.
func (r *RemoteFS) probe(info remote.ObjectInfo) *probe {
	key := info.Key + "\x00" + info.ETag
	if p, ok := r.probes.Get(key); ok {
		return p
	}
	p, failed, err := r.probeObject(info)
	if err != nil {
		if failed && !errors.Is(err, pack.ErrUnknownFormat) {
			// The object is gone, changed or out of reach: try again
			// next time rather than show it raw for good.
			r.f.warnOnce("%s: %v", r.store.Name(info.Key), err)
			return &probe{}
		}
		r.f.warnOnce("%s: shown raw: %v", r.store.Name(info.Key), err)
		p = &probe{}
	}
	r.probes.Add(key, p)
	return p
}

// probeObject reads what a listing needs of an object: its first
// probeHead bytes (all of it, up to twice that), in one GET (If-Match
// the listed ETag), which stay in the range cache for an open of the
// same version. An object fetched whole is then parsed whole, from those
// bytes; a larger one from its header alone (pack.OpenHead), and its
// index, trailer and chunks are left to the first open, or to the first
// GETXATTR that needs them (see fullProbe). A header longer than probeHead costs one more GET of the
// rest of it; a container whose header does not tell its size (a
// Bloscpack file without chunk sizes) is opened as for a read. failed
// reports an error of the store rather than of the object's content.
func (r *RemoteFS) probeObject(info remote.ObjectInfo) (p *probe, failed bool, err error) {
	o := r.store.OpenInfo(info)
	o.Opened() // the GETs fetch what is asked, no more
	n := info.Size
	if n > 2*probeHead {
		n = probeHead
	}
	head := make([]byte, n)
	if err := o.ReadExact(head, 0); err != nil {
		return nil, true, err
	}
	if int64(len(head)) == info.Size {
		v, err := all.OpenViewReader(bytes.NewReader(head), info.Size, o.Name(), pack.NoCache{})
		if err != nil {
			return nil, false, err
		}
		return probeOf(v), false, nil
	}
	for {
		h, err := pack.OpenHead(head, info.Size, o.Name())
		var short *pack.HeadShortError
		switch {
		case err == nil:
			return &probe{ok: true, size: h.Size, npy: h.NPY, info: pack.Info{Format: h.Format, StoredSize: info.Size}, head: true}, false, nil
		case errors.As(err, &short) && short.N > int64(len(head)) && short.N <= min(info.Size, pack.MaxHead):
			more := make([]byte, short.N)
			copy(more, head)
			if err := o.ReadExact(more[len(head):], int64(len(head))); err != nil {
				return nil, true, err
			}
			head = more
		case errors.Is(err, pack.ErrNoHead):
			return r.probeOpen(info)
		default:
			return nil, false, err
		}
	}
}

// probeOpen probes an object by opening it as a read does: its header,
// index and trailer (for an object of at most remote.SmallObject bytes,
// all of it) in as few GETs as the format allows.
func (r *RemoteFS) probeOpen(info remote.ObjectInfo) (*probe, bool, error) {
	o := r.store.OpenInfo(info)
	v, err := all.OpenViewReader(o, o.Size, o.Name(), pack.NoCache{})
	if err != nil {
		return nil, o.Failed(), err
	}
	return probeOf(v), false, nil
}

// fullProbe returns the probe of the opened object version info, for
// what a probe of its header alone (p.head) does not know: its codec,
// chunks and the other user.bloscfs.* attributes. Any other probe is
// returned as it is.
func (r *RemoteFS) fullProbe(info remote.ObjectInfo, p *probe) (*probe, error) {
	if p == nil || !p.head {
		return p, nil
	}
	full, failed, err := r.probeOpen(info)
	if err != nil {
		if failed {
			r.f.warnOnce("%s: %v", r.store.Name(info.Key), err)
		} else {
			// Shown raw from the next lookup on, as an open that
			// finds the same records it.
			r.f.warnOnce("%s: its header parses but the container does not: %v", r.store.Name(info.Key), err)
			r.probes.Add(info.Key+"\x00"+info.ETag, &probe{})
		}
		return p, err
	}
	r.probes.Add(info.Key+"\x00"+info.ETag, full)
	return full, nil
}

// maxSparseIndex bounds the chunks.b2frame read into memory.
const maxSparseIndex = 64 << 20

// openSparse opens the sparse frame under prefix: its index object is
// read whole, its chunk objects as the reads need them (by the ETags of
// the listing).
func (r *RemoteFS) openSparse(prefix string, c pack.BlockCache) (*all.View, *remote.Object, error) {
	l, err := r.store.List(context.Background(), prefix)
	if err != nil {
		return nil, nil, err
	}
	info, ok := l.Objects[frame.IndexFile]
	if !ok {
		return nil, nil, fmt.Errorf("%s: no %s: %w", r.store.Name(prefix), frame.IndexFile, pack.ErrUnknownFormat)
	}
	if info.Size > maxSparseIndex {
		return nil, nil, fmt.Errorf("%s: %w: %s of %d bytes", r.store.Name(prefix), pack.ErrUnsupported, frame.IndexFile, info.Size)
	}
	idx := r.store.OpenInfo(info)
	b := make([]byte, info.Size)
	if _, err := idx.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, idx, err
	}
	idx.Opened()
	chunk := func(id int64) (io.ReaderAt, int64, error) {
		ci, ok := l.Objects[frame.ChunkFileName(id)]
		if !ok {
			return nil, 0, fmt.Errorf("%s%s: %w", r.store.Name(prefix), frame.ChunkFileName(id), remote.ErrNotFound)
		}
		o := r.store.OpenInfo(ci)
		o.Opened()
		return o, ci.Size, nil
	}
	v, err := all.OpenSparseView(b, r.store.Name(strings.TrimSuffix(prefix, "/")), chunk, c)
	return v, idx, err
}

// probeSparse records whether prefix holds a readable sparse frame.
func (r *RemoteFS) probeSparse(prefix string) *probe {
	l, err := r.store.List(context.Background(), prefix)
	if err != nil {
		return &probe{}
	}
	info, ok := l.Objects[frame.IndexFile]
	if !ok {
		return &probe{}
	}
	key := info.Key + "\x00" + info.ETag
	if p, ok := r.probes.Get(key); ok {
		return p
	}
	p := &probe{}
	v, idx, err := r.openSparse(prefix, pack.NoCache{})
	if err != nil {
		if idx != nil && idx.Failed() {
			return p // try again next time
		}
		r.f.warnOnce("%s: shown as a directory: %v", r.store.Name(prefix), err)
	} else {
		p = probeOf(v)
	}
	r.probes.Add(key, p)
	return p
}

// remoteDir is a prefix shown as a directory.
type remoteDir struct {
	gofs.Inode
	r      *RemoteFS
	prefix string
}

var (
	_ = (gofs.NodeLookuper)((*remoteDir)(nil))
	_ = (gofs.NodeReaddirer)((*remoteDir)(nil))
	_ = (gofs.NodeGetattrer)((*remoteDir)(nil))
	_ = (gofs.NodeStatfser)((*remoteDir)(nil))
	_ = (gofs.NodeGetxattrer)((*remoteDir)(nil))
)

// Getxattr of the root answers StatsXattr, which `bloscfs stats` reads; a
// prefix has no other attribute.
func (d *remoteDir) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if attr == StatsXattr && d.IsRoot() {
		return d.r.f.getStats(dest)
	}
	if notCarried(attr) {
		return 0, syscall.EOPNOTSUPP
	}
	return 0, syscall.ENODATA
}

// probeParallel is how many objects a directory listing probes at once.
const probeParallel = 16

// bucketBackend is the bucket as a backend: directories are prefixes
// ("" or ending in "/"), objects carry their remote.ObjectInfo.
type bucketBackend struct{ r *RemoteFS }

// list returns the objects and prefixes of the (cached) listing of dir:
// a prefix and an object of one name give the prefix. The objects with a
// container suffix are probed first, in parallel: each costs a round
// trip or two.
func (b bucketBackend) list(dir string, names []string) ([]backendEntry, error) {
	l, err := b.r.store.List(context.Background(), dir) // not the request's: an interrupt must not fail a shared listing
	if err != nil {
		b.r.f.warnOnce("%v", err)
		return nil, syscall.EIO
	}
	if names == nil {
		names = make([]string, 0, len(l.Objects)+len(l.Prefixes))
		for name := range l.Objects {
			if !l.Prefixes[name] {
				names = append(names, name)
			}
		}
		for name := range l.Prefixes {
			names = append(names, name)
		}
	}
	var out []backendEntry
	var toProbe []remote.ObjectInfo
	for _, name := range names {
		if l.Prefixes[name] {
			out = append(out, backendEntry{name: name, dir: true})
			continue
		}
		info, ok := l.Objects[name]
		if !ok {
			continue
		}
		if _, suffixed := stemView(name); suffixed {
			toProbe = append(toProbe, info)
		}
		out = append(out, backendEntry{name: name, meta: info})
	}
	if len(toProbe) > 1 {
		sem := make(chan struct{}, probeParallel)
		var wg sync.WaitGroup
		for _, info := range toProbe {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				b.r.probe(info)
			}()
		}
		wg.Wait()
	}
	return out, nil
}

// probe probes an object, or the Zarr array or sparse frame a prefix may
// hold (a prefix is probed as a Zarr node when it is named *.zarr or its
// parent is a Zarr node: see zarrParent). A failure is never returned:
// an object out of reach is shown raw this time, and probed again next
// time.
func (b bucketBackend) probe(dir string, e backendEntry) (*probe, error) {
	if e.dir {
		p := dir + e.name + "/"
		zarrish := strings.HasSuffix(e.name, ".zarr")
		if !zarrish {
			if l, err := b.r.store.List(context.Background(), dir); err == nil {
				zarrish = zarrParent(l)
			}
		}
		if zarrish {
			if zp := b.r.probeZarr(p); zp.kind != zarr.KindNone {
				return zp.p, nil
			}
		}
		if _, suffixed := stemView(e.name); !suffixed {
			return &probe{}, nil // only a *.b2frame prefix can be a sparse frame: no LIST of the others
		}
		return b.r.probeSparse(p), nil
	}
	return b.r.probe(e.meta.(remote.ObjectInfo)), nil
}

// Lookup finds a child by its view name.
func (d *remoteDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	e, errno := lookupEntry(bucketBackend{d.r}, d.prefix, name)
	if errno != 0 {
		return nil, errno
	}
	if e.dir && e.compressed {
		p := d.prefix + e.disk + "/"
		if zp := d.r.probeZarr(p); zp.p.ok {
			n := &remoteFile{r: d.r, info: zp.meta, zarr: p, pr: zp.p}
			n.fill(&out.Attr)
			return d.r.lookedUp(ctx, d.EmbeddedInode(), n, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: ino(p), Gen: gen(n.info.ETag)}), 0
		}
		sl, err := d.r.store.List(context.Background(), p)
		if err != nil || sl.Objects[frame.IndexFile].Key == "" {
			return nil, syscall.EIO
		}
		n := &remoteFile{r: d.r, info: sl.Objects[frame.IndexFile], sparse: p, pr: d.r.probeSparse(p)}
		n.fill(&out.Attr)
		return d.r.lookedUp(ctx, d.EmbeddedInode(), n, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: ino(p), Gen: gen(n.info.ETag)}), 0
	}
	if e.dir {
		p := d.prefix + e.disk + "/"
		n := &remoteDir{r: d.r, prefix: p}
		n.fill(&out.Attr)
		return d.NewInode(ctx, n, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: ino(p)}), 0
	}
	info := e.meta.(remote.ObjectInfo)
	n := &remoteFile{r: d.r, info: info}
	if e.compressed {
		n.pr = d.r.probe(info)
	}
	n.fill(&out.Attr)
	return d.r.lookedUp(ctx, d.EmbeddedInode(), n, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: ino(info.Key), Gen: gen(info.ETag)}), 0
}

// Readdir lists the directory with mapped names.
func (d *remoteDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	ents, errno := viewEntries(bucketBackend{d.r}, d.prefix, nil)
	if errno != 0 {
		return nil, errno
	}
	list := make([]fuse.DirEntry, 0, len(ents))
	for _, e := range ents {
		if e.dir && e.compressed {
			list = append(list, fuse.DirEntry{Name: e.view, Mode: syscall.S_IFREG, Ino: ino(d.prefix + e.disk + "/")})
		} else if e.dir {
			list = append(list, fuse.DirEntry{Name: e.view, Mode: syscall.S_IFDIR, Ino: ino(d.prefix + e.disk + "/")})
		} else {
			list = append(list, fuse.DirEntry{Name: e.view, Mode: syscall.S_IFREG, Ino: ino(e.meta.(remote.ObjectInfo).Key)})
		}
	}
	return gofs.NewListDirStream(list), 0
}

func (d *remoteDir) fill(a *fuse.Attr) {
	a.Mode = syscall.S_IFDIR | 0o555
	a.Nlink = 2
	a.Uid, a.Gid = d.r.uid, d.r.gid
	t := d.r.f.stats.start // the mount's
	a.SetTimes(&t, &t, &t)
	a.Blksize = preferredIO
}

// Getattr reports a directory: read-only, the mount's owner and time.
func (d *remoteDir) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fill(&out.Attr)
	return 0
}

// Statfs reports an empty read-only filesystem (a bucket has no size).
func (d *remoteDir) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize = preferredIO
	out.NameLen = 1024
	return 0
}

// remoteFile is an object: a container shown decompressed (pr.ok), or
// its bytes as they are.
type remoteFile struct {
	gofs.Inode
	r *RemoteFS

	sparse string // a sparse frame: its prefix ("" for an object)
	zarr   string // a Zarr array: its prefix; info is its metadata object

	mu   sync.Mutex
	info remote.ObjectInfo // the object, or a sparse frame's index
	pr   *probe            // nil or !ok: shown raw
	cur  *openState        // the version handles open, shared
}

// openState is one opened version of an object: the content its
// handles read.
type openState struct {
	obj   *remote.Object
	view  io.ReaderAt // an *all.View, or the object itself (shown raw)
	plain int64       // the size shown

	// replaced is set when a newer version of the object is opened on
	// the node. The kernel keeps one page cache per file, which the
	// handles of both versions read: from then on this version's reads
	// fail rather than put its bytes there (see Open).
	replaced atomic.Bool
}

// errReplaced is the error of a read of a version replaced since.
func (st *openState) errReplaced() error {
	return fmt.Errorf("%s: replaced since this handle opened it (a new open reads the new version): %w", st.obj.Name(), remote.ErrChanged)
}

var _ = (viewContent)((*openState)(nil))

// readAt reads the version opened, within its size.
func (st *openState) readAt(p []byte, off int64, once bool) (int, error) {
	if st.replaced.Load() {
		return 0, st.errReplaced()
	}
	if off >= st.plain {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), st.plain-off)]
	if v, ok := st.view.(*all.View); ok && once {
		// A sequential reader: the object's read-ahead need not wait
		// until it has seen enough bytes in sequence itself.
		st.obj.Streaming()
		return v.ReadAtOnce(p, off) // the kernel keeps these pages
	}
	return st.view.ReadAt(p, off)
}

// prefetch decodes blocks of a container ahead (their compressed bytes
// come from the object's own read-ahead GETs).
func (st *openState) prefetch(off, size int64, reader func() int64) {
	if v, ok := st.view.(*all.View); ok && !st.replaced.Load() {
		v.Prefetch(off, size, reader)
	}
}

func (st *openState) size() int64 { return st.plain }

// newHandle returns a handle that reads the version st. A failed read
// the object store has logged already is not logged again.
func (n *remoteFile) newHandle(st *openState) *remoteHandle {
	var ra int64
	if _, ok := st.view.(*all.View); ok {
		ra = n.r.f.opts.ReadAhead
	}
	n.r.f.stats.openFiles.Add(1)
	return &remoteHandle{viewHandle{c: st, f: n.r.f, readAhead: ra, logged: st.obj.Failed}}
}

var (
	_ = (gofs.NodeGetattrer)((*remoteFile)(nil))
	_ = (gofs.NodeOpener)((*remoteFile)(nil))
	_ = (gofs.NodeGetxattrer)((*remoteFile)(nil))
	_ = (gofs.NodeListxattrer)((*remoteFile)(nil))
	_ = (gofs.NodeSetattrer)((*remoteFile)(nil))
)

func (n *remoteFile) compressed() bool { return n.pr != nil && n.pr.ok }

func (n *remoteFile) fill(a *fuse.Attr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	a.Mode = syscall.S_IFREG | 0o444
	a.Nlink = 1
	a.Uid, a.Gid = n.r.uid, n.r.gid
	a.Size = uint64(n.info.Size)
	if n.compressed() {
		a.Size = uint64(n.pr.size)
	}
	a.Blocks = (uint64(n.info.Size) + 511) / 512
	t := n.info.LastModified
	a.SetTimes(&t, &t, &t)
	a.Blksize = preferredIO
}

// Getattr reports the object's attributes: its plain size, LastModified.
func (n *remoteFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fill(&out.Attr)
	return 0
}

// Setattr refuses: the remote view is read-only.
func (n *remoteFile) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

// Open opens the object's current version: one HEAD tells whether it
// changed since it was listed or last opened; a changed object is opened
// anew (new size, new index) and the kernel's cached pages dropped.
func (n *remoteFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if writable(flags) {
		return nil, 0, syscall.EROFS
	}
	n.mu.Lock()
	key, cur := n.info.Key, n.cur
	n.mu.Unlock()
	info, err := n.r.store.Stat(context.Background(), key) // interrupts (SIGURG in Go readers) would cancel it
	if err != nil {
		n.r.f.opts.Logger.Printf("open: %v", err)
		if errors.Is(err, remote.ErrNotFound) {
			return nil, 0, syscall.ENOENT
		}
		return nil, 0, syscall.EIO
	}
	if cur != nil && cur.obj.ETag == info.ETag && !cur.obj.Changed() {
		return n.newHandle(cur), fuse.FOPEN_KEEP_CACHE, 0
	}
	if cur != nil && cur.obj.ETag != info.ETag {
		// The object was replaced since this node's version was opened.
		// The kernel keeps one page cache per node, which the handles of
		// both versions would read: the new version gets a node of its
		// own. ESTALE makes the kernel look the name up again (once,
		// with LOOKUP_REVAL); the listing, dropped here, then gives the
		// new ETag and Lookup a node of the new generation, while the
		// handles open on this one keep reading the old version (or get
		// EIO once a GET meets the change). An open that comes to this
		// node after such a lookup all the same (see answerStale) opens
		// the new version on it below, and the old one's handles fail
		// from then on.
		if n.r.answerStale(n.StableAttr()) {
			n.r.store.Invalidate(n.r.prefixOf(key))
			return nil, 0, syscall.ESTALE
		}
	}
	var opened *probe // the probe of the version opened, when it is a container
	st := &openState{obj: n.r.store.OpenInfo(info), plain: info.Size}
	st.view = st.obj
	n.mu.Lock()
	wasCompressed := n.compressed()
	n.mu.Unlock()
	if n.sparse != "" {
		if cur != nil && cur.obj.ETag != info.ETag {
			n.r.store.Invalidate(n.sparse) // the chunks changed too
		}
		c := n.r.f.blockCache()
		v, idx, err := n.r.openSparse(n.sparse, c)
		if err != nil {
			n.r.f.warnOnce("%v", err)
			return nil, 0, syscall.EIO
		}
		c.setCodec(v.Container.Info().Codec)
		st.obj, st.view, st.plain = idx, v, v.Size
		info = idx.ObjectInfo
	} else if n.zarr != "" {
		c := n.r.f.blockCache()
		v, err := n.r.openZarr(n.zarr, c)
		if err != nil {
			n.r.f.warnOnce("%v", err)
			return nil, 0, syscall.EIO
		}
		c.setCodec(v.Container.Info().Codec)
		st.view, st.plain = v, v.Size
	} else if wasCompressed {
		c := n.r.f.blockCache()
		v, err := all.OpenViewReader(st.obj, info.Size, st.obj.Name(), c)
		if err != nil {
			n.r.f.warnOnce("%v", err)
			if !st.obj.Failed() {
				// Its header parsed (a listing's probe reads no more),
				// the rest does not: shown raw from the next lookup on.
				n.r.probes.Add(info.Key+"\x00"+info.ETag, &probe{})
			}
			return nil, 0, syscall.EIO
		}
		c.setCodec(v.Container.Info().Codec)
		st.view, st.plain = v, v.Size
		opened = probeOf(v)
		n.r.probes.Add(info.Key+"\x00"+info.ETag, opened)
	}
	st.obj.Opened()
	n.mu.Lock()
	// The kernel's cached pages are those of the version last opened
	// (cur), whatever a listing has learned since: compare with that.
	stale := cur != nil && cur.obj.ETag != info.ETag
	changed := n.info.ETag != info.ETag || stale
	if stale {
		// The handles of the old version fail from now on: a read of
		// theirs arriving after this would fill the kernel's page cache,
		// which this open is about to drop, with old bytes for the new
		// handle to find. Reads of theirs already under way hold their
		// pages locked, and the kernel drops those pages once they are
		// done.
		cur.replaced.Store(true)
	}
	n.info, n.cur = info, st
	if n.sparse != "" {
		n.pr = n.r.probeSparse(n.sparse)
	} else if n.zarr != "" {
		if changed {
			n.r.zprobes.Remove(n.zarr)
		}
		if zp := n.r.probeZarr(n.zarr); zp.p.ok {
			n.pr = zp.p
		}
	} else if opened != nil {
		n.pr = opened
	}
	n.mu.Unlock()
	fl := uint32(fuse.FOPEN_KEEP_CACHE)
	if changed {
		n.r.store.Invalidate(n.r.prefixOf(key))
		go n.NotifyContent(0, 0)
	}
	if stale {
		// Without KEEP_CACHE the kernel drops the file's cached pages at
		// this open, before any read: the asynchronous notification above
		// alone may come after the reads it should have preceded.
		fl = 0
	}
	return n.newHandle(st), fl, 0
}

// prefixOf returns the listing prefix of key.
func (r *RemoteFS) prefixOf(key string) string {
	if i := strings.LastIndex(key, "/"); i >= 0 {
		return key[:i+1]
	}
	return ""
}

// xattrsOf returns the user.bloscfs.* attributes of the node. A node
// probed from its header alone is probed in full first (its index and
// first chunk tell the codec, chunks and filters): a GETXATTR of one of
// those costs what an open does, once per object version.
func (n *remoteFile) xattrsOf() (map[string]string, error) {
	n.mu.Lock()
	pr, info := n.pr, n.info
	n.mu.Unlock()
	if pr != nil && pr.head {
		full, err := n.r.fullProbe(info, pr)
		if err != nil {
			return nil, err
		}
		n.mu.Lock()
		if n.pr == pr {
			n.pr = full
		}
		n.mu.Unlock()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	m := map[string]string{}
	if n.compressed() {
		m = xattrs(n.pr)
	}
	m["etag"] = n.info.ETag
	return m, nil
}

// Getxattr returns a user.bloscfs.* attribute (plus user.bloscfs.etag).
func (n *remoteFile) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	n.mu.Lock()
	pr, prefix := n.pr, n.zarr
	n.mu.Unlock()
	if sz, errno, ours := zarrXattr(pr, attr, dest, func() (int64, error) {
		_, size, err := n.r.store.Du(context.Background(), prefix)
		if err != nil {
			n.r.f.warnOnce("%v", err)
		}
		return size, err
	}); ours {
		return sz, errno
	}
	if notCarried(attr) {
		return 0, syscall.EOPNOTSUPP
	}
	if !strings.HasPrefix(attr, xattrPrefix) {
		return 0, syscall.ENODATA
	}
	var own map[string]string
	if attr == xattrPrefix+"etag" {
		n.mu.Lock()
		own = map[string]string{"etag": n.info.ETag}
		n.mu.Unlock()
	} else {
		var err error
		if own, err = n.xattrsOf(); err != nil {
			return 0, syscall.EIO
		}
	}
	sz, errno, _ := getXattr(own, attr, dest)
	return sz, errno
}

// Listxattr lists the user.bloscfs.* attributes.
func (n *remoteFile) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	n.mu.Lock()
	pr := n.pr
	n.mu.Unlock()
	own, err := n.xattrsOf()
	if err != nil {
		return 0, syscall.EIO
	}
	return listXattrs(own, zarrXattrNames(pr), dest)
}

// remoteHandle is an open object version: the shared read path
// (viewHandle), whose read-ahead decodes the blocks of containers.
type remoteHandle struct {
	viewHandle
}

var (
	_ = (gofs.FileReader)((*remoteHandle)(nil))
	_ = (gofs.FileReleaser)((*remoteHandle)(nil))
)

// Release waits for the handle's read-ahead.
func (h *remoteHandle) Release(ctx context.Context) syscall.Errno {
	if h.stop() {
		h.f.stats.openFiles.Add(-1)
	}
	return 0
}
