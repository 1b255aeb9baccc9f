package fs

// Trees of the bucket: an object named as a tree format's, read by
// ranged GETs of its one version (its ETag), and a prefix named as one
// (a python-blosc2 .b2d), listed by one LIST without delimiter.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"path"
	"strings"
	"time"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/remote"
)

// maxTreeObjects bounds the objects of a tree prefix.
const maxTreeObjects = 1 << 16

// probeTree probes the tree object info, once per version (ETag). A
// failure of the store is not kept: the object is shown as it is this
// time, and probed again next time.
func (r *RemoteFS) probeTree(info remote.ObjectInfo) *probe {
	key := info.Key + "\x00" + info.ETag
	if p, ok := r.probes.Get(key); ok {
		return p
	}
	t, err := r.objectTree(info)
	if err != nil {
		if storeFailed(err) {
			r.f.warnOnce("%v", err)
			return &probe{}
		}
		if !errors.Is(err, pack.ErrNoTree) {
			r.f.warnOnce("%s: shown as it is stored: %v", r.store.Name(info.Key), err)
		}
		r.probes.Add(key, &probe{})
		return &probe{}
	}
	defer t.release()
	p := treeProbeOf(t)
	r.probes.Add(key, p)
	return p
}

// objectTree returns the opened tree of the object version info, with
// a reference the caller releases.
func (r *RemoteFS) objectTree(info remote.ObjectInfo) (*openTree, error) {
	return r.f.trees.get("s3\x00"+info.Key+"\x00"+info.ETag, func() (*openTree, error) {
		t, err := openObjectTree(r.store, info, r.f.blockCache())
		if err != nil {
			return nil, err
		}
		r.f.logProblems(t)
		return r.newTree(t, r.store.Name(info.Key), info.LastModified), nil
	})
}

// openObjectTree opens the tree of an object version, read by ranged
// GETs under If-Match.
func openObjectTree(s *remote.Store, info remote.ObjectInfo, cache pack.BlockCache) (pack.Tree, error) {
	tf, ok := pack.TreeFormatFor(path.Base(info.Key), false)
	if !ok {
		return nil, fmt.Errorf("%s: %w", s.Name(info.Key), pack.ErrUnknownFormat)
	}
	o := s.OpenInfo(info)
	t, err := tf.Open(o, info.Size, o.Name(), cache)
	o.Opened() // the files of the tree fetch what they read
	return t, err
}

// OpenRemoteTree opens the tree that the object key of s holds (a zipped
// Zarr store, a .b2z, a .b2e), or, for a key ending in "/" or naming no
// object, the prefix key (a .b2d), listed once.
func OpenRemoteTree(s *remote.Store, key string, cache pack.BlockCache) (pack.Tree, error) {
	ctx := context.Background()
	if key != "" && !strings.HasSuffix(key, "/") {
		info, err := s.Stat(ctx, key)
		if err == nil {
			return openObjectTree(s, info, cache)
		}
		if !errors.Is(err, remote.ErrNotFound) {
			return nil, err
		}
		key += "/"
	}
	objs, err := s.Walk(ctx, key, maxTreeObjects)
	if err != nil {
		return nil, err
	}
	return openPrefixTree(s, key, objs, cache)
}

// storeFailed reports whether err is the store's failure (a changed or
// missing object, a refused or failed request) rather than a fact about
// what the objects hold.
func storeFailed(err error) bool {
	for _, e := range []error{remote.ErrChanged, remote.ErrNotFound, remote.ErrDenied, remote.ErrRead, remote.ErrShortBody, remote.ErrTooMany, context.DeadlineExceeded, context.Canceled} {
		if errors.Is(err, e) {
			return true
		}
	}
	return pack.Transient(err)
}

// newTree wraps an opened tree of the bucket.
func (r *RemoteFS) newTree(t pack.Tree, name string, mtime time.Time) *openTree {
	return &openTree{t: t, name: name, mem: treeMemOf(t), f: r.f, uid: r.uid, gid: r.gid, perm: 0o444, mtime: mtime, timeout: r.f.opts.AttrTimeout}
}

// prefixTree is a listing of a tree prefix: the version of its objects
// (a hash of their keys and ETags), kept as long as a listing is.
type prefixTree struct {
	at   time.Time
	objs []remote.ObjectInfo
	key  string
}

