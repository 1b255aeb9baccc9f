package zarr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/zipread"
)

// A zipped Zarr store (a zarr-python ZipStore, an OME-Zarr .ozx) is a
// pack.Tree: a file named *.zip or *.ozx whose root holds Zarr metadata
// (.zarray, .zgroup or zarr.json, at the top of the archive or inside
// its one top-level folder). A root array is one file, NAME.npy (NAME is
// the archive's name without .zip or .ozx, then without .zarr); a root
// group a directory, in which groups and arrays follow the rules of a
// Zarr tree on disk: an array folder x/ or x.zarr/ is the file x.npy,
// a group (or any other folder) a directory, every other member a plain
// file as it is stored (a group's JSON documents). Consolidated metadata
// (.zmetadata, or the consolidated_metadata of a v3 group's zarr.json)
// describe the arrays below their group, as zarr.open_consolidated
// takes them: the archive is one version, written with them.

// ErrNotZarrZip reports a file named like a zipped store that is not
// one: no ZIP archive, or one without Zarr metadata at its root. It
// wraps pack.ErrFormat and pack.ErrNoTree: such a file is shown as it
// is stored, and not logged (most ZIP archives hold other data).
var ErrNotZarrZip = fmt.Errorf("%w: %w: no zipped Zarr store", pack.ErrFormat, pack.ErrNoTree)

// ZipSuffixes are the name suffixes of zipped Zarr stores.
var ZipSuffixes = []string{".zip", ".ozx"}

// maxPlainInflate bounds a deflated member shown as a plain file (a
// group's JSON documents, other files of the archive): it is inflated
// whole when opened. A larger one gives an error when opened.
const maxPlainInflate = MaxMetaSize

// maxTreeMeta bounds the metadata documents a tree keeps in all, as
// long as it is open: its consolidated metadata, its arrays' zarr.json
// or .zarray and .zattrs, its groups' attributes. Each document may be
// MaxMetaSize; a hostile archive may hold thousands. An array or group
// whose documents would pass the bound is shown as a folder (a problem),
// a consolidated document past it is not used.
const maxTreeMeta = MaxMetaSize

// errTreeMeta is the error of a document past maxTreeMeta.
var errTreeMeta = fmt.Errorf("%w: the metadata kept of the archive's arrays and groups would pass %d MiB in all", ErrTooLarge, maxTreeMeta>>20)

// maxProblems bounds the problems a tree keeps (the refused members of
// a hostile archive may be millions); the last one counts the rest.
const maxProblems = 256

// macOSFolder is the folder of resource forks macOS's archiver adds
// beside the folder it zips; it does not count as a second top-level
// folder.
const macOSFolder = "__MACOSX/"

func init() {
	pack.RegisterTreeFormat(pack.TreeFormat{
		Name:     "zarr-zip",
		Suffixes: ZipSuffixes,
		Open: func(r io.ReaderAt, size int64, name string, cache pack.BlockCache) (pack.Tree, error) {
			return OpenZipTree(r, size, name, cache)
		},
		RootNames: zipRootNames,
		RootView:  RootArrayName,
	})
}

// zipRootNames returns the names of the archives whose root array is
// shown as view (x.zip, x.ozx, x.zarr.zip, x.zarr.ozx for x.npy).
func zipRootNames(view string) []string {
	stem, ok := strings.CutSuffix(view, ".npy")
	if !ok {
		return nil
	}
	var out []string
	for _, c := range []string{stem, stem + ".zip", stem + ".ozx", stem + ".zarr.zip", stem + ".zarr.ozx"} {
		if _, ok := pack.TreeFormatFor(c, false); ok && RootArrayName(c) == view {
			out = append(out, c)
		}
	}
	return out
}

// ZipTree is an opened zipped Zarr store. It is safe for concurrent
// use.
type ZipTree struct {
	name  string    // the archive's name, in errors
	root  *ZipStore // the store at the Zarr root (the top, or the one folder)
	cache pack.BlockCache
	top   *zipNode

	mu       sync.Mutex
	dirs     map[string]*zipDir   // listings by folder ("" the root)
	levels   map[string]*zipLevel // consolidated metadata by folder
	problems []error
	seen     map[string]bool // the problems' texts
	dropped  int             // problems past maxProblems
	names    int64           // bytes of the members' names
	kept     int64           // bytes of metadata documents kept (maxTreeMeta)
}

