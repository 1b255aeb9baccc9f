package all

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/bloscfs/bloscfs/internal/mmapfile"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/b2store"
)

// DirMembers returns the files of the local directory dir as a
// pack.MemberSource for a tree format's OpenDir: reached from dir one
// component at a time, never through a symbolic link, only regular
// files, opened without blocking.
func DirMembers(dir string) pack.MemberSource { return b2store.NewDirSource(dir) }

// ErrNotTree reports a path whose name no tree format claims.
var ErrNotTree = errors.New("not named as a tree")

// Tree is an opened local tree and the file it reads.
type Tree struct {
	pack.Tree
	src *mmapfile.Pread // nil for a directory's tree
}

// Problems returns what the tree left out (pack.TreeProblems), if it
// tells.
func (t *Tree) Problems() []error {
	if p, ok := t.Tree.(pack.TreeProblems); ok {
		return p.Problems()
	}
	return nil
}

// Close closes the tree and its file.
func (t *Tree) Close() error {
	err := t.Tree.Close()
	if t.src != nil {
		if cerr := t.src.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// OpenTree opens the tree that the local file or directory path holds
// (a zipped Zarr store, a python-blosc2 store), by its name's suffix: a
// name no tree format claims gives ErrNotTree, a file that holds no tree
// an error wrapping pack.ErrFormat. Only a regular file or a directory
// is opened, never through a symbolic link, and never blocking.
func OpenTree(path string, cache pack.BlockCache) (*Tree, error) {
	f, fi, err := pack.OpenSource(path, true)
	if err != nil {
		return nil, err
	}
	tf, ok := pack.TreeFormatFor(filepath.Base(path), fi.IsDir())
	if !ok {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, ErrNotTree)
	}
	if fi.IsDir() {
		f.Close()
		t, err := tf.OpenDir(DirMembers(path), path, cache)
		if err != nil {
			return nil, err
		}
		return &Tree{Tree: t}, nil
	}
	r := mmapfile.NewPread(f)
	t, err := tf.Open(r, fi.Size(), path, cache)
	if err != nil {
		r.Close()
		return nil, err
	}
	return &Tree{Tree: t, src: r}, nil
}
