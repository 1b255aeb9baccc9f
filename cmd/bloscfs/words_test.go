package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/fixtures"
)

// TestErrorsInPlainWords: the errors a user meets name the file and the
// problem without a Go package's name: no exported sentinel error of the
// module starts with one, and verify and info of every invalid fixture
// print none.
func TestErrorsInPlainWords(t *testing.T) {
	sentinel := regexp.MustCompile(`(Err\w+)\s*=\s*errors\.New\("(\w+): `)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range sentinel.FindAllStringSubmatch(string(b), -1) {
			t.Errorf("%s: %s starts with %q: the messages users see must not name a package", p, m[1], m[2]+":")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	leak := regexp.MustCompile(`\b(blosc|blosclz|pack|frame|bloscpack|remote|cache): `)
	invalid, _ := filepath.Glob(filepath.Join(fixtures.Dir(), "invalid_*"))
	if len(invalid) < 10 {
		t.Fatalf("%d invalid fixtures", len(invalid))
	}
	for _, cmd := range []string{"verify", "info"} {
		r := bloscfs(t, append([]string{cmd}, invalid...)...)
		out := strings.ReplaceAll(string(r.stdout)+string(r.stderr), "bloscfs "+cmd+": ", "")
		for _, p := range invalid {
			out = strings.ReplaceAll(out, p, "FILE")
		}
		if r.code != 1 || !strings.Contains(out, "not a Blosc container") {
			t.Errorf("%s of the invalid fixtures: exit %d, %s", cmd, r.code, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if leak.MatchString(line) {
				t.Errorf("%s: a package name in %q", cmd, line)
			}
		}
	}
}