// keep charges n bytes of metadata documents kept to the tree, and
// reports whether they stay within maxTreeMeta (else nothing is charged).
func (t *ZipTree) keep(n int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kept+int64(n) > maxTreeMeta {
		return false
	}
	t.kept += int64(n)
	return true
}

// zipNode is one entry of the tree.
type zipNode struct {
	entry  pack.TreeEntry
	kind   Kind   // KindArray, KindGroup, or KindNone: a plain file or folder
	folder string // an array or directory's folder, a file's member name (relative to the root)
	member int    // a file's member index
	// An array's metadata documents: the zarr.json, or the .zarray and
	// .zattrs (nil when none).
	v3          bool
	meta, attrs []byte
}

// zipDir is the listing of one folder, made once.
type zipDir struct {
	once  sync.Once
	nodes []*zipNode
}

// zipLevel is what one folder says of consolidated metadata, read once.
type zipLevel struct {
	once  sync.Once
	c     *ConsolidatedMeta
	group bool
}

// OpenZipTree reads the directory of the ZIP archive r of size bytes
// (named name in errors: the archive's path or URL, whose base name
// names a root array) and the metadata of its root. A file that is no
// ZIP archive, or holds no Zarr metadata at its root, gives an error
// wrapping ErrNotZarrZip; a root array that cannot be read one wrapping
// pack.ErrFormat (both are shown as they are stored); an archive whose
// directory is broken (past the end of the file, not parsing) an error
// naming it. A RequestReader r (a file in an object store) has its
// chunks read whole, one read each.
func OpenZipTree(r io.ReaderAt, size int64, name string, cache pack.BlockCache) (*ZipTree, error) {
	if cache == nil {
		cache = pack.NoCache{}
	}
	a, err := zipread.Open(r, size, name)
	if err != nil {
		if errors.Is(err, zipread.ErrNoArchive) {
			return nil, fmt.Errorf("%w: %w", ErrNotZarrZip, err)
		}
		if errors.Is(err, zipread.ErrUnsupported) {
			return nil, fmt.Errorf("%w: %w", pack.ErrFormat, err)
		}
		return nil, err
	}
	exact, _ := r.(RequestReader)
	base, ok := zipRoot(a)
	if !ok {
		return nil, fmt.Errorf("%s: %w: no .zarray, .zgroup or zarr.json at its top or in its one top-level folder", name, ErrNotZarrZip)
	}
	t := &ZipTree{name: name, root: NewZipStore(a, base, exact), cache: cache,
		dirs: map[string]*zipDir{}, levels: map[string]*zipLevel{}}
	t.refused(a)
	top, err := t.classify("", nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, pack.ErrFormat, err)
	}
	switch top.kind {
	case KindArray:
		top.entry.Name = RootArrayName(name)
	case KindGroup:
		top.entry.Name = ""
	default:
		return nil, fmt.Errorf("%s: %w: its root metadata describe no array nor group", name, ErrNotZarrZip)
	}
	t.top = top
	return t, nil
}

// RootArrayName returns the name a zipped store named name whose root
// is an array is shown under: its base name without .zip or .ozx, then
// without .zarr, with .npy.
func RootArrayName(name string) string {
	b := path.Base(strings.ReplaceAll(name, "\\", "/"))
	for _, s := range ZipSuffixes {
		if t := strings.TrimSuffix(b, s); t != b && t != "" {
			b = t
			break
		}
	}
	if t := strings.TrimSuffix(b, ".zarr"); t != "" {
		b = t
	}
	return b + ".npy"
}

