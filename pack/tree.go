package pack

import (
	"errors"
	"io"
	"strings"
	"sync"
)

// Tree is what a container holds when it holds many: a directory tree of
// files inside one source file or directory. A zipped Zarr store (.zip,
// .ozx) is a tree of Zarr groups whose arrays are .npy files; a
// python-blosc2 store (.b2e, .b2z, a .b2d directory) is a tree of keys
// whose leaves are arrays and byte streams. The mount shows a tree as a
// read-only directory of that name, or, when its root is a file (a
// zipped Zarr array), as that one file.
//
// Paths in a tree are relative and '/'-separated, without a leading or
// trailing '/'; "" is the root. A Tree must be safe for concurrent use.
type Tree interface {
	// Root describes the top of the tree. A root that is a file (Dir
	// false) is shown in place of the tree, under the root's Name; a
	// directory is shown under the source's own name (Name is "").
	Root() TreeEntry
	// ReadDir returns the entries of the directory at path, sorted by
	// name. A path that is not a directory of the tree gives an error
	// wrapping ErrNotInTree.
	ReadDir(path string) ([]TreeEntry, error)
	// Stat returns the entry at path (the root for "").
	Stat(path string) (TreeEntry, error)
	// Open returns the file at path as a Container whose plain bytes
	// (ReadAt, Size) are what the file shows: an array's .npy view, a
	// leaf's bytes, a member as it is stored. A Container that is also a
	// Streamer serves sequential readers as a .b2frame does; one that is
	// an io.Closer is closed by the caller when done.
	Open(path string) (Container, error)
	// Close releases what the tree holds (files of a directory tree it
	// opened); its source stays the caller's.
	Close() error
}

// TreeEntry is one file or directory of a Tree.
type TreeEntry struct {
	// Name is the entry's name in its directory: the name it is shown
	// under (an array's "temp.npy", a leaf's "c.npy").
	Name string
	Dir  bool
	// Size is the size of a file as shown.
	Size int64
	// Info describes how a file is stored (Format, Codec, Chunks, …), for
	// its user.bloscfs.* attributes; a zero Format marks a file shown as
	// it is stored (a group's JSON document), which has none.
	Info Info
	// Attrs are more user.bloscfs.* attributes, named without the prefix
	// (a Zarr array's shape, chunkshape, codecs).
	Attrs map[string]string
	// XAttrs are the entry's other extended attributes, by full name:
	// user.zarr.attrs, user.blosc2.vlmeta.NAME (values as JSON).
	XAttrs map[string][]byte
}

// ErrNoTree marks, beside ErrFormat, a file named as a tree format's
// that is plainly another kind of file (a ZIP archive of other data): it
// is shown as it is stored without a word in the log.
var ErrNoTree = errors.New("holds no tree")

// ErrNotInTree reports a path that names nothing in a tree (or a file
// where a directory is asked for, or the reverse).
var ErrNotInTree = errors.New("no such entry in the tree")

// Member is one file of a directory tree that holds a Tree.
type Member struct {
	Path string // relative, '/'-separated: "embed.b2e", "a/b.b2nd"
	Size int64
}

// MemberSource gives the files of a directory that holds a Tree (a
// python-blosc2 .b2d): a local directory, a bucket prefix, the members
// of a ZIP archive. It must be safe for concurrent use.
type MemberSource interface {
	// Members lists every file (regular files only) under the source.
	Members() ([]Member, error)
	// Open returns a reader of the member at path and its size. A reader
	// that is also an io.Closer is closed by the Tree when done.
	Open(path string) (io.ReaderAt, int64, error)
}

// TreeFormat is a format whose files (or directories) hold a Tree.
type TreeFormat struct {
	// Name names the format ("zarr-zip", "b2store").
	Name string
	// Suffixes are the name suffixes of files that may hold such a tree
	// (".zip", ".ozx"); DirSuffixes those of directories (".b2d").
	Suffixes, DirSuffixes []string
	// Open reads the tree of the file r of size bytes, named name in
	// errors. A file that holds no such tree gives an error wrapping
	// ErrFormat (it is shown as it is stored); cache holds what the
	// tree's files decode.
	Open func(r io.ReaderAt, size int64, name string, cache BlockCache) (Tree, error)
	// OpenDir reads the tree of a directory through src (nil: the
	// format has none).
	OpenDir func(src MemberSource, name string, cache BlockCache) (Tree, error)
	// RootNames returns the names of the files whose tree's root, a
	// file, may be shown under the name view (a zipped Zarr array
	// "temp.zip" or "temp.zarr.zip" for "temp.npy"), so that a lookup of
	// view need look at no other entry; nil for a format whose roots
	// are always directories.
	RootNames func(view string) []string
	// RootView returns the name the root of the tree of a file named
	// name is shown under when it is a file ("temp.npy" for
	// "temp.zarr.zip"); nil with RootNames.
	RootView func(name string) string
}

var (
	treeMu      sync.RWMutex
	treeFormats []TreeFormat
)

// RegisterTreeFormat adds a tree format; packages register theirs in
// init.
func RegisterTreeFormat(f TreeFormat) {
	treeMu.Lock()
	defer treeMu.Unlock()
	treeFormats = append(treeFormats, f)
}

// TreeRootNames returns the names of the files whose tree's root may be
// shown under the name view, for every tree format.
func TreeRootNames(view string) []string {
	treeMu.RLock()
	defer treeMu.RUnlock()
	var out []string
	for _, f := range treeFormats {
		if f.RootNames != nil {
			out = append(out, f.RootNames(view)...)
		}
	}
	return out
}

// TreeRootView returns the name the tree of the file named name would be
// shown under if its root were a file, or "" when no format's root can
// be one.
func TreeRootView(name string) string {
	f, ok := TreeFormatFor(name, false)
	if !ok || f.RootView == nil {
		return ""
	}
	return f.RootView(name)
}

// TreeFormatFor returns the tree format that a file (dir: a directory)
// named name may hold, by its suffix.
func TreeFormatFor(name string, dir bool) (TreeFormat, bool) {
	treeMu.RLock()
	defer treeMu.RUnlock()
	for _, f := range treeFormats {
		suffixes := f.Suffixes
		if dir {
			suffixes = f.DirSuffixes
		}
		for _, s := range suffixes {
			if strings.HasSuffix(name, s) && len(name) > len(s) {
				if dir && f.OpenDir == nil || !dir && f.Open == nil {
					continue
				}
				return f, true
			}
		}
	}
	return TreeFormat{}, false
}

// TreeProblems is implemented by a Tree that left entries out or shows
// them raw (a leaf of a kind not read, a member refused): the mount and
// the commands log each problem once per version of the tree. Each
// error names the source and the entry. A problem that wraps
// ErrUnsupported is an entry of a kind not read, which verify reports
// as a note; any other is a defect of the tree, which verify fails.
type TreeProblems interface {
	Problems() []error
}
