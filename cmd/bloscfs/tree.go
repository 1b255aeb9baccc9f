package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	bfs "github.com/bloscfs/bloscfs/fs"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/remote"
)

// Trees on the command line: a file or directory that holds a tree (a
// zipped Zarr store, a python-blosc2 store), and a path inside one
// (DIR/survey.zarr.zip/grp/temp.npy), are taken by info, verify and
// unpack as a store directory is.

// treeNamed reports whether a file (dir: a directory) named name may
// hold a tree.
func treeNamed(name string, dir bool) bool {
	_, ok := pack.TreeFormatFor(name, dir)
	return ok
}

// treeArg splits p into the tree source it names or passes through and
// the path inside the tree ("" for the tree itself): the first
// component of p, from its start, that is a regular file or directory
// named as a tree format's. ok is false when p is in no tree.
func treeArg(p string) (src, inner string, ok bool) {
	if remote.IsURL(p) {
		bucket, key, ok := remote.ParseURL(p)
		if !ok || key == "" {
			return "", "", false
		}
		parts := strings.Split(strings.Trim(key, "/"), "/")
		for i, c := range parts {
			if treeNamed(c, false) || treeNamed(c, true) {
				return "s3://" + bucket + "/" + strings.Join(parts[:i+1], "/"), strings.Join(parts[i+1:], "/"), true
			}
		}
		return "", "", false
	}
	clean := filepath.Clean(p)
	parts := strings.Split(clean, string(filepath.Separator))
	for i := range parts {
		c := parts[i]
		if c == "" || c == "." || c == ".." {
			continue
		}
		prefix := strings.Join(parts[:i+1], string(filepath.Separator))
		if prefix == "" {
			prefix = string(filepath.Separator)
		}
		if !treeNamed(c, false) && !treeNamed(c, true) {
			continue
		}
		st, err := os.Lstat(prefix)
		if err != nil {
			return "", "", false
		}
		if st.Mode().IsRegular() && treeNamed(c, false) || st.IsDir() && treeNamed(c, true) {
			return prefix, strings.Join(parts[i+1:], "/"), true
		}
	}
	return "", "", false
}

// openTree opens the tree of src, a local path or an s3:// location.
func openTree(src string, cfg remote.Config, cache pack.BlockCache) (pack.Tree, error) {
	if !remote.IsURL(src) {
		return all.OpenTree(followArg(src), cache)
	}
	s, key, err := openStore(src, cfg)
	if err != nil {
		return nil, err
	}
	return bfs.OpenRemoteTree(s, key, cache)
}

// treeFile is a file of a tree, found by walkTree.
type treeFile struct {
	path string // in the tree ("" for a root file)
	e    pack.TreeEntry
}

// maxTreeWalk bounds the entries walkTree visits.
const maxTreeWalk = 1 << 22

// walkTree returns the files of t at and below inner (a file or a
// directory of the tree), in name order, without recursion.
func walkTree(t pack.Tree, inner string) ([]treeFile, error) {
	e, err := t.Stat(inner)
	if err != nil {
		return nil, err
	}
	if !e.Dir {
		return []treeFile{{inner, e}}, nil
	}
	var out []treeFile
	stack := []string{inner}
	seen := 0
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		ents, err := t.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		var subs []string
		for _, e := range ents {
			if seen++; seen > maxTreeWalk {
				return nil, fmt.Errorf("more than %d entries", maxTreeWalk)
			}
			p := path.Join(dir, e.Name)
			if e.Dir {
				subs = append(subs, p)
			} else {
				out = append(out, treeFile{p, e})
			}
		}
		for i := len(subs) - 1; i >= 0; i-- {
			stack = append(stack, subs[i])
		}
	}
	return out, nil
}

// treeDisplay names the file p of the tree src as the command line would.
func treeDisplay(src, p string) string {
	if p == "" {
		return src
	}
	return src + "/" + p
}

// treeProblems splits what a tree left out into notes (entries of kinds
// not read) and defects.
func treeProblems(t pack.Tree) (notes, defects []error) {
	tp, ok := t.(pack.TreeProblems)
	if !ok {
		return nil, nil
	}
	for _, err := range tp.Problems() {
		if errors.Is(err, pack.ErrUnsupported) {
			notes = append(notes, err)
		} else {
			defects = append(defects, err)
		}
	}
	return notes, defects
}

