package zarr

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/bloscfs/bloscfs/zipread"
)

// A Zarr store zipped whole (zarr-python's ZipStore, an OME-Zarr .ozx)
// is read in place: ZipStore is a Store over the members of a
// zipread.Archive. A stored member is a byte range of the archive,
// read with ranged reads (GetRange, ObjectReader: a Blosc chunk decodes
// block by block from it); a deflated member is inflated whole, within
// the bound of what the array's metadata allow for the object (a
// chunk's largest encoding, a shard's largest size; MaxMetaSize for a
// metadata document, which GetMeta asks for), and checked against its
// CRC-32.

// ZipStore is a Store over the members of a ZIP archive below a folder
// of it. Every version of an object is the member as this opening of
// the archive holds it (the archive's readers serve one version of the
// file): Versions of two openings differ. It is safe for concurrent
// use.
type ZipStore struct {
	z      *zipArchive
	prefix string // the store's root in the archive: "" or "folder/"
	// max bounds the objects read through the store: the largest the
	// array's writer can have made (a deflated member is inflated whole
	// within it; a larger one is ErrTooLarge).
	max int64
}

// zipArchive is what the stores of one opened archive share.
type zipArchive struct {
	a *zipread.Archive
	// tag names this opening of the archive in the Versions of its
	// members.
	tag string
	// whole: each read of the archive is a request (an object store):
	// chunks are read whole, one read each, not in place, and ranges of
	// members (a shard's index and inner chunks) through exact, one
	// GET each, without the object's read-ahead.
	whole bool
	exact RequestReader
}

// zipOpenings numbers the openings of archives, for their Versions.
var zipOpenings atomic.Uint64

// RequestReader is implemented by readers of a file in an object store
// (remote.Object), for which each read is a request: a ZipStore over
// one reads each chunk member whole, in one read with its local header,
// rather than its header, block starts and blocks one read at a time.
type RequestReader interface {
	io.ReaderAt
	// ReadExact reads exactly len(p) bytes at off, fetching no more.
	ReadExact(p []byte, off int64) error
}

// NewZipStore returns a store over the members of a below the folder
// prefix ("" for the top, else a folder's name with its trailing '/').
// exact is the archive's reader when each of its reads is a request (nil
// otherwise): chunks are then read whole, one read each, and ranges of
// members exactly (see OpenZipTree, which passes it).
func NewZipStore(a *zipread.Archive, prefix string, exact RequestReader) *ZipStore {
	z := &zipArchive{a: a, whole: exact != nil, exact: exact,
		tag: "zip#" + strconv.FormatUint(zipOpenings.Add(1), 10) + "\x00" + a.Name() + "\x00"}
	return &ZipStore{z: z, prefix: prefix, max: MaxObject}
}

// bounded returns the store s whose objects are at most max bytes.
func (s *ZipStore) bounded(max int64) *ZipStore {
	return &ZipStore{z: s.z, prefix: s.prefix, max: min(max, MaxObject)}
}

// member returns the index of the member key names, or an error: not a
// member (ErrNotExist), or one that is refused (its reason). The
// store's errors name the member (the archive's errors name the archive
// too).
func (s *ZipStore) member(key string) (int, zipread.Member, error) {
	if !ValidKey(key) {
		return -1, zipread.Member{}, fmt.Errorf("zarr: key %q: %w (not a relative key inside the store)", key, ErrFormat)
	}
	name := s.prefix + key
	i, ok := s.z.a.Lookup(name)
	if !ok {
		return -1, zipread.Member{}, fmt.Errorf("%s: %w", name, ErrNotExist)
	}
	m := s.z.a.Member(i)
	if m.Err != nil {
		return -1, m, fmt.Errorf("%s: %w", name, m.Err)
	}
	return i, m, nil
}

// zipErr maps the archive's errors to the store's: a member larger than
// allowed is ErrTooLarge, one whose bytes do not match its directory
// entry (CRC-32, inflated size) ErrCorrupt.
func zipErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zipread.ErrTooLarge):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	case errors.Is(err, zipread.ErrFormat):
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}

// Get returns the member key names, inflated if deflated, of at most
// limit bytes: a larger one is ErrTooLarge by its directory entry,
// unread. It costs one read of the archive (the member with its local
// header).
func (s *ZipStore) Get(key string, limit int64) ([]byte, error) {
	i, m, err := s.member(key)
	if err != nil {
		return nil, err
	}
	limit = min(limit, s.max)
	if m.Size > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, more than %d", m.Name, ErrTooLarge, m.Size, limit)
	}
	b, err := s.z.a.ReadFile(i, limit)
	return b, zipErr(err)
}

