package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
)

var binary string

// TestMain builds the command once; the tests run the real binary.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bloscfs-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "bloscfs")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building bloscfs: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr []byte
	code           int
}

func bloscfs(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.Bytes(), errb.Bytes(), code}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestUnpackFixtures: `bloscfs unpack F -` matches the manifest for every
// valid fixture (a .b2nd gives the .npy bytes, whose data part is the
// C-order array), and `verify` accepts it.
func TestUnpackFixtures(t *testing.T) {
	all, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fx := range all {
		if !fx.ValidPlain {
			continue
		}
		n++
		t.Run(fx.Name, func(t *testing.T) {
			t.Parallel() // each runs two processes: one runs while the other starts
			r := bloscfs(t, "unpack", fx.Path, "-")
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			got := r.stdout
			if fx.Kind == "b2nd" {
				if !bytes.HasPrefix(got, []byte("\x93NUMPY")) {
					t.Fatal("no NPY header")
				}
				hl := int(got[8]) | int(got[9])<<8
				got = got[10+hl:]
			}
			if int64(len(got)) != fx.PlainSize || sha(got) != fx.PlainSHA {
				t.Fatalf("%d bytes sha %s, want %d sha %s", len(got), sha(got), fx.PlainSize, fx.PlainSHA)
			}
			if v := bloscfs(t, "verify", fx.Path); v.code != 0 {
				t.Fatalf("verify exit %d: %s%s", v.code, v.stdout, v.stderr)
			}
		})
	}
	if n < 130 {
		t.Fatalf("only %d valid fixtures", n)
	}
}

// TestVerifyInvalid: verify exits 1 on every invalid fixture, with one
// line naming the file.
func TestVerifyInvalid(t *testing.T) {
	all, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fx := range all {
		if !fx.IsInvalid {
			continue
		}
		n++
		r := bloscfs(t, "verify", fx.Path)
		lines := strings.Split(strings.TrimSpace(string(r.stdout)), "\n")
		if r.code != 1 || len(lines) != 2 || !strings.HasPrefix(lines[0], "FAIL "+fx.Path+": ") {
			t.Errorf("%s: exit %d, output %q", fx.Name, r.code, r.stdout)
		}
		u := bloscfs(t, "unpack", fx.Path, "-")
		if u.code != 1 || strings.Count(string(u.stderr), "\n") != 1 || !strings.Contains(string(u.stderr), fx.Name) {
			t.Errorf("%s: unpack exit %d, stderr %q", fx.Name, u.code, u.stderr)
		}
	}
	if n < 13 {
		t.Fatalf("only %d invalid fixtures", n)
	}
	// A directory walk reports them too, and exits 1.
	r := bloscfs(t, "verify", "--json", fixtures.Dir())
	var recs []verifyRecord
	if err := json.Unmarshal(r.stdout, &recs); err != nil || r.code != 1 {
		t.Fatalf("verify --json: exit %d, %v", r.code, err)
	}
	bad := 0
	for _, rec := range recs {
		if !rec.OK {
			bad++
		}
	}
	if bad != n {
		t.Fatalf("directory walk: %d failures, want %d", bad, n)
	}
}

