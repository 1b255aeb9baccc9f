package b2store

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/bloscfs/bloscfs/pack/frame"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Entry is one key of an embed map (the "estore_metadata" vlmetalayer of
// an EmbedStore frame, docs/FORMATS.md §14.3): an embedded value, the
// byte range [Offset, Offset+Length) of the store's SChunk bytes, which
// holds the value's own frame, or a C2Array reference.
type Entry struct {
	Key    string // "/a/b/c"
	Offset int64  // embedded values
	Length int64
	C2     *C2Ref // C2Array references (no bytes in the store)
}

// C2Ref is a reference to a remote array (python-blosc2's C2Array), held
// in an embed map instead of bytes.
type C2Ref struct {
	URLBase string `json:"urlbase"`
	Path    string `json:"path"`
}

// JSON returns the reference as a JSON object {"urlbase": …, "path": …}.
func (c *C2Ref) JSON() []byte {
	b, _ := json.Marshal(c)
	return append(b, '\n')
}

// embedMap is a decoded embed map: its entries in the map's order, and
// its current_offset (where python-blosc2 writes the next value).
type embedMap struct {
	entries []Entry
	current int64
}

// field limits: a C2Array's urlbase and path.
const maxRefField = 4096

// parseEmbedMap decodes the msgpack of an "estore_metadata" vlmetalayer:
// {"embed_map": {key: {"offset": int, "length": int} | {"urlbase": str,
// "path": str}}, "current_offset": int}. A value that is not such a map
// is an error (the store is not read); an entry that is not such an entry
// is left out with a problem naming the store and key. Entries past
// MaxEntries are left out too.
func parseEmbedMap(b []byte, name string, probs *problems) (*embedMap, error) {
	m := newMPReader(b)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: estore_metadata at byte %d: "+format, append([]any{name, ErrNotStore, m.pos(len(b))}, args...)...)
	}
	c, err := m.peek()
	if err != nil {
		return nil, bad("%v", err)
	}
	if !isMap(c) {
		return nil, bad("%s where a map is expected", codeName(c))
	}
	n, err := m.mapLen()
	if err != nil {
		return nil, bad("%v", err)
	}
	em := &embedMap{}
	found := false
	for range n {
		k, kerr, err := m.optStr(64)
		if err != nil {
			return nil, bad("%v", err)
		}
		if kerr != nil {
			// Not one of the keys python-blosc2 reads: pass it by.
			if err := m.skip(); err != nil {
				return nil, bad("%v", err)
			}
			continue
		}
		switch k {
		case "embed_map":
			if found {
				return nil, bad("two embed_map keys")
			}
			found = true
			if err := em.parseEntries(m, name, probs); err != nil {
				return nil, bad("embed_map: %v", err)
			}
		case "current_offset":
			v, verr, err := m.optInt()
			if err != nil {
				return nil, bad("%v", err)
			}
			if verr == nil {
				em.current = v
			}
		default:
			if err := m.skip(); err != nil {
				return nil, bad("%v", err)
			}
		}
	}
	if !found {
		return nil, bad("no embed_map")
	}
	if m.left() != 0 {
		return nil, bad("%d bytes after the map", m.left())
	}
	return em, nil
}

// parseEntries reads the embed_map value.
func (em *embedMap) parseEntries(m *mpReader, name string, probs *problems) error {
	c, err := m.peek()
	if err != nil {
		return err
	}
	if !isMap(c) {
		return fmt.Errorf("%s where a map is expected", codeName(c))
	}
	n, err := m.mapLen()
	if err != nil {
		return err
	}
	for i := range n {
		if len(em.entries) >= MaxEntries {
			probs.add(fmt.Errorf("%s: %w: the embed map has %d entries; those past the first %d are left out", name, ErrBadEntry, n, MaxEntries))
			for range 2 * (n - i) {
				if err := m.skip(); err != nil {
					return err
				}
			}
			return nil
		}
		key, kerr, err := m.optStr(MaxKeyLen)
		if err != nil {
			return err
		}
		if kerr != nil {
			if err := m.skip(); err != nil {
				return err
			}
			probs.add(fmt.Errorf("%s: %w: embed map entry %d: key: %v", name, ErrBadEntry, i, kerr))
			continue
		}
		e, eerr, err := parseEntry(m, key)
		if err != nil {
			return err
		}
		if eerr != nil {
			probs.add(fmt.Errorf("%s: %w: key %q: %v", name, ErrBadEntry, key, eerr))
			continue
		}
		em.entries = append(em.entries, e)
	}
	return nil
}

