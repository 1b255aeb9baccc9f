package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the module's root directory.
const root = "../.."

// commandFlags returns the long flags `bloscfs help CMD` lists.
func commandFlags(t *testing.T, cmd string) []string {
	t.Helper()
	h := bloscfs(t, "help", cmd)
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(string(h.stdout), -1) {
		flags = append(flags, m[1])
	}
	return flags
}

// TestDocsListFlags: the man page, both completions and the user guide
// (with docs/REMOTE.md for the object-store flags) know every flag of
// every command.
func TestDocsListFlags(t *testing.T) {
	docs := map[string]string{}
	guide, err := os.ReadFile(filepath.Join(root, "docs", "USER-GUIDE.md"))
	if err != nil {
		t.Fatal(err)
	}
	remote, err := os.ReadFile(filepath.Join(root, "docs", "REMOTE.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs["docs/USER-GUIDE.md and docs/REMOTE.md"] = string(guide) + string(remote)
	for _, f := range []string{"man/bloscfs.1", "completion/bloscfs.bash", "completion/_bloscfs"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = strings.ReplaceAll(string(b), `\-`, "-")
	}
	for _, cmd := range []string{"mount", "unmount", "stats", "pack", "unpack", "info", "verify"} {
		for _, flag := range commandFlags(t, cmd) {
			for f, text := range docs {
				if !strings.Contains(text, "--"+flag) {
					t.Errorf("%s does not mention %s --%s", f, cmd, flag)
				}
			}
		}
	}
}

// TestReadmeLinks: the README and docs/ point only at files of the
// repository.
func TestReadmeLinks(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md"))
	link := regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), m[1])); err != nil {
				t.Errorf("%s links to %s, which is not in the repository", f, m[1])
			}
		}
		for _, gone := range []string{"DESIGN.md", "PERF-NOTES"} {
			if strings.Contains(string(b), gone) {
				t.Errorf("%s mentions %s, which is not in the repository", f, gone)
			}
		}
	}
}

// TestMakeInstall: make install puts the binary, the man page and the
// completions under DESTDIR/PREFIX, and the binary knows its version.
func TestMakeInstall(t *testing.T) {
	dest := t.TempDir()
	cmd := exec.Command("make", "-s", "-C", root, "install", "DESTDIR="+dest, "VERSION=v0.0.0-test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, f := range []string{"bin/bloscfs", "share/man/man1/bloscfs.1", "share/bash-completion/completions/bloscfs", "share/zsh/site-functions/_bloscfs"} {
		if _, err := os.Stat(filepath.Join(dest, "usr/local", f)); err != nil {
			t.Errorf("make install: %v", err)
		}
	}
	if out := run1(t, filepath.Join(dest, "usr/local/bin/bloscfs"), "--version"); !strings.HasPrefix(out, "bloscfs v0.0.0-test\n") {
		t.Errorf("installed --version: %q", out)
	}
}

// TestMakeStopQuiet: make stop with nothing mounted says nothing and
// succeeds.
func TestMakeStopQuiet(t *testing.T) {
	for _, mnt := range []string{filepath.Join(t.TempDir(), "missing"), t.TempDir()} {
		out, err := exec.Command("make", "-s", "-C", root, "stop", "MNT="+mnt).CombinedOutput()
		if err != nil || len(out) != 0 {
			t.Errorf("make stop MNT=%s: %v, %q", mnt, err, out)
		}
	}
}

// TestReadmeFacts: the README stays a short page, and what it and
// CONTRIBUTING.md say of the machine it needs is what go.mod and the
// Makefile say: the Go version, the Debian packages make test installs,
// where versitygw goes. No page says python-blosc2 defaults to clevel 5
// (its default is 1).
func TestReadmeFacts(t *testing.T) {
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme, contributing, makefile, gomod := read("README.md"), read("CONTRIBUTING.md"), read("Makefile"), read("go.mod")
	if n := strings.Count(readme, "\n"); n > 250 {
		t.Errorf("README.md has %d lines; the details belong in docs/ (a user's page is at most about 250)", n)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(gomod)
	for f, text := range map[string]string{"README.md": readme, "CONTRIBUTING.md": contributing} {
		if goVersion == nil || !strings.Contains(text, "Go "+goVersion[1]+" or later") {
			t.Errorf("%s does not say Go %v or later, the version of go.mod", f, goVersion)
		}
	}
	apt := regexp.MustCompile(`(?m)^APT_PACKAGES := (.*)$`).FindStringSubmatch(makefile)
	if apt == nil || !strings.Contains(contributing, apt[1]) {
		t.Errorf("CONTRIBUTING.md does not list the Debian packages make test installs: %v", apt)
	}
	tools := regexp.MustCompile(`(?m)^TOOLS_DIR \?= \$\(HOME\)(\S+)$`).FindStringSubmatch(makefile)
	vgw := regexp.MustCompile(`(?m)^VERSITYGW_VERSION := (\S+)$`).FindStringSubmatch(makefile)
	if tools == nil || vgw == nil || !strings.Contains(contributing, "~"+tools[1]) || !strings.Contains(contributing, "versitygw "+vgw[1]) {
		t.Errorf("CONTRIBUTING.md does not say make test builds versitygw %v into ~%v", vgw, tools)
	}
	wrong := regexp.MustCompile(`python-blosc2's (default|defaults|parameters)\W[^.]{0,40}clevel 5`)
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, f := range append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md"), filepath.Join(root, "man", "bloscfs.1")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := wrong.FindString(strings.ReplaceAll(strings.ReplaceAll(string(b), "\\-", "-"), "\n", " ")); m != "" {
			t.Errorf("%s: %q (python-blosc2's default clevel is 1)", f, m)
		}
	}
	if h := bloscfs(t, "help", "pack"); wrong.Match(bytes.ReplaceAll(h.stdout, []byte("\n"), []byte(" "))) {
		t.Errorf("help pack says python-blosc2's defaults have clevel 5:\n%s", h.stdout)
	}
}
