package zarr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/bloscfs/bloscfs/pack"
)

// DirArray is an array stored in a local directory: the pack container
// that pack.OpenPath returns for a Zarr array directory. Close releases
// the directory.
type DirArray struct {
	*Array
	store *DirStore
	dir   string
}

// Close releases the directory.
func (d *DirArray) Close() error { return d.store.Close() }

// named prefixes an error with the array's directory (the keys in the
// errors are relative to it).
func (d *DirArray) named(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return fmt.Errorf("%s: %w", d.dir, err)
}

// ReadAt reads bytes of the NPY view; an error names the directory.
func (d *DirArray) ReadAt(p []byte, off int64) (int, error) {
	n, err := d.Array.ReadAt(p, off)
	return n, d.named(err)
}

// ReadAtOnce is Array.ReadAtOnce; an error names the directory.
func (d *DirArray) ReadAtOnce(p []byte, off int64) (int, error) {
	n, err := d.Array.ReadAtOnce(p, off)
	return n, d.named(err)
}

// Prefetch is Array.Prefetch; an error names the directory.
func (d *DirArray) Prefetch(off, n int64, reader func() int64) error {
	return d.named(d.Array.Prefetch(off, n, reader))
}

// ArrayMetaFile returns the name of the metadata file that makes dir a
// Zarr array (".zarray", or "zarr.json" with node_type "array"), or ""
// when dir is not one. Symbolic links are not followed.
func ArrayMetaFile(dir string) string {
	if st, err := os.Lstat(filepath.Join(dir, ".zarray")); err == nil && st.Mode().IsRegular() {
		return ".zarray"
	}
	p := filepath.Join(dir, "zarr.json")
	st, err := os.Lstat(p)
	if err != nil || !st.Mode().IsRegular() || st.Size() > MaxMetaSize {
		return ""
	}
	// Without following a link or waiting on a FIFO put in its place
	// since the lstat, and read only if it is still a regular file.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxMetaSize))
	if err != nil || !bytes.Contains(b, []byte(`"array"`)) {
		return ""
	}
	var n nodeV3
	if checkJSON(b, p) != nil || json.Unmarshal(b, &n) != nil || n.NodeType != "array" {
		return ""
	}
	return "zarr.json"
}

func init() {
	pack.RegisterFormat(pack.Format{
		Name:     "zarr",
		MatchDir: func(dir string) bool { return ArrayMetaFile(dir) != "" },
		OpenDir: func(dir string, cache pack.BlockCache) (pack.Container, error) {
			s, err := OpenDirStore(dir)
			if err != nil {
				return nil, err
			}
			a, err := Open(s, "", cache)
			if err != nil {
				s.Close()
				return nil, err
			}
			a.Path = ""
			return &DirArray{Array: a, store: s, dir: dir}, nil
		},
	})
}

// StoredSize returns the bytes of the regular files under the array's
// directory (chunks and metadata). It walks the directory: callers that
// list many arrays should not ask.
func (d *DirArray) StoredSize() int64 { return rootSize(d.store.root) }

// StoredSize returns the bytes of the regular files under dir (a Zarr
// array's chunks and metadata), walking it without following symbolic
// links out of it.
func StoredSize(dir string) (int64, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return rootSize(r), nil
}

func rootSize(r *os.Root) int64 {
	var n int64
	fs.WalkDir(r.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
