// Package b2store reads python-blosc2's stores (docs/FORMATS.md §14):
// an EmbedStore (.b2e: one Blosc2 frame whose SChunk bytes are other
// frames, one after another, mapped by key in its "estore_metadata"
// vlmetalayer), and a DictStore or TreeStore (.b2d: a directory holding
// an embed.b2e plus one .b2nd/.b2f/.b2b file per larger value; .b2z: the
// same files in an uncompressed ZIP archive), as a tree of directories
// and leaves.
//
// A store directory's files come from a Source (a local directory:
// DirSource; a .b2z archive: ZipSource, read in place through zipread; a
// bucket prefix supplies its own). Each
// leaf is a frame read in place: an embedded one through the embed
// store's chunk reader, so that a read decodes only the store chunks
// that hold its bytes. An NDArray leaf is shown as the NPY file a .b2nd
// is shown as; an SChunk leaf as its plain bytes; a C2Array reference as
// a small JSON document; other kinds are listed and not read.
//
// Everything a store claims is checked before it is used: bad keys,
// ranges and conflicts leave out the entries concerned, each with an
// error naming the store and the key (Problems), and the rest reads.
//
// Tree is the view the mount and the commands show (a pack.Tree,
// registered for .b2e and .b2z files and .b2d directories): keys as
// paths, leaves as files, vlmeta as extended attributes; it opens each
// leaf's frame once to list it, and keeps at most MaxOpenLeaves open.
package b2store

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"

	bcache "github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// Flavor is the kind of a store.
type Flavor int

const (
	// FlavorEmbed is an EmbedStore (.b2e).
	FlavorEmbed Flavor = iota
	// FlavorDict is a DictStore: its embed.b2e is marked b2dict.
	FlavorDict
	// FlavorTree is a TreeStore: its embed.b2e is marked b2tree.
	FlavorTree
	// FlavorDir is a DictStore or TreeStore written by python-blosc2
	// 3.7–4.0, whose embed.b2e is marked b2embed whichever it is. It is
	// read as a TreeStore (its __vlmeta__ keys are subtree metadata).
	FlavorDir
)

func (f Flavor) String() string {
	switch f {
	case FlavorEmbed:
		return "EmbedStore"
	case FlavorDict:
		return "DictStore"
	case FlavorTree:
		return "TreeStore"
	case FlavorDir:
		return "DictStore/TreeStore (python-blosc2 < 4.1)"
	}
	return fmt.Sprintf("Flavor(%d)", int(f))
}

// Kind is the kind of a leaf.
type Kind int

const (
	// KindUnknown is a leaf not yet classified.
	KindUnknown Kind = iota
	// KindNDArray is an N-dimensional array (a b2nd frame), shown as NPY.
	KindNDArray
	// KindSChunk is a super-chunk, shown as its plain bytes.
	KindSChunk
	// KindC2Array is a reference to a remote array (urlbase and path).
	KindC2Array
	// KindOther is a kind listed but not read; Leaf.Kind names it.
	KindOther
)

func (k Kind) String() string {
	return [...]string{"unknown", "ndarray", "schunk", "c2array", "other"}[min(int(k), 4)]
}

// EmbedFile is the name of a store directory's embed store.
const EmbedFile = "embed.b2e"

// vlmetaKey is the last segment of a TreeStore's metadata keys:
// "<path>/__vlmeta__" holds the vlmeta of the subtree at path (the root
// for "/__vlmeta__") as the vlmeta of an SChunk.
const vlmetaKey = "__vlmeta__"

// externalExts are the suffixes of external leaves that python-blosc2
// (≥ 4.2; .b2nd and .b2f before) trusts without opening the file.
var externalExts = []string{".b2nd", ".b2f", ".b2b"}

// Member is one file of a store directory.
type Member = pack.Member

// Source supplies the files of a store directory: a local directory
// (DirSource), a bucket prefix, the members of a ZIP archive (only the
// stored ones open: ZipSource). See pack.MemberSource. The errors of its
// Open name the file (the store passes them on as they are).
type Source = pack.MemberSource

