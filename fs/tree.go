package fs

// Trees, on both backends: a source file or directory that holds a
// pack.Tree (a zipped Zarr store, a python-blosc2 store) is shown as a
// read-only directory of its own name, or, when the tree's root is a
// file (a zipped Zarr array), as that file. One opened tree per version
// of its source (local_tree.go, remote_tree.go) is kept in a cache
// bounded in bytes; the nodes of a tree hold it while the kernel knows
// them.

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bloscfs/bloscfs/pack"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// openTree is one opened version of a tree, shared by the cache and by
// the nodes that show it.
type openTree struct {
	t    pack.Tree
	key  string    // the version's key in the cache
	name string    // the source, for log lines
	src  io.Closer // what the tree reads (a local file), closed after it
	mem  int64     // what it holds in memory, roughly
	f    *FS

	// What the tree's nodes show of their source: owner, permission
	// bits (without write), times, blocks.
	uid, gid uint32
	perm     uint32
	mtime    time.Time
	statfs   func(out *fuse.StatfsOut) syscall.Errno
	// timeout is how long the kernel may keep the root's name and
	// attributes (the source may change behind the mount); those inside
	// a version never change, and are kept an hour.
	timeout time.Duration

	refs atomic.Int64 // the cache's one, and one per node

	mu   sync.Mutex
	dirs map[string][]pack.TreeEntry // ReadDir answers, by path
}

