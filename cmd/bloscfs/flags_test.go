package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// commandOperands are operands that make each command run far enough to
// check its flags, and no further (nothing there exists).
var commandOperands = map[string][]string{
	"mount":   {"/nonexistent/src", "/nonexistent/mnt"},
	"unmount": {"/nonexistent/mnt"},
	"stats":   {"/nonexistent/mnt"},
	"pack":    {"/nonexistent/in"},
	"unpack":  {"/nonexistent/in.blp"},
	"info":    {"/nonexistent/in.blp"},
	"verify":  {"/nonexistent/in.blp"},
}

// freeFlags take any value: a file, a URL, a region, a directory, or
// -o's options (checked one by one in TestMountHelperForm).
var freeFlags = map[string]bool{"options": true, "log": true, "endpoint": true, "region": true, "cache-dir": true}

// valueFlags returns the long flags `bloscfs help cmd` lists with the
// name of their value ("" for a flag without one).
func valueFlags(t *testing.T, cmd string) map[string]string {
	t.Helper()
	h := bloscfs(t, "help", cmd)
	flags := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)(?: ([A-Za-z]+))?\s`).FindAllStringSubmatch(string(h.stdout), -1) {
		flags[m[1]] = m[2]
	}
	return flags
}

// TestFlagErrors: every flag of every command given a value it does not
// take is refused with exit 2 and one line that names the flag and the
// value and says in words what it takes, with no package name or Go
// function in it; a flag of a few values lists them.
func TestFlagErrors(t *testing.T) {
	lists := map[string]string{
		"codec": "blosclz, lz4, lz4hc, zlib or zstd", "new-format": "b2frame, blp or none",
		"format": "b2frame, blp or b2nd", "checksum": "None, adler32, crc32, md5, sha1",
		"s3-path-style": "true or false", "filter": "shuffle, bitshuffle, none",
	}
	leaks := regexp.MustCompile(`usage:|strconv|\b(blosc|pack|frame|bloscpack|remote|pflag): `)
	checked := 0
	for cmd, operands := range commandOperands {
		for flag := range valueFlags(t, cmd) {
			if freeFlags[flag] || flag == "help" {
				continue
			}
			args := append([]string{cmd, "--" + flag + "=foo"}, operands...)
			r := bloscfs(t, args...)
			line, _, _ := strings.Cut(string(r.stderr), "\n")
			want := "bloscfs " + cmd + ": --" + flag + ` "foo": `
			if r.code != 2 || !strings.HasPrefix(line, want) || len(line) < len(want)+8 || leaks.MatchString(line[len("bloscfs "+cmd+": "):]) {
				t.Errorf("%s: exit %d, %q; want exit 2 and %q followed by what the flag takes", strings.Join(args, " "), r.code, line, want)
			}
			if l, ok := lists[flag]; ok && !strings.Contains(line, l) {
				t.Errorf("%s: %q does not list %s", strings.Join(args, " "), line, l)
			}
			checked++
		}
	}
	if checked < 30 {
		t.Errorf("only %d flags checked", checked)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mount", "--codec", "snappy"}, `--codec "snappy": snappy is read but not written`},
		{[]string{"mount", "-o", "codec=foo"}, `--codec "foo": not a codec: use blosclz, lz4, lz4hc, zlib or zstd`},
		{[]string{"mount", "-o", "clevel=foo"}, `-o clevel=foo: not a whole number`},
		{[]string{"mount", "--clevel", "12"}, `--clevel "12": a compression level is 0 (none) to 9 (most)`},
		{[]string{"pack", "--clevel", "12"}, `--clevel "12": a compression level is 0 (none) to 9 (most)`},
		{[]string{"pack", "--typesize", "0"}, `--typesize "0": an element size is 1 to 255 bytes`},
		{[]string{"pack", "--filter", "truncprec:20,shuffle", "--typesize", "2"}, `--filter "truncprec:20,shuffle" with --typesize 2: trunc_prec needs typesize 4 or 8`},
		{[]string{"pack", "--format", "blp", "--filter", "delta,shuffle"}, `Bloscpack files hold Blosc1 chunks, which take one filter`},
		{[]string{"pack", "--block-size", "65MiB"}, `--block-size "65MiB": takes a size`},
		{[]string{"pack", "--chunkshape", "10,x"}, `--chunkshape "10,x": a shape is whole numbers`},
	} {
		cmd := c.args[0]
		r := bloscfs(t, append(c.args, commandOperands[cmd]...)...)
		line, _, _ := strings.Cut(string(r.stderr), "\n")
		if r.code != 2 || !strings.Contains(line, c.want) || leaks.MatchString(strings.TrimPrefix(line, "bloscfs "+cmd+": ")) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", c.args, r.code, line, c.want)
		}
	}
}

// TestFlagsUsed: each command lists only the object-store flags it uses
// (a one-shot command no listing or range cache), refuses the others,
// and its bash and zsh completions offer exactly the flags of its help.
func TestFlagsUsed(t *testing.T) {
	cacheFlags := []string{"dir-cache", "remote-cache-size", "cache-dir", "cache-dir-size"}
	for cmd, want := range map[string][]string{
		"mount": cacheFlags, "unpack": cacheFlags[1:], "verify": cacheFlags[1:], "pack": nil, "info": nil,
	} {
		flags := valueFlags(t, cmd)
		for _, f := range cacheFlags {
			_, listed := flags[f]
			if listed != slices.Contains(want, f) {
				t.Errorf("help %s lists --%s: %v, want %v", cmd, f, listed, !listed)
			}
			if !listed {
				r := bloscfs(t, append([]string{cmd, "--" + f, "1"}, commandOperands[cmd]...)...)
				if r.code != 2 || !strings.Contains(string(r.stderr), "unknown flag: --"+f) {
					t.Errorf("%s --%s: exit %d, %s", cmd, f, r.code, r.stderr)
				}
			}
		}
	}
	zsh, err := os.ReadFile(filepath.Join(root, "completion/_bloscfs"))
	if err != nil {
		t.Fatal(err)
	}
	arrays := map[string]string{}
	for _, m := range regexp.MustCompile(`(?s)local -a (\w+)=\(\n(.*?)\n\t\)`).FindAllStringSubmatch(string(zsh), -1) {
		arrays[m[1]] = m[2]
	}
	for cmd := range commandOperands {
		var help []string
		for f := range valueFlags(t, cmd) {
			help = append(help, "--"+f)
		}
		sort.Strings(help)
		script := `source completion/bloscfs.bash; COMP_WORDS=(bloscfs ` + cmd + ` --); COMP_CWORD=2; _bloscfs; printf '%s\n' "${COMPREPLY[@]}"`
		c := exec.Command("bash", "-c", script)
		c.Dir = root
		out, err := c.Output()
		if err != nil {
			t.Fatalf("bash completion of %s: %v", cmd, err)
		}
		if got := longFlags(string(out), `(?m)^(--[a-z][a-z0-9-]*)$`); !slices.Equal(got, sorted(append(slices.Clone(help), "--help"))) {
			t.Errorf("bash completion of %s offers %v; help lists %v", cmd, got, help)
		}
		branch := regexp.MustCompile(`(?s)\n\t(?:\w+\|)*` + cmd + `(?:\|\w+)*\)(.*?);;`).FindStringSubmatch(string(zsh))
		if branch == nil {
			t.Errorf("zsh completion: no branch for %s", cmd)
			continue
		}
		text := regexp.MustCompile(`\$(\w+)`).ReplaceAllStringFunc(branch[1], func(v string) string { return arrays[v[1:]] })
		if got := longFlags(text, `['"{,](--[a-z][a-z0-9-]*)`); !slices.Equal(got, help) {
			t.Errorf("zsh completion of %s offers %v; help lists %v", cmd, got, help)
		}
	}
}

// longFlags returns the sorted, distinct first groups of re in text.
func longFlags(text, re string) []string {
	var out []string
	for _, m := range regexp.MustCompile(re).FindAllStringSubmatch(text, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	sort.Strings(out)
	return out
}

// sorted sorts list and returns it.
func sorted(list []string) []string {
	sort.Strings(list)
	return list
}
