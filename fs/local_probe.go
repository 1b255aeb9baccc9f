package fs

// Probes of the source directory: the local backend (localBackend), and
// the probes of its files, made once per version of each (inode, size,
// mtime, ctime) and read through the edge of the file only.

import (
	"fmt"
	"io"
	"path/filepath"
	"syscall"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// probeKey identifies one version of a disk entry: a change of its
// content changes its size or mtime, and even a change that sets the
// mtime back changes its ctime.
type probeKey struct {
	path                 string
	dev, ino             uint64
	size, mtimeN, ctimeN int64
	// via is the id of the consolidated metadata the probe was made
	// from (see consolidatedProbe), 0 for a probe of the entry itself.
	via uint64
}

// maxProbes bounds the probes kept: one per container of the
// directories listed, so that listing a directory of many files again
// opens none of them (a listing larger than the bound reopens them all,
// each time: a scan defeats an LRU).
const maxProbes = 1 << 20

// probe opens path once per version (inode, size, mtime) and caches
// whether it is a readable container. A failure that is a fact about the
// file (it does not parse, it is not a regular file) is cached and logged
// once: the file is then shown raw under its own name. A transient
// failure (out of descriptors or memory, interrupted, an I/O error) is
// returned and not cached: it says nothing about how to show the file.
// Only what is needed to show the file is kept: no metadata.
func (f *FS) probe(path string, st *syscall.Stat_t) (*probe, error) {
	if treeNamed(filepath.Base(path), st.Mode&syscall.S_IFMT == syscall.S_IFDIR) {
		return f.probeTree(path, st)
	}
	kst := *st
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		// A sparse frame changes through its chunks.b2frame, a Zarr
		// array through its .zarray or zarr.json (consolidated
		// metadata of a group above may answer without opening it:
		// probeZarrDir). Any other directory is a plain one, and
		// nothing to log.
		if err := syscall.Lstat(filepath.Join(path, "chunks.b2frame"), &kst); err != nil {
			if pack.Transient(err) {
				return &probe{}, err
			}
			if p, _, done := f.probeZarrDir(path, &kst); done {
				return p, nil
			}
		}
	}
	key := probeKey{path, uint64(kst.Dev), kst.Ino, kst.Size, kst.Mtim.Sec*1e9 + kst.Mtim.Nsec, kst.Ctim.Sec*1e9 + kst.Ctim.Nsec, 0}
	if p, ok := f.probes.Get(key); ok {
		return p, nil
	}
	f.stats.probed.Add(1)
	p := &probe{}
	v, err := openProbe(path, st)
	if err != nil {
		if pack.Transient(err) {
			f.opts.Logger.Printf("%s: not probed now: %v", path, err)
			return p, err
		}
		f.warnOnce("%s: shown raw: %v", path, err)
	} else {
		p = probeOf(v)
		v.Close()
	}
	f.probes.Add(key, p)
	return p, nil
}

// probeEdge is how many bytes at each end of a file a probe reads at
// once: a container's header, index and trailer lie there, and a small
// file is read whole, in one read.
const probeEdge = 64 << 10

// openProbe opens the view of path for a probe. A regular file is read
// through an edgeReader: the parse of a small container then costs one
// read instead of one per structure (seven for a small frame).
func openProbe(path string, st *syscall.Stat_t) (*all.View, error) {
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return all.OpenView(path, pack.NoCache{})
	}
	file, fi, err := pack.OpenSource(path, false)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	r, err := newEdgeReader(file, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return all.OpenViewReader(r, fi.Size(), path, pack.NoCache{})
}

// edgeReader reads a file through copies of its first and last
// probeEdge bytes (the whole file if it is small), read at once; other
// reads go to the file.
type edgeReader struct {
	f          io.ReaderAt
	head, tail []byte
	tailAt     int64
}

func newEdgeReader(f io.ReaderAt, size int64) (*edgeReader, error) {
	r := &edgeReader{f: f}
	n := min(size, probeEdge)
	if size <= 2*probeEdge {
		n = size
	}
	r.head = make([]byte, n)
	got, err := f.ReadAt(r.head, 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	r.head = r.head[:got] // shorter if the file shrank meanwhile
	r.tailAt = size
	if size > n {
		r.tailAt = size - probeEdge
		r.tail = make([]byte, probeEdge)
		got, err := f.ReadAt(r.tail, r.tailAt)
		if err != nil && err != io.EOF {
			return nil, err
		}
		r.tail = r.tail[:got]
	}
	return r, nil
}

// ReadAt serves p from the copies where they hold it.
func (r *edgeReader) ReadAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	switch {
	case off >= 0 && end <= int64(len(r.head)):
		return copy(p, r.head[off:]), nil
	case r.tail != nil && off >= r.tailAt && end <= r.tailAt+int64(len(r.tail)):
		return copy(p, r.tail[off-r.tailAt:]), nil
	}
	return r.f.ReadAt(p, off)
}

// localBackend is the source directory as a backend: directories are
// absolute paths, entries carry their *syscall.Stat_t.
type localBackend struct{ fs *FS }

// list lstats the entries of dir: those named (a failure other than
// ENOENT is returned as it is: ENAMETOOLONG for a path past PATH_MAX,
// EACCES, ELOOP, …), or every entry (one that vanished meanwhile is left
// out).
func (b localBackend) list(dir string, names []string) ([]backendEntry, error) {
	all := names == nil
	if all {
		f, err := pack.OpenSourceDir(dir)
		if err != nil {
			return nil, gofs.ToErrno(unwrapErrno(err))
		}
		names, err = f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return nil, gofs.ToErrno(err)
		}
	}
	var out []backendEntry
	for _, name := range names {
		if !all && len(name) > nameMax {
			continue // a longer disk name cannot exist
		}
		st := new(syscall.Stat_t)
		if err := syscall.Lstat(filepath.Join(dir, name), st); err != nil {
			if all || err == syscall.ENOENT {
				continue
			}
			return nil, gofs.ToErrno(err)
		}
		out = append(out, backendEntry{name: name, dir: st.Mode&syscall.S_IFMT == syscall.S_IFDIR, meta: st})
	}
	if all {
		b.probeAll(dir, out)
	}
	return out, nil
}

// probeParallelLocal is how many containers a listing probes at once: a
// cold probe waits for the disk.
const probeParallelLocal = 8

// probeAll probes the regular files of a listing that have a container
// suffix, in parallel, so that mapping their names finds the probes
// made; the failures are left for that mapping to meet again.
func (b localBackend) probeAll(dir string, ents []backendEntry) {
	var todo []backendEntry
	for _, e := range ents {
		mode := e.meta.(*syscall.Stat_t).Mode & syscall.S_IFMT
		if _, suffixed := stemView(e.name); suffixed && mode == syscall.S_IFREG ||
			(mode == syscall.S_IFREG || mode == syscall.S_IFDIR) && treeNamed(e.name, e.dir) {
			todo = append(todo, e)
		}
	}
	probeEach(len(todo), probeParallelLocal, func(i int) { b.probe(dir, todo[i]) })
}

// probe opens a regular file or a directory (a sparse frame) once per
// version; a symlink named x.blp stays a symlink, a FIFO is never read.
func (b localBackend) probe(dir string, e backendEntry) (*probe, error) {
	st := e.meta.(*syscall.Stat_t)
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG, syscall.S_IFDIR:
		return b.fs.probe(filepath.Join(dir, e.name), st)
	}
	return &probe{}, nil
}
