package fs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fakes3"
	"github.com/bloscfs/bloscfs/internal/testkit/faketree"
)

// treeSource writes a source directory holding every kind of tree, and
// returns the files each mount must show, by view path.
func treeSource(t *testing.T, src string) map[string]string {
	t.Helper()
	write := func(name, content string) {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("group.ftree", "FTREE\na\talpha\nsub/b\tbeta\nsub/deeper/c\tgamma\nsub/broken\tx\n")
	write("arr.fnpy", "FNPY\narray bytes")
	write("clash.fnpy", "FNPY\nclashing array")
	write("clash.npy", "a plain file")
	write("junk.ftree", "not a tree")
	write("quiet.ftree", "PLAIN other data")
	write("store.fdir/x", "ex")
	write("store.fdir/d/y", "why")
	write("plain.fdir/bad", "b")
	write("plain.txt", "plain")
	return map[string]string{
		"group.ftree/a":            "alpha",
		"group.ftree/sub/b":        "beta",
		"group.ftree/sub/deeper/c": "gamma",
		"arr.npy":                  "array bytes",
		"clash.fnpy":               "clashing array",
		"clash.npy":                "a plain file",
		"junk.ftree":               "not a tree",
		"store.fdir/x":             "ex",
		"store.fdir/d/y":           "why",
		"plain.fdir/bad":           "b",
		"plain.txt":                "plain",
	}
}

// checkTrees checks a mount of treeSource's files: names, kinds, bytes,
// attributes, and that the trees are read-only.
func checkTrees(t *testing.T, mnt string, want map[string]string, logs *syncBuffer) {
	t.Helper()
	ents, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, e := range ents {
		kinds[e.Name()] = e.IsDir()
	}
	for name, dir := range map[string]bool{"group.ftree": true, "arr.npy": false, "clash.fnpy": false, "clash.npy": false, "junk.ftree": false, "store.fdir": true, "plain.fdir": true, "plain.txt": false} {
		if got, ok := kinds[name]; !ok || got != dir {
			t.Errorf("%s: listed %v (dir %v), want dir %v; listing %v", name, ok, got, dir, kinds)
		}
	}
	for _, gone := range []string{"arr.fnpy", "group.npy"} {
		if _, ok := kinds[gone]; ok {
			t.Errorf("%s listed", gone)
		}
	}
	for p, content := range want {
		b, err := os.ReadFile(filepath.Join(mnt, p))
		if err != nil || string(b) != content {
			t.Errorf("%s: %q, %v; want %q", p, b, err, content)
		}
		st, err := os.Stat(filepath.Join(mnt, p))
		if err != nil || st.Size() != int64(len(content)) || !st.Mode().IsRegular() {
			t.Errorf("stat %s: %v %v", p, st, err)
		}
	}
	sub, err := os.ReadDir(filepath.Join(mnt, "group.ftree", "sub"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range sub {
		names = append(names, fmt.Sprintf("%s %v", e.Name(), e.IsDir()))
	}
	if !slices.Equal(names, []string{"b false", "broken false", "deeper true"}) {
		t.Errorf("group.ftree/sub lists %v", names)
	}
	// Attributes: how a file is stored, the tree's own.
	var x [256]byte
	for attr, want := range map[string]string{"user.fake.len": "5", "user.bloscfs.format": "fake", "user.bloscfs.kind": "leaf"} {
		n, err := syscall.Getxattr(filepath.Join(mnt, "group.ftree", "a"), attr, x[:])
		if err != nil || string(x[:n]) != want {
			t.Errorf("%s of a: %q %v, want %q", attr, x[:max(n, 0)], err, want)
		}
	}
	if n, err := syscall.Getxattr(filepath.Join(mnt, "group.ftree"), "user.fake.root", x[:]); err != nil || string(x[:n]) != `"yes"` {
		t.Errorf("user.fake.root of the tree: %q %v", x[:max(n, 0)], err)
	}
	n, err := syscall.Listxattr(filepath.Join(mnt, "group.ftree", "a"), x[:])
	if err != nil || !bytes.Contains(x[:n], []byte("user.fake.len\x00")) || !bytes.Contains(x[:n], []byte("user.bloscfs.kind\x00")) {
		t.Errorf("listxattr of a: %q %v", x[:max(n, 0)], err)
	}
	// A leaf that does not open: EIO and a log line naming it.
	if _, err := os.ReadFile(filepath.Join(mnt, "group.ftree", "sub", "broken")); !errors.Is(err, syscall.EIO) {
		t.Errorf("reading a broken leaf: %v, want EIO", err)
	}
	if !testkit.Eventually(t, 5*time.Second, func() bool { return strings.Contains(logs.String(), "sub/broken") }) {
		t.Errorf("no log line names the broken leaf: %s", logs.String())
	}
	// Read-only.
	for what, err := range map[string]error{
		"create":   os.WriteFile(filepath.Join(mnt, "group.ftree", "new"), []byte("x"), 0o644),
		"write":    os.WriteFile(filepath.Join(mnt, "group.ftree", "a"), []byte("x"), 0o644),
		"mkdir":    os.Mkdir(filepath.Join(mnt, "group.ftree", "d"), 0o755),
		"unlink":   os.Remove(filepath.Join(mnt, "group.ftree", "a")),
		"rename":   os.Rename(filepath.Join(mnt, "group.ftree", "a"), filepath.Join(mnt, "group.ftree", "z")),
		"truncate": os.Truncate(filepath.Join(mnt, "store.fdir", "x"), 0),
		"setxattr": syscall.Setxattr(filepath.Join(mnt, "group.ftree", "a"), "user.x", []byte("1"), 0),
	} {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s in a tree: %v, want EROFS", what, err)
		}
	}
}

// TestMountTrees mounts a directory holding trees of each kind.
func TestMountTrees(t *testing.T) {
	src := t.TempDir()
	want := treeSource(t, src)
	mnt, logs := mountSource(t, src)
	checkTrees(t, mnt, want, logs)
	if !strings.Contains(logs.String(), "junk.ftree: shown as it is stored") || !strings.Contains(logs.String(), "plain.fdir: shown as it is stored") {
		t.Errorf("no log line for the files named as trees that are none: %s", logs.String())
	}
	if strings.Contains(logs.String(), "quiet.ftree") {
		t.Errorf("a file plainly of another kind is logged: %s", logs.String())
	}

	// A new version of a tree: a listing drops the old name, and the
	// lookup after it opens the new version.
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(src, "group.ftree"), []byte("FTREE\na\tnew alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadDir(mnt); err != nil {
		t.Fatal(err)
	}
	if !testkit.Eventually(t, 5*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(mnt, "group.ftree", "a"))
		return string(b) == "new alpha"
	}) {
		b, err := os.ReadFile(filepath.Join(mnt, "group.ftree", "a"))
		t.Errorf("after the tree changed: %q %v", b, err)
	}
	// A tree that stops being one is shown as it is stored.
	if err := os.WriteFile(filepath.Join(src, "arr.fnpy"), []byte("no more"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !testkit.Eventually(t, 5*time.Second, func() bool {
		ents, _ := os.ReadDir(mnt)
		return slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.Name() == "arr.fnpy" })
	}) {
		t.Errorf("arr.fnpy, no longer a tree, is not listed")
	}
}

