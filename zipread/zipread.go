// Package zipread reads the members of a ZIP archive in place, as
// archive/zip reads them, for archives that hold other formats' objects
// (a zipped Zarr store, an OME-Zarr .ozx, a python-blosc2 .b2z): the
// archive is an io.ReaderAt and a size, and a member stored without
// compression is a byte range of it, read with ranged reads and never
// extracted.
//
// It differs from archive/zip where that matters for a file system that
// serves archives written by others, over a local disk or an object
// store:
//
//   - Opening costs at most two reads: a suffix of the archive, which
//     holds the end records and, in most archives, the whole central
//     directory, and the directory itself when it does not fit there.
//   - The directory is kept compactly (about 64 bytes a member, names in
//     one block) and bounded (MaxMembers, MaxDirectory).
//   - A member that cannot be read safely (encrypted, an unknown method,
//     a name with ".." or a leading "/", a name given twice, a byte range
//     that overlaps another member's) is kept with the reason and refused
//     when read; the other members stay readable.
//   - A member's local header is read only when its data is first read,
//     and in the same read where the range allows (see Reader.ReadAt).
//   - A deflated member is inflated whole into at most the size the
//     caller allows, and checked against its CRC-32.
package zipread

import (
	"bytes"
	"cmp"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"slices"
	"strings"
	"sync/atomic"
)

// Errors of the package, wrapped with the archive's name and, for a
// member, its name; test with errors.Is.
var (
	// ErrFormat reports bytes that are not a valid ZIP archive (no end
	// record, a central directory past the end of the file or that does
	// not parse), or a member whose bytes do not match its directory
	// entry (its local header, its size, its CRC-32).
	ErrFormat = errors.New("not a valid ZIP archive")
	// ErrNoArchive reports bytes with no ZIP archive at their end (no
	// end of central directory record): a file that is not a ZIP
	// archive, or one cut short. It comes with ErrFormat.
	ErrNoArchive = errors.New("no ZIP archive")
	// ErrUnsupported reports a valid archive or member this package does
	// not read: split archives, encrypted members, methods other than
	// stored and deflate.
	ErrUnsupported = errors.New("unsupported ZIP feature")
	// ErrUnsafe reports a member that is refused because of what the
	// directory says of it: a name that is not a clean relative path, a
	// name given twice, bytes that overlap another member's.
	ErrUnsafe = errors.New("unsafe ZIP member")
	// ErrNotExist reports a name no member has.
	ErrNotExist = errors.New("no such ZIP member")
	// ErrTooLarge reports a member larger than the caller allows.
	ErrTooLarge = errors.New("ZIP member too large")
)

// Limits on what an archive's directory may claim.
const (
	// MaxMembers bounds the members of one archive.
	MaxMembers = 1 << 22
	// MaxDirectory bounds the bytes of one central directory.
	MaxDirectory = 256 << 20
	// SuffixSize is how much of the archive's end Open reads first: the
	// end records (at most 65,557 bytes with the longest comment, plus
	// the ZIP64 ones) and the directory of small archives. A listing of
	// a directory of many archives reads this much of each.
	SuffixSize = 128 << 10
	// RequestSuffixSize is SuffixSize for a reader whose every read is a
	// request (it has a ReadExact method, as an object of a bucket
	// does): a GET of a mebibyte costs little more than one of a few
	// bytes, and holds the directory of most archives.
	RequestSuffixSize = 1 << 20
)

// Compression methods.
const (
	Store   uint16 = 0
	Deflate uint16 = 8
)

// Signatures and fixed lengths of the ZIP records (APPNOTE 4.3).
const (
	sigLocal    = 0x04034b50
	sigCentral  = 0x02014b50
	sigEnd      = 0x06054b50
	sigEnd64    = 0x06064b50
	sigLocator  = 0x07064b50
	sigDataDesc = 0x08074b50

	localLen   = 30
	centralLen = 46
	endLen     = 22
	end64Len   = 56
	locatorLen = 20

	flagEncrypted  = 0x0001
	flagDataDesc   = 0x0008
	flagStrongEnc  = 0x0040
	flagMaskedHdrs = 0x2000

	// headerSlack is what a read of a member's local header adds to the
	// length the central directory implies, for a local extra field
	// longer than the central one (ZIP64 sizes, alignment padding).
	headerSlack = 256
	// nearEdge is how far into a member a first read may end and still
	// be served in one read with the member's local header.
	nearEdge = 256 << 10
)

