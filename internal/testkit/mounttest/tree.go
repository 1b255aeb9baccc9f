package mounttest

import (
	"bytes"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bloscfs/bloscfs/pack"
)

// CheckTree checks that the mounted directory dir shows the tree tr as
// the mount must: the same names in every directory, directories as
// directories, files of the sizes and bytes tr.Open gives, and the
// extended attributes of each entry (its XAttrs, and its Attrs as
// user.bloscfs.*), the root's on dir. It returns how many files it read.
func CheckTree(tb testing.TB, tr pack.Tree, dir string) int {
	tb.Helper()
	files := 0
	checkXattrs(tb, dir, tr.Root())
	var walk func(p string)
	walk = func(p string) {
		ents, err := tr.ReadDir(p)
		if err != nil {
			tb.Fatalf("the tree's ReadDir(%q): %v", p, err)
		}
		mdir := filepath.Join(dir, filepath.FromSlash(p))
		des, err := os.ReadDir(mdir)
		if err != nil {
			tb.Errorf("%s: %v", mdir, err)
			return
		}
		var got, want []string
		for _, d := range des {
			got = append(got, d.Name())
		}
		for _, e := range ents {
			want = append(want, e.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			tb.Errorf("%s lists %q, the tree %q", mdir, got, want)
		}
		for _, e := range ents {
			tp := path.Join(p, e.Name)
			mp := filepath.Join(dir, filepath.FromSlash(tp))
			st, err := os.Stat(mp)
			if err != nil {
				tb.Errorf("%s: %v", mp, err)
				continue
			}
			checkXattrs(tb, mp, e)
			if e.Dir {
				if !st.IsDir() {
					tb.Errorf("%s: mode %v, want a directory", mp, st.Mode())
				}
				walk(tp)
				continue
			}
			if !st.Mode().IsRegular() || st.Size() != e.Size || st.Mode().Perm()&0o222 != 0 {
				tb.Errorf("%s: mode %v size %d, want a read-only file of %d bytes", mp, st.Mode(), st.Size(), e.Size)
			}
			got, err := os.ReadFile(mp)
			if err != nil {
				tb.Errorf("%s: %v", mp, err)
				continue
			}
			c, err := tr.Open(tp)
			if err != nil {
				tb.Fatalf("the tree's Open(%q): %v", tp, err)
			}
			want := make([]byte, c.Size())
			if n, err := c.ReadAt(want, 0); n != len(want) && err != io.EOF {
				tb.Fatalf("the tree's %q: %v", tp, err)
			}
			if cl, ok := c.(io.Closer); ok {
				cl.Close()
			}
			if !bytes.Equal(got, want) {
				tb.Errorf("%s: %d bytes that differ from the tree's %d", mp, len(got), len(want))
			}
			files++
		}
	}
	walk("")
	return files
}

// checkXattrs checks the extended attributes of the mounted path p
// against entry e: every one of e.XAttrs, and e.Attrs as user.bloscfs.*.
func checkXattrs(tb testing.TB, p string, e pack.TreeEntry) {
	tb.Helper()
	buf := make([]byte, 64<<10)
	n, err := unix.Listxattr(p, buf)
	if err != nil {
		tb.Errorf("listxattr %s: %v", p, err)
		return
	}
	names := strings.Split(strings.TrimSuffix(string(buf[:n]), "\x00"), "\x00")
	want := map[string][]byte{}
	for k, v := range e.XAttrs {
		want[k] = v
	}
	for k, v := range e.Attrs {
		want["user.bloscfs."+k] = []byte(v)
	}
	for k, v := range want {
		if !slices.Contains(names, k) {
			tb.Errorf("%s: listxattr lacks %s (has %q)", p, k, names)
			continue
		}
		n, err := unix.Getxattr(p, k, buf)
		if err != nil || !bytes.Equal(buf[:n], v) {
			tb.Errorf("%s: %s = %q, %v; want %q", p, k, buf[:max(n, 0)], err, v)
		}
	}
}
