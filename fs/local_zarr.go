package fs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"syscall"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/zarr"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sys/unix"
)

// Consolidated metadata in a local tree. A group's .zmetadata (v2), or
// the consolidated_metadata of its zarr.json (v3), describes every array
// below it: a listing of a group of arrays takes each array's metadata
// from it instead of opening each .zarray or zarr.json. An entry is
// trusted only while the array's own metadata file (and, v2, its
// .zattrs) was last modified strictly before the document holding it:
// one lstat each, which the probe pays anyway (the Fresh hook given to
// zarr.ConsolidatedMeta.Node). A metadata file changed after
// consolidation is read itself. Opening an array always reads its
// own metadata (the reads follow them); if they show another array than
// the consolidated entry did (a file changed with its mtime set back),
// the probe is corrected and the kernel's attributes dropped.

// fileVer identifies one version of a file: a change of its content
// changes its size or mtime, and even one that sets the mtime back
// changes its ctime.
type fileVer struct {
	dev, ino             uint64
	size, mtimeN, ctimeN int64
}

func verOf(st *syscall.Stat_t) fileVer {
	return fileVer{uint64(st.Dev), st.Ino, st.Size, st.Mtim.Sec*1e9 + st.Mtim.Nsec, st.Ctim.Sec*1e9 + st.Ctim.Nsec}
}

// consKey names one version of a file that may hold consolidated
// metadata.
type consKey struct {
	path string
	ver  fileVer
}

// localCons is what one version of a group's .zmetadata or zarr.json
// holds.
type localCons struct {
	*zarr.ConsolidatedMeta
	mtime int64  // of the file, in nanoseconds
	id    uint64 // this version, as loaded (never 0)
}

// hasDocs reports whether c is loaded and describes nodes.
func (c *localCons) hasDocs() bool { return c != nil && c.HasDocs() }

// consIDs numbers the versions of consolidated metadata loaded.
var consIDs atomic.Uint64

// consBudget bounds the bytes of the consolidated documents kept, and
// maxCons their number; the least recently used go first.
const (
	consBudget = 256 << 20
	maxCons    = 1024
)

// consCache keeps parsed versions of files that may hold consolidated
// metadata: those that do (docs), and apart from them, so that a listing
// of many arrays does not push them out, the others (a .zmetadata that
// is not used, the zarr.json of an array or of a group without any).
type consCache struct {
	docs, small *lru.Cache[consKey, *localCons]
	bytes       atomic.Int64
}

func newConsCache() *consCache {
	cc := &consCache{}
	cc.docs, _ = lru.NewWithEvict[consKey, *localCons](maxCons, func(_ consKey, c *localCons) { cc.bytes.Add(-c.Size()) })
	cc.small, _ = lru.New[consKey, *localCons](maxProbes)
	return cc
}

func (cc *consCache) get(k consKey) (*localCons, bool) {
	if c, ok := cc.small.Get(k); ok {
		return c, true
	}
	return cc.docs.Get(k)
}

// add keeps c as the version k, unless another caller kept one first:
// it returns the one kept.
func (cc *consCache) add(k consKey, c *localCons) *localCons {
	if !c.HasDocs() {
		prev, found, _ := cc.small.PeekOrAdd(k, c)
		if found {
			return prev
		}
		return c
	}
	if prev, found, _ := cc.docs.PeekOrAdd(k, c); found {
		return prev
	}
	cc.bytes.Add(c.Size())
	for cc.bytes.Load() > consBudget && cc.docs.Len() > 1 {
		cc.docs.RemoveOldest()
	}
	return c
}

// localConsolidated turns the use of consolidated metadata in a local
// tree on (benchmarks compare without).
var localConsolidated = true

