package b2store

import (
	"bytes"
	"container/list"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// The view of a store as a pack.Tree (docs/USER-GUIDE.md, "python-blosc2
// stores"): key /a/b/c is the path a/b/c, with a and a/b directories; an
// NDArray leaf is c.npy (the NPY view a .b2nd file has), an SChunk leaf
// the file c (its plain bytes), a C2Array reference c.json; leaves of
// other kinds, and leaves whose frame does not open, are left out, each
// with a problem. When a name so made collides with another entry of its
// directory, the leaf keeps its bare key name (still shown as its view).

func init() {
	pack.RegisterTreeFormat(pack.TreeFormat{
		Name:        "b2store",
		Suffixes:    []string{".b2z", ".b2e"},
		DirSuffixes: []string{".b2d"},
		Open: func(r io.ReaderAt, size int64, name string, cache pack.BlockCache) (pack.Tree, error) {
			return OpenFileTree(r, size, name, cache)
		},
		OpenDir: func(src pack.MemberSource, name string, cache pack.BlockCache) (pack.Tree, error) {
			return OpenDirTree(src, name, cache)
		},
	})
}

// XAttrPrefix starts the names of the extended attributes that hold
// vlmeta: user.blosc2.vlmeta.NAME, the value as JSON (§14.8).
const XAttrPrefix = "user.blosc2.vlmeta."

// Limits of a Tree.
var (
	// MaxOpenLeaves bounds the leaf frames a Tree keeps open (their
	// metadata and index, an external leaf's file) once nothing reads
	// them: listing a store opens each leaf once, and keeps only the
	// most recently used.
	MaxOpenLeaves = 64
	// MaxTreeXAttrs bounds the vlmeta a Tree keeps as extended
	// attributes, in bytes of names and JSON values; past it, entries
	// are shown without them, with one problem each.
	MaxTreeXAttrs int64 = 16 << 20
)

const (
	// maxXAttrValue is the largest value of an extended attribute
	// (Linux's XATTR_SIZE_MAX).
	maxXAttrValue = 64 << 10
	// maxXAttrName is the longest name of one (XATTR_NAME_MAX).
	maxXAttrName = 255
	// classifyWorkers is how many leaves of a directory are opened at
	// once when it is first listed (their reads may each wait on a
	// round trip to a bucket).
	classifyWorkers = 8
)

// Tree is a store as a pack.Tree: a read-only directory tree of its keys.
// It is safe for concurrent use. What a directory shows is worked out
// the first time it is read (each of its leaves' frames opened once) and
// kept; no more than MaxOpenLeaves leaf frames stay open but those that
// opened files read.
type Tree struct {
	s       *Store
	root    pack.TreeEntry
	objects map[string]string // directory key → object kind ("ctable")

	mu         sync.Mutex
	dirs       map[string]*dirSlot // by directory key, once listed
	refs       map[*Leaf]int       // users of each leaf's frame
	lru        *list.List          // leaves whose frames may be open, most recent first
	elem       map[*Leaf]*list.Element
	probs      problems // found while listing
	xattrBytes int64
}

var _ pack.TreeProblems = (*Tree)(nil)

// dirSlot holds the view of one directory, made once.
type dirSlot struct {
	mu sync.Mutex
	v  *dirView
}

// dirView is what a directory shows: its entries, sorted by name, and
// what each name is.
type dirView struct {
	entries []pack.TreeEntry
	items   map[string]viewItem
}

type viewItem struct {
	dir   *Dir
	leaf  *Leaf
	kind  Kind
	entry int // index in entries
}

// OpenFileTree opens the store file r of size bytes as a Tree: a .b2z
// archive (by its name, or its first bytes "PK") or a .b2e EmbedStore.
// A file that is not a store gives an error wrapping pack.ErrFormat (it
// is shown as it is stored); a failure to read it (locally or from a
// bucket, the system short of something) is returned as it is, and is no
// verdict on the file. name names it in errors; cache holds what its
// leaves decode (nil: a cache of pack.DefaultCacheSize bytes of its own).
func OpenFileTree(r io.ReaderAt, size int64, name string, cache pack.BlockCache) (*Tree, error) {
	zip := strings.HasSuffix(name, ".b2z")
	if !zip && !strings.HasSuffix(name, ".b2e") {
		var magic [2]byte
		if n, _ := r.ReadAt(magic[:], 0); n == 2 && string(magic[:]) == "PK" {
			zip = true
		}
	}
	var s *Store
	var err error
	if zip {
		var src *ZipSource
		src, err = OpenZip(r, size, name)
		if err == nil {
			s, err = OpenDir(src, name, cache)
		}
	} else {
		s, err = OpenEmbedStore(r, size, name, cache)
	}
	if err != nil {
		return nil, formatErr(err)
	}
	return newTree(s)
}

// OpenDirTree opens the store directory whose files src supplies (a .b2d
// directory or bucket prefix) as a Tree; see OpenDir and OpenFileTree.
func OpenDirTree(src Source, name string, cache pack.BlockCache) (*Tree, error) {
	s, err := OpenDir(src, name, cache)
	if err != nil {
		return nil, formatErr(err)
	}
	return newTree(s)
}

// formatErr makes an error that says the input is no store wrap
// pack.ErrFormat; the system's errors stay as they are.
func formatErr(err error) error {
	if !verdict(err) || errors.Is(err, pack.ErrFormat) {
		return err
	}
	return fmt.Errorf("%w: %w", pack.ErrFormat, err)
}

// NewTree returns the Tree of an opened store; the Tree's Close closes
// the store.
func NewTree(s *Store) (*Tree, error) { return newTree(s) }

func newTree(s *Store) (*Tree, error) {
	t := &Tree{
		s: s, objects: map[string]string{},
		dirs: map[string]*dirSlot{}, refs: map[*Leaf]int{},
		lru: list.New(), elem: map[*Leaf]*list.Element{},
	}
	var probs []error
	before := s.watch.failures()
	objs, err := s.Objects()
	err = s.watch.sure(err, before)
	switch {
	case err != nil && !verdict(err):
		s.Close()
		return nil, err
	case err != nil:
		probs = append(probs, fmt.Errorf("%s: %w: object roots: %w", s.name, ErrBadEntry, err))
	}
	for _, o := range objs {
		t.objects[o.Key] = o.Kind
	}
	t.root = pack.TreeEntry{Dir: true, Attrs: map[string]string{
		"store":  s.flavor.String(),
		"marker": s.embed.marker,
		"keys":   strconv.Itoa(len(s.leaves)),
	}}
	if k := t.objects["/"]; k != "" {
		t.root.Attrs["object"] = k
	}
	if s.flavor == FlavorTree || s.flavor == FlavorDir {
		t.root.XAttrs, err = t.dirXAttrs(s.root, &probs)
		if err != nil {
			s.Close()
			return nil, err
		}
	} else {
		t.root.XAttrs = t.vlmetaXAttrs(s.embed.VLMeta(), "/", &probs)
	}
	for _, p := range probs {
		t.probs.add(p)
	}
	return t, nil
}

// Store returns the tree's store.
func (t *Tree) Store() *Store { return t.s }

// Root describes the store's top directory: Attrs store (its flavour),
// marker, keys (how many leaves) and object; XAttrs its vlmeta.
func (t *Tree) Root() pack.TreeEntry { return t.root }

// Problems returns what the store left out when opened and what listing
// its directories has left out so far (leaves of kinds not read, frames
// that do not open, vlmeta not shown), each error naming the store and
// the key.
func (t *Tree) Problems() []error {
	t.mu.Lock()
	own := t.probs.errors()
	t.mu.Unlock()
	return append(t.s.Problems(), own...)
}

// Close closes the store and every file it opened.
func (t *Tree) Close() error { return t.s.Close() }

// MemSize estimates what the tree holds in memory once its directories
// have been listed: the store's tables (keys, the embed store's index)
// and a record per leaf as listed (measured at about 1.1 KiB each by
// TestTreeManyLeaves), for a cache of trees to weigh it by.
func (t *Tree) MemSize() int64 {
	n := int64(64<<10) + 8*int64(t.s.embed.fr.NumChunks())
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for _, l := range t.s.all {
		n += int64(len(l.Key)+len(l.Member)) + 1536
	}
	return n
}

// dirKey returns the key of the directory at path ("" → "/").
func dirKey(path string) string { return "/" + path }

// ReadDir returns the entries of the directory at path, sorted by name.
// The entries' maps are shared: callers must not change them.
func (t *Tree) ReadDir(path string) ([]pack.TreeEntry, error) {
	d, ok := t.s.lookupDir(dirKey(path))
	if !ok || (path != "" && strings.HasSuffix(path, "/")) {
		return nil, fmt.Errorf("%s: %q: %w", t.s.name, path, pack.ErrNotInTree)
	}
	v, err := t.view(d)
	if err != nil {
		return nil, err
	}
	return slices.Clone(v.entries), nil
}

// Stat returns the entry at path (the root for "").
func (t *Tree) Stat(path string) (pack.TreeEntry, error) {
	if path == "" {
		return t.root, nil
	}
	v, it, err := t.resolve(path)
	if err != nil {
		return pack.TreeEntry{}, err
	}
	return v.entries[it.entry], nil
}

// resolve finds the item at path (not the root).
func (t *Tree) resolve(path string) (*dirView, viewItem, error) {
	parent, name := "", path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		parent, name = path[:i], path[i+1:]
	}
	d, ok := t.s.lookupDir(dirKey(parent))
	if !ok || name == "" || (parent == "" && strings.HasPrefix(path, "/")) {
		return nil, viewItem{}, fmt.Errorf("%s: %q: %w", t.s.name, path, pack.ErrNotInTree)
	}
	v, err := t.view(d)
	if err != nil {
		return nil, viewItem{}, err
	}
	it, ok := v.items[name]
	if !ok {
		return nil, viewItem{}, fmt.Errorf("%s: %q: %w", t.s.name, path, pack.ErrNotInTree)
	}
	return v, it, nil
}