// GetRange returns n bytes at off of the member key names (the last n
// with off < 0): of a stored member, one ranged read of the archive (the
// first read of a member also reads its local header, see
// zipread.Reader); of a deflated one, from the member inflated whole
// (kept a while for the next ranges, see inflateCache).
func (s *ZipStore) GetRange(key string, off, n int64) ([]byte, error) {
	i, m, err := s.member(key)
	if err != nil {
		return nil, err
	}
	if off < 0 {
		off = m.Size - n
	}
	if n < 0 || n > MaxObject || off < 0 || off > m.Size-n {
		return nil, fmt.Errorf("%s: range [%d,+%d) of a %d-byte member: %w", m.Name, off, n, m.Size, io.ErrUnexpectedEOF)
	}
	if n == 0 {
		return []byte{}, nil
	}
	if m.Method == zipread.Store {
		r, err := s.z.a.Open(i)
		if err != nil {
			return nil, zipErr(err)
		}
		b := make([]byte, n)
		if s.z.exact != nil && off+n > nearStart {
			// One GET of exactly the range (the local header, once per
			// member, one more).
			d, err := r.DataOffset()
			if err != nil {
				return nil, zipErr(err)
			}
			if err := s.z.exact.ReadExact(b, d+off); err != nil {
				return nil, fmt.Errorf("%s: %w", m.Name, err)
			}
			return b, nil
		}
		if _, err := r.ReadAt(b, off); err != nil {
			return nil, zipErr(err)
		}
		return b, nil
	}
	whole, err := s.inflate(i, m)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(whole[off : off+n]), nil
}

// GetRangeChecked is GetRange for a caller that can check the bytes it
// asks for (a shard index and its crc32c): the first read of a stored
// member's range supposes the member's bytes end where the next record
// of the archive begins (zipread.Reader.DataOffsetGuess) and reads the
// range there, without the member's local header; bytes that check
// confirm the guess for every later read of the member. Bytes that do
// not, or a member whose place is known or cannot be guessed, are read
// as GetRange reads them.
func (s *ZipStore) GetRangeChecked(key string, off, n int64, check func([]byte) bool) ([]byte, error) {
	i, m, err := s.member(key)
	if err != nil {
		return nil, err
	}
	if off < 0 {
		off = m.Size - n
	}
	if m.Method != zipread.Store || n <= 0 || n > MaxObject || off < 0 || off > m.Size-n {
		return s.GetRange(key, off, n)
	}
	r, err := s.z.a.Open(i)
	if err != nil {
		return nil, zipErr(err)
	}
	d, known, ok := r.DataOffsetGuess()
	if known || !ok {
		return s.GetRange(key, off, n)
	}
	b := make([]byte, n)
	if s.z.exact != nil {
		err = s.z.exact.ReadExact(b, d+off)
	} else {
		var k int
		k, err = s.z.a.Source().ReadAt(b, d+off)
		if k == len(b) {
			err = nil
		} else if err == nil {
			err = io.ErrUnexpectedEOF
		}
	}
	if err == nil && check(b) && r.ConfirmDataOffset(d) == nil {
		return b, nil
	}
	return s.GetRange(key, off, n)
}

// nearStart is how far into a member a range may end and still be read
// through the member's reader, which reads it with the local header in
// one read the first time (zipread's own bound).
const nearStart = 256 << 10

// inflate returns deflated member i whole, within the store's bound,
// from the cache of inflated members or inflating it.
func (s *ZipStore) inflate(i int, m zipread.Member) ([]byte, error) {
	if m.Size > s.max {
		return nil, fmt.Errorf("%s: %w: a deflated member of %d bytes, more than the %d its array can have written", m.Name, ErrTooLarge, m.Size, s.max)
	}
	return inflatedMembers.get(inflateKey{s.z.tag, i}, func() ([]byte, error) {
		b, err := s.z.a.ReadFile(i, s.max)
		return b, zipErr(err)
	})
}

// ObjectReader returns a reader of the member key names and its size:
// a stored member is read in place (a chunk's header, block starts and
// the blocks a read touches, each one read of the archive); a deflated
// one is inflated whole within the store's bound.
func (s *ZipStore) ObjectReader(key string) (io.ReaderAt, int64, error) {
	i, m, err := s.member(key)
	if err != nil {
		return nil, 0, err
	}
	if m.Method == zipread.Store {
		r, err := s.z.a.Open(i)
		if err != nil {
			return nil, 0, zipErr(err)
		}
		return r, m.Size, nil
	}
	if m.Size > s.max {
		return nil, 0, fmt.Errorf("%s: %w: a deflated member of %d bytes, more than the %d its array can have written", m.Name, ErrTooLarge, m.Size, s.max)
	}
	b, err := s.z.a.ReadFile(i, s.max)
	if err != nil {
		return nil, 0, zipErr(err)
	}
	return bytes.NewReader(b), m.Size, nil
}

// Version returns the version of the member key names: that of this
// opening of the archive, without a read.
func (s *ZipStore) Version(key string) (Version, error) {
	if _, _, err := s.member(key); err != nil && errors.Is(err, ErrNotExist) {
		return Version{}, err
	}
	return TagVersion(s.z.tag + s.prefix + key), nil
}