// listTree lists the prefix p (ending in "/") of a tree.
func (r *RemoteFS) listTree(p string) (*prefixTree, error) {
	r.treeMu.Lock()
	pt := r.treeLists[p]
	r.treeMu.Unlock()
	if pt != nil && time.Since(pt.at) < zarrProbeTTL {
		return pt, nil
	}
	objs, err := r.store.Walk(context.Background(), p, maxTreeObjects)
	if err != nil {
		return nil, err
	}
	h := fnv.New64a()
	var last time.Time
	for _, o := range objs {
		fmt.Fprintf(h, "%s\x00%s\x00", o.Key, o.ETag)
		if o.LastModified.After(last) {
			last = o.LastModified
		}
	}
	pt = &prefixTree{at: time.Now(), objs: objs, key: fmt.Sprintf("s3\x00%s\x00%x", p, h.Sum64())}
	r.treeMu.Lock()
	if r.treeLists == nil || len(r.treeLists) > 1<<10 {
		r.treeLists = map[string]*prefixTree{}
	}
	r.treeLists[p] = pt
	r.treeMu.Unlock()
	return pt, nil
}

// probeTreePrefix probes the tree of prefix p (ending in "/"), once per
// version of its objects.
func (r *RemoteFS) probeTreePrefix(p string) *probe {
	pt, err := r.listTree(p)
	if err != nil {
		r.f.warnOnce("%v", err)
		return &probe{}
	}
	if pr, ok := r.probes.Get(pt.key); ok {
		return pr
	}
	t, err := r.prefixTreeOf(p, pt)
	if err != nil {
		if storeFailed(err) {
			r.f.warnOnce("%v", err)
			return &probe{}
		}
		r.f.warnOnce("%s: shown as it is stored: %v", r.store.Name(p), err)
		r.probes.Add(pt.key, &probe{})
		return &probe{}
	}
	defer t.release()
	pr := treeProbeOf(t)
	r.probes.Add(pt.key, pr)
	return pr
}

// prefixTreeOf returns the opened tree of the listing pt of prefix p,
// with a reference the caller releases.
func (r *RemoteFS) prefixTreeOf(p string, pt *prefixTree) (*openTree, error) {
	return r.f.trees.get(pt.key, func() (*openTree, error) {
		t, err := openPrefixTree(r.store, p, pt.objs, r.f.blockCache())
		if err != nil {
			return nil, err
		}
		r.f.logProblems(t)
		var last time.Time
		for _, o := range pt.objs {
			if o.LastModified.After(last) {
				last = o.LastModified
			}
		}
		return r.newTree(t, r.store.Name(p), last), nil
	})
}

// openPrefixTree opens the tree of prefix p (ending in "/") whose
// objects are objs.
func openPrefixTree(s *remote.Store, p string, objs []remote.ObjectInfo, cache pack.BlockCache) (pack.Tree, error) {
	tf, ok := pack.TreeFormatFor(path.Base(strings.TrimSuffix(p, "/")), true)
	if !ok {
		return nil, fmt.Errorf("%s: %w", s.Name(p), pack.ErrUnknownFormat)
	}
	src := &prefixMembers{s: s, prefix: p, objs: map[string]remote.ObjectInfo{}}
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Key, p)
		if rel == "" || strings.HasSuffix(rel, "/") {
			continue // a folder's marker object
		}
		src.list = append(src.list, pack.Member{Path: rel, Size: o.Size})
		src.objs[rel] = o
	}
	return tf.OpenDir(src, s.Name(p), cache)
}

// prefixMembers are the objects of a tree prefix, as the tree's files:
// each read by ranged GETs of the version the listing saw.
type prefixMembers struct {
	s      *remote.Store
	prefix string
	list   []pack.Member
	objs   map[string]remote.ObjectInfo
}

// Members returns the objects listed.
func (m *prefixMembers) Members() ([]pack.Member, error) { return m.list, nil }

// Open returns the object of the member at p, as the listing saw it.
func (m *prefixMembers) Open(p string) (io.ReaderAt, int64, error) {
	info, ok := m.objs[p]
	if !ok {
		return nil, 0, fmt.Errorf("%s: %w", m.s.Name(m.prefix+p), pack.ErrNotInTree)
	}
	o := m.s.OpenInfo(info)
	o.Opened()
	return o, info.Size, nil
}
