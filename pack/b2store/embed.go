package b2store

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// The metalayers that mark a store's frame (docs/FORMATS.md §14.1, §14.2).
const (
	MarkerEmbed = "b2embed" // EmbedStore; also every store's embed.b2e before python-blosc2 4.1
	MarkerDict  = "b2dict"  // the embed.b2e of a DictStore (python-blosc2 ≥ 4.1)
	MarkerTree  = "b2tree"  // the embed.b2e of a TreeStore (python-blosc2 ≥ 4.1)
)

// VLMetaEmbedMap is the vlmetalayer of a store's frame that holds its
// embed map.
const VLMetaEmbedMap = "estore_metadata"

// internalVLMeta are the vlmetalayers of a store's frame that
// python-blosc2 keeps for itself: they are not user metadata.
var internalVLMeta = []string{VLMetaEmbedMap, "_object_registry", "dstore_tick"}

// Embed is an opened EmbedStore frame (a .b2e file, or a DictStore's or
// TreeStore's embed.b2e): a Blosc2 frame whose SChunk bytes are other
// frames, one after another, and whose "estore_metadata" vlmetalayer maps
// keys to their byte ranges. It is safe for concurrent use.
type Embed struct {
	name    string
	fr      *frame.Frame
	marker  string
	entries []Entry // valid, sorted by key
	current int64
	probs   problems
}

// OpenEmbed opens the EmbedStore frame of size bytes at offset 0 of r.
// The frame must carry one of the b2embed, b2dict or b2tree metalayers;
// its embed map is decoded from the "estore_metadata" vlmetalayer (none:
// an empty store, as python-blosc2 reads it). An input that is not such
// a store gives an error wrapping ErrNotStore (transient I/O errors are
// returned as they are). Entries that cannot be read are left out and
// listed by Problems. name prefixes errors; cache holds the decoded
// blocks of the store's chunks (nil: a private cache, as frame.Open).
func OpenEmbed(r io.ReaderAt, size int64, name string, cache pack.BlockCache) (*Embed, error) {
	fr, err := frame.Open(r, size, name, cache)
	if err != nil {
		if !verdict(err) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrNotStore, err)
	}
	e := &Embed{name: name, fr: fr}
	for _, m := range []string{MarkerEmbed, MarkerDict, MarkerTree} {
		if _, ok := fr.Meta(m); ok {
			e.marker = m
			break
		}
	}
	if e.marker == "" {
		return nil, fmt.Errorf("%s: %w: the frame has none of the b2embed, b2dict, b2tree metalayers (it has %q)", name, ErrNotStore, fr.MetaNames())
	}
	if !slices.Contains(fr.VLMetaNames(), VLMetaEmbedMap) {
		return e, nil
	}
	raw, err := fr.VLMeta(VLMetaEmbedMap)
	if err != nil {
		if !verdict(err) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrNotStore, err)
	}
	em, err := parseEmbedMap(raw, name, &e.probs)
	if err != nil {
		return nil, err
	}
	e.current = em.current
	e.entries = em.validate(name, fr.Size(), &e.probs)
	return e, nil
}

// Name returns the name the store was opened with.
func (e *Embed) Name() string { return e.name }

// Marker returns the metalayer that marks the frame: MarkerEmbed,
// MarkerDict or MarkerTree.
func (e *Embed) Marker() string { return e.marker }

// Frame returns the store's frame.
func (e *Embed) Frame() *frame.Frame { return e.fr }

// Size returns the size of the store's SChunk bytes.
func (e *Embed) Size() int64 { return e.fr.Size() }

// CurrentOffset returns the map's current_offset: where python-blosc2
// appends the next value (bytes past the last range that are in no range
// were values since deleted or replaced).
func (e *Embed) CurrentOffset() int64 { return e.current }

// Entries returns the entries that can be read, sorted by key.
func (e *Embed) Entries() []Entry { return slices.Clone(e.entries) }

// Lookup returns the entry of key.
func (e *Embed) Lookup(key string) (Entry, bool) {
	i, ok := slices.BinarySearchFunc(e.entries, key, func(a Entry, k string) int {
		switch {
		case a.Key < k:
			return -1
		case a.Key > k:
			return 1
		}
		return 0
	})
	if !ok {
		return Entry{}, false
	}
	return e.entries[i], true
}

// Problems returns the errors of the entries left out (ErrBadEntry), each
// naming the store and the key.
func (e *Embed) Problems() []error { return e.probs.errors() }

// Bytes returns a reader of the byte range [off, off+n) of the store's
// SChunk bytes: reads decode only the store chunks (and blocks) that
// hold the bytes they ask for, through the store's cache.
func (e *Embed) Bytes(off, n int64) (io.ReaderAt, error) {
	if off < 0 || n < 0 || off > e.fr.Size() || n > e.fr.Size()-off {
		return nil, fmt.Errorf("%s: %w: bytes [%d,%d) outside the store's %d", e.name, ErrBadEntry, off, off+n, e.fr.Size())
	}
	return io.NewSectionReader(e.fr, off, n), nil
}

// ValueReader returns a reader of an embedded entry's frame bytes.
func (e *Embed) ValueReader(en Entry) (io.ReaderAt, int64, error) {
	if en.C2 != nil {
		return nil, 0, fmt.Errorf("%s: key %q: %w: a C2Array reference holds no bytes", e.name, en.Key, ErrUnsupportedKind)
	}
	r, err := e.Bytes(en.Offset, en.Length)
	return r, en.Length, err
}

// VLMeta returns the user vlmetalayers of the store's frame (those
// python-blosc2 keeps for itself, such as estore_metadata, left out).
func (e *Embed) VLMeta() *VLMeta {
	var names []string
	for _, n := range e.fr.VLMetaNames() {
		if !slices.Contains(internalVLMeta, n) {
			names = append(names, n)
		}
	}
	return &VLMeta{name: e.name, fr: e.fr, names: names}
}

// rawVLMeta returns a vlmetalayer of the store's frame, or nil.
func (e *Embed) rawVLMeta(name string) ([]byte, error) {
	if !slices.Contains(e.fr.VLMetaNames(), name) {
		return nil, nil
	}
	b, err := e.fr.VLMeta(name)
	if err != nil && errors.Is(err, frame.ErrNoMeta) {
		return nil, nil
	}
	return b, err
}
