package fs

// Trees of the source directory: a file or directory named as a tree
// format's (tree.go), probed and opened once per version.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// treeNamed reports whether a disk entry is named as a tree format's.
func treeNamed(name string, dir bool) bool {
	_, ok := pack.TreeFormatFor(name, dir)
	return ok
}

// localTreeKey returns the key of the version of the tree at path: the
// file's identity, size and times; for a directory, also those of every
// directory below it (a file added, removed or renamed anywhere in it
// changes one) and of its embed.b2e, hashed.
func localTreeKey(path string, st *syscall.Stat_t) (probeKey, error) {
	k := probeKey{path, uint64(st.Dev), st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano(), 0}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return k, nil
	}
	h := fnv.New64a()
	if err := hashDirs(h, path, 0); err != nil {
		return k, err
	}
	k.via = h.Sum64() | 1 // not 0: a consolidated probe's id is never this
	return k, nil
}

// maxTreeDirs bounds the directories hashDirs visits.
const maxTreeDirs = 1 << 16

// hashDirs writes into h the identity and times of dir, of its
// embed.b2e and of the directories below it (not following symbolic
// links), in name order.
func hashDirs(h interface{ Write([]byte) (int, error) }, dir string, n int) error {
	d, err := pack.OpenSourceDir(dir)
	if err != nil {
		return err
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, name := range []string{".", "embed.b2e"} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(dir, name), &st); err == nil {
			fmt.Fprintf(h, "%s\x00%d:%d:%d:%d:%d\x00", name, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano(), n)
		}
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if n++; n > maxTreeDirs {
			return fmt.Errorf("%s: more than %d directories", dir, maxTreeDirs)
		}
		fmt.Fprintf(h, "%s/", e.Name())
		if err := hashDirs(h, filepath.Join(dir, e.Name()), n); err != nil {
			return err
		}
	}
	return nil
}

// probeTree probes the tree at path once per version: a tree that does
// not open (it is not one) is shown as it is stored, logged once; a
// transient failure is returned and not kept.
func (f *FS) probeTree(path string, st *syscall.Stat_t) (*probe, error) {
	k, err := localTreeKey(path, st)
	if err != nil {
		if pack.Transient(err) {
			return &probe{}, err
		}
		f.warnOnce("%s: shown as it is stored: %v", path, err)
		return &probe{}, nil
	}
	if p, ok := f.probes.Get(k); ok {
		return p, nil
	}
	f.stats.probed.Add(1)
	t, err := f.localTree(path, st, treeKeyOf(k))
	if err != nil {
		if pack.Transient(err) {
			f.opts.Logger.Printf("%s: not probed now: %v", path, err)
			return &probe{}, err
		}
		if !errors.Is(err, pack.ErrNoTree) {
			f.warnOnce("%s: shown as it is stored: %v", path, err)
		}
		f.probes.Add(k, &probe{})
		return &probe{}, nil
	}
	defer t.release()
	p := treeProbeOf(t)
	f.probes.Add(k, p)
	return p, nil
}

// treeKeyOf returns the tree cache's key of the version k.
func treeKeyOf(k probeKey) string {
	return fmt.Sprintf("%s\x00%d:%d:%d:%d:%d:%d", k.path, k.dev, k.ino, k.size, k.mtimeN, k.ctimeN, k.via)
}

// localTree returns the opened tree of path whose version has the key
// key, with a reference the caller releases.
func (f *FS) localTree(path string, st *syscall.Stat_t, key string) (*openTree, error) {
	return f.trees.get(key, func() (*openTree, error) {
		t, err := all.OpenTree(path, f.blockCache())
		if err != nil {
			return nil, err
		}
		f.logProblems(t)
		source := f.source
		return &openTree{
			t: t, name: path, mem: treeMemOf(t.Tree), f: f,
			uid: st.Uid, gid: st.Gid, perm: st.Mode & 0o777,
			mtime: time.Unix(st.Mtim.Unix()), timeout: f.opts.CompressedTimeout,
			statfs: func(out *fuse.StatfsOut) syscall.Errno {
				var s syscall.Statfs_t
				if err := syscall.Statfs(source, &s); err != nil {
					return gofs.ToErrno(err)
				}
				out.FromStatfsT(&s)
				return 0
			},
		}, nil
	})
}

// lookupTree makes the node of the tree entry e of directory d: the
// tree's root directory, or its root file.
func (d *dirNode) lookupTree(ctx context.Context, e *entry, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	p := filepath.Join(d.path(), e.disk)
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return nil, gofs.ToErrno(err)
	}
	pr, err := d.fs.probe(p, &st)
	if err != nil {
		return nil, errnoOf(err)
	}
	if !pr.ok || pr.tree == nil {
		return nil, errStaleName
	}
	t, err := d.fs.localTree(p, &st, pr.tree.key)
	if err != nil {
		d.fs.warnOnce("%s: %v", p, err)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOENT) {
			return nil, syscall.ENOENT
		}
		return nil, errnoOf(err)
	}
	defer t.release()
	return newTreeChild(ctx, d.EmbeddedInode(), t, "", t.t.Root(), out)
}