// zipRoot finds the folder of the archive that holds the store's root
// metadata: the top, or its one top-level folder.
func zipRoot(a *zipread.Archive) (string, bool) {
	isMeta := func(prefix string) bool {
		for _, n := range []string{"zarr.json", ".zarray", ".zgroup"} {
			if _, ok := a.Lookup(prefix + n); ok {
				return true
			}
		}
		return false
	}
	if isMeta("") {
		return "", true
	}
	var only string
	for _, n := range a.List("") {
		if n == macOSFolder {
			continue
		}
		if only != "" || !strings.HasSuffix(n, "/") {
			return "", false
		}
		only = n
	}
	if only != "" && isMeta(only) {
		return only, true
	}
	return "", false
}

// refused records the members the archive refuses whose names cannot be
// shown (".." or a leading "/"): a refused member that is shown (an
// encrypted chunk, a name given twice) is an error, and a log line, when
// it is read. It counts the bytes of the names, for MemSize.
func (t *ZipTree) refused(a *zipread.Archive) {
	for i := range a.Len() {
		m := a.Member(i)
		t.names += int64(len(m.Name))
		if m.Err == nil || ValidKey(strings.TrimSuffix(m.Name, "/")) {
			continue
		}
		if len(t.problems) >= maxProblems-1 {
			t.dropped++ // not formatted: a hostile archive may have millions
			continue
		}
		t.problem(note(fmt.Errorf("%s: %q: left out: %w", t.name, m.Name, m.Err)))
	}
}

// problem records a problem of the tree, once.
func (t *ZipTree) problem(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.problems) >= maxProblems-1 {
		t.dropped++
		return
	}
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	if msg := err.Error(); !t.seen[msg] {
		t.seen[msg] = true
		t.problems = append(t.problems, err)
	}
}

// note marks a problem that is a feature not read (an encrypted member,
// an unknown method, codec or dtype) as pack.ErrUnsupported, which verify
// reports as a note; any other problem is a defect of the archive.
func note(err error) error {
	if errors.Is(err, zipread.ErrUnsupported) || errors.Is(err, ErrUnsupported) {
		return noteError{err}
	}
	return err
}

// noteError is a problem that is also pack.ErrUnsupported.
type noteError struct{ error }

func (e noteError) Unwrap() []error { return []error{e.error, pack.ErrUnsupported} }

// Problems returns the problems found so far: the members left out for
// their names (".." or a leading "/"), found when the archive is
// opened, and the arrays shown as folders, the consolidated metadata not
// used and the members hidden by a folder of their name, found when
// their directory is first listed. Each names the archive and the
// member or folder. (A member refused for what it is — encrypted, an
// unknown method, a name given twice, bytes shared with another — is an
// error naming it when it is read.)
func (t *ZipTree) Problems() []error {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Clone(t.problems)
	if t.dropped > 0 {
		out = append(out, fmt.Errorf("%s: %d more problems", t.name, t.dropped))
	}
	return out
}

// Root describes the top of the tree: a group's directory (Name "") or
// the root array's file.
func (t *ZipTree) Root() pack.TreeEntry { return t.top.entry }

// MemSize returns roughly what the tree holds in memory: the archive's
// directory (a few dozen bytes a member and its name), the listings made
// of it and the metadata documents kept.
func (t *ZipTree) MemSize() int64 {
	a := t.root.z.a
	n := int64(a.Len()) * 96
	t.mu.Lock()
	for _, d := range t.dirs {
		n += int64(len(d.nodes)) * 256
	}
	n += t.kept
	t.mu.Unlock()
	return n + t.names
}

// Close releases nothing: the archive's reader is the caller's.
func (t *ZipTree) Close() error { return nil }

// has reports whether the member name (relative to the root) exists
// and is a file.
func (t *ZipTree) has(name string) bool {
	_, ok := t.root.z.a.Lookup(t.root.prefix + name)
	return ok
}

// level returns what folder dir says of consolidated metadata, read
// once.
func (t *ZipTree) level(dir string) (*ConsolidatedMeta, bool) {
	t.mu.Lock()
	l, ok := t.levels[dir]
	if !ok {
		l = &zipLevel{}
		t.levels[dir] = l
	}
	t.mu.Unlock()
	l.once.Do(func() { l.c, l.group = t.readLevel(dir) })
	return l.c, l.group
}