// Open returns the file at path as a Container that is also an
// io.Closer (to be closed when done): an NDArray leaf's NPY view (a
// pack.Streamer, as a .b2nd file's view is to the mount), an SChunk
// leaf's frame (its plain bytes; also a pack.Streamer and
// pack.ChunkSource), a C2Array reference's JSON document. Reads decode
// the frame's chunks and check them as reads of a .b2nd or .b2frame file
// do.
func (t *Tree) Open(path string) (pack.Container, error) {
	_, it, err := t.resolve(path)
	if err != nil {
		return nil, err
	}
	if it.leaf == nil {
		return nil, fmt.Errorf("%s: %q: %w (a directory)", t.s.name, path, pack.ErrNotInTree)
	}
	l := it.leaf
	if l.C2 != nil {
		return &jsonFile{b: l.C2.JSON()}, nil
	}
	t.acquire(l)
	fr, err := l.Frame()
	if err != nil {
		t.release(l)
		return nil, err
	}
	rel := &releaser{t: t, l: l}
	if it.kind == KindNDArray {
		v, err := fr.NPY()
		if err != nil {
			t.release(l)
			return nil, err
		}
		return &npyFile{NPYView: v, releaser: rel}, nil
	}
	return &frameFile{Frame: fr, releaser: rel}, nil
}

