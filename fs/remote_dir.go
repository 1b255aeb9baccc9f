package fs

// A prefix of the bucket as a directory (remoteDir), over the bucket as a
// backend (bucketBackend).

import (
	"context"
	"strings"
	"syscall"

	"github.com/bloscfs/bloscfs/pack/frame"
	"github.com/bloscfs/bloscfs/remote"
	"github.com/bloscfs/bloscfs/zarr"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

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
		if _, suffixed := stemView(name); suffixed || treeNamed(name, false) {
			toProbe = append(toProbe, info)
		}
		out = append(out, backendEntry{name: name, meta: info})
	}
	probeEach(len(toProbe), probeParallel, func(i int) { b.r.probe(toProbe[i]) })
	return out, nil
}

// probe probes an object, or the Zarr array or sparse frame a prefix may
// hold (a prefix is probed as a Zarr node when it is named *.zarr or its
// parent is a Zarr node: see zarrParent). A failure is never returned:
// an object out of reach is shown raw this time, and probed again next
// time.
func (b bucketBackend) probe(dir string, e backendEntry) (*probe, error) {
	if e.dir && treeNamed(e.name, true) {
		return b.r.probeTreePrefix(dir + e.name + "/"), nil
	}
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
	if e.tree {
		return d.lookupTree(ctx, e, out)
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
		if e.tree {
			mode := uint32(syscall.S_IFREG)
			if e.treeDir {
				mode = syscall.S_IFDIR
			}
			list = append(list, fuse.DirEntry{Name: e.view, Mode: mode, Ino: treeIno(e.treeKey, "")})
		} else if e.dir && e.compressed {
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

// lookupTree makes the node of the tree entry e: the tree's root
// directory, or its root file.
func (d *remoteDir) lookupTree(ctx context.Context, e *entry, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	var t *openTree
	var err error
	if e.dir {
		p := d.prefix + e.disk + "/"
		var pt *prefixTree
		if pt, err = d.r.listTree(p); err == nil {
			t, err = d.r.prefixTreeOf(p, pt)
		}
	} else {
		t, err = d.r.objectTree(e.meta.(remote.ObjectInfo))
	}
	if err != nil {
		d.r.f.warnOnce("%v", err)
		return nil, syscall.EIO
	}
	defer t.release()
	return newTreeChild(ctx, d.EmbeddedInode(), t, "", t.t.Root(), out)
}