// optStr reads a value that should be a string of at most limit bytes.
// A value of another type, or a longer string, is passed by and reported
// in bad; err reports msgpack that cannot be walked on.
func (m *mpReader) optStr(limit int) (s string, bad, err error) {
	c, err := m.peek()
	if err != nil {
		return "", nil, err
	}
	if !msgpcode.IsString(c) {
		if err := m.skip(); err != nil {
			return "", nil, err
		}
		return "", fmt.Errorf("%s where a string is expected", codeName(c)), nil
	}
	n, err := m.d.DecodeBytesLen()
	if err != nil {
		return "", nil, truncated(err)
	}
	if n > limit {
		if err := m.pass(n); err != nil {
			return "", nil, err
		}
		return "", fmt.Errorf("string of %d bytes (at most %d)", n, limit), nil
	}
	b, err := m.raw(n, limit)
	return string(b), nil, err
}

// optInt reads a value that should be an integer in [0, MaxInt64]; see
// optStr.
func (m *mpReader) optInt() (v int64, bad, err error) {
	c, err := m.peek()
	if err != nil {
		return 0, nil, err
	}
	switch {
	case !isInt(c):
		if err := m.skip(); err != nil {
			return 0, nil, err
		}
		return 0, fmt.Errorf("%s where an integer is expected", codeName(c)), nil
	case c == msgpcode.Uint64:
		u, err := m.d.DecodeUint64()
		if err != nil {
			return 0, nil, truncated(err)
		}
		if u > math.MaxInt64 {
			return 0, fmt.Errorf("%d out of range", u), nil
		}
		return int64(u), nil, nil
	}
	v, err = m.d.DecodeInt64()
	if err != nil {
		return 0, nil, truncated(err)
	}
	if v < 0 {
		return 0, fmt.Errorf("negative value %d", v), nil
	}
	return v, nil, nil
}

// parseEntry reads one entry's value: python-blosc2 takes it as a C2Array
// reference when "urlbase" is a non-empty string, else as the range
// "offset", "length" (EmbedStore.__getitem__). bad says why the entry is
// left out; err reports msgpack that cannot be walked on.
func parseEntry(m *mpReader, key string) (e Entry, bad, err error) {
	e.Key = key
	c, err := m.peek()
	if err != nil {
		return e, nil, err
	}
	if !isMap(c) {
		if err := m.skip(); err != nil {
			return e, nil, err
		}
		return e, fmt.Errorf("%s where a map is expected", codeName(c)), nil
	}
	n, err := m.mapLen()
	if err != nil {
		return e, nil, err
	}
	var (
		hasOff, hasLen bool
		urlbase, path  string
	)
	for range n {
		f, ferr, err := m.optStr(16)
		if err != nil {
			return e, nil, err
		}
		if ferr != nil {
			if err := m.skip(); err != nil {
				return e, nil, err
			}
			continue
		}
		switch f {
		case "offset", "length":
			v, verr, err := m.optInt()
			if err != nil {
				return e, nil, err
			}
			if verr != nil {
				bad = cmp.Or(bad, fmt.Errorf("%s: %w", f, verr))
			} else if f == "offset" {
				e.Offset, hasOff = v, true
			} else {
				e.Length, hasLen = v, true
			}
		case "urlbase", "path":
			if c, err := m.peek(); err == nil && c == msgpcode.Nil {
				m.skip() // None, as no reference
				continue
			}
			s, serr, err := m.optStr(maxRefField)
			if err != nil {
				return e, nil, err
			}
			if serr != nil {
				bad = cmp.Or(bad, fmt.Errorf("%s: %w", f, serr))
			} else if f == "urlbase" {
				urlbase = s
			} else {
				path = s
			}
		default:
			if err := m.skip(); err != nil {
				return e, nil, err
			}
		}
	}
	switch {
	case bad != nil:
		return e, bad, nil
	case urlbase != "":
		if path == "" {
			return e, fmt.Errorf("C2Array reference to %q without a path", urlbase), nil
		}
		e.C2 = &C2Ref{URLBase: urlbase, Path: path}
		e.Offset, e.Length = 0, 0
	case !hasOff || !hasLen:
		return e, fmt.Errorf("neither a byte range (offset and length) nor a C2Array reference (urlbase and path)"), nil
	}
	return e, nil, nil
}

