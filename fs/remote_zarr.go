package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/remote"
	"github.com/bloscfs/bloscfs/zarr"
	lru "github.com/hashicorp/golang-lru/v2"
)

// Zarr arrays in a bucket. An array is a prefix holding .zarray or a
// zarr.json of node_type array; its chunks are objects found by key, never
// listed: a chunk is one GET of the whole object (a 404 is a missing
// chunk, the fill value), a shard's index one ranged GET of its end (or
// start), and its inner chunks ranged GETs of the shard's version seen
// then (If-Match, range cache and read-ahead of remote.Object).

// remoteZarrStore is a zarr.Store over the objects under a prefix.
type remoteZarrStore struct {
	s      *remote.Store
	prefix string                             // "" or ending in "/"
	objs   *lru.Cache[string, *remote.Object] // versions of objects read by range
	// vers holds the versions of objects read whole (their ETags): a
	// chunk's version, for the reader's memory of chunks that failed.
	vers *lru.Cache[string, zarr.Version]
}

var (
	_ zarr.Store     = (*remoteZarrStore)(nil)
	_ zarr.Versioner = (*remoteZarrStore)(nil)
)

func newRemoteZarrStore(s *remote.Store, prefix string) *remoteZarrStore {
	z := &remoteZarrStore{s: s, prefix: prefix}
	z.objs, _ = lru.New[string, *remote.Object](256)
	z.vers, _ = lru.New[string, zarr.Version](1024)
	return z
}

// err maps the store's errors to zarr's: a missing object is
// zarr.ErrNotExist, one past the caller's limit zarr.ErrTooLarge.
func (z *remoteZarrStore) err(key string, err error) error {
	switch {
	case errors.Is(err, remote.ErrNotFound):
		return fmt.Errorf("%s: %w", z.s.Name(z.prefix+key), zarr.ErrNotExist)
	case errors.Is(err, remote.ErrTooLarge):
		return fmt.Errorf("%w: %w", zarr.ErrTooLarge, err)
	}
	return err
}

// tagVersion is the zarr.Version of an object's ETag (the zero Version
// for an object without one).
func tagVersion(s *remote.Store, info remote.ObjectInfo) zarr.Version {
	if info.ETag == "" {
		return zarr.Version{}
	}
	return zarr.TagVersion(s.Name(info.Key) + "\x00" + info.ETag)
}

// Get GETs a whole object of at most limit bytes: a larger one is
// refused from the answer's Content-Length, before its body is read.
func (z *remoteZarrStore) Get(key string, limit int64) ([]byte, error) {
	if !zarr.ValidKey(key) {
		return nil, fmt.Errorf("zarr: key %q: %w (not a relative key inside the store)", key, zarr.ErrFormat)
	}
	b, info, err := z.s.Get(context.Background(), z.prefix+key, 0, -1, min(limit, zarr.MaxObject))
	if err == nil {
		if v := tagVersion(z.s, info); !v.IsZero() {
			z.vers.Add(key, v)
		}
	}
	return b, z.err(key, err)
}

// Version returns the version of key that this store reads: that of the
// object it reads ranges of (the shard whose index it read), else that
// of its last whole read, else the zero Version (unknown: no request is
// made to learn it). An object replaced is seen by the reads of a new
// store (a new open of the array).
func (z *remoteZarrStore) Version(key string) (zarr.Version, error) {
	if o, ok := z.objs.Get(key); ok {
		return tagVersion(z.s, o.ObjectInfo), nil
	}
	v, _ := z.vers.Get(key)
	return v, nil
}

// GetRange GETs a range of an object: the first range of an object with
// a request that also tells its version, the next ones through that
// version (remote.Object).
func (z *remoteZarrStore) GetRange(key string, off, n int64) ([]byte, error) {
	if !zarr.ValidKey(key) {
		return nil, fmt.Errorf("zarr: key %q: %w (not a relative key inside the store)", key, zarr.ErrFormat)
	}
	if n < 0 || n > zarr.MaxObject {
		return nil, fmt.Errorf("%s: range of %d bytes: %w", z.s.Name(z.prefix+key), n, io.ErrUnexpectedEOF)
	}
	if o, ok := z.objs.Get(key); ok && n > 0 {
		if off < 0 {
			off = o.Size - n
		}
		if off < 0 || off > o.Size-n {
			return nil, fmt.Errorf("%s: range [%d,+%d) of a %d-byte object: %w", o.Name(), off, n, o.Size, io.ErrUnexpectedEOF)
		}
		b := make([]byte, n)
		if err := o.ReadExact(b, off); err != nil {
			return nil, err
		}
		return b, nil
	}
	b, info, err := z.s.Get(context.Background(), z.prefix+key, off, n, zarr.MaxObject)
	if err != nil {
		return nil, z.err(key, err)
	}

	if n > 0 && info.ETag != "" {
		o := z.s.OpenInfo(info)
		o.Opened()
		z.objs.Add(key, o)
	}
	return b, nil
}

