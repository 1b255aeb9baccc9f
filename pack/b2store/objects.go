package b2store

import (
	"fmt"
	"slices"
	"strings"
)

// Object is an object root of a TreeStore: a key under which
// python-blosc2 keeps the parts of one object, such as a CTable (its
// manifest <key>/_meta, an SChunk whose vlmeta says kind "ctable", and
// its columns under <key>/_cols). Key "/" is a store that is itself a
// CTable.
type Object struct {
	Key     string
	Kind    string // "ctable"
	Version int64
	Layout  string // "inline-tree-subtree"
}

// VLMetaObjectRegistry is the vlmetalayer of a TreeStore's embed store
// that lists its object roots (python-blosc2 ≥ 4.3).
const VLMetaObjectRegistry = "_object_registry"

// Objects returns the store's object roots, sorted by key: those its
// registry lists (docs/FORMATS.md §14.6) or, without one, as
// python-blosc2 does for older stores, every directory whose _meta leaf
// is an SChunk with vlmeta kind "ctable". The leaves of an object stay
// leaves of the tree; what to show of them is the caller's choice.
func (s *Store) Objects() ([]Object, error) {
	raw, err := s.embed.rawVLMeta(VLMetaObjectRegistry)
	if err != nil {
		return nil, err
	}
	var out []Object
	if raw != nil {
		if out, err = parseRegistry(raw); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", s.name, VLMetaObjectRegistry, err)
		}
	}
	if len(out) == 0 {
		return s.probeObjects()
	}
	slices.SortFunc(out, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// probeObjects finds the object roots of a store without a registry:
// the directories whose _meta leaf is an SChunk with vlmeta kind
// "ctable" (TreeStore._probe_object_info).
func (s *Store) probeObjects() ([]Object, error) {
	var out []Object
	for _, l := range s.leaves {
		if l.Name() != "_meta" {
			continue
		}
		k, _, err := l.Kind()
		o, ok, err := probeManifest(l, k, err)
		l.Forget() // probing must not keep every manifest's frame open
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// probeManifest reports whether leaf l (of kind k, or err) is a CTable
// manifest: an SChunk whose vlmeta "kind" is "ctable".
func probeManifest(l *Leaf, k Kind, err error) (Object, bool, error) {
	if err != nil && !verdict(err) {
		return Object{}, false, err
	}
	if err != nil || k != KindSChunk {
		return Object{}, false, nil
	}
	vm, err := l.VLMeta()
	if err != nil || vm == nil || !slices.Contains(vm.names, "kind") {
		return Object{}, false, nil
	}
	b, err := vm.Raw("kind")
	if err != nil {
		return Object{}, false, nil
	}
	kind, bad, err := newMPReader(b).optStr(64)
	if err != nil || bad != nil || kind != "ctable" {
		return Object{}, false, nil
	}
	root := strings.TrimSuffix(l.Key, "/_meta")
	if root == "" {
		root = "/"
	}
	return Object{Key: root, Kind: kind, Version: 1, Layout: "inline-tree-subtree"}, true, nil
}

// parseRegistry decodes {key: {"kind": str, "version": int, "layout":
// str}}; entries of another shape are left out.
func parseRegistry(b []byte) ([]Object, error) {
	m := newMPReader(b)
	c, err := m.peek()
	if err != nil {
		return nil, err
	}
	if !isMap(c) {
		return nil, fmt.Errorf("%s where a map is expected", codeName(c))
	}
	n, err := m.mapLen()
	if err != nil {
		return nil, err
	}
	var out []Object
	for range n {
		key, kbad, err := m.optStr(MaxKeyLen)
		if err != nil {
			return nil, err
		}
		if kbad != nil || checkKey(key) != nil || len(out) >= MaxEntries {
			if err := m.skip(); err != nil {
				return nil, err
			}
			continue
		}
		o := Object{Key: key}
		c, err := m.peek()
		if err != nil {
			return nil, err
		}
		if !isMap(c) {
			if err := m.skip(); err != nil {
				return nil, err
			}
			continue
		}
		fn, err := m.mapLen()
		if err != nil {
			return nil, err
		}
		for range fn {
			f, fbad, err := m.optStr(16)
			if err != nil {
				return nil, err
			}
			switch {
			case fbad == nil && (f == "kind" || f == "layout"):
				v, vbad, err := m.optStr(64)
				if err != nil {
					return nil, err
				}
				if vbad == nil && f == "kind" {
					o.Kind = v
				} else if vbad == nil {
					o.Layout = v
				}
			case fbad == nil && f == "version":
				v, vbad, err := m.optInt()
				if err != nil {
					return nil, err
				}
				if vbad == nil {
					o.Version = v
				}
			default:
				if err := m.skip(); err != nil {
					return nil, err
				}
			}
		}
		if o.Kind != "" {
			out = append(out, o)
		}
	}
	return out, nil
}