// checkKey reports why key cannot name a file of the view: it must start
// with "/", and its segments be non-empty, neither "." nor "..", free of
// NUL, at most 255 bytes, at most MaxDepth of them.
func checkKey(key string) error {
	switch {
	case len(key) > MaxKeyLen:
		return fmt.Errorf("key of %d bytes (at most %d)", len(key), MaxKeyLen)
	case key == "/":
		return fmt.Errorf("key %q names the root, not a value", key)
	case !strings.HasPrefix(key, "/"):
		return fmt.Errorf("key does not start with /")
	}
	depth := 0
	for seg := range strings.SplitSeq(key[1:], "/") {
		depth++
		switch {
		case seg == "":
			return fmt.Errorf("empty path segment")
		case seg == "." || seg == "..":
			return fmt.Errorf("path segment %q", seg)
		case strings.IndexByte(seg, 0) >= 0:
			return fmt.Errorf("NUL in a path segment")
		case len(seg) > maxSegment:
			return fmt.Errorf("path segment of %d bytes (at most %d)", len(seg), maxSegment)
		}
	}
	if depth > MaxDepth {
		return fmt.Errorf("%d levels deep (at most %d)", depth, MaxDepth)
	}
	return nil
}

// validate checks the entries of an embed map for a store of size plain
// bytes and returns those that can be read, sorted by key: keys that
// can be paths, ranges inside the store that hold at least a frame
// header, no range over another. Each entry left out is a problem. A key
// listed twice keeps its last value, as Python's dict does.
func (em *embedMap) validate(name string, size int64, probs *problems) []Entry {
	last := make(map[string]int, len(em.entries))
	for i, e := range em.entries {
		if j, dup := last[e.Key]; dup {
			probs.add(fmt.Errorf("%s: %w: key %q is listed twice; the later value is kept", name, ErrBadEntry, e.Key))
			em.entries[j].Key = "" // dropped below
		}
		last[e.Key] = i
	}
	out := make([]Entry, 0, len(em.entries))
	for _, e := range em.entries {
		if e.Key == "" {
			continue
		}
		if err := checkKey(e.Key); err != nil {
			probs.add(fmt.Errorf("%s: %w: key %q: %v", name, ErrBadEntry, e.Key, err))
			continue
		}
		if e.C2 == nil {
			switch {
			case e.Offset > size || e.Length > size-e.Offset:
				probs.add(fmt.Errorf("%s: %w: key %q: bytes [%d,%d) run past the end of the store's %d bytes", name, ErrBadEntry, e.Key, e.Offset, uint64(e.Offset)+uint64(e.Length), size))
				continue
			case e.Length < frame.FixedHeaderLen:
				probs.add(fmt.Errorf("%s: %w: key %q: %d bytes cannot hold a frame", name, ErrBadEntry, e.Key, e.Length))
				continue
			}
		}
		out = append(out, e)
	}
	// Ranges over one another: sorted by offset, each must start at or
	// after the end of every range before it.
	byOff := make([]int, 0, len(out))
	for i, e := range out {
		if e.C2 == nil {
			byOff = append(byOff, i)
		}
	}
	slices.SortFunc(byOff, func(a, b int) int {
		return cmp.Or(cmp.Compare(out[a].Offset, out[b].Offset), cmp.Compare(out[a].Length, out[b].Length))
	})
	drop := make(map[int]bool)
	reach := -1 // the entry that reaches furthest so far
	for _, i := range byOff {
		if reach >= 0 && out[i].Offset < out[reach].Offset+out[reach].Length {
			r, e := out[reach], out[i]
			probs.add(fmt.Errorf("%s: %w: keys %q [%d,%d) and %q [%d,%d) overlap; both are left out", name, ErrBadEntry, r.Key, r.Offset, r.Offset+r.Length, e.Key, e.Offset, e.Offset+e.Length))
			drop[reach], drop[i] = true, true
		}
		if reach < 0 || out[i].Offset+out[i].Length > out[reach].Offset+out[reach].Length {
			reach = i
		}
	}
	if len(drop) > 0 {
		kept := out[:0]
		for i, e := range out {
			if !drop[i] {
				kept = append(kept, e)
			}
		}
		out = kept
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	return out
}