// describeTree is info of a tree, or of a path inside one: a record of
// the tree (its format and file count, when the whole tree is asked
// for), then one per file.
func describeTree(src, inner string, cfg remote.Config) ([]*infoRecord, error) {
	t, err := openTree(src, cfg, pack.NoCache{})
	if err != nil {
		return nil, err
	}
	defer t.Close()
	files, err := walkTree(t, inner)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", treeDisplay(src, inner), err)
	}
	var recs []*infoRecord
	if inner == "" {
		base := path.Base(strings.TrimSuffix(src, "/"))
		tf, ok := pack.TreeFormatFor(base, false)
		if !ok || isDirArg(src) {
			tf, _ = pack.TreeFormatFor(base, true)
		}
		r := &infoRecord{Path: src, Format: "tree " + tf.Name, Meta: map[string]string{"files": fmt.Sprint(len(files))}}
		for _, f := range files {
			r.Size += f.e.Size
		}
		r.ViewSize = r.Size
		if st, err := os.Stat(src); err == nil && !st.IsDir() {
			r.StoredSize = st.Size()
			if r.StoredSize > 0 {
				r.Ratio = float64(r.Size) / float64(r.StoredSize)
			}
		}
		notes, defects := treeProblems(t)
		for i, err := range append(notes, defects...) {
			r.Meta[fmt.Sprintf("left out %d", i+1)] = oneLine(err)
		}
		recs = append(recs, r)
	}
	for _, f := range files {
		in := f.e.Info
		r := &infoRecord{
			Path: treeDisplay(src, f.path), Format: in.Format, Version: in.Version, Size: f.e.Size, ViewSize: f.e.Size,
			StoredSize: in.StoredSize, Chunks: in.Chunks, ChunkSize: in.ChunkSize, Blocksize: in.Blocksize,
			Codec: in.Codec, Typesize: in.Typesize, Checksum: in.Checksum,
		}
		if r.Format == "" {
			r.Format = "file"
		}
		if in.Clevel >= 0 && in.Format != "" {
			r.Clevel = &in.Clevel
		}
		if in.StoredSize > 0 {
			r.Ratio = float64(r.Size) / float64(in.StoredSize)
		}
		if len(f.e.Attrs) > 0 {
			r.Meta = map[string]string{}
			for k, v := range f.e.Attrs {
				r.Meta[k] = v
			}
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// isDirArg reports whether a local path is a directory.
func isDirArg(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// verifyTree is verify of a tree, or of a path inside one: every file is
// read whole through its format's checks; what the tree left out fails
// it, unless it is only of a kind not read (then it is told on stderr).
// An error is the tree's that did not open, already in the records.
func verifyTree(src, inner string, cfg remote.Config, stderr io.Writer) ([]verifyRecord, error) {
	t, err := openTree(src, cfg, pack.NoCache{})
	if err != nil {
		return []verifyRecord{{Path: treeDisplay(src, inner), Error: oneLine(err)}}, err
	}
	defer t.Close()
	var recs []verifyRecord
	if inner == "" {
		notes, defects := treeProblems(t)
		for _, err := range notes {
			fmt.Fprintf(stderr, "bloscfs verify: note: %s\n", oneLine(err))
		}
		for _, err := range defects {
			recs = append(recs, verifyRecord{Path: src, Error: oneLine(err)})
		}
	}
	files, err := walkTree(t, inner)
	if err != nil {
		return append(recs, verifyRecord{Path: treeDisplay(src, inner), Error: oneLine(err)}), nil
	}
	for _, f := range files {
		rec := verifyRecord{Path: treeDisplay(src, f.path), Format: f.e.Info.Format, Size: f.e.Size}
		c, err := t.Open(f.path)
		if err == nil {
			pb := newBar(stderr, c.Size(), "verify "+path.Base(rec.Path))
			err = all.ContainerView(c).Verify(pb.Add)
			if err == nil {
				pb.Finish()
			}
			if cl, ok := c.(io.Closer); ok {
				cl.Close()
			}
		}
		if err != nil {
			rec.Error = oneLine(err)
		} else {
			rec.OK = true
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// errTreeDir reports a directory of a tree where unpack needs a file.
var errTreeDir = errors.New("a directory of the tree: unpack takes one file (info lists them)")

// openTreeFile opens the file of a tree that unpack's arguments name:
// IN inside a tree (TREE/PATH), or, with key, the entry key of the tree
// IN ("a/b/c", "/a/b/c", or the name it is shown under, "a/b/c.npy").
// It returns the view to write, its name in the tree, and what to close.
func openTreeFile(in, key string, cfg remote.Config) (*all.View, string, func(), error) {
	src, inner, ok := treeArg(in)
	if !ok {
		return nil, "", nil, fmt.Errorf("%s: %w", in, all.ErrNotTree)
	}
	if key != "" {
		inner = path.Join(inner, strings.Trim(key, "/"))
	}
	t, err := openTree(src, cfg, newUnpackCache())
	if err != nil {
		return nil, "", nil, err
	}
	var e pack.TreeEntry
	p := inner
	for _, try := range []string{inner, inner + ".npy", inner + ".json"} {
		if e, err = t.Stat(try); err == nil {
			p = try
			break
		}
	}
	if err != nil {
		t.Close()
		return nil, "", nil, err
	}
	if e.Dir {
		t.Close()
		return nil, "", nil, fmt.Errorf("%s: %w", treeDisplay(src, p), errTreeDir)
	}
	c, err := t.Open(p)
	if err != nil {
		t.Close()
		return nil, "", nil, err
	}
	name := e.Name
	if p != "" {
		name = path.Base(p)
	}
	done := func() {
		if cl, ok := c.(io.Closer); ok {
			cl.Close()
		}
		t.Close()
	}
	return all.ContainerView(c), name, done, nil
}
