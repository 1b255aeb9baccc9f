package fs

// A local mount's state: New, the nodes of the source's entries, and the
// identities (inode numbers, generations) of compressed files, which
// survive the renames of their recompressions and hard links.

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sys/unix"
)

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

// newNode makes the node for a loopback child: directories map names,
// other entries pass through.
func (f *FS) newNode(root *gofs.LoopbackRoot, _ *gofs.Inode, _ string, st *syscall.Stat_t) gofs.InodeEmbedder {
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return &dirNode{loopbackNode: loopbackNode{gofs.LoopbackNode{RootData: root}}, fs: f}
	}
	return &plainNode{loopbackNode: loopbackNode{gofs.LoopbackNode{RootData: root}}, fs: f}
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