// seedLevel records what the v3 group f's zarr.json b, read to classify
// it, says of consolidated metadata, so that listing the group does not
// read it again.
func (t *ZipTree) seedLevel(f string, b []byte) {
	if t.has(JoinKey(f, ".zmetadata")) {
		return // which one answers is readLevel's to say
	}
	t.mu.Lock()
	l, ok := t.levels[f]
	if !ok {
		l = &zipLevel{}
		t.levels[f] = l
	}
	t.mu.Unlock()
	l.once.Do(func() { l.c, l.group = t.parseLevel(f, "zarr.json", b) })
}

// parseLevel parses the document name (.zmetadata or zarr.json) of
// folder dir.
func (t *ZipTree) parseLevel(dir, name string, b []byte) (c *ConsolidatedMeta, group bool) {
	cm, err := ParseConsolidatedMeta(name, b, t.name+": "+t.root.prefix+JoinKey(dir, name))
	if err != nil {
		t.problem(fmt.Errorf("consolidated metadata not used: %w", err))
	}
	group = name == ".zmetadata" || cm.NodeType() == "group" || t.has(JoinKey(dir, ".zgroup"))
	if cm.HasDocs() {
		if !t.keep(len(b)) {
			t.problem(fmt.Errorf("%s: %s: consolidated metadata not used: %w", t.name, t.root.prefix+JoinKey(dir, name), errTreeMeta))
			return nil, group
		}
		return cm, group
	}
	return nil, group
}

// readLevel reads the .zmetadata or zarr.json of folder dir.
func (t *ZipTree) readLevel(dir string) (c *ConsolidatedMeta, group bool) {
	for _, name := range []string{".zmetadata", "zarr.json"} {
		key := JoinKey(dir, name)
		if !t.has(key) {
			continue
		}
		b, err := GetMeta(t.root, key)
		if err != nil {
			t.problem(fmt.Errorf("%s: %s: consolidated metadata not read: %w", t.name, t.root.prefix+key, err))
			continue
		}
		cm, g := t.parseLevel(dir, name, b)
		group = group || g
		if cm != nil {
			return cm, group
		}
	}
	return nil, group || t.has(JoinKey(dir, ".zgroup"))
}

// classify finds what the folder f (relative to the root; "" the root)
// is: an array (with its metadata documents), a group, or a plain
// folder, from the consolidated metadata of a group above it, else from
// its own metadata. An array that does not open is a plain folder (and a
// problem); err is set only for the root, which must be a Zarr node.
func (t *ZipTree) classify(f string, docs metaDocs) (*zipNode, error) {
	n := &zipNode{folder: f, entry: pack.TreeEntry{Name: path.Base(f), Dir: true}}
	zj, za := t.has(JoinKey(f, "zarr.json")), t.has(JoinKey(f, ".zarray"))
	if !zj && !za {
		if t.has(JoinKey(f, ".zgroup")) {
			n.kind = KindGroup
			n.entry.XAttrs = t.groupAttrs(f, false, nil, docs)
		}
		return n, nil
	}
	if f != "" {
		if c, rel := FindConsolidated(f, "", t.level); c != nil {
			if cn, ok := c.Node(rel, nil); ok && (cn.MetaFile == "zarr.json") == zj {
				if cn.Kind == KindGroup {
					n.kind = KindGroup
					doc, _ := c.doc(rel + "/zarr.json")
					n.entry.XAttrs = t.groupAttrs(f, zj, doc, docs)
					return n, nil
				}
				n.kind, n.v3, n.meta, n.attrs = KindArray, zj, cn.meta, cn.attrs
				if t.describe(n) == nil {
					return n, nil
				}
				// An entry that does not open: the array's own
				// metadata decide.
			}
		}
	}
	what := t.name + ": " + t.root.prefix + JoinKey(f, "zarr.json")
	if zj {
		b, err := t.getMeta(docs, JoinKey(f, "zarr.json"))
		if err == nil {
			err = checkJSON(b, what)
		}
		var node nodeV3
		if err == nil {
			if json.Unmarshal(b, &node) != nil || node.ZarrFormat != 3 {
				err = fmt.Errorf("%s: %w: not zarr_format 3", what, ErrFormat)
			}
		}
		switch {
		case err != nil:
		case node.NodeType == "group":
			n.kind = KindGroup
			n.entry.XAttrs = t.groupAttrs(f, true, b, docs)
			t.seedLevel(f, b)
			return n, nil
		case node.NodeType == "array":
			n.kind, n.v3, n.meta = KindArray, true, b
		default:
			err = fmt.Errorf("%s: %w: node_type %q", what, ErrFormat, node.NodeType)
		}
		if err != nil {
			return t.unread(n, err)
		}
	} else {
		b, err := t.getMeta(docs, JoinKey(f, ".zarray"))
		if err != nil {
			return t.unread(n, err)
		}
		n.kind, n.meta = KindArray, b
		if t.has(JoinKey(f, ".zattrs")) {
			if n.attrs, err = t.getMeta(docs, JoinKey(f, ".zattrs")); err != nil {
				return t.unread(n, err)
			}
		}
	}
	if err := t.describe(n); err != nil {
		return t.unread(n, err)
	}
	if !t.keep(len(n.meta) + len(n.attrs) + len(n.entry.XAttrs["user.zarr.attrs"])) {
		return t.unread(n, errTreeMeta)
	}
	return n, nil
}

