package writes

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nsEntry is one name of the model tree of TestRandomNamespace.
type nsEntry struct {
	kind   byte   // 'f' file, 'd' directory, 'l' symlink
	data   []byte // a file's content
	target string // a symlink's target
}

// nsFD is a descriptor the test holds open. It follows its name through
// renames; once the name is unlinked or replaced it holds its own
// content (POSIX: readable and writable until the last close).
type nsFD struct {
	id   int // numbers the descriptors in the log
	f    *os.File
	name string   // the model name it shows, "" once detached
	gone *nsEntry // its file once detached (shared by the descriptors of that file)
}

// file returns the model file a descriptor shows.
func (r *nsRun) file(d *nsFD) *nsEntry {
	if d.name != "" {
		return r.model[d.name]
	}
	return d.gone
}

// nsRun runs random namespace and content operations (fsstress-style)
// on a mount against a model.
type nsRun struct {
	t     *testing.T
	rng   *rand.Rand
	seed  uint64
	m     *mount
	model map[string]*nsEntry // relative path → entry ("" is the root)
	fds   []*nsFD
	log   []string
	n     int
	fdSeq int
}

func (r *nsRun) note(format string, a ...any) {
	r.log = append(r.log, fmt.Sprintf("%5d ", r.n)+fmt.Sprintf(format, a...))
	if len(r.log) > 60 {
		r.log = r.log[1:]
	}
}

func (r *nsRun) fail(format string, a ...any) {
	r.t.Helper()
	r.t.Fatalf("operation %d: %s\nseed %d (replay: BLOSCFS_NS_SEED=%d go test -run '%s' ./integration/writes/)\nthe last operations:\n%s",
		r.n, fmt.Sprintf(format, a...), r.seed, r.seed, r.t.Name(), strings.Join(r.log, "\n"))
}

func (r *nsRun) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.rng.Uint32() >> 24 % 7) // compressible
	}
	return b
}