// consolidatedFor returns the consolidated metadata that describe the
// directory path, from the nearest group above it (within the source)
// whose .zmetadata or zarr.json holds some, and path's key relative to
// that group (zarr.FindConsolidated). The walk up stops at the first
// directory that is not a Zarr group.
func (f *FS) consolidatedFor(path string) (*localCons, string) {
	var found *localCons
	_, rel := zarr.FindConsolidated(path, f.source, func(dir string) (*zarr.ConsolidatedMeta, bool) {
		zm, zmok := f.loadCons(dir, ".zmetadata")
		if zm.hasDocs() {
			found = zm
			return zm.ConsolidatedMeta, true
		}
		zj, zjok := f.loadCons(dir, "zarr.json")
		if zj.hasDocs() {
			found = zj
			return zj.ConsolidatedMeta, true
		}
		group := zmok || zj != nil && zj.NodeType() == "group"
		if !group && !zjok {
			var st syscall.Stat_t
			group = syscall.Lstat(filepath.Join(dir, ".zgroup"), &st) == nil
		}
		return nil, group
	})
	if found == nil {
		return nil, ""
	}
	return found, rel
}

// loadCons reads and parses dir/name (.zmetadata or zarr.json) once per
// version. exists reports a regular file of that name; c is nil when it
// cannot be read now. A document that is malformed or too large is
// logged once and kept without docs: the arrays are then probed one by
// one.
func (f *FS) loadCons(dir, name string) (c *localCons, exists bool) {
	p := filepath.Join(dir, name)
	var st syscall.Stat_t
	if syscall.Lstat(p, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, false
	}
	key := consKey{p, verOf(&st)}
	if c, ok := f.cons.get(key); ok {
		return c, true
	}
	c = &localCons{mtime: key.ver.mtimeN, id: consIDs.Add(1)}
	if st.Size > zarr.MaxMetaSize {
		f.warnOnce("%s: consolidated metadata not used: %d bytes exceeds %d", p, st.Size, zarr.MaxMetaSize)
		c.ConsolidatedMeta = &zarr.ConsolidatedMeta{}
		return f.cons.add(key, c), true
	}
	// Opened without following a link and without waiting (a FIFO put
	// in its place since the lstat is never waited on), and read only
	// if it is still a regular file.
	file, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, true
	}
	var b []byte
	if fi, err := file.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() <= zarr.MaxMetaSize {
		b, err = io.ReadAll(io.LimitReader(file, zarr.MaxMetaSize+1))
		if err != nil {
			b = nil
		}
	}
	file.Close()
	if b == nil {
		return nil, true
	}
	if c.ConsolidatedMeta, err = zarr.ParseConsolidatedMeta(name, b, p); err != nil {
		f.warnOnce("%s: consolidated metadata not used: %v", p, err)
	}
	return f.cons.add(key, c), true
}

// noStore is the store of an array opened from consolidated metadata
// only to describe it: nothing is read through it.
type noStore struct{}

func (noStore) Get(key string, _ int64) ([]byte, error) {
	return nil, fmt.Errorf("%s: %w", key, zarr.ErrNotExist)
}

func (noStore) GetRange(key string, off, n int64) ([]byte, error) {
	return nil, fmt.Errorf("%s: %w", key, zarr.ErrNotExist)
}

// probeZarrDir answers the probe of the directory path (not a sparse
// frame), as far as it can without opening an array's metadata. done is
// false when the caller must probe the array itself: meta then holds the
// stat of its metadata file (.zarray or zarr.json), which that probe is
// keyed by.
//
// A directory without a regular .zarray or zarr.json is no Zarr array.
// A v3 directory's zarr.json is read once per version to tell a group
// from an array (zarr.ArrayMetaFile would read it at each probe). An
// array, or a v3 group, that consolidated metadata of a group above it
// describe is answered from them (consolidatedProbe).
func (f *FS) probeZarrDir(path string, meta *syscall.Stat_t) (p *probe, key probeKey, done bool) {
	regular := func(name string) bool {
		return syscall.Lstat(filepath.Join(path, name), meta) == nil && meta.Mode&syscall.S_IFMT == syscall.S_IFREG
	}
	v2 := regular(".zarray")
	if !v2 && (!regular("zarr.json") || meta.Size > zarr.MaxMetaSize) {
		return &probe{}, key, true
	}
	if localConsolidated {
		if p, key, ok := f.consolidatedProbe(path, meta, v2); ok {
			return p, key, true
		}
	}
	if !v2 {
		zj, _ := f.loadCons(path, "zarr.json")
		if zj == nil || zj.NodeType() != "array" {
			return &probe{}, key, true
		}
	}
	return nil, key, false
}