// unread is classify's answer for a folder whose metadata do not read:
// a plain folder and a problem (an error at the root).
func (t *ZipTree) unread(n *zipNode, err error) (*zipNode, error) {
	n.kind, n.meta, n.attrs = KindNone, nil, nil
	n.entry = pack.TreeEntry{Name: path.Base(n.folder), Dir: true}
	if n.folder == "" {
		return nil, err
	}
	t.problem(note(fmt.Errorf("%s: %s: shown as a folder: %w", t.name, t.root.prefix+n.folder, err)))
	return n, nil
}

// groupAttrs returns the user.zarr.attrs of the group f: the attributes
// of its zarr.json doc (v3), else its .zattrs (from the consolidated
// metadata above it, or read).
func (t *ZipTree) groupAttrs(f string, v3 bool, doc []byte, docs metaDocs) map[string][]byte {
	var attrs []byte
	if v3 {
		var n nodeV3
		if json.Unmarshal(doc, &n) == nil {
			attrs = n.Attributes
		}
	} else if t.has(JoinKey(f, ".zattrs")) {
		// From the consolidated metadata that describe the group, else
		// read.
		var c *ConsolidatedMeta
		key := ".zattrs"
		if f == "" {
			c, _ = t.level("")
		} else {
			var rel string
			c, rel = FindConsolidated(f, "", t.level)
			key = rel + "/.zattrs"
		}
		if d, ok := c.doc(key); ok {
			attrs = d
		} else if b, err := t.getMeta(docs, JoinKey(f, ".zattrs")); err == nil && checkJSON(b, f) == nil {
			attrs = b
		}
	}
	attrs = bytes.TrimSpace(attrs)
	if len(attrs) == 0 || string(attrs) == "{}" || string(attrs) == "null" {
		return nil
	}
	if !t.keep(len(attrs)) {
		t.problem(fmt.Errorf("%s: %s: attributes left out: %w", t.name, t.root.prefix+f, errTreeMeta))
		return nil
	}
	return map[string][]byte{"user.zarr.attrs": slices.Clone(attrs)}
}

// openArray opens the array of node n from its metadata documents, over
// the store of its folder bounded by what it can have written.
func (t *ZipTree) openArray(n *zipNode) (*Array, error) {
	s := t.root.bounded(MaxObject)
	var a *Array
	var err error
	if n.v3 {
		a, err = OpenV3Meta(s.forArray(), n.folder, n.meta, t.cache)
	} else {
		a, err = OpenV2Meta(s.forArray(), n.folder, n.meta, n.attrs, t.cache)
	}
	if err != nil {
		return nil, err
	}
	// Set before any read of the array, which happens after Open.
	s.max = a.maxStored()
	return a, nil
}