// Store is an opened store: an EmbedStore, or a DictStore or TreeStore
// directory, as a tree of directories and leaves. It is safe for
// concurrent use.
type Store struct {
	name   string
	flavor Flavor
	embed  *Embed
	src    Source // nil for an EmbedStore
	cache  pack.BlockCache
	root   *Dir
	leaves []*Leaf // sorted by key
	probs  problems

	watch readWatch // the failed reads of its files

	mu     sync.Mutex
	embedR io.ReaderAt // the embed store's reader, closed with the store
	all    []*Leaf     // every leaf made, for Close
	closed bool
}

// Dir is a directory of a store: a key prefix ("/a/b"), or the root ("/").
type Dir struct {
	Key    string // "/" or "/a/b"
	s      *Store
	dirs   map[string]*Dir
	leaves map[string]*Leaf
	names  []string
	vlmeta *Leaf // TreeStore: the SChunk at <Key>/__vlmeta__
}

// Names returns the names of the directory's entries, sorted.
func (d *Dir) Names() []string { return slices.Clone(d.names) }

// Lookup returns the directory or the leaf called name (one of them nil;
// both nil if there is none).
func (d *Dir) Lookup(name string) (*Dir, *Leaf) { return d.dirs[name], d.leaves[name] }

// VLMeta returns the directory's vlmeta: a TreeStore subtree's (the
// vlmeta of its __vlmeta__ SChunk); for the root, the store's (see
// Store.VLMeta). A directory without any has an empty set.
func (d *Dir) VLMeta() (*VLMeta, error) {
	if d.Key == "/" {
		return d.s.VLMeta()
	}
	if d.vlmeta == nil {
		return nil, nil
	}
	return d.vlmeta.VLMeta()
}

// Leaf is a value of a store: a frame embedded in the embed store, a
// frame in a file of its own, or a C2Array reference.
type Leaf struct {
	Key      string // "/a/b/c"
	Embedded bool   // its frame lies in the embed store, at Offset
	Offset   int64  // embedded: where its frame starts in the store's SChunk bytes
	Member   string // external: the file that holds its frame
	Size     int64  // the size of its frame (0 for a C2Array reference)
	C2       *C2Ref // C2Array references

	s    *Store
	mu   sync.Mutex
	r    io.ReaderAt // external: its file, once opened
	rn   int64
	fr   *frame.Frame
	err  error
	kind Kind
	sub  string
}

// Name returns the last segment of the key.
func (l *Leaf) Name() string { return l.Key[strings.LastIndexByte(l.Key, '/')+1:] }

// OpenEmbedStore opens a .b2e file of size bytes in r as a store whose
// leaves are the entries of its embed map. See OpenEmbed.
func OpenEmbedStore(r io.ReaderAt, size int64, name string, cache pack.BlockCache) (*Store, error) {
	cache = shared(cache)
	s := &Store{name: name, cache: cache}
	e, err := OpenEmbed(s.watch.wrap(r), size, name, cache)
	if err != nil {
		return nil, s.watch.sure(err, 0)
	}
	s.flavor, s.embed = flavorOf(e.marker, false), e
	var leaves []*Leaf
	for _, en := range e.entries {
		leaves = append(leaves, s.embeddedLeaf(en))
	}
	s.build(leaves)
	return s, nil
}

// shared returns cache, or for nil a cache of pack.DefaultCacheSize
// bytes that the store and all its leaves share.
func shared(c pack.BlockCache) pack.BlockCache {
	if c == nil {
		return bcache.New[pack.BlockKey](pack.DefaultCacheSize)
	}
	return c
}

func flavorOf(marker string, dir bool) Flavor {
	switch marker {
	case MarkerDict:
		return FlavorDict
	case MarkerTree:
		return FlavorTree
	}
	if dir {
		return FlavorDir
	}
	return FlavorEmbed
}

// newLeaf makes a leaf of the store.
func (s *Store) newLeaf(l *Leaf) *Leaf {
	l.s = s
	s.mu.Lock()
	s.all = append(s.all, l)
	s.mu.Unlock()
	return l
}

