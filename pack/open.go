package pack

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNotRegular reports a source entry that is not a regular file (or
// not a directory where one is expected): a FIFO, socket, device or
// symlink. bloscfs never reads such entries; it shows them as they are.
var ErrNotRegular = errors.New("not a regular file")

// openFlags are the flags every open of a source file adds: a symlink is
// not followed (the daemon must not read, with its rights, what a link
// points to), a FIFO does not block the open, and reading does not change
// the access time (which would undo a time the owner set). O_NOATIME is
// dropped where it is not permitted (a file of another user).
const openFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOATIME

// OpenSource opens path for reading as a regular file or, when dirOK, a
// directory. It does not follow a symlink in the last component and does
// not block on a FIFO; what it opened is checked with fstat before
// anything is read, so a FIFO, socket or device gives ErrNotRegular
// (wrapped with the path), never a read. A symlink gives ErrNotRegular
// too.
func OpenSource(path string, dirOK bool) (*os.File, os.FileInfo, error) {
	fd, err := openRetry(unix.AT_FDCWD, path, openFlags)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, nil, fmt.Errorf("%s: %w (a symlink): %w", path, ErrNotRegular, err)
		}
		return nil, nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return checkOpened(fd, path, dirOK)
}

// OpenSourceAt is OpenSource for name (no slashes) inside the directory
// open as dir.
func OpenSourceAt(dir *os.File, name, path string) (*os.File, os.FileInfo, error) {
	fd, err := openRetry(int(dir.Fd()), name, openFlags)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, nil, fmt.Errorf("%s: %w (a symlink): %w", path, ErrNotRegular, err)
		}
		return nil, nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return checkOpened(fd, path, false)
}

// OpenSourceDir opens the directory path without following a symlink in
// its last component.
func OpenSourceDir(path string) (*os.File, error) {
	fd, err := openRetry(unix.AT_FDCWD, path, openFlags|unix.O_DIRECTORY)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%s: %w (not a directory): %w", path, ErrNotRegular, err)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

func openRetry(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		switch {
		case err == unix.EINTR:
		case err == unix.EPERM && flags&unix.O_NOATIME != 0:
			flags &^= unix.O_NOATIME // not the file's owner: open plainly
		default:
			return fd, err
		}
	}
}

// checkOpened fstats fd and keeps it only if it is a regular file (or a
// directory, when dirOK). O_NONBLOCK is cleared: it means nothing for
// regular files and directories, but the file is handed on.
func checkOpened(fd int, path string, dirOK bool) (*os.File, os.FileInfo, error) {
	f := os.NewFile(uintptr(fd), path)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() && !(dirOK && st.IsDir()) {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kindOf(st.Mode()))
	}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return f, st, nil
}

func kindOf(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSymlink != 0:
		return "a symlink"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.String()
}

// Transient reports whether err says nothing about the file itself: the
// process or the system ran short of something (descriptors, memory), or
// a call was interrupted. Such an error must be passed on, never taken as
// the file's verdict (cached, or shown as "not a container").
func Transient(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EINTR, syscall.EAGAIN,
		syscall.ENOBUFS, syscall.EIO, syscall.ESTALE, syscall.ETIMEDOUT, syscall.ENOLCK:
		return true
	}
	return false
}