// describe opens the array of n once to fill in its entry: the .npy
// size, Info (with the bytes its members take in the archive), the
// user.bloscfs.* attributes and user.zarr.attrs.
func (t *ZipTree) describe(n *zipNode) error {
	a, err := t.openArray(n)
	if err != nil {
		return err
	}
	in := a.Info()
	under := t.root.prefix
	if n.folder != "" {
		under += n.folder + "/"
	}
	for i := range t.root.z.a.Under(under) {
		in.StoredSize += t.root.z.a.Member(i).CompressedSize
	}
	n.entry = pack.TreeEntry{Name: path.Base(n.folder), Size: a.Size(), Info: in, Attrs: a.Describe()}
	if len(a.Attrs) > 0 {
		n.entry.XAttrs = map[string][]byte{"user.zarr.attrs": a.Attrs}
	}
	return nil
}

// treeFolder checks a tree path and returns the folder it names
// (relative to the root): a directory's path is its folder's.
func treeFolder(p string) (string, bool) {
	if p == "" {
		return "", true
	}
	return p, ValidKey(p)
}

// ReadDir returns the entries of the directory at p, sorted by name.
func (t *ZipTree) ReadDir(p string) ([]pack.TreeEntry, error) {
	nodes, err := t.list(p)
	if err != nil {
		return nil, err
	}
	out := make([]pack.TreeEntry, len(nodes))
	for i, n := range nodes {
		out[i] = n.entry
	}
	return out, nil
}

// list returns the nodes of the directory p, listed once.
func (t *ZipTree) list(p string) ([]*zipNode, error) {
	f, ok := treeFolder(p)
	if !ok || t.top.kind != KindGroup {
		return nil, fmt.Errorf("%s: %s: %w", t.name, p, pack.ErrNotInTree)
	}
	t.mu.Lock()
	d, ok := t.dirs[f]
	t.mu.Unlock()
	if ok {
		d.once.Do(func() {}) // made, or being made: wait for it
		return d.nodes, nil
	}
	if f != "" {
		// The directory must be one of its parent's.
		parent, err := t.list(parentDir(f))
		if err != nil {
			return nil, err
		}
		base := path.Base(f)
		i, found := slices.BinarySearchFunc(parent, base, func(n *zipNode, name string) int { return strings.Compare(n.entry.Name, name) })
		if !found || !parent[i].entry.Dir {
			return nil, fmt.Errorf("%s: %s: %w", t.name, p, pack.ErrNotInTree)
		}
	}
	t.mu.Lock()
	if d, ok = t.dirs[f]; !ok {
		d = &zipDir{}
		t.dirs[f] = d
	}
	t.mu.Unlock()
	d.once.Do(func() { d.nodes = t.readFolder(f) })
	return d.nodes, nil
}

// metaDocs are the metadata documents of the folders of a directory,
// read ahead together, by key (relative to the root).
type metaDocs map[string][]byte

// getMeta returns the metadata document key: read ahead, else read.
func (t *ZipTree) getMeta(docs metaDocs, key string) ([]byte, error) {
	if b, ok := docs[key]; ok {
		return b, nil
	}
	return GetMeta(t.root, key)
}

// The read-ahead of a directory's metadata documents: at most
// prefetchBudget bytes of them, members within a gap of each other read
// together in reads of at most a span (wider over an object store,
// where each read is a request).
const (
	prefetchBudget          = 64 << 20
	localGap, localSpan     = 32 << 10, 4 << 20
	requestGap, requestSpan = 1 << 20, 32 << 20
	prefetchFolders         = 2
)

