package fs

import (
	"sync"
	"syscall"
	"time"
)

// dirSig is what changes in a directory's own stat when an entry is
// added, removed or renamed in it.
type dirSig struct {
	dev, ino     uint64
	size         int64
	nlink        uint64
	mtime, ctime int64 // nanoseconds
}

func sigOf(st *syscall.Stat_t) dirSig {
	return dirSig{
		dev: uint64(st.Dev), ino: st.Ino, size: st.Size, nlink: uint64(st.Nlink),
		mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec, ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec,
	}
}

// settleTime is how old a directory's last change must be for its
// listing to be kept: a change within the same tick of a coarse clock
// (a filesystem without fine-grained timestamps) could leave the
// directory's mtime and ctime as they were, never one after it.
var settleTime = 2 * time.Second

// viewNames is the name mapping of one directory as its last full
// listing found it, kept while the directory's signature stays the
// same: a lookup then costs a stat of the directory instead of one lstat
// per name that could be it (a dozen), and OPENDIR can let the kernel
// keep its cached listing. Only the names are kept, never attributes:
// each use still stats and probes the entry itself.
type viewNames struct {
	mu    sync.Mutex
	sig   dirSig
	valid bool
	names map[string]viewName // by view name
	// listed is set once the kernel has been given a listing of the
	// directory with FOPEN_CACHE_DIR for this signature.
	listed bool
	// keepable is set when the kernel may keep the listing: at most half
	// of its entries are short-lived (see set).
	keepable bool
}

// viewName is where a view name leads on disk.
type viewName struct {
	disk          string
	compressed    bool
	dir           bool
	tree, treeDir bool
	treeKey       string
}

// current stats dir and returns its signature, and whether the kept
// names are for it.
func (v *viewNames) current(dir string) (dirSig, bool) {
	var st syscall.Stat_t
	if syscall.Lstat(dir, &st) != nil {
		return dirSig{}, false
	}
	sig := sigOf(&st)
	v.mu.Lock()
	defer v.mu.Unlock()
	return sig, v.valid && v.sig == sig
}

// get returns the entry called name by the kept names, if they are those
// of dir as it is now; found is false for a name the directory does not
// show.
func (v *viewNames) get(dir, name string) (e *entry, found, ok bool) {
	sig, ok := v.current(dir)
	if !ok {
		return nil, false, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.sig != sig || !v.valid {
		return nil, false, false
	}
	n, found := v.names[name]
	if !found {
		return nil, false, true
	}
	return &entry{view: name, disk: n.disk, compressed: n.compressed, dir: n.dir, tree: n.tree, treeDir: n.treeDir, treeKey: n.treeKey}, true, true
}

// set keeps the names of a listing of the directory whose signature was
// sig before it was read, unless it changed too recently to be sure that
// a change would show in sig.
func (v *viewNames) set(sig dirSig, ents []entry) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if time.Since(time.Unix(0, max(sig.mtime, sig.ctime))) < settleTime {
		v.valid, v.names, v.listed = false, nil, false
		return
	}
	if v.valid && v.sig == sig {
		return
	}
	m := make(map[string]viewName, len(ents))
	short := 0
	for _, e := range ents {
		m[e.view] = viewName{disk: e.disk, compressed: e.compressed, dir: e.dir, tree: e.tree, treeDir: e.treeDir, treeKey: e.treeKey}
		if !e.compressed && !e.tree {
			short++
		}
	}
	// The kernel's kept listing pays where names and attributes outlive
	// it: a compressed file's are kept an hour, a plain file's or a
	// directory's a second (they change behind the mount). Listed from
	// the kernel's copy, an entry whose name has expired costs a LOOKUP
	// round trip of its own, about twice what it costs in a READDIRPLUS
	// of a new listing (100,000 plain files: 3.4 s against 1.6 s). So
	// the kernel keeps the listing of a directory of mostly compressed
	// files only.
	v.sig, v.valid, v.names, v.listed = sig, true, m, false
	v.keepable = 2*short <= len(ents)
}

// drop forgets the kept names (a change through the mount).
func (v *viewNames) drop() {
	v.mu.Lock()
	v.valid, v.names, v.listed = false, nil, false
	v.mu.Unlock()
}