// memoStore remembers the small documents a probe reads, so that
// zarr.Probe and zarr.Open GET each metadata object once, and the version
// of the one that makes the prefix an array.
type memoStore struct {
	*remoteZarrStore
	mu   sync.Mutex
	got  map[string][]byte
	errs map[string]error
	info map[string]remote.ObjectInfo
}

func (m *memoStore) Get(key string, limit int64) ([]byte, error) {
	m.mu.Lock()
	b, ok := m.got[key]
	err := m.errs[key]
	m.mu.Unlock()
	if ok || err != nil {
		return b, err
	}
	if !zarr.ValidKey(key) {
		return nil, fmt.Errorf("zarr: key %q: %w", key, zarr.ErrFormat)
	}
	b, info, err := m.s.Get(context.Background(), m.prefix+key, 0, -1, min(limit, zarr.MaxMetaSize))
	err = m.err(key, err)
	m.mu.Lock()
	if err != nil {
		m.errs[key] = err
	} else {
		m.got[key], m.info[key] = b, info
	}
	m.mu.Unlock()
	return b, err
}

// GetRange of nothing (zarr.Probe's test that an object exists) reads the
// object whole: it is a metadata document that zarr.Open reads next.
func (m *memoStore) GetRange(key string, off, n int64) ([]byte, error) {
	if n == 0 {
		_, err := m.Get(key, zarr.MaxMetaSize)
		return []byte{}, err
	}
	return m.remoteZarrStore.GetRange(key, off, n)
}

// zarrProbe is the cached answer of probeZarr for a prefix.
type zarrProbe struct {
	at   time.Time
	kind zarr.Kind
	p    *probe
	meta remote.ObjectInfo // the array's .zarray or zarr.json
}

// zarrProbeTTL is how long a prefix's probe is reused (as a listing is).
const zarrProbeTTL = 60 * time.Second

// probeZarr tells what prefix is as a Zarr node, from its metadata
// objects (never a listing): an array (p.ok when it opens), a group, or
// neither. An array that does not open is logged once and shown as a
// directory.
func (r *RemoteFS) probeZarr(prefix string) *zarrProbe {
	if zp, ok := r.zprobes.Get(prefix); ok && time.Since(zp.at) < zarrProbeTTL {
		return zp
	}
	if c, rel := r.consolidatedFor(prefix); c != nil {
		if zp := r.probeConsolidated(prefix, c, rel); zp != nil {
			r.zprobes.Add(prefix, zp)
			return zp
		}
	}
	m := &memoStore{remoteZarrStore: newRemoteZarrStore(r.store, prefix), got: map[string][]byte{}, errs: map[string]error{}, info: map[string]remote.ObjectInfo{}}
	zp := &zarrProbe{at: time.Now(), p: &probe{}}
	kind, err := zarr.Probe(m, "")
	if err != nil {
		if !errors.Is(err, zarr.ErrFormat) && !errors.Is(err, zarr.ErrUnsupported) {
			r.f.warnOnce("%s: %v", r.store.Name(prefix), err)
			return zp // out of reach: try again next time
		}
		r.f.warnOnce("%s: shown as a directory: %v", r.store.Name(prefix), err)
	}
	zp.kind = kind
	if kind == zarr.KindArray {
		a, err := zarr.Open(m, "", pack.NoCache{})
		if err != nil {
			r.f.warnOnce("%s: shown as a directory: %v", r.store.Name(prefix), err)
		} else {
			zp.p = zarrProbeOf(a)
			zp.meta = m.info["zarr.json"]
			if zp.meta.Key == "" {
				zp.meta = m.info[".zarray"]
			}
		}
	}
	r.zprobes.Add(prefix, zp)
	return zp
}

