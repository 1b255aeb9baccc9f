package zarr

import (
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2 turns out not to be there (a kernel
// before 5.6, or a seccomp filter that refuses it).
var noOpenat2 atomic.Bool

// openBeneath opens key, a valid key, with openat2 so that its path can
// neither leave the store's directory nor pass a symbolic link; a key
// that meets a symbolic link (or any other refusal) is opened through
// the store's os.Root, which follows links that stay inside the store
// and gives the errors it always gave.
func (s *DirStore) openBeneath(key string) (int, error) {
	if !noOpenat2.Load() {
		fd := -1
		var err error
		cerr := s.dir.Control(func(dfd uintptr) {
			err = ignoringEINTR(func() error {
				fd, err = unix.Openat2(int(dfd), key, &unix.OpenHow{
					Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY,
					Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
				})
				return err
			})
		})
		switch {
		case cerr != nil:
			return -1, fmt.Errorf("%s: %w", key, cerr)
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOENT):
			return -1, fmt.Errorf("%s: %w", key, ErrNotExist)
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			noOpenat2.Store(true)
		}
	}
	return s.openRoot(key)
}

// idOf returns the identity of the file st describes.
func idOf(st *unix.Stat_t) fileID {
	return fileID{
		dev: st.Dev, ino: st.Ino, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
	}
}