// hold takes a reference, unless the tree has been closed already.
func (t *openTree) hold() bool {
	for {
		n := t.refs.Load()
		if n <= 0 {
			return false
		}
		if t.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last closes the tree and its source.
func (t *openTree) release() {
	if t.refs.Add(-1) == 0 {
		t.t.Close()
		if t.src != nil {
			t.src.Close()
		}
	}
}

// readDir returns the entries of the directory at p, read once per
// opened tree. What reading it left out (a tree may find it only then)
// is logged, once each.
func (t *openTree) readDir(p string) ([]pack.TreeEntry, error) {
	t.mu.Lock()
	ents, ok := t.dirs[p]
	t.mu.Unlock()
	if ok {
		return ents, nil
	}
	ents, err := t.t.ReadDir(p)
	if err != nil {
		return nil, err
	}
	if t.f != nil {
		t.f.logProblems(t.t)
	}
	t.mu.Lock()
	if t.dirs == nil {
		t.dirs = map[string][]pack.TreeEntry{}
	}
	t.dirs[p] = ents
	t.mu.Unlock()
	return ents, nil
}

// stat returns the entry at p.
func (t *openTree) stat(p string) (pack.TreeEntry, error) {
	if p == "" {
		return t.t.Root(), nil
	}
	dir, name := path.Split(p)
	ents, err := t.readDir(strings.TrimSuffix(dir, "/"))
	if err != nil {
		return pack.TreeEntry{}, err
	}
	if e, ok := findTreeEntry(ents, name); ok {
		return e, nil
	}
	return pack.TreeEntry{}, fmt.Errorf("%s: %s: %w", t.name, p, pack.ErrNotInTree)
}

// findTreeEntry finds the entry name among ents, a directory's entries
// sorted by name as pack.Tree's ReadDir returns them.
func findTreeEntry(ents []pack.TreeEntry, name string) (pack.TreeEntry, bool) {
	i, ok := slices.BinarySearchFunc(ents, name, func(e pack.TreeEntry, n string) int { return strings.Compare(e.Name, n) })
	if !ok {
		return pack.TreeEntry{}, false
	}
	return ents[i], true
}

// ino returns the inode number of the entry at p: the same for the same
// version of the source and path, in a range of its own (bit 62 set,
// bit 63 clear: newID's numbers have bit 63, the source's are small).
func (t *openTree) ino(p string) uint64 { return treeIno(t.key, p) }

// treeIno returns the inode number of the entry at p of the tree whose
// version has the key key.
func treeIno(key, p string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(p))
	return h.Sum64()&^(1<<63) | 1<<62
}

// fill sets the attributes of entry e of the tree.
func (t *openTree) fill(a *fuse.Attr, e pack.TreeEntry) {
	a.Uid, a.Gid = t.uid, t.gid
	a.SetTimes(&t.mtime, &t.mtime, &t.mtime)
	a.Blksize = preferredIO
	if e.Dir {
		a.Mode = syscall.S_IFDIR | t.perm&0o555 | (t.perm&0o444)>>2 // r → x
		a.Nlink = 2
		return
	}
	a.Mode = syscall.S_IFREG | t.perm&0o444
	a.Nlink = 1
	a.Size = uint64(e.Size)
	a.Blocks = (a.Size + 511) / 512
}

// fillStatfs reports the file system of the tree's source (a bucket's
// has no size).
func (t *openTree) fillStatfs(out *fuse.StatfsOut) syscall.Errno {
	if t.statfs != nil {
		return t.statfs(out)
	}
	out.Bsize = preferredIO
	out.NameLen = 1024
	return 0
}

// node makes the node of entry e at p, holding a reference to the tree
// (dropped when the kernel forgets it, or by the caller when go-fuse
// already had a node for it).
func (t *openTree) node(p string, e pack.TreeEntry) (gofs.InodeEmbedder, gofs.StableAttr, bool) {
	if !t.hold() {
		return nil, gofs.StableAttr{}, false
	}
	id := gofs.StableAttr{Mode: syscall.S_IFREG, Ino: t.ino(p), Gen: 1}
	if e.Dir {
		id.Mode = syscall.S_IFDIR
		return &treeDir{t: t, path: p}, id, true
	}
	return &treeFile{t: t, path: p, e: e}, id, true
}

// newTreeChild adds the node of entry e at p under parent, and answers
// the lookup with its attributes.
func newTreeChild(ctx context.Context, parent *gofs.Inode, t *openTree, p string, e pack.TreeEntry, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	n, id, ok := t.node(p, e)
	if !ok {
		return nil, syscall.ESTALE
	}
	child := parent.NewInode(ctx, n, id)
	if child.Operations() != n {
		t.release() // go-fuse kept the node it had: it holds its own reference
	}
	t.fill(&out.Attr, e)
	out.Ino = id.Ino
	timeout := t.timeout
	if p != "" {
		timeout = time.Hour // a version of a tree never changes
	}
	out.SetEntryTimeout(timeout)
	out.SetAttrTimeout(timeout)
	return child, 0
}

// treeXattrs returns the user.bloscfs.* attributes of a file of a tree
// (named without the prefix): how it is stored (none for a file shown as
// it is stored), and the tree's own (a Zarr array's shape, …).
func treeXattrs(e pack.TreeEntry) map[string]string {
	m := map[string]string{}
	if e.Info.Format != "" {
		m = xattrs(&probe{ok: true, size: e.Size, info: e.Info})
		if e.Info.StoredSize == 0 {
			delete(m, "compressed_size")
		}
	}
	for k, v := range e.Attrs {
		m[k] = v
	}
	return m
}

// getTreeXattr answers a GETXATTR of entry e.
func getTreeXattr(e pack.TreeEntry, attr string, dest []byte) (uint32, syscall.Errno) {
	if notCarried(attr) {
		return 0, syscall.EOPNOTSUPP
	}
	if v, ok := e.XAttrs[attr]; ok {
		if len(dest) < len(v) {
			return uint32(len(v)), syscall.ERANGE
		}
		return uint32(copy(dest, v)), 0
	}
	if sz, errno, ours := getXattr(treeXattrs(e), attr, dest); ours {
		return sz, errno
	}
	return 0, syscall.ENODATA
}

// listTreeXattrs answers a LISTXATTR of entry e.
func listTreeXattrs(e pack.TreeEntry, dest []byte) (uint32, syscall.Errno) {
	var more []byte
	names := make([]string, 0, len(e.XAttrs))
	for name := range e.XAttrs {
		if !notCarried(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		more = append(append(more, name...), 0)
	}
	return listXattrs(treeXattrs(e), more, dest)
}

// treeDir is a directory of a tree (its root, when the root is one).
type treeDir struct {
	gofs.Inode
	t    *openTree
	path string
}

var (
	_ = (gofs.NodeLookuper)((*treeDir)(nil))
	_ = (gofs.NodeReaddirer)((*treeDir)(nil))
	_ = (gofs.NodeGetattrer)((*treeDir)(nil))
	_ = (gofs.NodeGetxattrer)((*treeDir)(nil))
	_ = (gofs.NodeListxattrer)((*treeDir)(nil))
	_ = (gofs.NodeStatfser)((*treeDir)(nil))
	_ = (gofs.NodeOnForgetter)((*treeDir)(nil))
	_ = (gofs.NodeSetattrer)((*treeDir)(nil))
	_ = (gofs.NodeCreater)((*treeDir)(nil))
	_ = (gofs.NodeMkdirer)((*treeDir)(nil))
	_ = (gofs.NodeUnlinker)((*treeDir)(nil))
	_ = (gofs.NodeRmdirer)((*treeDir)(nil))
	_ = (gofs.NodeRenamer)((*treeDir)(nil))
	_ = (gofs.NodeSymlinker)((*treeDir)(nil))
	_ = (gofs.NodeLinker)((*treeDir)(nil))
	_ = (gofs.NodeMknoder)((*treeDir)(nil))
	_ = (gofs.NodeSetxattrer)((*treeDir)(nil))
	_ = (gofs.NodeRemovexattrer)((*treeDir)(nil))
)

// entries returns the directory's entries; an error is logged once and
// answered EIO.
func (d *treeDir) entries() ([]pack.TreeEntry, syscall.Errno) {
	ents, err := d.t.readDir(d.path)
	if err != nil {
		d.t.f.warnOnce("%v", err)
		return nil, syscall.EIO
	}
	return ents, 0
}

// Lookup finds an entry of the directory.
func (d *treeDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ents, errno := d.entries()
	if errno != 0 {
		return nil, errno
	}
	if e, ok := findTreeEntry(ents, name); ok {
		return newTreeChild(ctx, d.EmbeddedInode(), d.t, path.Join(d.path, name), e, out)
	}
	return nil, syscall.ENOENT
}

// Readdir lists the directory.
func (d *treeDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	ents, errno := d.entries()
	if errno != 0 {
		return nil, errno
	}
	list := make([]fuse.DirEntry, 0, len(ents))
	for _, e := range ents {
		mode := uint32(syscall.S_IFREG)
		if e.Dir {
			mode = syscall.S_IFDIR
		}
		list = append(list, fuse.DirEntry{Name: e.Name, Mode: mode, Ino: d.t.ino(path.Join(d.path, e.Name))})
	}
	return gofs.NewListDirStream(list), 0
}

// Getattr reports a read-only directory with its source's owner and
// time.
func (d *treeDir) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.t.fill(&out.Attr, pack.TreeEntry{Dir: true})
	out.SetTimeout(d.t.timeout)
	return 0
}

// Getxattr answers the directory's attributes (a store's or subtree's
// vlmeta).
func (d *treeDir) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	e, err := d.t.stat(d.path)
	if err != nil {
		return 0, syscall.ENODATA
	}
	return getTreeXattr(e, attr, dest)
}

