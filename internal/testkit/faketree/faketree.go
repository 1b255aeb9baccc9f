// Package faketree registers tree formats (pack.Tree) for the tests of
// the mount and the commands, in the test binaries that import it:
//   - x.ftree: a file "FTREE\n" then lines "path\tcontent", a tree whose
//     root is a directory (as a zipped Zarr group);
//   - x.fnpy: a file "FNPY\n" then content, a tree whose root is the file
//     x.npy (as a zipped Zarr array);
//   - x.fdir/: a directory whose files are the tree's files (as a .b2d),
//     "bad" in its top directory making it no tree;
//   - a file starting "PLAIN" is plainly no tree (pack.ErrNoTree).
package faketree

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/bloscfs/bloscfs/pack"
)

func init() {
	pack.RegisterTreeFormat(pack.TreeFormat{
		Name:        "fake",
		Suffixes:    []string{".ftree", ".fnpy"},
		DirSuffixes: []string{".fdir"},
		Open:        openFakeTree,
		OpenDir:     openFakeDirTree,
		RootNames: func(view string) []string {
			if stem, ok := strings.CutSuffix(view, ".npy"); ok {
				return []string{stem + ".fnpy"}
			}
			return nil
		},
		RootView: func(name string) string {
			if stem, ok := strings.CutSuffix(name, ".fnpy"); ok {
				return stem + ".npy"
			}
			return ""
		},
	})
}

// Open counts the fake trees open.
var Open atomic.Int64

// Tree is a fake tree: files by path.
type Tree struct {
	Name     string
	Files    map[string][]byte
	RootName string // the root file's name; "" for a directory
	closed   atomic.Bool
}

func openFakeTree(r io.ReaderAt, size int64, name string, cache pack.BlockCache) (pack.Tree, error) {
	b := make([]byte, size)
	if _, err := r.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, err
	}
	t := &Tree{Name: name, Files: map[string][]byte{}}
	switch {
	case bytes.HasPrefix(b, []byte("FTREE\n")):
		for _, line := range strings.Split(string(b[6:]), "\n") {
			if p, content, ok := strings.Cut(line, "\t"); ok {
				t.Files[p] = []byte(content)
			}
		}
	case bytes.HasPrefix(b, []byte("FNPY\n")):
		t.RootName = strings.TrimSuffix(path.Base(name), ".fnpy") + ".npy"
		t.Files[""] = b[5:]
	case bytes.HasPrefix(b, []byte("PLAIN")):
		return nil, fmt.Errorf("%s: %w: %w: plainly another file", name, pack.ErrFormat, pack.ErrNoTree)
	default:
		return nil, fmt.Errorf("%s: %w: not a fake tree", name, pack.ErrFormat)
	}
	Open.Add(1)
	return t, nil
}

func openFakeDirTree(src pack.MemberSource, name string, cache pack.BlockCache) (pack.Tree, error) {
	ms, err := src.Members()
	if err != nil {
		return nil, err
	}
	t := &Tree{Name: name, Files: map[string][]byte{}}
	for _, m := range ms {
		if m.Path == "bad" {
			return nil, fmt.Errorf("%s: %w: a bad member", name, pack.ErrFormat)
		}
		r, n, err := src.Open(m.Path)
		if err != nil {
			return nil, err
		}
		b := make([]byte, n)
		if _, err := r.ReadAt(b, 0); err != nil && err != io.EOF {
			return nil, err
		}
		if c, ok := r.(io.Closer); ok {
			c.Close()
		}
		t.Files[m.Path] = b
	}
	Open.Add(1)
	return t, nil
}

// Root implements pack.Tree.
func (t *Tree) Root() pack.TreeEntry {
	if t.RootName != "" {
		return t.entry(t.RootName, "")
	}
	return pack.TreeEntry{Dir: true, XAttrs: map[string][]byte{"user.fake.root": []byte(`"yes"`)}}
}

func (t *Tree) entry(name, p string) pack.TreeEntry {
	b := t.Files[p]
	return pack.TreeEntry{
		Name: name, Size: int64(len(b)),
		Info:   pack.Info{Format: "fake", Size: int64(len(b)), Codec: "none", Clevel: -1},
		Attrs:  map[string]string{"kind": "leaf"},
		XAttrs: map[string][]byte{"user.fake.len": []byte(fmt.Sprint(len(b)))},
	}
}

// ReadDir implements pack.Tree.
func (t *Tree) ReadDir(dir string) ([]pack.TreeEntry, error) {
	seen := map[string]bool{}
	var out []pack.TreeEntry
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	for p := range t.Files {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok || rest == "" {
			continue
		}
		name, _, deeper := strings.Cut(rest, "/")
		if seen[name] {
			continue
		}
		seen[name] = true
		if deeper {
			out = append(out, pack.TreeEntry{Name: name, Dir: true})
		} else {
			out = append(out, t.entry(name, p))
		}
	}
	if len(out) == 0 && dir != "" {
		return nil, fmt.Errorf("%s: %s: %w", t.Name, dir, pack.ErrNotInTree)
	}
	slices.SortFunc(out, func(a, b pack.TreeEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Stat implements pack.Tree.
func (t *Tree) Stat(p string) (pack.TreeEntry, error) {
	if p == "" {
		return t.Root(), nil
	}
	if _, ok := t.Files[p]; ok {
		return t.entry(path.Base(p), p), nil
	}
	return pack.TreeEntry{Name: path.Base(p), Dir: true}, nil
}

// Open implements pack.Tree.
func (t *Tree) Open(p string) (pack.Container, error) {
	b, ok := t.Files[p]
	if !ok {
		return nil, fmt.Errorf("%s: %s: %w", t.Name, p, pack.ErrNotInTree)
	}
	if strings.HasSuffix(p, "broken") {
		return nil, fmt.Errorf("%s: %s: %w: a broken leaf", t.Name, p, pack.ErrFormat)
	}
	return memContainer{bytes.NewReader(b)}, nil
}

// Close implements pack.Tree.
func (t *Tree) Close() error {
	if !t.closed.Swap(true) {
		Open.Add(-1)
	}
	return nil
}

// memContainer is a file of a fake tree.
type memContainer struct{ *bytes.Reader }

// Info describes the file.
func (c memContainer) Info() pack.Info { return pack.Info{Format: "fake", Size: c.Size()} }
