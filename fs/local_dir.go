package fs

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The source directory's directories (dirNode): lookups and listings
// through the name mapping, and the namespace changes (rename, unlink,
// link, create) of the files they hold.

// dirNode is a directory: a loopback node whose children are named by
// mapNames.
type dirNode struct {
	loopbackNode
	fs    *FS
	names viewNames // the names of the last listing, while the directory is unchanged
}

var (
	_ = (gofs.NodeLookuper)((*dirNode)(nil))
	_ = (gofs.NodeOpendirHandler)((*dirNode)(nil))
	_ = (gofs.NodeUnlinker)((*dirNode)(nil))
	_ = (gofs.NodeRenamer)((*dirNode)(nil))
	_ = (gofs.NodeCreater)((*dirNode)(nil))
)

func (d *dirNode) path() string { return d.fs.diskPath(&d.Inode) }

// nameMax is the longest name the source filesystems take (NAME_MAX).
const nameMax = 255

// resolve finds the view entry called name, looking only at the disk
// entries that could be it. A name longer than NAME_MAX gives
// ENAMETOOLONG, and a failure other than ENOENT (ENAMETOOLONG for a path
// past PATH_MAX, EACCES, ELOOP, …) is returned as it is.
func (d *dirNode) resolve(name string) (*entry, syscall.Errno) {
	if len(name) > nameMax {
		return nil, syscall.ENAMETOOLONG
	}
	return lookupEntry(localBackend{d.fs}, d.path(), name)
}

// resolveKept is resolve for the read side (lookups, a node's disk
// path): while the directory is as its last listing found it, the name
// is found among that listing's names with one stat of the directory.
// A name shown raw although it has a container suffix is resolved in
// full: it may have become readable in place. The caller checks that a
// compressed entry still probes readable (see Lookup).
func (d *dirNode) resolveKept(name string) (e *entry, kept bool, errno syscall.Errno) {
	if len(name) > nameMax {
		return nil, false, syscall.ENAMETOOLONG
	}
	dir := d.path()
	if e, found, ok := d.names.get(dir, name); ok {
		if !found {
			return nil, true, syscall.ENOENT
		}
		_, suffixed := stemView(e.disk)
		suffixed = suffixed || treeNamed(e.disk, e.dir)
		if e.compressed || e.tree || !suffixed {
			return e, true, 0
		}
	}
	e, errno = lookupEntry(localBackend{d.fs}, dir, name)
	return e, false, errno
}

// Lookup finds a child by its view name.
func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	e, kept, errno := d.resolveKept(name)
	if errno != 0 {
		return nil, errno
	}
	ch, errno := d.lookupResolved(ctx, name, e, out)
	if errno == errStaleName && kept {
		// The kept names no longer hold (a file stopped parsing in
		// place): resolve in full.
		d.names.drop()
		if e, errno = d.resolve(name); errno != 0 {
			return nil, errno
		}
		ch, errno = d.lookupResolved(ctx, name, e, out)
	}
	if errno == errStaleName {
		return d.LoopbackNode.Lookup(ctx, e.disk, out)
	}
	return ch, errno
}

// errStaleName is lookupResolved's answer for a compressed entry that no
// longer probes readable.
const errStaleName = syscall.Errno(0x7fff)

// lookupResolved makes (or finds) the node of the view name name, which
// leads to e.
func (d *dirNode) lookupResolved(ctx context.Context, name string, e *entry, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e.tree {
		return d.lookupTree(ctx, e, out)
	}
	if !e.compressed {
		return d.LoopbackNode.Lookup(ctx, e.disk, out)
	}
	p := filepath.Join(d.path(), e.disk)
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return nil, gofs.ToErrno(err)
	}
	pr, err := d.fs.probe(p, &st)
	if err != nil {
		return nil, errnoOf(err)
	}
	if !pr.ok {
		return nil, errStaleName
	}
	n := &blobNode{fs: d.fs, disk: e.disk, sparse: e.dir, dir: d, ino: st.Ino}
	id := d.fs.blobID(p, &st)
	if st.Nlink > 1 && !e.dir {
		// A hard-linked file: one node per name. A commit replaces the
		// disk file of the one name it was written through (the write
		// breaks the link), so names sharing a node would show content
		// they do not store.
		id = d.fs.newID()
	}
	// The node that has this name keeps it while it shows the same disk
	// file (the link count may have changed meanwhile): it may hold
	// staged writes.
	if ch := d.GetChild(name); ch != nil {
		if bn, ok := ch.Operations().(*blobNode); ok && bn.shows(st.Ino) {
			id = ch.StableAttr()
		}
	}
	child := d.NewInode(ctx, n, id)
	if bn, ok := child.Operations().(*blobNode); ok && st.Nlink > 1 && !e.dir {
		d.fs.addLink(st.Ino, bn)
	}
	fillAttr(&out.Attr, &st, pr)
	out.Ino = id.Ino
	// A node already in the tree may be open for writing: its size is the
	// staged one, not the committed one on disk (the reply's attributes
	// would otherwise shrink a file being appended to).
	if ch := d.GetChild(name); ch != nil {
		if bn, ok := ch.Operations().(*blobNode); ok && ch.StableAttr() == id {
			if size, staged := bn.stagedSize(); staged {
				out.Size = uint64(size)
			}
		}
	}
	// The attributes change only through the mount: cache them long
	// (not at all for a hard-linked file: see attrTimeout). So the name
	// (at least as long as a plain entry's): it depends on its siblings
	// too (collisions), but a sibling that appears behind the mount
	// changes the directory, and the next listing of it drops the names
	// that now lead elsewhere (dropMoved).
	out.SetEntryTimeout(max(d.fs.attrTimeout(&st), d.fs.opts.AttrTimeout))
	out.SetAttrTimeout(d.fs.attrTimeout(&st))
	return child, 0
}

