package b2store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/bloscfs/bloscfs/pack"
)

// DirSource is the Source of a local store directory (.b2d). Its files
// are reached from the directory by openat, one component at a time,
// never through a symbolic link (neither a directory nor a file may be
// one: such entries are not members), and only regular files are opened
// (pack.OpenSourceAt: O_NONBLOCK, checked with fstat), so that nothing
// in the directory can make the reader leave it, block, or read what its
// owner could not.
type DirSource struct {
	dir string
}

// NewDirSource returns the Source of the directory dir.
func NewDirSource(dir string) *DirSource { return &DirSource{dir: dir} }

// maxWalked bounds the entries of every kind (files, directories,
// links, others) a walk of a store directory reads: a directory of
// millions of links or empty folders is refused, not listed. (A
// variable: tests lower it.)
var maxWalked = 4 * MaxEntries

// Members lists the regular files under the directory, walking at most
// MaxDepth levels, MaxEntries files beside embed.b2e and maxWalked
// entries in all (more is an error: the listing would not be the
// store's). A directory is read a thousand entries at a time.
func (s *DirSource) Members() ([]Member, error) {
	root, err := pack.OpenSourceDir(s.dir)
	if err != nil {
		return nil, err
	}
	var out []Member
	walked := 0
	var walk func(d *os.File, rel string, depth int) error
	walk = func(d *os.File, rel string, depth int) error {
		defer d.Close()
		for {
			ents, err := d.ReadDir(1024)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: %w", path.Join(s.dir, rel), err)
			}
			if walked += len(ents); walked > maxWalked {
				return fmt.Errorf("%s: %w: more than %d entries", s.dir, ErrBadEntry, maxWalked)
			}
			if err := s.entries(d, rel, depth, ents, &out, walk); err != nil {
				return err
			}
		}
	}
	if err := walk(root, "", 0); err != nil {
		return nil, err
	}
	return out, nil
}

// entries adds the members among ents, entries of directory d (rel
// under the store's), to out, walking the directories among them.
func (s *DirSource) entries(d *os.File, rel string, depth int, ents []os.DirEntry, out *[]Member, walk func(*os.File, string, int) error) error {
	for _, e := range ents {
		p := path.Join(rel, e.Name())
		switch {
		case e.Type().IsRegular():
			if len(*out) > MaxEntries { // MaxEntries values and embed.b2e
				return fmt.Errorf("%s: %w: more than %d files", s.dir, ErrBadEntry, MaxEntries+1)
			}
			// (e.Info would stat by the directory's name, not its
			// descriptor.)
			var st unix.Stat_t
			if err := unix.Fstatat(int(d.Fd()), e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue // removed since the listing
				}
				return fmt.Errorf("%s: %w", path.Join(s.dir, p), err)
			}
			if st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue // replaced since the listing
			}
			*out = append(*out, Member{Path: p, Size: st.Size})
		case e.IsDir():
			if depth+1 >= MaxDepth {
				continue
			}
			sub, err := openDirAt(d, e.Name())
			if err != nil {
				if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
					continue
				}
				return fmt.Errorf("%s: %w", path.Join(s.dir, p), err)
			}
			if err := walk(sub, p, depth+1); err != nil {
				return err
			}
		}
		// Symbolic links, FIFOs, sockets, devices: not members.
	}
	return nil
}

// openDirAt opens the directory name inside d without following a
// symbolic link.
func openDirAt(d *os.File, name string) (*os.File, error) {
	for {
		fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}

// Open opens the member at p (relative, '/'-separated, no "." or ".."
// components) and returns it, an *os.File, and its size.
func (s *DirSource) Open(p string) (io.ReaderAt, int64, error) {
	if checkKey("/"+p) != nil {
		return nil, 0, fmt.Errorf("%s: %w: member path %q", s.dir, ErrNotFound, p)
	}
	d, err := pack.OpenSourceDir(s.dir)
	if err != nil {
		return nil, 0, err
	}
	segs := strings.Split(p, "/")
	for _, seg := range segs[:len(segs)-1] {
		sub, err := openDirAt(d, seg)
		d.Close()
		if err != nil {
			return nil, 0, &os.PathError{Op: "open", Path: path.Join(s.dir, p), Err: err}
		}
		d = sub
	}
	defer d.Close()
	f, st, err := pack.OpenSourceAt(d, segs[len(segs)-1], path.Join(s.dir, p))
	if err != nil {
		return nil, 0, err
	}
	return f, st.Size(), nil
}
