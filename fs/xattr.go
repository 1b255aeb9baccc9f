package fs

// Extended attributes, the same on both backends: bloscfs's own
// user.bloscfs.* (how a file is stored) and a Zarr array's
// user.zarr.attrs, and the namespaces no node carries.

import (
	"bytes"
	"strconv"
	"strings"
	"syscall"

	"github.com/bloscfs/bloscfs/blosc"
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

// xattrPrefix names bloscfs's own extended attributes.
const xattrPrefix = "user.bloscfs."

// zarrAttrsXattr holds a Zarr array's user attributes (JSON).
const zarrAttrsXattr = "user.zarr.attrs"

// maxZarrAttrs bounds the attributes kept with a probe (the largest
// value an extended attribute can have).
const maxZarrAttrs = 64 << 10

// xattrs returns the user.bloscfs.* attributes that describe how a file
// is stored.
func xattrs(p *probe) map[string]string {
	in := p.info
	m := map[string]string{
		"format":          in.Format,
		"codec":           in.Codec,
		"typesize":        strconv.Itoa(in.Typesize),
		"chunksize":       strconv.FormatInt(in.ChunkSize, 10),
		"blocksize":       strconv.Itoa(in.Blocksize),
		"chunks":          strconv.Itoa(in.Chunks),
		"compressed_size": strconv.FormatInt(in.StoredSize, 10),
		"size":            strconv.FormatInt(in.Size, 10),
		"filters":         blosc.FilterString(in.Filters, in.FiltersMeta),
	}
	if in.Clevel >= 0 {
		m["clevel"] = strconv.Itoa(in.Clevel)
	}
	if in.StoredSize > 0 {
		m["ratio"] = strconv.FormatFloat(float64(in.Size)/float64(in.StoredSize), 'f', 3, 64)
	}
	if in.Checksum != "" {
		m["checksum"] = in.Checksum
	}
	for k, v := range p.zarr {
		m[k] = v
	}
	if p.zarr != nil {
		delete(m, "blocksize")
		delete(m, "filters")
		delete(m, "compressed_size")
	}
	return m
}

// zarrXattr answers the attributes of a Zarr array that its probe does
// not hold: user.zarr.attrs, and user.bloscfs.compressed_size and ratio,
// computed only when asked, by stored (a walk of the array's directory,
// or a LIST of its prefix: too dear for every lookup or listing). ours is
// false for any other attribute, or a file that is not a Zarr array.
func zarrXattr(pr *probe, attr string, dest []byte, stored func() (int64, error)) (sz uint32, errno syscall.Errno, ours bool) {
	if pr == nil || !pr.ok || pr.zarr == nil {
		return 0, 0, false
	}
	var v []byte
	switch attr {
	case zarrAttrsXattr:
		if pr.zarrAttrs == nil {
			return 0, 0, false
		}
		v = pr.zarrAttrs
	case xattrPrefix + "compressed_size", xattrPrefix + "ratio":
		n, err := stored()
		if err != nil {
			return 0, syscall.EIO, true
		}
		v = strconv.AppendInt(nil, n, 10)
		if attr == xattrPrefix+"ratio" {
			if n == 0 {
				return 0, syscall.ENODATA, true
			}
			v = strconv.AppendFloat(nil, float64(pr.info.Size)/float64(n), 'f', 3, 64)
		}
	default:
		return 0, 0, false
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE, true
	}
	return uint32(copy(dest, v)), 0, true
}

// zarrXattrNames returns the names zarrXattr answers for the file p
// describes, each NUL-terminated (none when it is not a Zarr array).
func zarrXattrNames(pr *probe) []byte {
	if pr == nil || !pr.ok || pr.zarr == nil {
		return nil
	}
	var b []byte
	if pr.zarrAttrs != nil {
		b = append(append(b, zarrAttrsXattr...), 0)
	}
	b = append(append(b, xattrPrefix+"compressed_size"...), 0)
	return append(append(b, xattrPrefix+"ratio"...), 0)
}

// ownXattrs returns the user.bloscfs.* attributes of a file that p
// describes: none unless it is shown decompressed.
func ownXattrs(p *probe) map[string]string {
	if !p.ok {
		return nil
	}
	return xattrs(p)
}

// getXattr answers a GETXATTR of attr from own, the file's user.bloscfs.*
// attributes (named without the prefix). ours is false when attr is not
// a user.bloscfs.* name: the caller asks the source, if it has any.
func getXattr(own map[string]string, attr string, dest []byte) (sz uint32, errno syscall.Errno, ours bool) {
	name, ok := strings.CutPrefix(attr, xattrPrefix)
	if !ok {
		return 0, 0, false
	}
	v, ok := own[name]
	if !ok {
		return 0, syscall.ENODATA, true
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE, true
	}
	return uint32(copy(dest, v)), 0, true
}

// listXattrs answers a LISTXATTR: the names of own, then more (the
// source's own list, NUL-terminated names).
func listXattrs(own map[string]string, more, dest []byte) (uint32, syscall.Errno) {
	var buf []byte
	for name := range own {
		buf = append(append(buf, xattrPrefix+name...), 0)
	}
	buf = append(buf, more...)
	if len(dest) < len(buf) {
		return uint32(len(buf)), syscall.ERANGE
	}
	return uint32(copy(dest, buf)), 0
}