// view returns the view of directory d, making it on first use. A
// failure to read a leaf is returned and nothing is kept: the next call
// tries again.
func (t *Tree) view(d *Dir) (*dirView, error) {
	t.mu.Lock()
	slot := t.dirs[d.Key]
	if slot == nil {
		slot = &dirSlot{}
		t.dirs[d.Key] = slot
	}
	t.mu.Unlock()
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.v != nil {
		return slot.v, nil
	}
	v, probs, err := t.build(d)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	for _, p := range probs {
		t.probs.add(p)
	}
	t.mu.Unlock()
	slot.v = v
	return v, nil
}

// shown is one entry of a directory being named.
type shown struct {
	seg      string // the key's last segment
	name     string // the name it is shown under
	suffixed bool   // name is seg plus a suffix (.npy, .json)
	entry    pack.TreeEntry
	item     viewItem
}

// build makes the view of directory d: its subdirectories, and its
// leaves, each opened once (several at a time) for its kind, size and
// attributes. A build that fails gives back the vlmeta it counted
// against MaxTreeXAttrs: its view is not kept, and the next one counts
// them again.
func (t *Tree) build(d *Dir) (*dirView, []error, error) {
	var probs []error
	var out []*shown
	var leaves []*Leaf
	var counted int64
	for _, n := range d.names {
		if sub := d.dirs[n]; sub != nil {
			xa, err := t.dirXAttrs(sub, &probs)
			if err != nil {
				t.uncount(counted)
				return nil, nil, err
			}
			counted += xattrSize(xa)
			e := pack.TreeEntry{Name: n, Dir: true, Attrs: map[string]string{"key": sub.Key}, XAttrs: xa}
			if k := t.objects[sub.Key]; k != "" {
				e.Attrs["object"] = k
			}
			out = append(out, &shown{seg: n, name: n, entry: e, item: viewItem{dir: sub}})
			continue
		}
		leaves = append(leaves, d.leaves[n])
	}
	type result struct {
		sh    *shown
		probs []error
		err   error
	}
	res := make([]result, len(leaves))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(classifyWorkers, len(leaves)) {
		wg.Go(func() {
			for i := range work {
				var r result
				before := t.s.watch.failures()
				r.sh, r.err = t.leafEntry(leaves[i], &r.probs)
				r.err = t.s.watch.sure(r.err, before)
				res[i] = r
			}
		})
	}
	for i := range leaves {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, r := range res {
		if r.sh != nil {
			counted += xattrSize(r.sh.entry.XAttrs)
		}
	}
	for _, r := range res {
		probs = append(probs, r.probs...)
		switch {
		case r.err != nil && !verdict(r.err):
			t.uncount(counted)
			return nil, nil, r.err
		case r.err != nil:
			probs = append(probs, r.err)
		default:
			out = append(out, r.sh)
		}
	}
	nameEntries(out)
	slices.SortFunc(out, func(a, b *shown) int { return strings.Compare(a.name, b.name) })
	v := &dirView{entries: make([]pack.TreeEntry, len(out)), items: make(map[string]viewItem, len(out))}
	for i, sh := range out {
		sh.entry.Name = sh.name
		sh.item.entry = i
		v.entries[i] = sh.entry
		v.items[sh.name] = sh.item
	}
	return v, probs, nil
}

// xattrSize is what extended attributes xa count against MaxTreeXAttrs.
func xattrSize(xa map[string][]byte) int64 {
	var n int64
	for k, v := range xa {
		n += int64(len(k) + len(v))
	}
	return n
}

// uncount gives back n bytes counted against MaxTreeXAttrs.
func (t *Tree) uncount(n int64) {
	t.mu.Lock()
	t.xattrBytes -= n
	t.mu.Unlock()
}

// nameEntries settles the names of a directory's entries: directories
// and SChunk leaves are shown under their key's name; NDArray and C2Array
// leaves under it plus .npy or .json, unless that name is another
// entry's too, in which case they keep the bare key name (which no other
// entry can have but such a leaf's name with a suffix: hence the rounds,
// at most one per suffix a key's segment can hold).
func nameEntries(es []*shown) {
	for {
		count := make(map[string]int, len(es))
		for _, e := range es {
			count[e.name]++
		}
		changed := false
		for _, e := range es {
			if e.suffixed && count[e.name] > 1 {
				e.name, e.suffixed, changed = e.seg, false, true
			}
		}
		if !changed {
			return
		}
	}
}

// leafEntry works out what leaf l shows: nil and an error wrapping
// ErrUnsupportedKind for a kind not read, nil and the leaf's error for a
// frame that does not open. More problems (vlmeta not shown) go to probs.
func (t *Tree) leafEntry(l *Leaf, probs *[]error) (*shown, error) {
	seg := l.Name()
	if l.C2 != nil {
		b := l.C2.JSON()
		return &shown{seg: seg, name: seg + ".json", suffixed: true, item: viewItem{leaf: l, kind: KindC2Array}, entry: pack.TreeEntry{
			Size:  int64(len(b)),
			Attrs: map[string]string{"kind": "c2array", "key": l.Key, "urlbase": l.C2.URLBase, "path": l.C2.Path},
		}}, nil
	}
	t.acquire(l)
	defer t.release(l)
	kind, sub, err := l.Kind()
	if err != nil {
		if !verdict(err) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w: key %q is left out: %w", t.s.name, ErrBadEntry, l.Key, err)
	}
	fr, err := l.Frame()
	if err != nil {
		return nil, err
	}
	attrs := map[string]string{"kind": kind.String(), "key": l.Key}
	if l.Embedded {
		attrs["embedded"] = "true"
		attrs["offset"] = strconv.FormatInt(l.Offset, 10)
	} else {
		attrs["member"] = l.Member
	}
	sh := &shown{seg: seg, name: seg, item: viewItem{leaf: l, kind: kind}}
	var info pack.Info
	switch kind {
	case KindNDArray:
		v, err := fr.NPY()
		if err != nil {
			return nil, fmt.Errorf("%s: %w: key %q is left out: %w", t.s.name, ErrBadEntry, l.Key, err)
		}
		info = v.Info()
		a := fr.Array()
		attrs["shape"] = dims(a.Shape)
		attrs["chunkshape"] = dims(a.ChunkShape)
		attrs["blockshape"] = dims(a.BlockShape)
		attrs["dtype"] = strings.Trim(a.NPYDescr(), "'")
		sh.name, sh.suffixed = seg+".npy", true
	case KindSChunk:
		info = fr.Info()
	default:
		return nil, fmt.Errorf("%s: key %q is left out: %w (%s)", t.s.name, l.Key, ErrUnsupportedKind, sub)
	}
	info.Meta = nil // kept per entry: the metadata are in the frame
	if l.Embedded {
		info.StoredSize = l.Size
	}
	sh.entry = pack.TreeEntry{Size: info.Size, Info: info, Attrs: attrs}
	vm, err := l.VLMeta()
	if err != nil {
		*probs = append(*probs, fmt.Errorf("%s: key %q: vlmeta: %w", t.s.name, l.Key, err))
	} else {
		sh.entry.XAttrs = t.vlmetaXAttrs(vm, l.Key, probs)
	}
	return sh, nil
}

// dims renders a shape as the Zarr arrays' attributes do: "300,30".
func dims[T int32 | int64](v []T) string {
	s := make([]string, len(v))
	for i, d := range v {
		s[i] = strconv.FormatInt(int64(d), 10)
	}
	return strings.Join(s, ",")
}

// dirXAttrs returns the extended attributes of directory d: a TreeStore
// subtree's vlmeta (of its __vlmeta__ leaf).
func (t *Tree) dirXAttrs(d *Dir, probs *[]error) (map[string][]byte, error) {
	l := d.vlmeta
	if l == nil {
		return nil, nil
	}
	t.acquire(l)
	defer t.release(l)
	before := t.s.watch.failures()
	vm, err := l.VLMeta()
	if err != nil {
		if err = t.s.watch.sure(err, before); !verdict(err) {
			return nil, err
		}
		*probs = append(*probs, fmt.Errorf("%s: %w: the vlmeta of %q (key %q) are not shown: %w", t.s.name, ErrBadEntry, d.Key, l.Key, err))
		return nil, nil
	}
	return t.vlmetaXAttrs(vm, d.Key, probs), nil
}

// vlmetaXAttrs returns vm as extended attributes user.blosc2.vlmeta.NAME
// holding JSON (VLMeta.Shown): a value too large for an attribute, or
// past MaxTreeXAttrs, is left out with a problem.
func (t *Tree) vlmetaXAttrs(vm *VLMeta, what string, probs *[]error) map[string][]byte {
	names := vm.Names()
	if len(names) == 0 {
		return nil
	}
	out := make(map[string][]byte, len(names))
	for _, n := range names {
		x := XAttrPrefix + n
		if n == "" || len(x) > maxXAttrName || strings.IndexByte(n, 0) >= 0 {
			*probs = append(*probs, fmt.Errorf("%s: %q: vlmeta %q: %w: no extended attribute can have that name", t.s.name, what, n, ErrVLMeta))
			continue
		}
		j, err := vm.Shown(n)
		if err == nil && len(j) > maxXAttrValue {
			err = fmt.Errorf("%w: %d bytes of JSON, more than an extended attribute holds (%d)", ErrVLMeta, len(j), maxXAttrValue)
		}
		if err != nil {
			*probs = append(*probs, fmt.Errorf("%s: %q: vlmeta %q is not shown: %w", t.s.name, what, n, err))
			continue
		}
		t.mu.Lock()
		over := t.xattrBytes+int64(len(x)+len(j)) > MaxTreeXAttrs
		if !over {
			t.xattrBytes += int64(len(x) + len(j))
		}
		t.mu.Unlock()
		if over {
			*probs = append(*probs, fmt.Errorf("%s: %q: vlmeta %q is not shown: %w: the store's vlmeta pass %d bytes", t.s.name, what, n, ErrVLMeta, MaxTreeXAttrs))
			continue
		}
		out[x] = j
	}
	return out
}

// acquire marks leaf l's frame in use, so that it stays open until
// release, and closes the frames of the least recently used leaves
// nothing uses past MaxOpenLeaves.
func (t *Tree) acquire(l *Leaf) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refs[l]++
	if e := t.elem[l]; e != nil {
		t.lru.MoveToFront(e)
	} else {
		t.elem[l] = t.lru.PushFront(l)
	}
	t.evictLocked()
}