// Member describes one member of the archive, from its central
// directory entry.
type Member struct {
	Name           string
	Method         uint16
	Flags          uint16
	CRC32          uint32
	CompressedSize int64
	Size           int64 // uncompressed
	HeaderOffset   int64 // of its local header, in the archive
	// Err is why the member cannot be read (nil: it can): wraps
	// ErrUnsupported or ErrUnsafe.
	Err error
}

// IsDir reports whether the member is a directory entry (its name ends
// in "/").
func (m *Member) IsDir() bool { return strings.HasSuffix(m.Name, "/") }

// entry is a member as the archive keeps it.
type entry struct {
	hdr    int64 // local header offset
	csize  int64
	usize  int64
	end    int64 // where the next record starts (a local header or the directory)
	data   atomic.Int64
	crc    uint32
	name   uint32 // offset into Archive.names
	nlen   uint16
	method uint16
	flags  uint16
	cextra uint16 // length of the central extra field
	bad    uint8  // a reason* value
}

// Reasons a member is refused.
const (
	okMember uint8 = iota
	badEncrypted
	badMethod
	badName
	badDuplicate
	badOverlap
	badSizes
)

func reason(b uint8, method uint16) error {
	switch b {
	case badEncrypted:
		return fmt.Errorf("%w: encrypted", ErrUnsupported)
	case badMethod:
		return fmt.Errorf("%w: compression method %d", ErrUnsupported, method)
	case badName:
		return fmt.Errorf("%w: name is not a clean relative path", ErrUnsafe)
	case badDuplicate:
		return fmt.Errorf("%w: name given to more than one member", ErrUnsafe)
	case badOverlap:
		return fmt.Errorf("%w: bytes overlap another member's or the directory", ErrUnsafe)
	case badSizes:
		return fmt.Errorf("%w: stored member whose sizes differ", ErrUnsafe)
	}
	return nil
}

// Archive is an opened ZIP archive: its central directory. It is safe
// for concurrent use.
type Archive struct {
	r      io.ReaderAt
	size   int64
	name   string
	ents   []entry
	names  []byte   // every name, one after another
	sorted []uint32 // member indexes in name order
	dirEnd int64    // where the central directory starts: the end of the members' bytes
}

