package b2store

import (
	"errors"
	"fmt"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
	"github.com/bloscfs/bloscfs/zipread"
)

// Errors of the package, wrapped with the store's name and what is wrong;
// test them with errors.Is.
var (
	// ErrNotStore reports a file or directory that is not a python-blosc2
	// store: no frame, no b2embed/b2dict/b2tree metalayer, no embed.b2e,
	// or an embed map that does not decode. Such an input stays what it
	// is on disk (a frame, a directory of frames, a plain file).
	ErrNotStore = errors.New("not a python-blosc2 store")
	// ErrBadEntry reports one entry of a store that is left out: a key
	// that cannot be a path, a byte range outside the store or over
	// another's, a key that is both a leaf and a directory, a limit
	// passed. The rest of the store reads.
	ErrBadEntry = errors.New("invalid store entry")
	// ErrUnsupportedKind reports a leaf whose kind is listed but not read
	// (BatchArray, ObjectArray, ListArray, lazy expressions and other
	// b2o objects, proxies). It is also a pack.ErrUnsupported: a tree's
	// problem of a kind not read, not a defect of the store.
	ErrUnsupportedKind error = unsupportedKind{}
	// ErrVLMeta reports a vlmetalayer value that is not one msgpack value
	// that JSON can show (trailing bytes, a non-string map key, too deep,
	// too large).
	ErrVLMeta = errors.New("vlmeta value not shown as JSON")
	// ErrNotFound reports a key or member that the store does not hold.
	ErrNotFound = errors.New("not in the store")
)

// Limits. Every allocation a store can steer is bounded by these and by
// the size of the metadata that holds it (the embed map is one
// vlmetalayer, at most pack.MaxMetaLayer bytes decoded).
var (
	// MaxEntries bounds the entries read from one embed map, and the
	// members of a store directory or archive beside embed.b2e (the
	// values it holds as files); past it the rest are left out with one
	// ErrBadEntry.
	MaxEntries = 1 << 16
	// MaxKeyLen bounds the length of a key in bytes (PATH_MAX).
	MaxKeyLen = 4096
	// MaxDepth bounds the number of segments of a key.
	MaxDepth = 64
	// MaxProblems bounds the problems a store keeps; one more says how
	// many were dropped.
	MaxProblems = 100
	// MaxVLMetaJSON bounds the JSON text of one vlmeta value.
	MaxVLMetaJSON = 1 << 20
)

// maxNesting bounds the nesting of msgpack arrays and maps walked (the
// walk recurses once per level).
const maxNesting = 64

// maxSegment is the longest key segment: a file name (NAME_MAX).
const maxSegment = 255

// problems collects the errors of the entries left out, up to MaxProblems.
type problems struct {
	list    []error
	dropped int
}

func (p *problems) add(err error) {
	if len(p.list) < MaxProblems {
		p.list = append(p.list, err)
		return
	}
	p.dropped++
}

func (p *problems) errors() []error {
	out := append([]error(nil), p.list...)
	if p.dropped > 0 {
		out = append(out, fmt.Errorf("%w: %d more problems not listed", ErrBadEntry, p.dropped))
	}
	return out
}

// unsupportedKind is ErrUnsupportedKind.
type unsupportedKind struct{}

func (unsupportedKind) Error() string { return "store leaf of a kind that is not read" }

// Is makes ErrUnsupportedKind a pack.ErrUnsupported.
func (unsupportedKind) Is(target error) bool { return target == pack.ErrUnsupported }

// verdicts are the errors that say something of a store's bytes: a
// failure that wraps none of them (a read that failed, locally or from a
// bucket, the system short of something) says nothing of the store, and
// is never kept as its verdict: the next use tries again.
var verdicts = []error{
	pack.ErrFormat, pack.ErrUnsupported, pack.ErrChecksum, pack.ErrNotInTree,
	blosc.ErrCorrupt, blosc.ErrUnsupported, frame.ErrNoMeta,
	zipread.ErrFormat, zipread.ErrUnsupported, zipread.ErrUnsafe, zipread.ErrNotExist, zipread.ErrTooLarge,
	ErrNotStore, ErrBadEntry, ErrUnsupportedKind, ErrVLMeta, ErrNotFound,
}

// verdict reports whether err is a fact about the store's bytes rather
// than a failure to read them.
func verdict(err error) bool {
	if err == nil || pack.Transient(err) {
		return false
	}
	for _, v := range verdicts {
		if errors.Is(err, v) {
			return true
		}
	}
	return false
}