// pick returns a random existing path of one of kinds ("" if none).
func (r *nsRun) pick(kinds string) string {
	var ps []string
	for p, e := range r.model {
		if p != "" && strings.IndexByte(kinds, e.kind) >= 0 {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return ""
	}
	sort.Strings(ps)
	return ps[r.rng.IntN(len(ps))]
}

// newName returns a path in a random directory, existing or not.
func (r *nsRun) newName() string {
	dir := r.pick("d")
	if r.rng.IntN(3) == 0 {
		dir = ""
	}
	return path.Join(dir, []string{"a", "b", "c", "d", "e", "f", "g"}[r.rng.IntN(7)])
}

func (r *nsRun) mnt(p string) string { return filepath.Join(r.m.Dir, p) }

// fileData returns the content a model file name shows.
func (r *nsRun) fileData(p string) []byte { return r.model[p].data }

// detach gives the descriptors open on name p (about to be unlinked or
// replaced) their own copy of its content.
func (r *nsRun) detach(p string) {
	e := &nsEntry{kind: 'f', data: slices.Clone(r.model[p].data)}
	for _, d := range r.fds {
		if d.name == p {
			d.gone, d.name = e, ""
		}
	}
}

// moved renames every model path at or below from to below to.
func (r *nsRun) moved(from, to string) {
	next := map[string]*nsEntry{}
	for p, e := range r.model {
		if p == from || strings.HasPrefix(p, from+"/") {
			next[to+p[len(from):]] = e
		} else {
			next[p] = e
		}
	}
	r.model = next
	for _, d := range r.fds {
		if d.name == from || strings.HasPrefix(d.name, from+"/") {
			d.name = to + d.name[len(from):]
		}
	}
}

func isBelow(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func (r *nsRun) step() {
	switch k := r.rng.IntN(100); {
	case k < 15: // create (or replace the content of) a file by path
		p := r.newName()
		if e := r.model[p]; e != nil && e.kind != 'f' {
			return
		}
		data := r.bytes(r.rng.IntN(200 << 10))
		r.note("write file %s (%d bytes)", p, len(data))
		if err := os.WriteFile(r.mnt(p), data, 0o644); err != nil {
			r.fail("write file %s: %v", p, err)
		}
		if e := r.model[p]; e != nil {
			e.data = data
		} else {
			r.model[p] = &nsEntry{kind: 'f', data: data}
		}
	case k < 25: // patch a file by path
		p := r.pick("f")
		if p == "" {
			return
		}
		e := r.model[p]
		off := r.rng.IntN(len(e.data) + 70000)
		b := r.bytes(1 + r.rng.IntN(5000))
		r.note("patch %s at %d+%d (size %d)", p, off, len(b), len(e.data))
		f, err := os.OpenFile(r.mnt(p), os.O_RDWR, 0)
		if err == nil {
			_, err = f.WriteAt(b, int64(off))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			r.fail("patch %s: %v", p, err)
		}
		if end := off + len(b); end > len(e.data) {
			e.data = append(e.data, make([]byte, end-len(e.data))...)
		}
		copy(e.data[off:], b)
	case k < 32: // truncate by path
		p := r.pick("f")
		if p == "" {
			return
		}
		e := r.model[p]
		n := r.rng.IntN(len(e.data) + 300000)
		r.note("truncate %s %d → %d", p, len(e.data), n)
		if err := os.Truncate(r.mnt(p), int64(n)); err != nil {
			r.fail("truncate %s: %v", p, err)
		}
		if n <= len(e.data) {
			e.data = e.data[:n]
		} else {
			e.data = append(e.data, make([]byte, n-len(e.data))...)
		}
	case k < 38: // mkdir
		p := r.newName()
		if r.model[p] != nil {
			return
		}
		r.note("mkdir %s", p)
		if err := os.Mkdir(r.mnt(p), 0o755); err != nil {
			r.fail("mkdir %s: %v", p, err)
		}
		r.model[p] = &nsEntry{kind: 'd'}
	case k < 41: // rmdir an empty directory
		p := r.pick("d")
		if p == "" {
			return
		}
		for q := range r.model {
			if q != p && isBelow(q, p) {
				return
			}
		}
		r.note("rmdir %s", p)
		if err := syscall.Rmdir(r.mnt(p)); err != nil {
			var names []string
			ents, _ := os.ReadDir(filepath.Join(r.m.Src, p))
			for _, e := range ents {
				names = append(names, e.Name())
			}
			r.fail("rmdir %s: %v (on disk: %v)", p, err, names)
		}
		delete(r.model, p)
	case k < 53: // rename a file or symlink, to a new name or over a file
		p := r.pick("fl")
		q := r.newName()
		if p == "" || p == q {
			return
		}
		if e := r.model[q]; e != nil && e.kind == 'd' {
			return
		}
		r.note("rename %s → %s", p, q)
		if err := syscall.Rename(r.mnt(p), r.mnt(q)); err != nil {
			r.fail("rename %s → %s: %v", p, q, err)
		}
		if r.model[q] != nil {
			r.detach(q)
			delete(r.model, q)
		}
		r.moved(p, q)
	case k < 57: // rename a directory to a new name or over an empty one
		p := r.pick("d")
		q := r.newName()
		if p == "" || p == q || isBelow(q, p) {
			return
		}
		if e := r.model[q]; e != nil {
			if e.kind != 'd' {
				return
			}
			for s := range r.model {
				if s != q && isBelow(s, q) {
					return
				}
			}
		}
		r.note("rename directory %s → %s", p, q)
		if err := syscall.Rename(r.mnt(p), r.mnt(q)); err != nil {
			r.fail("rename directory %s → %s: %v", p, q, err)
		}
		delete(r.model, q)
		r.moved(p, q)
	case k < 63: // hard link
		p := r.pick("f")
		q := r.newName()
		if p == "" || r.model[q] != nil {
			return
		}
		r.note("link %s → %s", p, q)
		if err := os.Link(r.mnt(p), r.mnt(q)); err != nil {
			r.fail("link %s → %s: %v", p, q, err)
		}
		// A write through one name of a compressed file breaks the link
		// (README): each name is followed on its own.
		r.model[q] = &nsEntry{kind: 'f', data: slices.Clone(r.model[p].data)}
	case k < 67: // symlink
		q := r.newName()
		if r.model[q] != nil {
			return
		}
		target := "target-" + strconv.Itoa(r.rng.IntN(1000))
		r.note("symlink %s → %s", q, target)
		if err := os.Symlink(target, r.mnt(q)); err != nil {
			r.fail("symlink %s: %v", q, err)
		}
		r.model[q] = &nsEntry{kind: 'l', target: target}
	case k < 73: // unlink a file or symlink
		p := r.pick("fl")
		if p == "" {
			return
		}
		r.note("unlink %s", p)
		if err := os.Remove(r.mnt(p)); err != nil {
			r.fail("unlink %s: %v", p, err)
		}
		r.detach(p)
		delete(r.model, p)
	case k < 78: // open a descriptor and keep it
		p := r.pick("f")
		if p == "" || len(r.fds) >= 3 {
			return
		}
		r.note("open %s", p)
		f, err := os.OpenFile(r.mnt(p), os.O_RDWR, 0)
		if err != nil {
			r.fail("open %s: %v", p, err)
		}
		r.fdSeq++
		r.note("descriptor %d is %s", r.fdSeq, p)
		r.fds = append(r.fds, &nsFD{id: r.fdSeq, f: f, name: p})
	case k < 86: // write through a descriptor
		if len(r.fds) == 0 {
			return
		}
		d := r.fds[r.rng.IntN(len(r.fds))]
		data := r.file(d).data
		off := r.rng.IntN(len(data) + 10000)
		b := r.bytes(1 + r.rng.IntN(3000))
		r.note("write %d+%d through descriptor %d (%q)", off, len(b), d.id, d.name)
		if _, err := d.f.WriteAt(b, int64(off)); err != nil {
			r.fail("write through descriptor %d (%q): %v", d.id, d.name, err)
		}
		if end := off + len(b); end > len(data) {
			data = append(data, make([]byte, end-len(data))...)
		}
		copy(data[off:], b)
		r.file(d).data = data
	case k < 92: // read through a descriptor
		if len(r.fds) == 0 {
			return
		}
		d := r.fds[r.rng.IntN(len(r.fds))]
		r.note("read all through descriptor %d (%q)", d.id, d.name)
		r.checkFD(d)
	case k < 97: // close a descriptor
		if len(r.fds) == 0 {
			return
		}
		i := r.rng.IntN(len(r.fds))
		r.note("close descriptor %d (%q)", r.fds[i].id, r.fds[i].name)
		if err := r.fds[i].f.Close(); err != nil {
			r.fail("close descriptor %d (%q): %v", r.fds[i].id, r.fds[i].name, err)
		}
		r.fds = slices.Delete(r.fds, i, i+1)
	default: // fsync through a descriptor
		if len(r.fds) == 0 {
			return
		}
		d := r.fds[r.rng.IntN(len(r.fds))]
		r.note("fsync descriptor %d (%q)", d.id, d.name)
		if err := d.f.Sync(); err != nil {
			r.fail("fsync descriptor %d (%q): %v", d.id, d.name, err)
		}
	}
}

// checkFD reads a descriptor whole and compares it with the model.
func (r *nsRun) checkFD(d *nsFD) {
	r.t.Helper()
	want := r.file(d).data
	got := make([]byte, len(want)+1)
	n, err := d.f.ReadAt(got, 0)
	if err != nil && err != io.EOF {
		r.fail("read through descriptor %d (%q): %v", d.id, d.name, err)
	}
	if !bytes.Equal(got[:n], want) {
		r.fail("descriptor %d (%q): %s", d.id, d.name, firstDiff(got[:n], want))
	}
}

// closeAll closes every descriptor.
func (r *nsRun) closeAll() {
	for _, d := range r.fds {
		r.checkFD(d)
		if err := d.f.Close(); err != nil {
			r.fail("close descriptor %d (%q): %v", d.id, d.name, err)
		}
	}
	r.fds = nil
}

// check compares the whole tree of the mount with the model.
func (r *nsRun) check(when string) {
	r.t.Helper()
	seen := map[string]bool{}
	err := filepath.Walk(r.m.Dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.m.Dir, p)
		if rel == "." {
			return nil
		}
		seen[rel] = true
		e := r.model[rel]
		if e == nil {
			r.fail("%s: %s is in the mount, not in the model", when, rel)
		}
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if e.kind != 'l' || err != nil || target != e.target {
				r.fail("%s: symlink %s → %q (%v), model %c %q", when, rel, target, err, e.kind, e.target)
			}
		case info.IsDir():
			if e.kind != 'd' {
				r.fail("%s: %s is a directory, model %c", when, rel, e.kind)
			}
		default:
			got, err := os.ReadFile(p)
			if e.kind != 'f' || err != nil || !bytes.Equal(got, e.data) {
				r.fail("%s: file %s (model %c): %v, %s", when, rel, e.kind, err, firstDiff(got, e.data))
			}
		}
		return nil
	})
	if err != nil {
		r.fail("%s: walking the mount: %v", when, err)
	}
	for p := range r.model {
		if p != "" && !seen[p] {
			r.fail("%s: %s is in the model, not in the mount", when, p)
		}
	}
}

