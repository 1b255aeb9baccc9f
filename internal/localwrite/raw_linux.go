package localwrite

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// localFS are the file systems whose buffered writes wait for nothing but
// the local disk and memory.
var localFS = map[int64]bool{
	unix.EXT4_SUPER_MAGIC:  true, // ext2 and ext3 share it
	unix.XFS_SUPER_MAGIC:   true,
	unix.BTRFS_SUPER_MAGIC: true,
	unix.TMPFS_MAGIC:       true,
}

// local reports whether the open file fd lies on one of localFS.
func local(fd uintptr) bool {
	var s unix.Statfs_t
	if err := unix.Fstatfs(int(fd), &s); err != nil {
		return false
	}
	return localFS[int64(s.Type)]
}

// rawWrite writes p to fd with write(2) as a raw system call, again when
// a signal interrupted it before it wrote anything.
func rawWrite(fd uintptr, p []byte) (int, error) {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
		switch e {
		case 0:
			return int(r), nil
		case syscall.EINTR:
			continue
		}
		return 0, e
	}
}
