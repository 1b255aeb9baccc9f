package zarr

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/bloscfs/bloscfs/internal/mmapfile"
	"golang.org/x/sys/unix"
)

// openFile opens the file of key for reading, beneath the store's
// directory, and returns its descriptor and identity. Only a regular
// file is opened: anything else is ErrNotExist, as a missing chunk.
func (s *DirStore) openFile(key string) (int, fileID, error) {
	fd, err := s.openBeneath(key)
	if err != nil {
		return -1, fileID{}, err
	}
	var st unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Fstat(fd, &st) }); err != nil {
		unix.Close(fd)
		return -1, fileID{}, fmt.Errorf("%s: %w", key, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, fileID{}, fmt.Errorf("%s: %w (not a regular file)", key, ErrNotExist)
	}
	return fd, idOf(&st), nil
}

// statName returns the identity of the file that key names now.
func (s *DirStore) statName(key string) (fileID, error) {
	var st unix.Stat_t
	var err error
	cerr := s.dir.Control(func(dfd uintptr) {
		err = ignoringEINTR(func() error { return unix.Fstatat(int(dfd), key, &st, 0) })
	})
	if cerr != nil {
		return fileID{}, cerr
	}
	if err != nil {
		return fileID{}, err
	}
	return idOf(&st), nil
}

// dupFD returns a close-on-exec duplicate of f's descriptor.
func dupFD(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	cerr := rc.Control(func(x uintptr) {
		fd, err = unix.FcntlInt(x, unix.F_DUPFD_CLOEXEC, 0)
	})
	if cerr != nil {
		return -1, cerr
	}
	if err != nil {
		return -1, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return fd, nil
}

// preadFull reads len(p) bytes at off of fd, or up to the file's end
// (then with io.EOF): from the page cache without the scheduler's
// involvement where it can (mmapfile.ReadCached), else with pread.
func preadFull(fd int, p []byte, off int64) (int, error) {
	n := mmapfile.ReadCached(fd, p, off)
	for n < len(p) {
		k, err := unix.Pread(fd, p[n:], off+int64(n))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			return n, io.EOF
		}
		n += k
	}
	return n, nil
}

// closeFDs closes descriptors.
func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// nofileLimit returns the process's soft limit on open descriptors.
func nofileLimit() int64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	return int64(min(rl.Cur, 1<<30))
}

// ignoringEINTR calls f until it returns something other than EINTR.
func ignoringEINTR(f func() error) error {
	for {
		if err := f(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