func (s *Store) embeddedLeaf(en Entry) *Leaf {
	l := s.newLeaf(&Leaf{Key: en.Key, C2: en.C2})
	if en.C2 != nil {
		l.kind, l.sub = KindC2Array, "c2array"
		return l
	}
	l.Embedded, l.Offset, l.Size = true, en.Offset, en.Length
	return l
}

// OpenDir opens the store directory whose files src supplies (a .b2d
// directory, or the members of a .b2z archive) as python-blosc2 reads
// it: the embed store embed.b2e, whose marker tells a DictStore from a
// TreeStore, and every .b2nd, .b2f and .b2b file as the leaf whose key is
// its path without the suffix (a file of another suffix is opened, and
// is a leaf if it is a frame). A key that is both a file and an embedded
// entry is the file. A directory without embed.b2e, or whose embed.b2e is
// not a store, gives an error wrapping ErrNotStore. name prefixes errors;
// cache holds the decoded blocks of the store and its leaves (nil: one
// cache of pack.DefaultCacheSize bytes for them all).
func OpenDir(src Source, name string, cache pack.BlockCache) (*Store, error) {
	members, err := src.Members()
	if err != nil {
		return nil, err
	}
	cache = shared(cache)
	s := &Store{name: name, src: src, cache: cache}
	var embed *Member
	for i, m := range members {
		if m.Path == EmbedFile {
			embed = &members[i]
			break
		}
	}
	if embed == nil {
		return nil, fmt.Errorf("%s: %w: no %s", name, ErrNotStore, EmbedFile)
	}
	r, size, err := src.Open(EmbedFile)
	if err != nil {
		return nil, err // a Source's errors name the file
	}
	s.embedR = s.watch.wrap(r)
	e, err := OpenEmbed(s.embedR, size, name+"/"+EmbedFile, cache)
	if err != nil {
		s.Close()
		return nil, s.watch.sure(err, 0)
	}
	s.embed = e
	s.flavor = flavorOf(e.marker, true)

	// External leaves, by key. Two files of one key (a.b2nd and a.b2f):
	// the first in the order of externalExts, then of path, is kept.
	ext := make(map[string]*Leaf)
	rank := func(p string) int {
		if i := slices.Index(externalExts, splitExt(p)); i >= 0 {
			return i
		}
		return len(externalExts)
	}
	slices.SortFunc(members, func(a, b Member) int {
		return cmp.Or(cmp.Compare(rank(a.Path), rank(b.Path)), strings.Compare(a.Path, b.Path))
	})
	values := 0 // the files but embed.b2e, which MaxEntries bounds
	for _, m := range members {
		if m.Path == EmbedFile {
			continue
		}
		if values >= MaxEntries {
			s.probs.add(fmt.Errorf("%s: %w: more than %d files beside %s; those past the first %d are left out", name, ErrBadEntry, MaxEntries, EmbedFile, MaxEntries))
			break
		}
		values++
		key := "/" + strings.TrimSuffix(m.Path, splitExt(m.Path))
		l := &Leaf{Key: key, Member: m.Path, Size: m.Size}
		canonical := rank(m.Path) < len(externalExts)
		if err := checkKey(key); err != nil {
			if canonical {
				s.probs.add(fmt.Errorf("%s: %w: file %q: key %q: %v", name, ErrBadEntry, m.Path, key, err))
			}
			continue
		}
		s.newLeaf(l)
		if !canonical {
			// Not a suffix python-blosc2 trusts: it opens the file, and
			// takes it if it is a Blosc2 object.
			before := s.watch.failures()
			_, err := l.Frame()
			l.Forget()
			if err != nil {
				if err = s.watch.sure(err, before); !verdict(err) {
					s.Close()
					return nil, err
				}
				continue
			}
		}
		if prev, dup := ext[key]; dup {
			s.probs.add(fmt.Errorf("%s: %w: files %q and %q both hold key %q; %q is left out", name, ErrBadEntry, prev.Member, m.Path, key, m.Path))
			continue
		}
		ext[key] = l
	}
	leaves := make([]*Leaf, 0, len(ext)+len(e.entries))
	for _, l := range ext {
		leaves = append(leaves, l)
	}
	for _, en := range e.entries {
		if _, ok := ext[en.Key]; !ok {
			leaves = append(leaves, s.embeddedLeaf(en))
		}
	}
	s.build(leaves)
	return s, nil
}