// Open reads the end records and the central directory of the archive
// r of size bytes, in at most two reads of r: its last SuffixSize bytes
// (RequestSuffixSize for a reader of an object store), then the rest of
// the directory when it did not fit. name names the archive in errors. A member that cannot be read does not fail Open: its Err says
// why.
func Open(r io.ReaderAt, size int64, name string) (*Archive, error) {
	a := &Archive{r: r, size: size, name: name}
	if err := a.readDirectory(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return a, nil
}

func (a *Archive) readDirectory() error {
	if a.size < endLen {
		return fmt.Errorf("%w: %w: %d bytes, shorter than an end record", ErrFormat, ErrNoArchive, a.size)
	}
	suffix := int64(SuffixSize)
	if _, ok := a.r.(interface{ ReadExact([]byte, int64) error }); ok {
		suffix = RequestSuffixSize
	}
	tailStart := max(a.size-suffix, 0)
	tail := make([]byte, a.size-tailStart)
	if err := readFull(a.r, tail, tailStart); err != nil {
		return err
	}
	e := findEnd(tail)
	if e < 0 {
		return fmt.Errorf("%w: %w: no end of central directory record", ErrFormat, ErrNoArchive)
	}
	endPos := tailStart + int64(e)
	d := tail[e:]
	disk, cdDisk := le16(d[4:]), le16(d[6:])
	count, total := uint64(le16(d[8:])), uint64(le16(d[10:]))
	cdSize, cdOff := uint64(le32(d[12:])), uint64(le32(d[16:]))
	dirEnd := endPos // where the directory must end (before the ZIP64 records, if any)
	if e >= locatorLen && le32(tail[e-locatorLen:]) == sigLocator {
		l := tail[e-locatorLen:]
		if le32(l[4:]) != 0 || le32(l[16:]) > 1 {
			return fmt.Errorf("%w: a split archive", ErrUnsupported)
		}
		off := int64(le64(l[8:]))
		if off < 0 || off > endPos-locatorLen-end64Len {
			return fmt.Errorf("%w: ZIP64 end record at %d, past the end", ErrFormat, off)
		}
		// The ZIP64 end record sits just before the locator in every
		// archive seen; it may be further back (an extensible data
		// sector): one more read then.
		var r64 []byte
		if off >= tailStart {
			r64 = tail[off-tailStart:]
		} else {
			r64 = make([]byte, end64Len)
			if err := readFull(a.r, r64, off); err != nil {
				return err
			}
		}
		if le32(r64) != sigEnd64 {
			return fmt.Errorf("%w: no ZIP64 end record at %d", ErrFormat, off)
		}
		disk, cdDisk = uint16(min(le32(r64[16:]), 0xffff)), uint16(min(le32(r64[20:]), 0xffff))
		count, total = le64(r64[24:]), le64(r64[32:])
		cdSize, cdOff = le64(r64[40:]), le64(r64[48:])
		dirEnd = off
	}
	if disk != 0 || cdDisk != 0 || count != total {
		return fmt.Errorf("%w: a split archive", ErrUnsupported)
	}
	if total > MaxMembers {
		return fmt.Errorf("%w: %d members, more than %d", ErrUnsupported, total, MaxMembers)
	}
	if cdSize > MaxDirectory {
		return fmt.Errorf("%w: a central directory of %d bytes, more than %d", ErrUnsupported, cdSize, MaxDirectory)
	}
	if cdSize > uint64(dirEnd) || cdOff > uint64(dirEnd)-cdSize {
		return fmt.Errorf("%w: central directory [%d,+%d) past its end at %d", ErrFormat, cdOff, cdSize, dirEnd)
	}
	if total*centralLen > cdSize {
		return fmt.Errorf("%w: %d members in a central directory of %d bytes", ErrFormat, total, cdSize)
	}
	// Bytes before the archive (a self-extracting stub) shift every
	// offset: the directory ends where the end records start.
	base := dirEnd - int64(cdOff+cdSize)
	if base > 0 {
		// As archive/zip: an archive whose directory is where its end
		// record says, with bytes between the two, is not shifted.
		var sig [4]byte
		if int64(cdOff) >= tailStart {
			copy(sig[:], tail[int64(cdOff)-tailStart:])
		} else if err := readFull(a.r, sig[:], int64(cdOff)); err != nil {
			return err
		}
		if le32(sig[:]) == sigCentral {
			base = 0
		}
	}
	start := int64(cdOff) + base
	var cd []byte
	if start >= tailStart {
		cd = tail[start-tailStart : start-tailStart+int64(cdSize)]
	} else {
		cd = make([]byte, cdSize)
		if err := readFull(a.r, cd, start); err != nil {
			return err
		}
	}
	a.dirEnd = start
	return a.parseDirectory(cd, int(total), base)
}

// findEnd returns the offset of the last end of central directory
// record in b whose comment fits in b, or -1.
func findEnd(b []byte) int {
	for i := len(b) - endLen; i >= 0 && i >= len(b)-endLen-0xffff; i-- {
		if b[i] == 'P' && le32(b[i:]) == sigEnd {
			if n := int(le16(b[i+20:])); i+endLen+n <= len(b) {
				return i
			}
		}
	}
	return -1
}

func (a *Archive) parseDirectory(cd []byte, n int, base int64) error {
	a.ents = make([]entry, n)
	// Names take at most what is left of the directory after the fixed
	// parts; most directories hold little else.
	a.names = make([]byte, 0, min(len(cd)-n*centralLen, 1<<20))
	p := cd
	for i := range n {
		if len(p) < centralLen || le32(p) != sigCentral {
			return fmt.Errorf("%w: central directory entry %d does not parse", ErrFormat, i)
		}
		nlen, elen, clen := int(le16(p[28:])), int(le16(p[30:])), int(le16(p[32:]))
		if len(p) < centralLen+nlen+elen+clen {
			return fmt.Errorf("%w: central directory entry %d runs past the directory", ErrFormat, i)
		}
		e := &a.ents[i]
		e.flags, e.method = le16(p[8:]), le16(p[10:])
		e.crc = le32(p[16:])
		csize, usize, hdr := uint64(le32(p[20:])), uint64(le32(p[24:])), uint64(le32(p[42:]))
		diskStart := uint32(le16(p[34:]))
		name := p[centralLen : centralLen+nlen]
		extra := p[centralLen+nlen : centralLen+nlen+elen]
		// The ZIP64 extended information field holds, in this order,
		// those of the sizes and offset whose fixed field is all ones.
		for len(extra) >= 4 {
			id, sz := le16(extra), int(le16(extra[2:]))
			if 4+sz > len(extra) {
				break
			}
			if id == 0x0001 {
				f := extra[4 : 4+sz]
				take := func(v *uint64) bool {
					if len(f) < 8 {
						return false
					}
					*v, f = le64(f), f[8:]
					return true
				}
				ok := true
				if usize == 0xffffffff {
					ok = ok && take(&usize)
				}
				if csize == 0xffffffff {
					ok = ok && take(&csize)
				}
				if hdr == 0xffffffff {
					ok = ok && take(&hdr)
				}
				if diskStart == 0xffff && len(f) >= 4 {
					diskStart = le32(f)
				}
				if !ok {
					return fmt.Errorf("%w: central directory entry %d: short ZIP64 field", ErrFormat, i)
				}
			}
			extra = extra[4+sz:]
		}
		if diskStart != 0 {
			return fmt.Errorf("%w: a split archive", ErrUnsupported)
		}
		if hdr > uint64(a.dirEnd-base) || csize > uint64(a.dirEnd) || usize > 1<<62 {
			return fmt.Errorf("%w: central directory entry %d: member at %d of %d bytes, past the directory at %d", ErrFormat, i, hdr, csize, a.dirEnd)
		}
		e.hdr, e.csize, e.usize = int64(hdr)+base, int64(csize), int64(usize)
		e.cextra = uint16(elen)
		e.name, e.nlen = uint32(len(a.names)), uint16(nlen)
		a.names = append(a.names, name...)
		switch {
		case e.flags&(flagEncrypted|flagStrongEnc|flagMaskedHdrs) != 0 || e.method == 99:
			e.bad = badEncrypted
		case e.method != Store && e.method != Deflate:
			e.bad = badMethod
		case !cleanName(name):
			e.bad = badName
		case e.method == Store && e.csize != e.usize:
			e.bad = badSizes
		}
		p = p[centralLen+nlen+elen+clen:]
	}
	a.markDuplicates()
	a.markOverlaps()
	return nil
}

// cleanName reports whether name is a relative '/'-separated path whose
// components are not empty (but a directory's trailing one), ".", "..",
// and hold no NUL or backslash.
func cleanName(name []byte) bool {
	s := string(name)
	s = strings.TrimSuffix(s, "/")
	if s == "" {
		return false
	}
	for c := range strings.SplitSeq(s, "/") {
		if c == "" || c == "." || c == ".." || strings.ContainsAny(c, "\x00\\") {
			return false
		}
	}
	return true
}

func (a *Archive) nameOf(i int) []byte {
	e := &a.ents[i]
	return a.names[e.name : e.name+uint32(e.nlen)]
}

// markDuplicates sorts the name index and refuses every member whose
// name another member has: which one a reader would take is not
// agreed (Python takes the last, others the first).
func (a *Archive) markDuplicates() {
	a.sorted = make([]uint32, len(a.ents))
	for i := range a.sorted {
		a.sorted[i] = uint32(i)
	}
	slices.SortFunc(a.sorted, func(x, y uint32) int {
		if c := bytes.Compare(a.nameOf(int(x)), a.nameOf(int(y))); c != 0 {
			return c
		}
		return int(x) - int(y)
	})
	for k := 1; k < len(a.sorted); k++ {
		x, y := int(a.sorted[k-1]), int(a.sorted[k])
		if bytes.Equal(a.nameOf(x), a.nameOf(y)) {
			a.ents[x].bad = max(a.ents[x].bad, badDuplicate)
			a.ents[y].bad = max(a.ents[y].bad, badDuplicate)
		}
	}
}

// markOverlaps orders the members by offset, records where each one's
// slot ends (the next local header, or the directory), and refuses
// members whose smallest possible extent (header with its name, data,
// data descriptor) does not fit in their slot: two entries that share
// bytes (a classic zip bomb) or run into the directory.
func (a *Archive) markOverlaps() {
	byOff := make([]uint32, len(a.ents))
	for i := range byOff {
		byOff[i] = uint32(i)
	}
	slices.SortFunc(byOff, func(x, y uint32) int {
		hx, hy := a.ents[x].hdr, a.ents[y].hdr
		switch {
		case hx < hy:
			return -1
		case hx > hy:
			return 1
		}
		return int(x) - int(y)
	})
	for k, i := range byOff {
		e := &a.ents[i]
		e.end = a.dirEnd
		if k+1 < len(byOff) {
			e.end = a.ents[byOff[k+1]].hdr
		}
		need := int64(localLen) + int64(e.nlen) + e.csize
		if e.flags&flagDataDesc != 0 {
			need += 12
		}
		if e.end-e.hdr < need {
			e.bad = max(e.bad, badOverlap)
			if k+1 < len(byOff) {
				n := &a.ents[byOff[k+1]]
				n.bad = max(n.bad, badOverlap)
			}
		}
	}
}

// Source returns the reader of the archive itself.
func (a *Archive) Source() io.ReaderAt { return a.r }

// Name returns the name the archive was opened with.
func (a *Archive) Name() string { return a.name }

// Len returns the number of members.
func (a *Archive) Len() int { return len(a.ents) }

// Member returns member i (0 ≤ i < Len()), in directory order.
func (a *Archive) Member(i int) Member {
	e := &a.ents[i]
	return Member{
		Name: string(a.nameOf(i)), Method: e.method, Flags: e.flags, CRC32: e.crc,
		CompressedSize: e.csize, Size: e.usize, HeaderOffset: e.hdr,
		Err: reason(e.bad, e.method),
	}
}

// Lookup returns the index of the member named name.
func (a *Archive) Lookup(name string) (int, bool) {
	k, ok := slices.BinarySearchFunc(a.sorted, name, func(i uint32, n string) int {
		return bytes.Compare(a.nameOf(int(i)), []byte(n))
	})
	if !ok {
		return -1, false
	}
	return int(a.sorted[k]), true
}

// List returns the entries directly under the directory prefix ("" for
// the top; "a/b" for "a/b/"), in name order: member names without the
// prefix, and the first component of deeper names, once, with a
// trailing "/" (directories, whether or not the archive has an entry
// for them).
func (a *Archive) List(prefix string) []string {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	var out []string
	k, _ := slices.BinarySearchFunc(a.sorted, prefix, func(i uint32, n string) int {
		return bytes.Compare(a.nameOf(int(i)), []byte(n))
	})
	for k < len(a.sorted) {
		name := a.nameOf(int(a.sorted[k]))
		if !bytes.HasPrefix(name, []byte(prefix)) {
			break
		}
		rest := name[len(prefix):]
		if len(rest) == 0 || !cleanName(name) {
			k++
			continue
		}
		j := bytes.IndexByte(rest, '/')
		if j < 0 {
			if len(out) == 0 || out[len(out)-1] != string(rest) {
				out = append(out, string(rest))
			}
			k++
			continue
		}
		dir := string(rest[:j+1])
		if len(out) == 0 || out[len(out)-1] != dir {
			out = append(out, dir)
		}
		// Skip the rest of that subtree: every name that starts with
		// prefix+dir sorts before prefix+dir with the '/' raised by one.
		skip := prefix + dir[:j] + "0" // '0' follows '/'
		k, _ = slices.BinarySearchFunc(a.sorted, skip, func(i uint32, n string) int {
			return bytes.Compare(a.nameOf(int(i)), []byte(n))
		})
	}
	return out
}

// Under returns the indexes of the members whose names start with
// prefix (all of them for ""), in name order: the members below a
// directory "a/b/", say.
func (a *Archive) Under(prefix string) iter.Seq[int] {
	return func(yield func(int) bool) {
		k, _ := slices.BinarySearchFunc(a.sorted, prefix, func(i uint32, n string) int {
			return bytes.Compare(a.nameOf(int(i)), []byte(n))
		})
		for ; k < len(a.sorted); k++ {
			i := int(a.sorted[k])
			if !bytes.HasPrefix(a.nameOf(i), []byte(prefix)) || !yield(i) {
				return
			}
		}
	}
}

// usable returns member i's entry, or why it cannot be read.
func (a *Archive) usable(i int) (*entry, error) {
	if i < 0 || i >= len(a.ents) {
		return nil, fmt.Errorf("%s: member %d: %w", a.name, i, ErrNotExist)
	}
	e := &a.ents[i]
	if e.bad != okMember {
		return nil, fmt.Errorf("%s: %s: %w", a.name, a.nameOf(i), reason(e.bad, e.method))
	}
	return e, nil
}

// parseLocal checks the local header at the start of b against entry i
// and returns the offset of the member's data from the header's start.
func (a *Archive) parseLocal(i int, b []byte) (int64, error) {
	e := &a.ents[i]
	if len(b) < localLen || le32(b) != sigLocal {
		return 0, fmt.Errorf("%s: %s: %w: no local header at %d", a.name, a.nameOf(i), ErrFormat, e.hdr)
	}
	nlen, elen := int(le16(b[26:])), int(le16(b[28:]))
	if nlen != int(e.nlen) || (len(b) >= localLen+nlen && !bytes.Equal(b[localLen:localLen+nlen], a.nameOf(i))) {
		return 0, fmt.Errorf("%s: %s: %w: the local header names another member", a.name, a.nameOf(i), ErrFormat)
	}
	if m := le16(b[8:]); m != e.method {
		return 0, fmt.Errorf("%s: %s: %w: method %d in the local header, %d in the directory", a.name, a.nameOf(i), ErrFormat, m, e.method)
	}
	off := int64(localLen + nlen + elen)
	if e.hdr+off+e.csize > e.end {
		return 0, fmt.Errorf("%s: %s: %w: data [%d,+%d) runs into the next member at %d", a.name, a.nameOf(i), ErrFormat, e.hdr+off, e.csize, e.end)
	}
	return off, nil
}

// guessHeader is the length of member e's local header as its central
// entry suggests, plus room for a longer local extra field.
func (e *entry) guessHeader() int64 {
	return int64(localLen) + int64(e.nlen) + int64(e.cextra) + headerSlack
}

// resolve reads member i's local header and records where its data
// starts.
func (a *Archive) resolve(i int) (int64, error) {
	e := &a.ents[i]
	if d := e.data.Load(); d != 0 {
		return d, nil
	}
	b := make([]byte, min(e.guessHeader(), e.end-e.hdr))
	if err := readFull(a.r, b, e.hdr); err != nil {
		return 0, fmt.Errorf("%s: %s: %w", a.name, a.nameOf(i), err)
	}
	if len(b) >= localLen {
		if need := localLen + int(le16(b[26:])) + int(le16(b[28:])); need > len(b) && int64(need) <= e.end-e.hdr {
			b = make([]byte, need)
			if err := readFull(a.r, b, e.hdr); err != nil {
				return 0, fmt.Errorf("%s: %s: %w", a.name, a.nameOf(i), err)
			}
		}
	}
	off, err := a.parseLocal(i, b)
	if err != nil {
		return 0, err
	}
	e.data.Store(e.hdr + off)
	return e.hdr + off, nil
}

// ReadFile returns the uncompressed bytes of member i, stored or
// deflated, checked against its CRC-32; a member whose size is more
// than max bytes gives ErrTooLarge before anything is read. It reads
// the member (with its local header, when that is not known yet) in one
// read of the archive.
func (a *Archive) ReadFile(i int, max int64) ([]byte, error) {
	e, err := a.readable(i, max)
	if err != nil {
		return nil, err
	}
	name := a.nameOf(i)
	var raw []byte
	if d := e.data.Load(); d != 0 {
		raw = make([]byte, e.csize)
		if err := readFull(a.r, raw, d); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", a.name, name, err)
		}
	} else {
		b := make([]byte, e.wholeRead())
		if err := readFull(a.r, b, e.hdr); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", a.name, name, err)
		}
		off, err := a.parseLocal(i, b)
		if err != nil {
			return nil, err
		}
		e.data.Store(e.hdr + off)
		if off+e.csize <= int64(len(b)) {
			raw = b[off : off+e.csize : off+e.csize]
		} else {
			raw = make([]byte, e.csize)
			if err := readFull(a.r, raw, e.hdr+off); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", a.name, name, err)
			}
		}
	}
	return a.decode(i, raw)
}

