package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	bfs "github.com/bloscfs/bloscfs/fs"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
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

// TestOneRatio: pack, info and unpack give a .b2nd array the same ratio,
// plain bytes (its .npy file) ÷ stored bytes, and info shows the chunks'
// padded size apart, labelled.
func TestOneRatio(t *testing.T) {
	dir := t.TempDir()
	npy, b2nd := filepath.Join(dir, "a.npy"), filepath.Join(dir, "a.b2nd")
	writeNPY(t, npy, 100000)
	ratioRE := regexp.MustCompile(`\(ratio ([0-9.]+)\)`)
	ratio := func(what string, out []byte) string {
		t.Helper()
		m := ratioRE.FindSubmatch(out)
		if m == nil {
			t.Fatalf("%s: no ratio in %q", what, out)
		}
		return string(m[1])
	}
	r := bloscfs(t, "pack", "--chunkshape", "30000", "--blockshape", "5000", npy, b2nd)
	packed := ratio("pack", r.stderr)
	r = bloscfs(t, "info", b2nd)
	if got := ratio("info", r.stdout); got != packed {
		t.Errorf("info's ratio %s, pack's %s", got, packed)
	}
	if want := "the chunks hold 960000 bytes padded to whole chunks"; !strings.Contains(string(r.stdout), want) {
		t.Errorf("info: no %q in\n%s", want, r.stdout)
	}
	r = bloscfs(t, "unpack", b2nd, filepath.Join(dir, "b.npy"))
	if got := ratio("unpack", r.stderr); got != packed {
		t.Errorf("unpack's ratio %s, pack's %s", got, packed)
	}
	r = bloscfs(t, "info", "--json", b2nd)
	st, _ := os.Stat(npy)
	if want := `"size": ` + strconv.FormatInt(st.Size(), 10) + ","; !strings.Contains(string(r.stdout), want) || !strings.Contains(string(r.stdout), `"padded_size": 960000,`) {
		t.Errorf("info --json: want %s and padded_size 960000 in\n%s", want, r.stdout)
	}
}

// TestStatsText: stats prints its figures in one column after the
// labels, whatever the codec names, with singulars for one, and says in
// words what the read-ahead counters count.
func TestStatsText(t *testing.T) {
	s := bfs.Stats{Source: "/data", UptimeSeconds: 12}
	s.Cache.Hits, s.Cache.Misses, s.Cache.Loads, s.Cache.Entries = 1, 1, 1, 1
	s.Codecs = map[string]bfs.CodecStat{
		"blosclz": {Blocks: 1, DecodedBytes: 1 << 20, DecodeSeconds: 0.01},
		"lz4":     {Blocks: 2, DecodedBytes: 2 << 20, DecodeSeconds: 0.01},
	}
	s.ReadAhead.Runs, s.ReadAhead.Hits = 1, 1
	s.Remote = &bfs.RemoteStats{Requests: 1}
	var b strings.Builder
	printStats(&b, "/mnt", s)
	text := b.String()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	figure := regexp.MustCompile(`^  (?:\S[^:]*:)?\s+\S`)
	col := -1
	for _, line := range lines[1:] {
		i := len(figure.FindString(line)) - 1
		if col < 0 {
			col = i
		}
		if i < 0 || i != col {
			t.Errorf("stats: %q starts its figures at column %d, not %d:\n%s", line, i, col, text)
		}
	}
	for _, bad := range []string{"1 blocks", "1 hits", "1 misses", "1 decodes", "1 requests", "1 READs", "found their bytes asked for"} {
		if strings.Contains(text, bad) {
			t.Errorf("stats says %q:\n%s", bad, text)
		}
	}
	for _, want := range []string{"1 hit, 1 miss", "decode blosclz:", "1 block, ", "1 READ found all its bytes already decoded"} {
		if !strings.Contains(text, want) {
			t.Errorf("stats does not say %q:\n%s", want, text)
		}
	}
}

// TestExamplesReproduce: examples/make-examples.sh, run with this
// binary, makes the bundled example files byte for byte (it gives pack
// every parameter, so that a change of defaults does not drift them).
func TestExamplesReproduce(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(root, "examples", "make-examples.sh"), out)
	cmd.Env = append(os.Environ(), "BLOSCFS="+binary)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make-examples.sh: %v\n%s", err, b)
	}
	names := []string{"server-log.blp", "temperatures.b2frame", "grid.b2nd", "station.b2z", "ocean.zarr.zip"}
	filepath.WalkDir(filepath.Join(root, "examples", "weather.zarr"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(filepath.Join(root, "examples"), p)
			names = append(names, rel)
		}
		return err
	})
	if len(names) < 9 {
		t.Fatalf("examples/weather.zarr holds %d files; want the store make-examples.sh writes", len(names)-4)
	}
	for _, name := range names {
		want, err := os.ReadFile(filepath.Join(root, "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("make-examples.sh makes a %s of %d bytes that differs from the bundled one (%d bytes): run it and commit the result", name, len(got), len(want))
		}
	}
}