// consolidatedProbe answers the probe of the directory path, whose own
// metadata file (.zarray when v2, else zarr.json) has the stat own, from
// the consolidated metadata of a group above it: an array, or a v3
// group. ok is false when there are none, they do not describe path, or
// its own metadata file (or .zattrs) is not strictly older than them
// (changed after consolidation, or within the same tick of a coarse
// clock). key is the probe's key in f.probes.
func (f *FS) consolidatedProbe(path string, own *syscall.Stat_t, v2 bool) (p *probe, key probeKey, ok bool) {
	c, rel := f.consolidatedFor(path)
	if c == nil {
		return nil, key, false
	}
	older := func(st *syscall.Stat_t) bool { return st.Mtim.Sec*1e9+st.Mtim.Nsec < c.mtime }
	n, ok := c.Node(rel, func(name string, inDoc bool) bool {
		if name != ".zattrs" {
			return older(own)
		}
		var ast syscall.Stat_t
		switch err := syscall.Lstat(filepath.Join(path, ".zattrs"), &ast); {
		case err == nil:
			return inDoc && ast.Mode&syscall.S_IFMT == syscall.S_IFREG && older(&ast)
		case err == syscall.ENOENT:
			return !inDoc
		}
		return false
	})
	// The entry must stand for the metadata file the directory has.
	file := "zarr.json"
	if v2 {
		file = ".zarray"
	}
	if !ok || n.MetaFile != file {
		return nil, key, false
	}
	key = consProbeKey(path, own, c)
	if p, ok := f.probes.Get(key); ok {
		return p, key, true
	}
	if n.Kind == zarr.KindGroup {
		p = &probe{}
		f.probes.Add(key, p)
		return p, key, true
	}
	a, err := n.Open(noStore{}, pack.NoCache{})
	if err != nil {
		// What the array's own metadata say decides (and is logged).
		return nil, key, false
	}
	p = zarrProbeOf(a)
	f.probes.Add(key, p)
	return p, key, true
}

// consProbeKey is the key of a probe made from consolidated metadata c
// for the array directory path whose metadata file has the stat own: it
// differs from the key of a probe of the file itself.
func consProbeKey(path string, own *syscall.Stat_t, c *localCons) probeKey {
	v := verOf(own)
	return probeKey{path: path, dev: v.dev, ino: v.ino, size: v.size, mtimeN: v.mtimeN, ctimeN: v.ctimeN, via: c.id}
}

// recheckZarr compares the view v of the Zarr array at path, just
// opened from its own metadata, with the probe consolidated metadata
// gave of it. When they differ (the array's metadata changed with an
// mtime older than the consolidated document's), the probe is replaced
// by the truth and recheckZarr reports true: the kernel's attributes of
// the file must go.
func (f *FS) recheckZarr(path string, v *all.View) bool {
	if _, ok := v.Container.(*zarr.DirArray); !ok {
		return false
	}
	var own syscall.Stat_t
	p, key, ok := f.probeZarrDir(path, &own)
	if !ok || key.via == 0 {
		return false // not answered from consolidated metadata
	}
	real := probeOf(v)
	if p.ok && p.size == real.size && p.info.Format == real.info.Format && maps.Equal(p.zarr, real.zarr) && sameJSON(p.zarrAttrs, real.zarrAttrs) {
		return false
	}
	f.warnOnce("%s: consolidated metadata out of date; the array's own metadata are used", path)
	f.probes.Add(key, real)
	return true
}

// sameJSON reports whether two JSON documents hold the same values
// (consolidated metadata hold the attributes as their writer formats
// them, not as the .zattrs file's bytes).
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil && reflect.DeepEqual(va, vb)
}