// readable returns member i's entry if it can be read whole within max
// bytes, else why not.
func (a *Archive) readable(i int, max int64) (*entry, error) {
	e, err := a.usable(i)
	if err != nil {
		return nil, err
	}
	name := a.nameOf(i)
	if e.usize > max {
		return nil, fmt.Errorf("%s: %s: %w: %d bytes, more than %d", a.name, name, ErrTooLarge, e.usize, max)
	}
	// Deflate expands incompressible input by 5 bytes per 64 KiB block
	// stored: a member whose compressed size is beyond that is refused.
	if e.method == Deflate && e.csize > e.usize+e.usize/1024+1024 {
		return nil, fmt.Errorf("%s: %s: %w: %d compressed bytes for %d", a.name, name, ErrFormat, e.csize, e.usize)
	}
	// Nor can it shrink input by more than 1032 to 1 (a 258-byte match
	// in two bits): a member that claims more is refused before its
	// size is allocated (a few bytes claiming 64 MiB each, many times).
	if e.method == Deflate && e.usize > maxInflated(e.csize) {
		return nil, fmt.Errorf("%s: %s: %w: %d compressed bytes cannot inflate to %d", a.name, name, ErrFormat, e.csize, e.usize)
	}
	return e, nil
}

// wholeRead is how much of the archive, from the local header, a read
// of the whole member takes: its header (as guessHeader) and data.
func (e *entry) wholeRead() int64 { return min(e.guessHeader()+e.csize, e.end-e.hdr) }