// OpendirHandle lists the directory with mapped names. While the
// directory is unchanged since a listing the kernel was allowed to keep
// (FOPEN_CACHE_DIR), the kernel is told to keep it, and the listing is
// made only if the kernel asks for entries after all (it dropped its
// copy). A listing of a changed directory drops the kernel's copy first.
func (d *dirNode) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	dir := d.path()
	h := &listHandle{d: d, dir: dir}
	sig, same := d.names.current(dir)
	d.names.mu.Lock()
	listed := same && d.names.listed && d.names.keepable
	d.names.mu.Unlock()
	if listed {
		d.fs.stats.dirsKept.Add(1)
		return h, fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
	}
	if errno := h.load(); errno != 0 {
		return nil, 0, errno
	}
	d.dropMoved(h.mapped)
	d.names.set(sig, h.mapped)
	d.names.mu.Lock()
	keep := d.names.valid && d.names.sig == sig && d.names.keepable
	if keep {
		d.names.listed = true
	}
	d.names.mu.Unlock()
	// The kernel may hold a listing of an earlier state of the directory
	// (changed behind the mount, within the directory's attribute
	// timeout): drop it, so that the one given now is what it keeps.
	d.NotifyContent(0, 0)
	if !keep {
		return h, 0, 0
	}
	return h, fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
}

// dropMoved tells the kernel to forget the names of the directory it
// may hold (the children go-fuse knows) that no longer lead where they
// did, as the listing mapped shows: a name gone, a compressed file's
// name that now shows another disk entry or a plain one, or the other
// way round. The kernel keeps compressed files' names long.
func (d *dirNode) dropMoved(mapped []entry) {
	kids := d.Children()
	if len(kids) == 0 {
		return
	}
	now := make(map[string]*entry, len(mapped))
	for i := range mapped {
		now[mapped[i].view] = &mapped[i]
	}
	var moved []string
	for name, ch := range kids {
		e := now[name]
		switch ch.Operations().(type) {
		case *treeDir, *treeFile:
			if e != nil && e.tree && ch.StableAttr().Ino == treeIno(e.treeKey, "") {
				continue
			}
			moved = append(moved, name)
			continue
		}
		if bn, ok := ch.Operations().(*blobNode); ok {
			bn.mu.Lock()
			disk := bn.disk
			bn.mu.Unlock()
			if e != nil && e.compressed && !e.tree && e.disk == disk {
				continue
			}
		} else if e != nil && !e.compressed && !e.tree {
			continue
		}
		moved = append(moved, name)
	}
	if len(moved) > 0 {
		// Not within the OPENDIR: the kernel takes the directory's lock
		// to drop a name.
		go func() {
			for _, name := range moved {
				d.NotifyEntry(name)
			}
		}()
	}
}