// TestRemoteTrees shows the same objects in a bucket.
func TestRemoteTrees(t *testing.T) {
	src := t.TempDir()
	want := treeSource(t, src)
	srv := fakes3.New("bkt")
	t.Cleanup(srv.Close)
	filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			rel, _ := filepath.Rel(src, p)
			b, _ := os.ReadFile(p)
			srv.Put(filepath.ToSlash(rel), b)
		}
		return err
	})
	mnt, logs, _ := mountBucket(t, srv, "")
	checkTrees(t, mnt, want, logs)
}

// TestTreeCache opens more trees than the cache keeps: each reads right
// while evicted ones close once the kernel has forgotten their nodes.
func TestTreeCache(t *testing.T) {
	var c treeCache
	opened := 0
	open := func(i int) func() (*openTree, error) {
		return func() (*openTree, error) {
			opened++
			tr := &faketree.Tree{Name: fmt.Sprint(i), Files: map[string][]byte{"x": []byte("x")}}
			faketree.Open.Add(1)
			return &openTree{t: tr, mem: maxTreeBytes / 4}, nil
		}
	}
	before := faketree.Open.Load()
	held, err := c.get("k0", open(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 10; i++ {
		ot, err := c.get(fmt.Sprint("k", i), open(i))
		if err != nil {
			t.Fatal(err)
		}
		ot.release()
	}
	if got := faketree.Open.Load() - before; got != 5 {
		t.Errorf("%d trees open, want 5: the 4 the cache keeps and the one held", got)
	}
	if _, err := held.readDir(""); err != nil {
		t.Errorf("an evicted tree still held does not read: %v", err)
	}
	held.release()
	if got := faketree.Open.Load() - before; got != 4 {
		t.Errorf("%d trees open after the last hold went, want 4", got)
	}
	if _, err := c.get("k9", open(9)); err != nil || opened != 10 {
		t.Errorf("a cached tree opened again: %d opens, %v", opened, err)
	}
	c.drop()
	if got := faketree.Open.Load() - before; got != 1 {
		t.Errorf("%d trees open after drop, want the 1 still held", got)
	}
}