// decode returns member i's bytes from its stored ones raw: inflated if
// deflated, and checked against the CRC-32.
func (a *Archive) decode(i int, raw []byte) ([]byte, error) {
	e, name := &a.ents[i], a.nameOf(i)
	out := raw
	if e.method == Deflate {
		out = make([]byte, e.usize)
		fr := flate.NewReader(bytes.NewReader(raw))
		n, err := io.ReadFull(fr, out)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w: inflates to %d bytes, not %d: %v", a.name, name, ErrFormat, n, e.usize, err)
		}
		var one [1]byte
		if k, _ := fr.Read(one[:]); k != 0 {
			return nil, fmt.Errorf("%s: %s: %w: inflates to more than %d bytes", a.name, name, ErrFormat, e.usize)
		}
	}
	if got := crc32.ChecksumIEEE(out); got != e.crc {
		return nil, fmt.Errorf("%s: %s: %w: CRC-32 %08x, the directory says %08x", a.name, name, ErrFormat, got, e.crc)
	}
	return out, nil
}

// ReadFiles reads the members idx whole, as ReadFile reads each (within
// limit bytes each, checked), in few reads of the archive: members whose
// bytes lie within gap bytes of each other are read together, in reads
// of at most span bytes (the metadata documents of many arrays in one
// ranged GET, say). fn gets each member's bytes, which it may keep, or
// why they cannot be read, once per member, on the caller's goroutine.
func (a *Archive) ReadFiles(idx []int, limit, gap, span int64, fn func(i int, b []byte, err error)) {
	type slot struct {
		i          int
		start, end int64
	}
	var slots []slot
	for _, i := range idx {
		e, err := a.readable(i, limit)
		if err != nil {
			fn(i, nil, err)
			continue
		}
		if e.wholeRead() > span || e.data.Load() != 0 {
			b, err := a.ReadFile(i, limit)
			fn(i, b, err)
			continue
		}
		slots = append(slots, slot{i, e.hdr, e.hdr + e.wholeRead()})
	}
	slices.SortFunc(slots, func(x, y slot) int { return cmp.Compare(x.start, y.start) })
	for k := 0; k < len(slots); {
		start, end := slots[k].start, slots[k].end
		j := k + 1
		for j < len(slots) && slots[j].start-end <= gap && max(end, slots[j].end)-start <= span {
			end = max(end, slots[j].end)
			j++
		}
		buf := make([]byte, end-start)
		err := readFull(a.r, buf, start)
		for _, s := range slots[k:j] {
			if err != nil {
				fn(s.i, nil, fmt.Errorf("%s: %s: %w", a.name, a.nameOf(s.i), err))
				continue
			}
			e := &a.ents[s.i]
			b := buf[s.start-start : s.end-start]
			off, perr := a.parseLocal(s.i, b)
			if perr != nil {
				fn(s.i, nil, perr)
				continue
			}
			e.data.Store(e.hdr + off)
			if off+e.csize > int64(len(b)) {
				// A local extra field longer than guessed.
				out, err := a.ReadFile(s.i, limit)
				fn(s.i, out, err)
				continue
			}
			raw := b[off : off+e.csize]
			if e.method == Store {
				raw = bytes.Clone(raw) // not the whole read's buffer kept by a caller
			}
			out, err := a.decode(s.i, raw)
			fn(s.i, out, err)
		}
		k = j
	}
}