// prefetch reads the metadata documents (zarr.json, .zarray, .zattrs)
// of the folders of directory f together, in few reads of the archive
// (the documents of an .ozx, written first, in one), unless
// consolidated metadata above describe them.
func (t *ZipTree) prefetch(f string, folders []string) metaDocs {
	if len(folders) < prefetchFolders {
		return nil
	}
	if c, _ := FindConsolidated(JoinKey(f, folders[0]), "", t.level); c != nil {
		return nil
	}
	a := t.root.z.a
	var idx []int
	keys := map[int]string{}
	var total int64
	for _, d := range folders {
		for _, name := range []string{"zarr.json", ".zarray", ".zattrs"} {
			key := JoinKey(JoinKey(f, d), name)
			i, ok := a.Lookup(t.root.prefix + key)
			if !ok {
				continue
			}
			m := a.Member(i)
			if m.Err != nil || m.Size > MaxMetaSize || total+m.Size > prefetchBudget {
				continue // read (and refused) on its own
			}
			total += m.Size
			idx = append(idx, i)
			keys[i] = key
		}
	}
	gap, span := int64(localGap), int64(localSpan)
	if t.root.z.whole {
		gap, span = requestGap, requestSpan
	}
	docs := metaDocs{}
	a.ReadFiles(idx, MaxMetaSize, gap, span, func(i int, b []byte, err error) {
		if err == nil {
			docs[keys[i]] = b
		}
	})
	return docs
}

// classifyParallel bounds the folders of one directory classified at
// once (each may read its metadata: a request in an object store).
const classifyParallel = 8

// readFolder makes the nodes of folder f: its subfolders classified,
// its members, named by the view's rules.
func (t *ZipTree) readFolder(f string) []*zipNode {
	a := t.root.z.a
	names := a.List(t.root.prefix + f)
	var folders []string
	var nodes []*zipNode
	for _, name := range names {
		if !ValidKey(strings.TrimSuffix(name, "/")) || strings.Contains(strings.TrimSuffix(name, "/"), "/") {
			continue // the archive lists no such name
		}
		if d, ok := strings.CutSuffix(name, "/"); ok {
			folders = append(folders, d)
			continue
		}
		i, ok := a.Lookup(t.root.prefix + JoinKey(f, name))
		if !ok {
			continue
		}
		m := a.Member(i)
		nodes = append(nodes, &zipNode{member: i, folder: JoinKey(f, name),
			entry: pack.TreeEntry{Name: name, Size: m.Size}})
	}
	docs := t.prefetch(f, folders)
	sub := make([]*zipNode, len(folders))
	var wg sync.WaitGroup
	sem := make(chan struct{}, classifyParallel)
	for k, d := range folders {
		if len(folders) == 1 {
			sub[k], _ = t.classify(JoinKey(f, d), nil)
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sub[k], _ = t.classify(JoinKey(f, d), docs)
		}()
	}
	wg.Wait()
	return t.nameEntries(nodes, sub)
}

// nameEntries names the entries of a folder: a file and a folder keep their
// names, an array folder x/ or x.zarr/ is the file x.npy — unless that
// name is another entry's too (a file x.npy, x/ beside x.zarr/), when
// every array involved keeps its folder's name. Of a member and a
// folder of one name, the folder is shown (the member is a problem).
func (t *ZipTree) nameEntries(files, folders []*zipNode) []*zipNode {
	taken := map[string]int{}
	for _, n := range files {
		taken[n.entry.Name]++
	}
	stems := map[string]int{}
	for _, n := range folders {
		if n.kind == KindArray {
			stems[arrayStem(n.entry.Name)]++
		} else {
			taken[n.entry.Name]++
		}
	}
	out := make([]*zipNode, 0, len(files)+len(folders))
	seen := map[string]bool{}
	for _, n := range folders {
		if n.kind == KindArray {
			if s := arrayStem(n.entry.Name); stems[s] == 1 && taken[s] == 0 {
				n.entry.Name = s
			}
		}
		seen[n.entry.Name] = true
		out = append(out, n)
	}
	for _, n := range files {
		if seen[n.entry.Name] {
			t.problem(fmt.Errorf("%s: %q: left out: a folder of the same name is shown", t.name, t.root.prefix+n.folder))
			continue
		}
		seen[n.entry.Name] = true
		out = append(out, n)
	}
	slices.SortFunc(out, func(x, y *zipNode) int { return strings.Compare(x.entry.Name, y.entry.Name) })
	return out
}