// load lists the directory, if it has not been listed yet.
func (h *listHandle) load() syscall.Errno {
	if h.ents != nil {
		return 0
	}
	d, dir := h.d, h.dir
	mapped, errno := viewEntries(localBackend{d.fs}, dir, nil)
	if errno != 0 {
		return errno
	}
	d.fs.stats.dirsListed.Add(1)
	list := []fuse.DirEntry{{Name: ".", Mode: syscall.S_IFDIR}, {Name: "..", Mode: syscall.S_IFDIR}}
	for _, e := range mapped {
		st := e.meta.(*syscall.Stat_t)
		mode, ino := st.Mode&syscall.S_IFMT, d.fs.idFromStat(st).Ino
		if e.tree {
			mode, ino = syscall.S_IFREG, treeIno(e.treeKey, "")
			if e.treeDir {
				mode = syscall.S_IFDIR
			}
		} else if e.compressed {
			mode, ino = syscall.S_IFREG, d.fs.blobID(filepath.Join(dir, e.disk), st).Ino
		}
		list = append(list, fuse.DirEntry{Name: e.view, Mode: mode, Ino: ino})
	}
	for i := range list {
		list[i].Off = uint64(i + 1)
	}
	h.ents, h.mapped = list, mapped
	return 0
}

// listHandle serves a directory listing made at opendir, or when first
// read (see OpendirHandle).
type listHandle struct {
	d      *dirNode
	mu     sync.Mutex
	ents   []fuse.DirEntry
	mapped []entry // the entries after "." and "..", in the order of ents
	pos    int
	dir    string // the source directory, for fsync
}

var (
	_ = (gofs.FileReaddirenter)((*listHandle)(nil))
	_ = (gofs.FileSeekdirer)((*listHandle)(nil))
	_ = (gofs.FileFsyncdirer)((*listHandle)(nil))
	_ = (gofs.FileLookuper)((*listHandle)(nil))
)

// Lookup answers the lookup of READDIRPLUS of the entry Readdirent
// returned last, from the listing: no search for its disk name.
func (h *listHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	h.mu.Lock()
	var e *entry
	if i := h.pos - 3; i >= 0 && i < len(h.mapped) && h.mapped[i].view == name {
		c := h.mapped[i]
		e = &c
	}
	h.mu.Unlock()
	if e == nil {
		return h.d.Lookup(ctx, name, out)
	}
	ch, errno := h.d.lookupResolved(ctx, name, e, out)
	if errno == errStaleName {
		return h.d.Lookup(ctx, name, out)
	}
	return ch, errno
}

// Fsyncdir syncs the source directory.
func (h *listHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return gofs.ToErrno(syncDir(h.dir))
}

// Readdirent returns the next entry, or nil at the end.
func (h *listHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if errno := h.load(); errno != 0 {
		return nil, errno
	}
	if h.pos >= len(h.ents) {
		return nil, 0
	}
	e := h.ents[h.pos]
	h.pos++
	return &e, 0
}

// Seekdir moves to the entry after offset off.
func (h *listHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if errno := h.load(); errno != 0 {
		return errno
	}
	h.pos = int(min(off, uint64(len(h.ents))))
	return 0
}

// removeDisk removes a disk entry: a sparse frame directory entirely.
func removeDisk(p string, sparse bool) error {
	if sparse {
		return os.RemoveAll(p)
	}
	return syscall.Unlink(p)
}

// Unlink removes a child by its view name.
func (d *dirNode) Unlink(ctx context.Context, name string) syscall.Errno {
	if d.fs.opts.ReadOnly {
		return syscall.EROFS
	}
	d.fs.nsMu.Lock()
	defer d.fs.nsMu.Unlock()
	e, errno := d.resolve(name)
	if errno != 0 {
		return errno
	}
	if e.dir && !e.compressed {
		return syscall.EISDIR
	}
	p := filepath.Join(d.path(), e.disk)
	var st syscall.Stat_t
	linked := syscall.Lstat(p, &st) == nil && st.Nlink > 1 && e.compressed && !e.dir
	if err := removeDisk(p, e.compressed && e.dir); err != nil {
		return gofs.ToErrno(err)
	}
	d.childGone(name)
	if linked {
		d.fs.linksChanged(st.Ino) // their link count
	}
	return 0
}

// childGone marks an open compressed child as removed, so that a pending
// commit does not bring it back. A compressed file's node has one name
// (hard links get a node per name: see Lookup), so the node is gone
// even when its disk file lives on under other names.
func (d *dirNode) childGone(name string) {
	if ch := d.GetChild(name); ch != nil {
		if bn, ok := ch.Operations().(*blobNode); ok {
			bn.setGone()
		}
	}
}