// maxInflated is the most that n bytes of deflate can inflate to.
func maxInflated(n int64) int64 {
	if n > (1<<62)/1032 {
		return 1 << 62
	}
	return 1032*n + 1024
}

// Open returns a reader of stored member i's bytes, read in place.
// A deflated member gives ErrUnsupported: read it whole with ReadFile.
func (a *Archive) Open(i int) (*Reader, error) {
	e, err := a.usable(i)
	if err != nil {
		return nil, err
	}
	if e.method != Store {
		return nil, fmt.Errorf("%s: %s: %w: a deflated member cannot be read in place", a.name, a.nameOf(i), ErrUnsupported)
	}
	return &Reader{a: a, i: i}, nil
}

// Reader reads a stored member's bytes in place: each ReadAt is one
// read of the archive, but the first: the member's data starts after its
// local header, whose extra field may differ in length from the central
// one (and nothing else tells where the data is), so a first read that
// ends near the member's start reads the header with the data in one
// read, and any other reads the header first.
type Reader struct {
	a *Archive
	i int
}

// Size returns the member's size.
func (r *Reader) Size() int64 { return r.a.ents[r.i].usize }

// DataOffset returns where the member's bytes start in the archive,
// reading its local header first if no read has yet: for a caller that
// reads the member's bytes where they lie in the archive's reader (a
// mapping, a cache of fetched ranges).
func (r *Reader) DataOffset() (int64, error) { return r.a.resolve(r.i) }