// splitExt returns the extension of a path's last segment as Python's
// os.path.splitext does: from its last dot, unless the segment's dots
// all lead it.
func splitExt(p string) string {
	base := p[strings.LastIndexByte(p, '/')+1:]
	i := strings.LastIndexByte(base, '.')
	if i <= 0 || strings.Trim(base[:i], ".") == "" {
		return ""
	}
	return base[i:]
}

// build makes the tree of leaves, leaving out (as problems) the leaves
// whose key is also a directory; TreeStore metadata keys become the
// metadata of their directory.
func (s *Store) build(leaves []*Leaf) {
	slices.SortFunc(leaves, func(a, b *Leaf) int { return strings.Compare(a.Key, b.Key) })
	tree := s.flavor == FlavorTree || s.flavor == FlavorDir
	s.root = s.newDir("/")
	meta := make(map[string]*Leaf)
	for _, l := range leaves {
		segs := strings.Split(l.Key[1:], "/")
		if tree && segs[len(segs)-1] == vlmetaKey {
			meta[strings.TrimSuffix(strings.TrimSuffix(l.Key, vlmetaKey), "/")] = l
			continue
		}
		d := s.root
		for _, seg := range segs[:len(segs)-1] {
			if leaf := d.leaves[seg]; leaf != nil {
				s.probs.add(fmt.Errorf("%s: %w: key %q is a leaf and also a directory (of %q); the leaf is left out", s.name, ErrBadEntry, leaf.Key, l.Key))
				delete(d.leaves, seg)
			}
			sub := d.dirs[seg]
			if sub == nil {
				sub = s.newDir(path.Join(d.Key, seg))
				d.dirs[seg] = sub
			}
			d = sub
		}
		last := segs[len(segs)-1]
		if d.dirs[last] != nil {
			s.probs.add(fmt.Errorf("%s: %w: key %q is a leaf and also a directory; the leaf is left out", s.name, ErrBadEntry, l.Key))
			continue
		}
		d.leaves[last] = l
	}
	// The leaves kept, in key order, and the names of each directory.
	var walk func(d *Dir)
	walk = func(d *Dir) {
		for n := range d.dirs {
			d.names = append(d.names, n)
		}
		for n := range d.leaves {
			d.names = append(d.names, n)
		}
		slices.Sort(d.names)
		for _, n := range d.names {
			if sub := d.dirs[n]; sub != nil {
				walk(sub)
			} else {
				s.leaves = append(s.leaves, d.leaves[n])
			}
		}
	}
	walk(s.root)
	for p, l := range meta {
		if p == "" {
			p = "/"
		}
		if d, _ := s.lookupDir(p); d != nil {
			d.vlmeta = l
		}
	}
}

func (s *Store) newDir(key string) *Dir {
	return &Dir{Key: key, s: s, dirs: map[string]*Dir{}, leaves: map[string]*Leaf{}}
}

// lookupDir returns the directory of key ("/" or "/a/b"), if any.
func (s *Store) lookupDir(key string) (*Dir, bool) {
	d := s.root
	if key == "/" {
		return d, true
	}
	for seg := range strings.SplitSeq(strings.TrimPrefix(key, "/"), "/") {
		if d = d.dirs[seg]; d == nil {
			return nil, false
		}
	}
	return d, true
}

// Name returns the name the store was opened with.
func (s *Store) Name() string { return s.name }

// Flavor returns the kind of store.
func (s *Store) Flavor() Flavor { return s.flavor }

// Embed returns the store's embed store.
func (s *Store) Embed() *Embed { return s.embed }

// Root returns the root directory.
func (s *Store) Root() *Dir { return s.root }

