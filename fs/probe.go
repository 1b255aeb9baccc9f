package fs

// The probe record of a file, local or remote: whether it holds a
// readable container and what it shows, made once per version of the
// file (local_probe.go, remote_probe.go), and the errno of a failure.

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/zarr"
)

// probe is what opening a candidate container found.
type probe struct {
	ok   bool
	size int64 // size of the view
	info pack.Info
	npy  bool
	// zarr: a Zarr array's own user.bloscfs.* attributes, and its user
	// attributes (user.zarr.attrs).
	zarr      map[string]string
	zarrAttrs []byte
	// head: made from the header alone (a remote object's first bytes,
	// pack.OpenHead): size, npy and info.Format hold, the rest of info
	// is unknown until the object is opened.
	head bool
	// tree: the entry holds a pack.Tree (tree.go); for a tree whose root
	// is a file, size, info and npy describe that file.
	tree *treeProbe
}

// treeProbe is what a probe of a tree keeps: the key of its version in
// the tree cache, and its root.
type treeProbe struct {
	key  string
	root pack.TreeEntry
}

// treeProbeOf records what the opened tree t shows.
func treeProbeOf(t *openTree) *probe {
	root := t.t.Root()
	p := &probe{ok: true, tree: &treeProbe{key: t.key, root: root}}
	if !root.Dir {
		p.size, p.info, p.npy = root.Size, root.Info, strings.HasSuffix(root.Name, ".npy")
	}
	return p
}

// probeOf records what the view v of a readable container holds: only
// what is needed to show the file (no metadata, which may be large).
func probeOf(v *all.View) *probe {
	p := &probe{ok: true, size: v.Size, info: v.Container.Info(), npy: v.NPY}
	p.info.Meta = nil
	z, ok := v.Container.(*zarr.Array)
	if d, isDir := v.Container.(*zarr.DirArray); isDir {
		z, ok = d.Array, true
	}
	if ok {
		p.zarr = z.Describe()
		if len(z.Attrs) <= maxZarrAttrs {
			p.zarrAttrs = z.Attrs
		}
	}
	return p
}

// errnoOf turns an error into the errno to give the caller.
func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}

// zarrProbeOf records what the Zarr array a holds, shown as an .npy file.
func zarrProbeOf(a *zarr.Array) *probe {
	p := probeOf(all.ContainerView(a))
	p.npy = true
	return p
}

// probeEach calls probe(i) for each i below n, at most parallel at once,
// when n is at least 2: a listing probes its containers before it maps
// their names, so that the mapping finds them probed, and each probe
// waits for the disk or a round trip to the store.
func probeEach(n, parallel int, probe func(i int)) {
	if n < 2 {
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(parallel, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				probe(int(i))
			}
		}()
	}
	wg.Wait()
}