// TestRandomNamespace runs seeded random operations across several
// files and directories of a mount (fsstress-style: writes, truncations,
// directories, renames of files and directories, hard links, symlinks,
// unlinks, descriptors kept open across unlinks and renames, fsync)
// against a model, and checks the whole tree after a remount in the
// middle and at the end, on a default mount (new files stored as
// .b2frame) and a --new-format blp one. BLOSCFS_NS_SEED replays a seed,
// BLOSCFS_NS_OPS sets the number of operations (1500).
func TestRandomNamespace(t *testing.T) {
	setup.Require(t)
	ops := 1500
	if longRun() {
		ops = 20000
	}
	if s := os.Getenv("BLOSCFS_NS_OPS"); s != "" {
		ops, _ = strconv.Atoi(s)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BLOSCFS_NS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	for i, flags := range [][]string{{"--chunk-size", "64KiB"}, {"--new-format", "blp", "--chunk-size", "64KiB"}} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			_, src, mnt := newDirs(t)
			s := seed + uint64(i)
			r := &nsRun{t: t, seed: seed, rng: rand.New(rand.NewPCG(s, s^0x14)), model: map[string]*nsEntry{"": {kind: 'd'}}}
			r.m = mountFG(t, src, mnt, flags...)
			t.Cleanup(func() {
				for _, d := range r.fds {
					d.f.Close()
				}
			})
			t.Logf("seed %d, %d operations", seed, ops)
			for r.n = 0; r.n < ops; r.n++ {
				r.step()
				if r.n == ops/2 {
					r.note("remount")
					r.closeAll()
					r.check("before the remount in the middle")
					r.m.MustUnmount(t)
					r.m = mountFG(t, src, mnt, flags...)
					r.check("after the remount in the middle")
				}
			}
			r.closeAll()
			r.check("at the end")
			r.m.MustUnmount(t)
			r.m = mountFG(t, src, mnt, flags...)
			r.check("after the final remount")
			r.m.MustUnmount(t)
			if left := hiddenIn(src); len(left) > 0 {
				t.Errorf("temp files left: %v", left)
			}
		})
	}
}