// TestPackRoundTrip packs a file in both formats with several settings and
// unpacks it again.
func TestPackRoundTrip(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "data.bin")
	var src bytes.Buffer
	for i := 0; src.Len() < 3<<20+77; i++ {
		fmt.Fprintf(&src, "%d,%f,sensor-%d\n", i, float64(i)*0.25, i%17)
	}
	if err := os.WriteFile(in, src.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for k, args := range [][]string{
		{"--format", "b2frame"},
		{"--format", "blp"},
		{"--format", "blp", "--codec", "zstd", "--checksum", "sha256", "--chunk-size", "256KiB"},
		{"--codec", "lz4", "--filter", "bitshuffle", "--typesize", "4", "--chunk-size", "300000"},
		{"--codec", "zlib", "--clevel", "9", "--filter", "delta,shuffle"},
		{"--codec", "blosclz", "--filter", "none", "--typesize", "1"},
		{"--codec", "lz4", "--block-size", "64KiB"},
		{"--format", "blp", "--block-size", "100000"},
	} {
		out := filepath.Join(dir, fmt.Sprintf("packed%d", k))
		r := bloscfs(t, append(append([]string{"pack"}, args...), in, out)...)
		if r.code != 0 {
			t.Fatalf("pack %v: exit %d: %s", args, r.code, r.stderr)
		}
		u := bloscfs(t, "unpack", out, "-")
		if u.code != 0 || !bytes.Equal(u.stdout, src.Bytes()) {
			t.Fatalf("pack %v: unpack exit %d, %d bytes back of %d", args, u.code, len(u.stdout), src.Len())
		}
		i := bloscfs(t, "info", "--json", out)
		if i.code != 0 {
			t.Fatalf("info: %s", i.stderr)
		}
		// --block-size is what the chunks hold.
		for j, a := range args {
			if a == "--block-size" {
				bs, _ := parseSize(args[j+1])
				if want := fmt.Sprintf(`"blocksize": %d,`, bs); !bytes.Contains(i.stdout, []byte(want)) {
					t.Errorf("pack %v: info has no %s: %s", args, want, i.stdout)
				}
			}
		}
		// No temp file is left behind.
		if m, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(m) != 0 {
			t.Fatalf("temp files left: %v", m)
		}
	}
	// Existing outputs are not overwritten without -f.
	r := bloscfs(t, "pack", in, filepath.Join(dir, "packed0"))
	if r.code != 1 || !strings.Contains(string(r.stderr), "already exists") {
		t.Fatalf("overwrite: exit %d, %s", r.code, r.stderr)
	}
	// A device is written in place, never replaced.
	if r := bloscfs(t, "unpack", filepath.Join(dir, "packed0"), "/dev/null"); r.code != 0 {
		t.Fatalf("unpack to /dev/null: %s", r.stderr)
	}
	if st, err := os.Stat("/dev/null"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a device: %v", st.Mode())
	}
	// Default names: IN.b2frame, and unpack drops the suffix.
	if r := bloscfs(t, "pack", in); r.code != 0 {
		t.Fatal(string(r.stderr))
	}
	os.Rename(in, in+".orig")
	if r := bloscfs(t, "unpack", in+".b2frame"); r.code != 0 {
		t.Fatal(string(r.stderr))
	}
	if got, _ := os.ReadFile(in); !bytes.Equal(got, src.Bytes()) {
		t.Fatal("default-named unpack differs")
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{}, {"frobnicate"}, {"pack"}, {"pack", "--codec", "snappy", "x"}, {"pack", "--clevel", "12", "x"},
		{"pack", "--filter", "rot13", "x"}, {"pack", "--chunk-size", "lots", "x"},
		{"pack", "--block-size", "0", "x"}, {"pack", "--block-size", "65MiB", "x"}, {"pack", "--block-size", "big", "x"}, {"unpack"}, {"info"}, {"verify"},
	} {
		if r := bloscfs(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
	if r := bloscfs(t, "unpack", "/nonexistent/file.blp", "-"); r.code != 1 || !strings.Contains(string(r.stderr), "/nonexistent/file.blp") {
		t.Errorf("missing file: exit %d, %s", r.code, r.stderr)
	}
}

// TestPackDefaultBlockSize: new frames get c-blosc2's block size capped
// at 256 KiB (512 KiB for the python-blosc2 defaults at typesize 8),
// Bloscpack files bloscpack's, and --block-size auto c-blosc2's own.
func TestPackDefaultBlockSize(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, bytes.Repeat([]byte("0.125,2.5,17\n"), 300000), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, 256 << 10},
		{[]string{"--block-size", "auto"}, 512 << 10},
		{[]string{"--clevel", "9"}, 256 << 10},
		{[]string{"--codec", "lz4", "--typesize", "1"}, 64 << 10},
		{[]string{"--format", "blp"}, 1 << 20},
	} {
		out := filepath.Join(dir, "out")
		if r := bloscfs(t, append(append([]string{"pack", "-f", "-q"}, c.args...), in, out)...); r.code != 0 {
			t.Fatalf("pack %v: %s", c.args, r.stderr)
		}
		r := bloscfs(t, "info", "--json", out)
		var infos []struct{ Blocksize int }
		if err := json.Unmarshal(r.stdout, &infos); err != nil || len(infos) != 1 {
			t.Fatalf("info --json: %v: %s", err, r.stdout)
		}
		if infos[0].Blocksize != c.want {
			t.Errorf("pack %v: blocksize %d, want %d", c.args, infos[0].Blocksize, c.want)
		}
	}
}