// release ends a use that acquire began.
func (t *Tree) release(l *Leaf) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.refs[l]--; t.refs[l] <= 0 {
		delete(t.refs, l)
	}
	t.evictLocked()
}

// evictLocked forgets the frames of unused leaves, least recently used
// first, while more than MaxOpenLeaves are kept. (Leaf.Forget only closes
// a file: no reads happen under the lock, for no frame is being opened
// on a leaf nothing uses.)
func (t *Tree) evictLocked() {
	for e := t.lru.Back(); e != nil && t.lru.Len() > MaxOpenLeaves; {
		prev := e.Prev()
		if l := e.Value.(*Leaf); t.refs[l] == 0 {
			t.lru.Remove(e)
			delete(t.elem, l)
			l.Forget()
		}
		e = prev
	}
}

// openLeaves returns how many leaves' frames the tree keeps (tests).
func (t *Tree) openLeaves() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Len()
}

// releaser ends an opened file's use of its leaf, once.
type releaser struct {
	t    *Tree
	l    *Leaf
	once sync.Once
}

// Close releases the leaf's frame (it may then be closed, once other
// leaves are used).
func (r *releaser) Close() error {
	r.once.Do(func() { r.t.release(r.l) })
	return nil
}

// npyFile is an NDArray leaf opened by Tree.Open: a pack.Streamer as a
// .b2nd file's NPY view is to the mount (pack/all.View), so that a
// sequential reader gets the same read-ahead.
type npyFile struct {
	*frame.NPYView
	*releaser
}