// Leaves returns the leaves, sorted by key.
func (s *Store) Leaves() []*Leaf { return slices.Clone(s.leaves) }

// Lookup returns the directory or leaf of key ("/", "/a/b"): one of them,
// or an error wrapping ErrNotFound.
func (s *Store) Lookup(key string) (*Dir, *Leaf, error) {
	if d, ok := s.lookupDir(key); ok {
		return d, nil, nil
	}
	dir, name := path.Split(key)
	if d, ok := s.lookupDir(path.Clean(dir)); ok && name != "" {
		if l := d.leaves[name]; l != nil {
			return nil, l, nil
		}
	}
	return nil, nil, fmt.Errorf("%s: key %q: %w", s.name, key, ErrNotFound)
}

// Problems returns the errors of everything left out (ErrBadEntry), each
// naming the store and the key or file.
func (s *Store) Problems() []error {
	return append(s.embed.Problems(), s.probs.errors()...)
}

// VLMeta returns the store's vlmeta: a TreeStore's is the vlmeta of its
// /__vlmeta__ SChunk; an EmbedStore's or DictStore's, the user
// vlmetalayers of its embed store's frame.
func (s *Store) VLMeta() (*VLMeta, error) {
	if s.flavor == FlavorTree || s.flavor == FlavorDir {
		if s.root.vlmeta == nil {
			return nil, nil
		}
		return s.root.vlmeta.VLMeta()
	}
	return s.embed.VLMeta(), nil
}

// ErrClosed reports a use of a closed store.
var ErrClosed = errors.New("store closed")

// Close closes the files the store and its leaves opened (readers
// returned before fail afterwards).
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	all := s.all
	r := s.embedR
	s.embedR = nil
	s.mu.Unlock()
	var errs []error
	if c, ok := r.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	for _, l := range all {
		l.Forget()
	}
	return errors.Join(errs...)
}

// FrameReader returns a reader of the leaf's frame bytes and their
// number: a range of the embed store's SChunk bytes, read through its
// chunk reader, or the leaf's file (opened once, kept until Forget or
// the store's Close).
func (l *Leaf) FrameReader() (io.ReaderAt, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.readerLocked()
}

func (l *Leaf) readerLocked() (io.ReaderAt, int64, error) {
	switch {
	case l.C2 != nil:
		return nil, 0, fmt.Errorf("%s: key %q: %w: a C2Array reference holds no frame", l.s.name, l.Key, ErrUnsupportedKind)
	case l.Embedded:
		r, err := l.s.embed.Bytes(l.Offset, l.Size)
		return r, l.Size, err
	case l.r != nil:
		return l.r, l.rn, nil
	}
	l.s.mu.Lock()
	closed := l.s.closed
	l.s.mu.Unlock()
	if closed {
		return nil, 0, fmt.Errorf("%s: %w", l.s.name, ErrClosed)
	}
	r, n, err := l.s.src.Open(l.Member)
	if err != nil {
		return nil, 0, err // a Source's errors name the file
	}
	l.r, l.rn = l.s.watch.wrap(r), n
	return l.r, n, nil
}

// Frame opens the leaf's frame (once; a failure to read it, rather than
// a frame that is not one, is tried again on the next call).
func (l *Leaf) Frame() (*frame.Frame, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fr != nil || l.err != nil {
		return l.fr, l.err
	}
	before := l.s.watch.failures()
	r, n, err := l.readerLocked()
	if err == nil {
		var fr *frame.Frame
		if fr, err = frame.Open(r, n, l.s.name+":"+l.Key, l.s.cache); err == nil {
			l.fr = fr
			l.kind, l.sub = classify(fr)
			return fr, nil
		}
	}
	if err = l.s.watch.sure(err, before); verdict(err) {
		l.err = err
	}
	return nil, err
}

// Forget drops the leaf's opened frame (its metadata and index) and
// closes its file, so that a caller holding many leaves can bound the
// memory and descriptors they keep; the next use opens them again.
// Readers of an external leaf returned before fail afterwards.
func (l *Leaf) Forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fr = nil
	if c, ok := l.r.(io.Closer); ok {
		c.Close()
	}
	l.r = nil
}

