package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit/faketree"
)

// treeFixtures writes trees of faketree's formats into a new directory.
func treeFixtures(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	for name, content := range map[string]string{
		"data/group.ftree":  "FTREE\na\talpha\nsub/b\tbeta\nsub/broken\tx\n",
		"data/arr.fnpy":     "FNPY\narray bytes",
		"data/junk.ftree":   "not a tree",
		"data/store.fdir/x": "ex",
		"data/plain.txt":    "plain",
	} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// TestTreeCommands runs info, verify and unpack on trees and on paths
// inside them, as they run on containers.
func TestTreeCommands(t *testing.T) {
	_ = faketree.Open.Load()
	src := treeFixtures(t)
	data := filepath.Join(src, "data")
	run := func(cmd func([]string, *bytes.Buffer, *bytes.Buffer) error, args ...string) (string, string, error) {
		var out, errb bytes.Buffer
		err := cmd(args, &out, &errb)
		return out.String(), errb.String(), err
	}
	info := func(args []string, o, e *bytes.Buffer) error { return cmdInfo(args, o, e) }
	verify := func(args []string, o, e *bytes.Buffer) error { return cmdVerify(args, o, e) }
	unpack := func(args []string, o, e *bytes.Buffer) error { return cmdUnpack(args, o, e) }

	// info of a tree lists it and its files; of a path inside, that file.
	out, stderr, err := run(info, "--json", filepath.Join(data, "group.ftree"))
	if err != nil {
		t.Fatalf("info: %v %s", err, stderr)
	}
	var recs []map[string]any
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatal(err)
	}
	paths := map[string]any{}
	for _, r := range recs {
		paths[strings.TrimPrefix(r["path"].(string), data+"/")] = r["size"]
	}
	for p, size := range map[string]float64{"group.ftree": 10, "group.ftree/a": 5, "group.ftree/sub/b": 4, "group.ftree/sub/broken": 1} {
		if paths[p] != size {
			t.Errorf("info: %s has size %v, want %v (%v)", p, paths[p], size, paths)
		}
	}
	out, _, err = run(info, filepath.Join(data, "group.ftree", "sub", "b"))
	if err != nil || !strings.Contains(out, "group.ftree/sub/b: fake") || strings.Contains(out, "/a:") {
		t.Errorf("info of a path in a tree: %v %s", err, out)
	}
	// A walk of the directory takes every tree, and passes over a file
	// named as a tree that holds none.
	out, stderr, err = run(info, data)
	if err != nil || !strings.Contains(out, "store.fdir/x") || !strings.Contains(out, "arr.fnpy: fake") || strings.Contains(out+stderr, "junk") {
		t.Errorf("info of the directory: %v\n%s\n%s", err, out, stderr)
	}
	// Named on the command line, a file that holds no tree is an error.
	if _, stderr, err = run(info, filepath.Join(data, "junk.ftree")); err == nil || !strings.Contains(stderr, "junk.ftree") {
		t.Errorf("info of a file named as a tree that holds none: %v %s", err, stderr)
	}

	// verify reads every file; the leaf that does not open fails it.
	out, _, err = run(verify, filepath.Join(data, "group.ftree"))
	if err == nil || !strings.Contains(out, "OK   "+data+"/group.ftree/a") || !strings.Contains(out, "FAIL "+data+"/group.ftree/sub/broken") {
		t.Errorf("verify of a tree with a broken leaf: %v\n%s", err, out)
	}
	out, _, err = run(verify, filepath.Join(data, "store.fdir"), filepath.Join(data, "arr.fnpy"))
	if err != nil || !strings.Contains(out, "2 verified, 0 failed") {
		t.Errorf("verify of sound trees: %v\n%s", err, out)
	}

	// unpack: TREE/PATH, STORE KEY, a root file, to a file or stdout.
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		file string
		want string
	}{
		{[]string{filepath.Join(data, "group.ftree", "sub", "b"), filepath.Join(dir, "b1")}, "b1", "beta"},
		{[]string{filepath.Join(data, "group.ftree"), "/sub/b", filepath.Join(dir, "b2")}, "b2", "beta"},
		{[]string{filepath.Join(data, "group.ftree"), "sub/b", "-"}, "", "beta"},
		{[]string{filepath.Join(data, "arr.fnpy"), filepath.Join(dir, "arr")}, "arr", "array bytes"},
		{[]string{filepath.Join(data, "arr.fnpy")}, "", "array bytes"}, // default name: data/arr.npy
	} {
		out, stderr, err := run(unpack, append([]string{"-q"}, tc.args...)...)
		if err != nil {
			t.Errorf("unpack %v: %v %s", tc.args, err, stderr)
			continue
		}
		got := out
		switch {
		case tc.file != "":
			b, _ := os.ReadFile(filepath.Join(dir, tc.file))
			got = string(b)
		case tc.args[len(tc.args)-1] != "-":
			b, _ := os.ReadFile(filepath.Join(data, "arr.npy"))
			got = string(b)
		}
		if got != tc.want {
			t.Errorf("unpack %v: %q, want %q", tc.args, got, tc.want)
		}
	}
	if _, _, err := run(unpack, filepath.Join(data, "group.ftree"), "sub", "-"); err == nil || !strings.Contains(err.Error(), "directory of the tree") {
		t.Errorf("unpack of a directory of a tree: %v", err)
	}
	if _, _, err := run(unpack, filepath.Join(data, "group.ftree"), "nothing", "-"); err == nil {
		t.Errorf("unpack of a key the tree has not: no error")
	}
}