// Name returns the member's name.
func (r *Reader) Name() string { return string(r.a.nameOf(r.i)) }

// DataOffsetGuess returns where the member's bytes start in the archive
// without a read: known when a read has found it (from the local
// header); otherwise, for a member without a data descriptor, where its
// bytes would start if they ended where the next record begins, as
// every writer lays out such members (ok), which only a check of bytes
// read there can confirm (see ConfirmDataOffset). The local header may
// have an extra field of its own length: nothing else tells where the
// data start.
func (r *Reader) DataOffsetGuess() (off int64, known, ok bool) {
	e := &r.a.ents[r.i]
	if d := e.data.Load(); d != 0 {
		return d, true, true
	}
	if e.flags&flagDataDesc != 0 {
		return 0, false, false
	}
	return e.end - e.csize, false, true
}

// ConfirmDataOffset records d, a DataOffsetGuess, as where the member's
// bytes start, once the caller has read bytes there and checked them
// against a checksum they carry (a Zarr shard index's crc32c): the
// local header need not be read. A d outside the member's place in the
// archive is refused.
func (r *Reader) ConfirmDataOffset(d int64) error {
	e := &r.a.ents[r.i]
	if d < e.hdr+localLen+int64(e.nlen) || d+e.csize > e.end {
		return fmt.Errorf("%s: %s: %w: data at %d outside the member's place [%d,%d)", r.a.name, r.Name(), ErrFormat, d, e.hdr, e.end)
	}
	e.data.CompareAndSwap(0, d)
	return nil
}