// Kind returns the leaf's kind and, for KindOther, what it is
// ("batcharray", "objectarray", "listarray", "lazyarray", "proxy",
// "store", "b2o:" and the b2o kind), opening its frame: python-blosc2
// decides by the frame's metalayers, whatever the file's suffix. The
// frame stays open until Forget (the kind is kept after it); a Tree
// bounds how many do.
func (l *Leaf) Kind() (Kind, string, error) {
	if l.C2 != nil {
		return KindC2Array, "c2array", nil
	}
	l.mu.Lock()
	k, sub := l.kind, l.sub
	l.mu.Unlock()
	if k != KindUnknown {
		return k, sub, nil // known, even after Forget
	}
	if _, err := l.Frame(); err != nil {
		return KindUnknown, "", err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kind, l.sub, nil
}

// classify tells a frame's kind from its metalayers, in the order of
// python-blosc2's process_opened_object.
func classify(fr *frame.Frame) (Kind, string) {
	has := func(n string) bool { _, ok := fr.Meta(n); return ok }
	switch {
	case has("proxy-source"):
		return KindOther, "proxy"
	case has("b2o"):
		sub := "b2o"
		if v, ok := fr.Meta("b2o"); ok {
			if k := msgpackField(v, "kind"); k != "" {
				sub += ":" + k
			}
		}
		return KindOther, sub
	case has("listarray"):
		return KindOther, "listarray"
	case has("vlarray"):
		return KindOther, "objectarray"
	case has("batcharray"):
		return KindOther, "batcharray"
	case has(MarkerEmbed) || has(MarkerDict) || has(MarkerTree):
		return KindOther, "store"
	case fr.Array() != nil:
		if has("LazyArray") {
			return KindOther, "lazyarray"
		}
		return KindNDArray, "ndarray"
	}
	return KindSChunk, "schunk"
}

// msgpackField returns the string field name of a small msgpack map, or "".
func msgpackField(b []byte, name string) string {
	m := newMPReader(b)
	if c, err := m.peek(); err != nil || !isMap(c) {
		return ""
	}
	n, err := m.mapLen()
	if err != nil {
		return ""
	}
	for range n {
		k, kerr, err := m.optStr(64)
		if err != nil {
			return ""
		}
		if kerr == nil && k == name {
			v, verr, err := m.optStr(64)
			if err != nil || verr != nil {
				return ""
			}
			return v
		}
		if err := m.skip(); err != nil {
			return ""
		}
	}
	return ""
}

// View returns what the leaf is shown as and its size: for an NDArray
// the NPY file (the view a .b2nd file has), for an SChunk its plain
// bytes, for a C2Array reference its JSON document; other kinds give an
// error wrapping ErrUnsupportedKind.
func (l *Leaf) View() (io.ReaderAt, int64, error) {
	if l.C2 != nil {
		b := l.C2.JSON()
		return bytes.NewReader(b), int64(len(b)), nil
	}
	fr, err := l.Frame()
	if err != nil {
		return nil, 0, err
	}
	l.mu.Lock()
	kind, sub := l.kind, l.sub
	l.mu.Unlock()
	switch kind {
	case KindNDArray:
		v, err := fr.NPY()
		if err != nil {
			return nil, 0, err
		}
		return v, v.Size(), nil
	case KindSChunk:
		return fr, fr.Size(), nil
	}
	return nil, 0, fmt.Errorf("%s: key %q: %w (%s)", l.s.name, l.Key, ErrUnsupportedKind, sub)
}

// VLMeta returns the vlmeta of the leaf's frame (empty for a C2Array
// reference).
func (l *Leaf) VLMeta() (*VLMeta, error) {
	if l.C2 != nil {
		return nil, nil
	}
	fr, err := l.Frame()
	if err != nil {
		return nil, err
	}
	return &VLMeta{name: l.s.name + ":" + l.Key, fr: fr, names: fr.VLMetaNames()}, nil
}
