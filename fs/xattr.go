package fs

import (
	"bytes"
	"context"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// notCarried reports whether attr is in a namespace the mount does not
// carry: POSIX ACLs (system.posix_acl_access, system.posix_acl_default)
// and security.* (SELinux labels, file capabilities). Through FUSE
// without FUSE_POSIX_ACL the kernel never enforces an ACL, a security
// module labels a FUSE mount as a whole, and the mount is nosuid, so
// that none of them means through the mount what it means on the
// source: the mount answers EOPNOTSUPP for them, as a filesystem without
// ACLs or labels does (sshfs). That answer also spares every `ls -l` two
// round trips per file: coreutils remembers, per device, that ACLs and
// security contexts are not supported, where ENODATA makes it ask each
// file again (docs/PERFORMANCE.md, "Listing at scale"). getfacl and
// libacl read a missing ACL from the mode bits for either answer.
func notCarried(attr string) bool {
	return strings.HasPrefix(attr, "security.") || strings.HasPrefix(attr, "system.posix_acl_")
}

// carriedOnly drops the names notCarried refuses from list, a
// LISTXATTR answer of NUL-terminated names.
func carriedOnly(list []byte) []byte {
	out := list[:0:0]
	for len(list) > 0 {
		name, rest, _ := bytes.Cut(list, []byte{0})
		if len(name) > 0 && !notCarried(string(name)) {
			out = append(append(out, name...), 0)
		}
		list = rest
	}
	return out
}

// listCarried answers a LISTXATTR from the source's list (full, read
// with list) without the names notCarried refuses.
func listCarried(list func([]byte) (uint32, syscall.Errno), dest []byte) (uint32, syscall.Errno) {
	sz, errno := list(nil)
	if errno != 0 {
		return sz, errno
	}
	buf := make([]byte, sz)
	if sz > 0 {
		if sz, errno = list(buf); errno != 0 {
			return sz, errno
		}
		buf = buf[:sz]
	}
	buf = carriedOnly(buf)
	if len(dest) == 0 {
		return uint32(len(buf)), 0
	}
	if len(dest) < len(buf) {
		return uint32(len(buf)), syscall.ERANGE
	}
	return uint32(copy(dest, buf)), 0
}

// loopbackNode is go-fuse's loopback node of a directory, plain file or
// symlink of a local mount, with the source's extended attributes but
// those the mount does not carry. (dirNode.Getxattr, in stats.go, also
// answers the root's StatsXattr.)
type loopbackNode struct{ gofs.LoopbackNode }

// Getxattr returns the source's attribute.
func (n *loopbackNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if notCarried(attr) {
		return 0, syscall.EOPNOTSUPP
	}
	return n.LoopbackNode.Getxattr(ctx, attr, dest)
}

// Setxattr sets the source's attribute.
func (n *loopbackNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if notCarried(attr) {
		return syscall.EOPNOTSUPP
	}
	return n.LoopbackNode.Setxattr(ctx, attr, data, flags)
}

// Removexattr removes the source's attribute.
func (n *loopbackNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if notCarried(attr) {
		return syscall.EOPNOTSUPP
	}
	return n.LoopbackNode.Removexattr(ctx, attr)
}

// Listxattr lists the source's attributes.
func (n *loopbackNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listCarried(func(b []byte) (uint32, syscall.Errno) { return n.LoopbackNode.Listxattr(ctx, b) }, dest)
}