// ReadAtOnce reads as ReadAt: the NPY view is not the frame's own bytes.
func (f *npyFile) ReadAtOnce(p []byte, off int64) (int, error) { return f.ReadAt(p, off) }

// Prefetch reads [off, off+n) of the view into scratch memory, which
// decodes the blocks behind it into the cache for the reads that follow.
func (f *npyFile) Prefetch(off, n int64, reader func() int64) error {
	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	for end := min(off+n, f.Size()); off < end; off += int64(len(*bp)) {
		if _, err := f.ReadAt((*bp)[:min(int64(len(*bp)), end-off)], off); err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}

var scratch = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// frameFile is an SChunk leaf opened by Tree.Open: its frame, whose
// methods (pack.Streamer, pack.ChunkSource) it has.
type frameFile struct {
	*frame.Frame
	*releaser
}

// jsonFile is a C2Array reference's JSON document.
type jsonFile struct{ b []byte }

// ReadAt reads the document.
func (j *jsonFile) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(j.b).ReadAt(p, off)
}

// Size returns the document's size.
func (j *jsonFile) Size() int64 { return int64(len(j.b)) }

// Info is empty: the document is shown as it is.
func (j *jsonFile) Info() pack.Info { return pack.Info{Size: int64(len(j.b))} }

// Close does nothing.
func (j *jsonFile) Close() error { return nil }

var (
	_ pack.Tree     = (*Tree)(nil)
	_ pack.Streamer = (*npyFile)(nil)
	_ io.Closer     = (*npyFile)(nil)
	_ pack.Streamer = (*frameFile)(nil)
	_ io.Closer     = (*frameFile)(nil)
)