// Listxattr lists the directory's attributes.
func (d *treeDir) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	e, err := d.t.stat(d.path)
	if err != nil {
		return listXattrs(nil, nil, dest)
	}
	return listTreeXattrs(e, dest)
}

// Statfs reports the source's file system.
func (d *treeDir) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return d.t.fillStatfs(out)
}

// OnForget drops the node's reference to the tree.
func (d *treeDir) OnForget() { d.t.release() }

// A tree is read-only: every change is EROFS.

func (d *treeDir) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}
func (d *treeDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}
func (d *treeDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (d *treeDir) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }
func (d *treeDir) Rmdir(ctx context.Context, name string) syscall.Errno  { return syscall.EROFS }
func (d *treeDir) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}
func (d *treeDir) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (d *treeDir) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (d *treeDir) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (d *treeDir) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EROFS
}
func (d *treeDir) Removexattr(ctx context.Context, attr string) syscall.Errno { return syscall.EROFS }

// treeFile is a file of a tree (the tree itself, when its root is one).
type treeFile struct {
	gofs.Inode
	t    *openTree
	path string
	e    pack.TreeEntry
}

var (
	_ = (gofs.NodeGetattrer)((*treeFile)(nil))
	_ = (gofs.NodeOpener)((*treeFile)(nil))
	_ = (gofs.NodeGetxattrer)((*treeFile)(nil))
	_ = (gofs.NodeListxattrer)((*treeFile)(nil))
	_ = (gofs.NodeSetattrer)((*treeFile)(nil))
	_ = (gofs.NodeSetxattrer)((*treeFile)(nil))
	_ = (gofs.NodeRemovexattrer)((*treeFile)(nil))
	_ = (gofs.NodeStatfser)((*treeFile)(nil))
	_ = (gofs.NodeOnForgetter)((*treeFile)(nil))
)

// Getattr reports a read-only file of the size shown.
func (n *treeFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.t.fill(&out.Attr, n.e)
	out.SetTimeout(n.t.timeout)
	return 0
}

// Open opens the file for reading; writing is EROFS.
func (n *treeFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	c, err := n.t.t.Open(n.path)
	if err != nil {
		n.t.f.warnOnce("%v", err)
		return nil, 0, errnoOf(err)
	}
	if !n.t.hold() {
		closeContainer(c)
		return nil, 0, syscall.ESTALE
	}
	n.t.f.stats.openFiles.Add(1)
	h := &treeHandle{viewHandle: viewHandle{c: &treeContent{c: c}, f: n.t.f}, t: n.t}
	if _, ok := c.(pack.Streamer); ok {
		h.readAhead = n.t.f.opts.ReadAhead
	}
	return h, fuse.FOPEN_KEEP_CACHE, 0
}

// Getxattr answers the file's attributes.
func (n *treeFile) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return getTreeXattr(n.e, attr, dest)
}

// Listxattr lists the file's attributes.
func (n *treeFile) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listTreeXattrs(n.e, dest)
}

// Statfs reports the source's file system.
func (n *treeFile) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return n.t.fillStatfs(out)
}

// OnForget drops the node's reference to the tree.
func (n *treeFile) OnForget() { n.t.release() }

