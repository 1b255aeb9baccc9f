package testkit

import (
	"archive/zip"
	"bytes"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/zipread"
)

// kitPath is the import path of the test kit and its subpackages.
const kitPath = "github.com/bloscfs/bloscfs/internal/testkit"

// kitImporters returns "file: import" for every Go file under root that
// the program may be built from (not a _test.go file, not in the test
// kit, not under testdata) and imports the test kit, whatever its build
// constraints. No such file means that no package of the program
// depends on the kit: a package reaches the kit only through a file
// that imports it.
func kitImporters(root string) ([]string, error) {
	var bad []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				filepath.ToSlash(rel) == "internal/testkit") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == kitPath || strings.HasPrefix(p, kitPath+"/") {
				bad = append(bad, filepath.ToSlash(rel)+": "+p)
			}
		}
		return nil
	})
	return bad, err
}

// TestOnlyTestsImportKit: no file of the program imports the test kit
// (go list -deps ./cmd/bloscfs names no package of it).
func TestOnlyTestsImportKit(t *testing.T) {
	bad, err := kitImporters(ModuleRoot())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("%s: only tests may import the test kit", b)
	}
}

// TestKitImportersSeesOne: the check above finds a program file that
// imports the kit, under any build constraint, and passes over tests,
// the kit itself and testdata.
func TestKitImportersSeesOne(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"fs/read.go":                    "//go:build linux && purego\n\npackage fs\n\nimport (\n\t\"os\"\n\tkit \"" + kitPath + "/fixtures\"\n)\n",
		"fs/read_test.go":               "package fs\n\nimport \"" + kitPath + "\"\n",
		"pack/pack.go":                  "package pack\n\nimport \"fmt\"\n",
		"internal/testkit/mounts.go":    "package testkit\n\nimport \"" + kitPath + "/fixtures\"\n",
		"zarr/testdata/gen/gen.go":      "package main\n\nimport \"" + kitPath + "\"\n",
		"cmd/bloscfs/main.go":           "package main\n\nimport \"" + kitPath + "\"\n",
		"internal/testkitten/kitten.go": "package testkitten\n\nimport \"" + kitPath + "kitten\"\n",
	}
	for name, src := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bad, err := kitImporters(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"cmd/bloscfs/main.go: " + kitPath, "fs/read.go: " + kitPath + "/fixtures"}
	if strings.Join(bad, "\n") != strings.Join(want, "\n") {
		t.Errorf("found %q, want %q", bad, want)
	}
}

// TestEventually: a condition met later is waited for; one never met
// gives false once the timeout has passed, not much later.
func TestEventually(t *testing.T) {
	var n atomic.Int32
	if !Eventually(t, 10*time.Second, func() bool { return n.Add(1) == 5 }) {
		t.Errorf("a condition met at the fifth call was not waited for")
	}
	start := time.Now()
	if Eventually(t, 50*time.Millisecond, func() bool { return false }) {
		t.Errorf("a condition never met was reported met")
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("gave up after %v, before the timeout of 50ms", d)
	}
}

// TestBuildZipManyMembers: an archive of more members than its end
// record can count carries ZIP64 end records: zipread counts every
// member, and archive/zip reads them as written.
func TestBuildZipManyMembers(t *testing.T) {
	const n = 0xffff + 2
	ms := make([]ZipMember, n)
	for i := range ms {
		ms[i] = ZipMember{Name: strconv.Itoa(i), Data: []byte{byte(i)}}
	}
	b := BuildZip(ms, nil)
	a, err := zipread.Open(bytes.NewReader(b), int64(len(b)), "many.zip")
	if err != nil || a.Len() != n {
		t.Fatalf("zipread: %v; want %d members", err, n)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil || len(zr.File) != n {
		t.Fatalf("%v; want %d members", err, n)
	}
	for _, i := range []int{0, 0xffff, n - 1} {
		f := zr.File[i]
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if f.Name != strconv.Itoa(i) || err != nil || !bytes.Equal(got, []byte{byte(i)}) {
			t.Errorf("member %d: %s %v, %v", i, f.Name, got, err)
		}
	}
}