// zarrParent reports whether the listing of dir shows a Zarr node (a
// group's or array's metadata): its sub-prefixes are then probed as Zarr
// nodes. Elsewhere only prefixes named *.zarr are, so that listing a
// bucket costs no request per prefix.
func zarrParent(l *remote.Listing) bool {
	for _, k := range []string{".zgroup", ".zattrs", ".zmetadata", "zarr.json", ".zarray"} {
		if _, ok := l.Objects[k]; ok {
			return true
		}
	}
	return false
}

// openZarr opens the array under prefix for reading, through the block
// cache c.
func (r *RemoteFS) openZarr(prefix string, c pack.BlockCache) (*all.View, error) {
	a, err := zarr.Open(newRemoteZarrStore(r.store, prefix), "", c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.store.Name(strings.TrimSuffix(prefix, "/")), err)
	}
	v := all.ContainerView(a)
	v.NPY = true
	return v, nil
}

// remoteCons is one version of a group's consolidated metadata (its
// .zmetadata, or its zarr.json), and the object that held it.
type remoteCons struct {
	*zarr.ConsolidatedMeta
	info remote.ObjectInfo
}

// consolidatedFor returns the consolidated metadata that describe prefix
// (a Zarr node, ending in "/"), from the nearest ancestor group within
// the mount that has some, and prefix's key relative to that group
// (zarr.FindConsolidated). The walk up uses the (cached) listings of the
// ancestors and stops at the first that is not a Zarr node; each document
// is read once per version.
func (r *RemoteFS) consolidatedFor(prefix string) (*remoteCons, string) {
	var found *remoteCons
	_, rel := zarr.FindConsolidated(strings.TrimSuffix(prefix, "/"), strings.TrimSuffix(r.prefix, "/"), func(dir string) (*zarr.ConsolidatedMeta, bool) {
		if dir != "" {
			dir += "/"
		}
		l, err := r.store.List(context.Background(), dir)
		if err != nil || !zarrParent(l) {
			return nil, false
		}
		for _, name := range []string{".zmetadata", "zarr.json"} {
			if info, ok := l.Objects[name]; ok {
				if c := r.loadConsolidated(info); c != nil && c.HasDocs() {
					found = c
					return c.ConsolidatedMeta, true
				}
			}
		}
		return nil, true
	})
	if found == nil {
		return nil, ""
	}
	return found, rel
}

// loadConsolidated reads and parses one version of a .zmetadata or a
// group's zarr.json (nil when it cannot be read now).
func (r *RemoteFS) loadConsolidated(info remote.ObjectInfo) *remoteCons {
	id := info.Key + "\x00" + info.ETag
	if c, ok := r.cons.Get(id); ok {
		return c
	}
	b, _, err := r.store.Get(context.Background(), info.Key, 0, -1, zarr.MaxMetaSize)
	if err != nil {
		r.f.warnOnce("%v", err)
		return nil
	}
	c := &remoteCons{info: info}
	if c.ConsolidatedMeta, err = zarr.ParseConsolidatedMeta(path.Base(info.Key), b, r.store.Name(info.Key)); err != nil {
		r.f.warnOnce("%s: not used: %v", r.store.Name(info.Key), err)
	}
	r.cons.Add(id, c)
	return c
}

// probeConsolidated answers probeZarr from consolidated metadata, as
// zarr.open_consolidated does: no request. It returns nil when the
// metadata do not name the node.
func (r *RemoteFS) probeConsolidated(prefix string, c *remoteCons, rel string) *zarrProbe {
	n, ok := c.Node(rel, nil)
	if !ok {
		return nil
	}
	zp := &zarrProbe{at: time.Now(), kind: n.Kind, p: &probe{}}
	if n.Kind == zarr.KindGroup {
		return zp
	}
	zp.meta.Key = prefix + n.MetaFile
	a, err := n.Open(newRemoteZarrStore(r.store, prefix), pack.NoCache{})
	if err != nil {
		r.f.warnOnce("%s: shown as a directory: %v", r.store.Name(prefix), err)
		return zp
	}
	zp.meta.LastModified = c.info.LastModified
	zp.p = zarrProbeOf(a)
	return zp
}
