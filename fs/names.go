package fs

import (
	"sort"
	"strings"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
)

// TempPrefix starts the names of files bloscfs writes beside the
// originals (staging and recompression); they never appear in the view.
const TempPrefix = ".bloscfs-"

// hiddenName reports whether a disk name is kept out of the view.
func hiddenName(name string) bool { return strings.HasPrefix(name, TempPrefix) }

// stemView returns the name a compressed disk entry is shown under when
// nothing collides with it, and whether the name has a container suffix.
func stemView(disk string) (string, bool) { return all.PlainName(disk) }

// diskCandidates returns every disk name whose view could be name: the
// name itself and name with each container suffix, plus, when name is a
// stem view, the disk names that would collide with it. Resolving name
// over just these entries gives the same answer as over the whole
// directory.
func diskCandidates(name string) []string {
	out := []string{name}
	add := func(stem string) {
		for _, s := range all.Suffixes {
			if s.View == "" {
				out = append(out, stem+s.Disk)
			}
		}
		out = append(out, stem+".npy")
		if v := strings.TrimSuffix(stem, ".npy"); v != stem {
			out = append(out, v+".b2nd", v+".zarr", v) // a Zarr array directory: v.zarr or v
		}
	}
	add(name)
	// A file holding a tree whose root is a file shown as name.
	out = append(out, pack.TreeRootNames(name)...)
	// A file holding a tree whose root is a file is visible under its
	// full name when its root's name collides.
	if view := pack.TreeRootView(name); view != "" {
		out = append(out, view)
		add(view)
		out = append(out, pack.TreeRootNames(view)...)
	}
	// A full name such as x.blp is visible when its stem view x collides.
	if stem, ok := stemView(name); ok {
		out = append(out, stem)
		add(stem)
		if s := strings.TrimSuffix(stem, ".npy"); s != stem {
			out = append(out, s+".b2nd", s+".zarr", s)
		}
	}
	sort.Strings(out)
	return compact(out)
}

func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// entry is one name of the view.
type entry struct {
	view       string
	disk       string
	compressed bool // shown decompressed
	dir        bool // a directory on disk (plain directory or sparse frame)
	meta       any  // the backend's record of the disk entry (backendEntry.meta)
	// tree: the entry holds a pack.Tree, shown as a read-only directory
	// (treeDir) or as its root file; treeKey names the tree's version.
	tree, treeDir bool
	treeKey       string
}

// diskEntry is what mapNames needs to know of a disk entry.
type diskEntry struct {
	name string
	dir  bool
	meta any // carried to the entry
	// container reports whether the entry holds a readable container; it
	// is only asked for entries with a container suffix.
	container func() bool
	// zarrArray reports whether a directory without a container suffix
	// is a Zarr array (shown as name.npy).
	zarrArray func() bool
	// tree reports whether an entry named as a tree format's holds a
	// readable tree, and how it is shown: as a directory of its own
	// name (dir), or as its root file named view; key names the tree's
	// version. It is only asked for entries so named.
	tree func() (view string, dir bool, key string, ok bool)

	treeKey string // set by mapNames for a tree shown as its root file
}

// mapNames applies the view's naming rules to the entries of one
// directory:
//   - a readable container with a container suffix is shown decompressed
//     under its stem (x.blp → x, x.b2nd → x.npy);
//   - when that stem collides with another entry (a plain file or
//     directory of that name, or another container with the same stem),
//     every container involved keeps its full name, still decompressed;
//   - an entry that only looks like a container (suffix, but it does not
//     parse) is shown raw under its own name;
//   - a file or directory that holds a tree is shown as a read-only
//     directory of its own name, or, when the tree's root is a file, as
//     that file under the root's name, colliding as containers do;
//   - bloscfs's own temp files are hidden; everything else passes through.
func mapNames(ents []diskEntry) []entry {
	exists := make(map[string]bool, len(ents))
	for _, e := range ents {
		exists[e.name] = true
	}
	byStem := map[string][]diskEntry{}
	var out []entry
	for _, e := range ents {
		if hiddenName(e.name) {
			continue
		}
		if e.tree != nil {
			if view, dir, key, ok := e.tree(); ok {
				if dir {
					out = append(out, entry{view: e.name, disk: e.name, dir: e.dir, meta: e.meta, tree: true, treeDir: true, treeKey: key})
				} else {
					e.treeKey = key
					byStem[view] = append(byStem[view], e)
				}
				continue
			}
		}
		if stem, ok := stemView(e.name); ok && e.container != nil && e.container() {
			byStem[stem] = append(byStem[stem], e)
			continue
		} else if !ok && e.dir && e.zarrArray != nil && e.zarrArray() {
			byStem[e.name+".npy"] = append(byStem[e.name+".npy"], e)
			continue
		}
		out = append(out, entry{view: e.name, disk: e.name, dir: e.dir, meta: e.meta})
	}
	for stem, es := range byStem {
		if len(es) == 1 && !exists[stem] {
			e := es[0]
			out = append(out, entry{view: stem, disk: e.name, compressed: true, dir: e.dir, meta: e.meta, tree: e.treeKey != "", treeKey: e.treeKey})
			continue
		}
		for _, e := range es {
			out = append(out, entry{view: e.name, disk: e.name, compressed: true, dir: e.dir, meta: e.meta, tree: e.treeKey != "", treeKey: e.treeKey})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].view < out[j].view })
	return out
}

// stemOf returns a container disk name without its suffix.
func stemOf(disk string) string { return all.StemOf(disk) }

// stemFor returns the disk stem for a new view name of a container
// stored as disk: for a .b2nd (shown as .npy) the .npy is dropped.
func stemFor(view, disk string) string {
	if strings.HasSuffix(disk, ".b2nd") || strings.HasSuffix(disk, ".zarr") {
		return strings.TrimSuffix(view, ".npy")
	}
	return view
}