// ReadAt reads len(p) bytes of the member at off (io.EOF at its end).
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	e := &r.a.ents[r.i]
	if off < 0 {
		return 0, fmt.Errorf("%s: %s: negative offset %d", r.a.name, r.Name(), off)
	}
	if off >= e.usize {
		if len(p) == 0 && off == e.usize {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := min(int64(len(p)), e.usize-off)
	q := p[:want]
	d := e.data.Load()
	if d == 0 {
		var err error
		if d, err = r.first(q, off); err != nil || d < 0 {
			return r.result(want, len(p), err)
		}
	}
	if err := readFull(r.a.r, q, d+off); err != nil {
		return 0, fmt.Errorf("%s: %s: %w", r.a.name, r.Name(), err)
	}
	return r.result(want, len(p), nil)
}

func (r *Reader) result(n int64, asked int, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	if int(n) < asked {
		return int(n), io.EOF
	}
	return int(n), nil
}

// first serves a read of an unresolved member, resolving it; it returns
// -1 when q has been filled, else the data offset.
func (r *Reader) first(q []byte, off int64) (int64, error) {
	a, e, i := r.a, &r.a.ents[r.i], r.i
	end := off + int64(len(q))
	switch {
	case end <= nearEdge:
		b := make([]byte, min(e.guessHeader()+end, e.end-e.hdr))
		if err := readFull(a.r, b, e.hdr); err != nil {
			return 0, fmt.Errorf("%s: %s: %w", a.name, a.nameOf(i), err)
		}
		h, err := a.parseLocal(i, b)
		if err != nil {
			return 0, err
		}
		e.data.Store(e.hdr + h)
		if h+end > int64(len(b)) {
			return e.hdr + h, nil
		}
		copy(q, b[h+off:])
		return -1, nil
	}
	return a.resolve(i)
}

// readFull reads len(b) bytes at off of r; a short read is
// io.ErrUnexpectedEOF.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading [%d,+%d): %w", off, len(b), err)
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