func (n *treeFile) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}
func (n *treeFile) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EROFS
}
func (n *treeFile) Removexattr(ctx context.Context, attr string) syscall.Errno { return syscall.EROFS }

// treeContent is what a handle of a tree's file reads.
type treeContent struct{ c pack.Container }

func (c *treeContent) readAt(p []byte, off int64, once bool) (int, error) {
	if s, ok := c.c.(pack.Streamer); ok && once {
		return s.ReadAtOnce(p, off)
	}
	return c.c.ReadAt(p, off)
}

func (c *treeContent) prefetch(off, size int64, reader func() int64) {
	if s, ok := c.c.(pack.Streamer); ok {
		s.Prefetch(off, size, reader)
	}
}

func (c *treeContent) size() int64 { return c.c.Size() }

// treeHandle is an open file of a tree: the shared read path.
type treeHandle struct {
	viewHandle
	t *openTree
}

var (
	_ = (gofs.FileReader)((*treeHandle)(nil))
	_ = (gofs.FileReleaser)((*treeHandle)(nil))
)

// Release waits for the handle's read-ahead and closes what it read.
func (h *treeHandle) Release(ctx context.Context) syscall.Errno {
	if h.stop() {
		h.f.stats.openFiles.Add(-1)
		closeContainer(h.c.(*treeContent).c)
		h.t.release()
	}
	return 0
}

func closeContainer(c pack.Container) {
	if cl, ok := c.(io.Closer); ok {
		cl.Close()
	}
}

// treeCache keeps the trees opened, one per version of a source, in
// least recently used order, within maxTreeBytes of what they hold in
// memory (and at most maxTrees of them). The nodes of an evicted tree
// keep it open until the kernel forgets them.
type treeCache struct {
	mu      sync.Mutex
	order   []string // least recently used first
	trees   map[string]*openTree
	bytes   int64
	loading map[string]*treeLoad
}

type treeLoad struct {
	done chan struct{}
	t    *openTree
	err  error
}

const (
	maxTreeBytes = 256 << 20
	maxTrees     = 256
)

// treeMem is what a tree holds in memory when it does not say: its
// directory tables, a mebibyte at most in the formats read.
const treeMem = 1 << 20

// get returns the tree of key, opened by open if it is not cached, with
// a reference the caller releases. Concurrent gets of one key wait for
// one open.
func (c *treeCache) get(key string, open func() (*openTree, error)) (*openTree, error) {
	for {
		c.mu.Lock()
		if c.trees == nil {
			c.trees, c.loading = map[string]*openTree{}, map[string]*treeLoad{}
		}
		if t, ok := c.trees[key]; ok && t.hold() {
			c.touch(key)
			c.mu.Unlock()
			return t, nil
		}
		if l, ok := c.loading[key]; ok {
			c.mu.Unlock()
			<-l.done
			if l.err != nil {
				return nil, l.err
			}
			continue
		}
		l := &treeLoad{done: make(chan struct{})}
		c.loading[key] = l
		c.mu.Unlock()
		t, err := open()
		c.mu.Lock()
		delete(c.loading, key)
		if err == nil {
			t.key = key
			t.refs.Store(2) // the cache's and the caller's
			c.trees[key] = t
			c.order = append(c.order, key)
			c.bytes += t.mem
			c.evict()
		}
		l.t, l.err = t, err
		c.mu.Unlock()
		close(l.done)
		return t, err
	}
}

// touch moves key to the most recently used end (c.mu held).
func (c *treeCache) touch(key string) {
	if i := slices.Index(c.order, key); i >= 0 && i != len(c.order)-1 {
		c.order = append(slices.Delete(c.order, i, i+1), key)
	}
}

// evict drops the least recently used trees past the bounds, but the
// newest (c.mu held).
func (c *treeCache) evict() {
	for len(c.order) > 1 && (c.bytes > maxTreeBytes || len(c.order) > maxTrees) {
		key := c.order[0]
		c.order = c.order[1:]
		t := c.trees[key]
		delete(c.trees, key)
		c.bytes -= t.mem
		t.release()
	}
}

// drop forgets every cached tree (at unmount).
func (c *treeCache) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, key := range c.order {
		c.trees[key].release()
	}
	c.order, c.trees, c.bytes = nil, nil, 0
}

// treeMemOf returns what t holds in memory: its own figure where it
// gives one.
func treeMemOf(t pack.Tree) int64 {
	if s, ok := t.(interface{ MemSize() int64 }); ok {
		return max(s.MemSize(), 1)
	}
	return treeMem
}

// logProblems logs what a tree left out, once each.
func (f *FS) logProblems(t pack.Tree) {
	if p, ok := t.(pack.TreeProblems); ok {
		for _, err := range p.Problems() {
			f.warnOnce("%v", err)
		}
	}
}