// Rename moves a child. A compressed file keeps its container suffix on
// disk (x.blp renamed to y is stored as y.blp and shown as y); whatever
// the new view name showed before is replaced. RENAME_NOREPLACE is
// honoured; RENAME_EXCHANGE swaps two plain entries, or two compressed
// files stored with the same suffix, and gives EINVAL otherwise (the
// suffixes would have to move with the contents); RENAME_WHITEOUT (for
// overlay filesystems) gives EINVAL.
func (d *dirNode) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if d.fs.opts.ReadOnly {
		return syscall.EROFS
	}
	np, ok := newParent.(*dirNode)
	if !ok {
		return syscall.EXDEV
	}
	if flags&^(unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE) != 0 {
		return syscall.EINVAL
	}
	if len(newName) > nameMax {
		return syscall.ENAMETOOLONG
	}
	d.fs.nsMu.Lock()
	defer d.fs.nsMu.Unlock()
	src, errno := d.resolve(name)
	if errno != 0 {
		return errno
	}
	if flags&unix.RENAME_EXCHANGE != 0 {
		dst, errno := np.resolve(newName)
		if errno != 0 {
			return errno
		}
		if src.compressed != dst.compressed || src.compressed && src.disk[len(stemOf(src.disk)):] != dst.disk[len(stemOf(dst.disk)):] {
			return syscall.EINVAL
		}
		return gofs.ToErrno(unix.Renameat2(unix.AT_FDCWD, filepath.Join(d.path(), src.disk), unix.AT_FDCWD, filepath.Join(np.path(), dst.disk), unix.RENAME_EXCHANGE))
	}
	newDisk := newName
	if src.compressed {
		if _, named := stemView(newName); !named {
			// Keep the container suffix on disk.
			newDisk = stemFor(newName, src.disk) + src.disk[len(stemOf(src.disk)):]
			if v, _ := stemView(newDisk); v != newName {
				// A .b2nd is shown as NAME.npy: y would come back as y.npy.
				d.fs.opts.Logger.Printf("%s: refused: renaming an array's .npy view to %q, which does not end in .npy", filepath.Join(d.path(), src.disk), newName)
				return syscall.EINVAL
			}
		}
	}
	if dst, errno := np.resolve(newName); errno == 0 {
		if flags&unix.RENAME_NOREPLACE != 0 {
			return syscall.EEXIST
		}
		if dst.disk != newDisk {
			// What the view showed under newName lives under another
			// disk name: remove it, as a rename over it would.
			if dst.dir && !dst.compressed {
				return syscall.EISDIR
			}
			dp := filepath.Join(np.path(), dst.disk)
			if err := removeDisk(dp, dst.compressed && dst.dir); err != nil {
				return gofs.ToErrno(err)
			}
		}
		np.childGone(newName)
	}
	from, to := filepath.Join(d.path(), src.disk), filepath.Join(np.path(), newDisk)
	// Two names of one hard-linked disk file are two files in the view
	// (see Lookup), where rename(2) of one over the other does nothing:
	// the source name must go, as the kernel now believes it has.
	var sst, dst syscall.Stat_t
	sameFile := src.compressed && syscall.Lstat(from, &sst) == nil && syscall.Lstat(to, &dst) == nil &&
		sst.Dev == dst.Dev && sst.Ino == dst.Ino && from != to
	// renameat2, not os.Rename: os.Rename refuses to replace a directory
	// (EEXIST) where rename(2) replaces an empty one.
	if err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, uint(flags&unix.RENAME_NOREPLACE)); err != nil {
		return gofs.ToErrno(err)
	}
	if sameFile {
		if err := syscall.Unlink(from); err != nil && err != syscall.ENOENT {
			return gofs.ToErrno(err)
		}
	}
	// An open compressed file follows the rename: its node resolves its
	// disk name from its (new) view name at each use.
	return 0
}

// Create makes a new file: name.b2frame on disk (or name.blp, or a plain
// file, as --new-format says), shown as name. An empty container is
// written at once, so that the name exists while it is being written. A
// name the view already shows as a compressed file is opened instead
// (EEXIST with O_EXCL); a name hidden behind one (x.blp shown as x) is
// refused rather than truncated.
func (d *dirNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	if d.fs.opts.ReadOnly {
		return nil, nil, 0, syscall.EROFS
	}
	if errno := d.checkNewName(name); errno != 0 {
		if e, rerr := d.resolve(name); errno == syscall.EEXIST && rerr == 0 && e.compressed && flags&syscall.O_EXCL == 0 {
			return d.openExisting(ctx, name, flags, out)
		}
		return nil, nil, 0, errno
	}
	if e, errno := d.resolve(name); errno == 0 && !e.compressed {
		return d.LoopbackNode.Create(ctx, name, flags, mode, out) // an existing plain file
	}
	format := d.fs.opts.NewFormat
	if format == NewPlain || len(name)+len(format.suffix()) > nameMax {
		// A name too long to take the container suffix (248 to 255
		// bytes) is stored plain.
		return d.LoopbackNode.Create(ctx, name, flags, mode, out)
	}
	disk := filepath.Join(d.path(), name+format.suffix())
	if _, err := os.Lstat(disk); err == nil {
		return nil, nil, 0, syscall.EEXIST
	}
	if err := d.fs.writeEmpty(disk, format, mode&07777, ctx); err != nil {
		d.fs.opts.Logger.Printf("%s: creating: %v", disk, err)
		return nil, nil, 0, gofs.ToErrno(unwrapErrno(err))
	}
	child, fh, fl, errno := d.openExisting(ctx, name, flags&^syscall.O_EXCL, out)
	if errno == 0 {
		if bn, ok := child.Operations().(*blobNode); ok {
			bn.mu.Lock()
			bn.created, bn.format = true, format
			bn.mu.Unlock()
		}
	}
	return child, fh, fl, errno
}