// List lists the names directly under the folder prefix of the store
// (folders with a trailing '/'), from the archive's directory.
func (s *ZipStore) List(prefix string) ([]string, error) {
	if prefix != "" && !ValidKey(prefix) {
		return nil, fmt.Errorf("zarr: key %q: %w", prefix, ErrFormat)
	}
	return s.z.a.List(s.prefix + prefix), nil
}

// wholeStore is a ZipStore without ObjectReader: over a RequestReader,
// a Blosc chunk is read whole (Get: one read of the archive) rather than
// in place in several.
type wholeStore struct{ s *ZipStore }

func (w wholeStore) Get(key string, limit int64) ([]byte, error) { return w.s.Get(key, limit) }

func (w wholeStore) GetRange(key string, off, n int64) ([]byte, error) {
	return w.s.GetRange(key, off, n)
}

func (w wholeStore) GetRangeChecked(key string, off, n int64, check func([]byte) bool) ([]byte, error) {
	return w.s.GetRangeChecked(key, off, n, check)
}

func (w wholeStore) Version(key string) (Version, error)  { return w.s.Version(key) }
func (w wholeStore) List(prefix string) ([]string, error) { return w.s.List(prefix) }

var (
	_ Store         = (*ZipStore)(nil)
	_ Versioner     = (*ZipStore)(nil)
	_ ReaderAtStore = (*ZipStore)(nil)
	_ Lister        = (*ZipStore)(nil)
	_ Versioner     = wholeStore{}
	_ checkedRanger = (*ZipStore)(nil)
	_ checkedRanger = wholeStore{}
)

// checkedRanger is implemented by stores that can read a range without
// what they would read first when the caller checks the bytes (a
// ZipStore: a member's local header).
type checkedRanger interface {
	GetRangeChecked(key string, off, n int64, check func([]byte) bool) ([]byte, error)
}

// forArray returns the store an array reads through.
func (s *ZipStore) forArray() Store {
	if s.z.whole {
		return wholeStore{s}
	}
	return s
}

// maxStored is the largest object the array's writer can have made: the
// largest encoding of a chunk, or of a shard (its index and every inner
// chunk at its largest).
func (a *Array) maxStored() int64 {
	if a.v3 != nil && a.v3.shard != nil {
		s := a.v3.shard
		if s.chain.raw <= 0 || s.n > (MaxObject-s.indexSize())/s.chain.raw {
			return MaxObject
		}
		return s.indexSize() + s.n*s.chain.raw
	}
	return min(a.rawMax, MaxObject)
}

// inflateBudget bounds the bytes of the inflated members the process
// keeps for GetRange (a deflated shard is read by ranges: its index,
// then inner chunks), over all archives; a member larger than half of it
// is inflated at each range.
const inflateBudget = 64 << 20

// maxInflated bounds the members kept (each get looks through them).
const maxInflated = 64

// inflatedMembers are the deflated members last inflated for ranges of
// them.
var inflatedMembers inflateCache

// inflateCache keeps inflated members, the most recent up to
// inflateBudget bytes and maxInflated members. A member is inflated
// once for the readers that ask for it at the same time (the kernel's
// concurrent READs of a view read the same deflated shard).
type inflateCache struct {
	mu    sync.Mutex
	ents  []inflated // most recent last
	bytes int64
	busy  map[inflateKey]*inflating // members being inflated
}

// inflating is a member being inflated: the readers that ask for it
// meanwhile wait for done and take its result.
type inflating struct {
	done chan struct{}
	b    []byte
	err  error
}

// inflateKey names a member of one opening of an archive.
type inflateKey struct {
	tag string
	i   int
}

type inflated struct {
	i inflateKey
	b []byte
}

// get returns member i inflated: kept, being inflated by another
// reader (it waits for that), or inflated by load now. The bytes are
// shared: the caller must not change them.
func (c *inflateCache) get(i inflateKey, load func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	for k, e := range c.ents {
		if e.i == i {
			c.ents = append(append(c.ents[:k:k], c.ents[k+1:]...), e)
			c.mu.Unlock()
			return e.b, nil
		}
	}
	if f := c.busy[i]; f != nil {
		c.mu.Unlock()
		<-f.done
		return f.b, f.err
	}
	f := &inflating{done: make(chan struct{}), err: errInflatePanic}
	if c.busy == nil {
		c.busy = make(map[inflateKey]*inflating)
	}
	c.busy[i] = f
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.busy, i)
		if f.err == nil && int64(len(f.b)) <= inflateBudget/2 {
			c.ents = append(c.ents, inflated{i, f.b})
			c.bytes += int64(len(f.b))
			for c.bytes > inflateBudget || len(c.ents) > maxInflated {
				c.bytes -= int64(len(c.ents[0].b))
				c.ents = c.ents[1:]
			}
		}
		c.mu.Unlock()
		close(f.done)
	}()
	f.b, f.err = load()
	return f.b, f.err
}

// errInflatePanic is what the readers waiting for a member get when its
// inflation panicked.
var errInflatePanic = errors.New("inflating the member failed")