// arrayStem is the name an array folder is shown under: x.npy for x or
// x.zarr.
func arrayStem(folder string) string {
	if s := strings.TrimSuffix(folder, ".zarr"); s != "" {
		folder = s
	}
	return folder + ".npy"
}

// node returns the node at tree path p.
func (t *ZipTree) node(p string) (*zipNode, error) {
	if p == "" {
		return t.top, nil
	}
	if t.top.kind != KindGroup || !ValidKey(p) {
		return nil, fmt.Errorf("%s: %s: %w", t.name, p, pack.ErrNotInTree)
	}
	nodes, err := t.list(parentDir(p))
	if err != nil {
		return nil, err
	}
	base := path.Base(p)
	i, found := slices.BinarySearchFunc(nodes, base, func(n *zipNode, name string) int { return strings.Compare(n.entry.Name, name) })
	if !found {
		return nil, fmt.Errorf("%s: %s: %w", t.name, p, pack.ErrNotInTree)
	}
	return nodes[i], nil
}

// Stat returns the entry at p (the root for "").
func (t *ZipTree) Stat(p string) (pack.TreeEntry, error) {
	n, err := t.node(p)
	if err != nil {
		return pack.TreeEntry{}, err
	}
	return n.entry, nil
}

// Open returns the file at p: an array's .npy view (a *ZipArray), or a
// member's bytes (stored: read in place; deflated: inflated whole, up to
// 64 MiB).
func (t *ZipTree) Open(p string) (pack.Container, error) {
	n, err := t.node(p)
	if err != nil {
		return nil, err
	}
	if n.entry.Dir {
		return nil, fmt.Errorf("%s: %s: %w (a directory)", t.name, p, pack.ErrNotInTree)
	}
	if n.kind == KindArray {
		a, err := t.openArray(n)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", t.name, t.root.prefix+n.folder, err)
		}
		return &ZipArray{Array: a, name: t.name}, nil
	}
	arch := t.root.z.a
	m := arch.Member(n.member)
	if m.Err != nil {
		return nil, fmt.Errorf("%s: %s: %w", t.name, m.Name, m.Err)
	}
	if m.Method == zipread.Store {
		r, err := arch.Open(n.member)
		if err != nil {
			return nil, err
		}
		return &zipFile{ReaderAt: r, size: m.Size}, nil
	}
	b, err := arch.ReadFile(n.member, maxPlainInflate)
	if err != nil {
		return nil, err
	}
	return &zipFile{ReaderAt: bytes.NewReader(b), size: m.Size}, nil
}

// zipFile is a member shown as it is stored.
type zipFile struct {
	io.ReaderAt
	size int64
}

func (f *zipFile) Size() int64     { return f.size }
func (f *zipFile) Info() pack.Info { return pack.Info{Size: f.size} }

// ZipArray is an array of a zipped store: its errors name the archive
// (and the member, by its key).
type ZipArray struct {
	*Array
	name string // the archive's
}

func (z *ZipArray) named(err error) error {
	if err == nil || err == io.EOF || strings.Contains(err.Error(), z.name+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", z.name, err)
}

// ReadAt reads bytes of the NPY view; an error names the archive and
// the array.
func (z *ZipArray) ReadAt(p []byte, off int64) (int, error) {
	n, err := z.Array.ReadAt(p, off)
	return n, z.named(err)
}

// ReadAtOnce is Array.ReadAtOnce; an error names the archive and the
// array.
func (z *ZipArray) ReadAtOnce(p []byte, off int64) (int, error) {
	n, err := z.Array.ReadAtOnce(p, off)
	return n, z.named(err)
}

// Prefetch is Array.Prefetch; an error names the archive and the array.
func (z *ZipArray) Prefetch(off, n int64, reader func() int64) error {
	return z.named(z.Array.Prefetch(off, n, reader))
}

var (
	_ pack.Tree         = (*ZipTree)(nil)
	_ pack.TreeProblems = (*ZipTree)(nil)
)

// doc returns the document c holds under key (relative to its group);
// c may be nil.
func (c *ConsolidatedMeta) doc(key string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	d, ok := c.docs[key]
	return d, ok
}