// openExisting looks up a compressed file and opens it.
func (d *dirNode) openExisting(ctx context.Context, name string, flags uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	child, errno := d.Lookup(ctx, name, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	bn, ok := child.Operations().(*blobNode)
	if !ok {
		return nil, nil, 0, syscall.EIO
	}
	fh, fl, errno := bn.Open(ctx, flags)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return child, fh, fl, 0
}

// checkNewName reports EEXIST when name is taken in the view or on disk.
func (d *dirNode) checkNewName(name string) syscall.Errno {
	if hiddenName(name) {
		return syscall.EPERM
	}
	if e, errno := d.resolve(name); errno == 0 {
		if e.compressed {
			return syscall.EEXIST
		}
		return 0 // a plain entry: the loopback call decides
	}
	var st syscall.Stat_t
	if syscall.Lstat(filepath.Join(d.path(), name), &st) == nil {
		return syscall.EEXIST // hidden behind a compressed view name
	}
	return 0
}

// Mkdir refuses names taken by compressed files.
func (d *dirNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if errno := d.checkNewName(name); errno != 0 {
		return nil, errno
	}
	return d.LoopbackNode.Mkdir(ctx, name, mode, out)
}

// Symlink refuses names taken by compressed files.
func (d *dirNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if errno := d.checkNewName(name); errno != 0 {
		return nil, errno
	}
	return d.LoopbackNode.Symlink(ctx, target, name, out)
}

// Mknod refuses names taken by compressed files.
func (d *dirNode) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if errno := d.checkNewName(name); errno != 0 {
		return nil, errno
	}
	return d.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
}

// Link makes a hard link; a compressed file is linked under its disk
// name with its suffix.
func (d *dirNode) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if errno := d.checkNewName(name); errno != 0 {
		return nil, errno
	}
	if bn, ok := target.(*blobNode); ok {
		ino, errno := d.linkBlob(bn, name)
		if errno != 0 {
			return nil, errno
		}
		// The new name is another node: the kernel keeps the other
		// names' cached attributes (their link count) unless told.
		ch, errno := d.Lookup(ctx, name, out)
		if errno == 0 {
			d.fs.addLink(ino, bn)
			d.fs.linksChanged(ino)
		}
		return ch, errno
	}
	return d.LoopbackNode.Link(ctx, target, name, out)
}

// linkBlob links the disk file of a compressed file under name, with its
// suffix. What is staged is committed first, so that the new name shows
// what the target shows now. It returns the disk file's inode number.
func (d *dirNode) linkBlob(bn *blobNode, name string) (uint64, syscall.Errno) {
	bn.smu.Lock()
	defer bn.smu.Unlock()
	if errno := bn.commitErrno(); errno != 0 {
		return 0, errno
	}
	src, sparse := bn.diskPath()
	if src == "" {
		return 0, syscall.ENOENT
	}
	if sparse {
		return 0, syscall.EPERM // directories cannot be hard-linked
	}
	base := filepath.Base(src)
	disk := name
	if _, named := stemView(name); !named {
		disk = stemFor(name, base) + base[len(stemOf(base)):]
		if v, _ := stemView(disk); v != name {
			return 0, syscall.EINVAL // an array's view must keep its .npy
		}
	}
	d.fs.nsMu.Lock()
	defer d.fs.nsMu.Unlock()
	if err := os.Link(src, filepath.Join(d.path(), disk)); err != nil {
		return 0, gofs.ToErrno(err)
	}
	var st syscall.Stat_t
	syscall.Lstat(src, &st)
	return st.Ino, 0
}

// Getxattr of the root answers StatsXattr; everything else is the
// source's, but what the mount does not carry (notCarried). (A remote mount's root answers it in remoteDir.Getxattr.)
func (n *dirNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if attr == StatsXattr && n.IsRoot() {
		return n.fs.getStats(dest)
	}
	return n.loopbackNode.Getxattr(ctx, attr, dest)
}
