package zarr

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestConsolidatedV3 reads a group's inline consolidated metadata, and
// refuses keys that leave the group and kinds it does not know.
func TestConsolidatedV3(t *testing.T) {
	docs, err := ConsolidatedV3([]byte(`{"zarr_format":3,"node_type":"group","consolidated_metadata":{"kind":"inline","metadata":{"a/b":{"node_type":"array"}}}}`), "g")
	if err != nil || string(docs["a/b/zarr.json"]) != `{"node_type":"array"}` {
		t.Errorf("docs %q, %v", docs, err)
	}
	for doc, want := range map[string]error{
		`{"zarr_format":3,"node_type":"group"}`:                                                         ErrNotExist,
		`{"zarr_format":3,"node_type":"array","consolidated_metadata":{"kind":"inline","metadata":{}}}`: ErrNotExist,
		`{"node_type":"group","consolidated_metadata":{"kind":"inline","metadata":{"../x":{}}}}`:        ErrFormat,
		`{"node_type":"group","consolidated_metadata":{"kind":"inline","metadata":{"/x":{}}}}`:          ErrFormat,
		`{"node_type":"group","consolidated_metadata":{"kind":"other","metadata":{}}}`:                  ErrUnsupported,
		`{"node_type":"group",`: ErrFormat,
	} {
		if _, err := ConsolidatedV3([]byte(doc), "g"); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", doc, err, want)
		}
	}
	if _, err := ParseConsolidated([]byte(`{"zarr_consolidated_format":2,"metadata":{}}`), "g"); !errors.Is(err, ErrFormat) {
		t.Errorf(".zmetadata of format 2: %v", err)
	}
}

// Documents of the consolidated-metadata tests: a v2 array, a v3 array.
const (
	consZarray = `{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<i4","compressor":null,"fill_value":0,"order":"C","filters":null}`
	consV3     = `{"zarr_format":3,"node_type":"array","shape":[6],"data_type":"int16","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[3]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes","configuration":{"endian":"little"}}]}`
)

// TestParseConsolidatedMeta reads both kinds of documents: a .zmetadata,
// a group's zarr.json with consolidated metadata, and a zarr.json
// without (an array's, a group's), which only tell their node type; a
// malformed document is an error and describes nothing.
func TestParseConsolidatedMeta(t *testing.T) {
	zmeta := `{"zarr_consolidated_format":1,"metadata":{"a/.zarray":` + consZarray + `,"a/.zattrs":{"x":1},"g/.zgroup":{"zarr_format":2}}}`
	group := `{"zarr_format":3,"node_type":"group","consolidated_metadata":{"kind":"inline","metadata":{"b":` + consV3 + `,"h":{"zarr_format":3,"node_type":"group"}}}}`
	for _, c := range []struct {
		name, doc string
		docs      bool
		node      string
		err       error
	}{
		{".zmetadata", zmeta, true, "", nil},
		{"zarr.json", group, true, "group", nil},
		{"zarr.json", consV3, false, "array", nil},
		{"zarr.json", `{"zarr_format":3,"node_type":"group"}`, false, "group", nil},
		{".zmetadata", `{"zarr_consolidated_format":2,"metadata":{}}`, false, "", ErrFormat},
		{"zarr.json", `{"zarr_format":3,"node_type":"group","consolidated_metadata":{"kind":"inline","metadata":{"../x":{}}}}`, false, "group", ErrFormat},
		{"zarr.json", `{"node_type":`, false, "", nil},
	} {
		m, err := ParseConsolidatedMeta(c.name, []byte(c.doc), "g/"+c.name)
		if !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("%s %.40s: %v, want %v", c.name, c.doc, err, c.err)
		}
		if m.HasDocs() != c.docs || m.NodeType() != c.node || (m.Size() != 0) != c.docs {
			t.Errorf("%s %.40s: docs %v, node %q, size %d; want docs %v, node %q", c.name, c.doc, m.HasDocs(), m.NodeType(), m.Size(), c.docs, c.node)
		}
	}
}

// TestConsolidatedNode checks what consolidated metadata say of a node:
// its kind and metadata file, zarr.json before .zarray before .zgroup,
// nothing for a node they do not hold or of another node_type, the files
// the freshness hook is asked about (and its refusal), and the array
// opened from the documents alone.
func TestConsolidatedNode(t *testing.T) {
	zmeta := `{"zarr_consolidated_format":1,"metadata":{"a/.zarray":` + consZarray + `,"a/.zattrs":{"x":1},"n/.zarray":` + consZarray + `,"g/.zgroup":{"zarr_format":2}}}`
	group := `{"zarr_format":3,"node_type":"group","consolidated_metadata":{"kind":"inline","metadata":{"b":` + consV3 + `,"h":{"zarr_format":3,"node_type":"group"},"odd":{"zarr_format":3,"node_type":"other"}}}}`
	m2, err := ParseConsolidatedMeta(".zmetadata", []byte(zmeta), "g")
	if err != nil {
		t.Fatal(err)
	}
	m3, err := ParseConsolidatedMeta("zarr.json", []byte(group), "g")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		m     *ConsolidatedMeta
		rel   string
		kind  Kind
		file  string
		asked string // the files the hook was asked about, with inDoc
	}{
		{m2, "a", KindArray, ".zarray", ".zarray:true .zattrs:true"},
		{m2, "n", KindArray, ".zarray", ".zarray:true .zattrs:false"},
		{m2, "g", KindGroup, ".zgroup", ".zgroup:true"},
		{m2, "x", KindNone, "", ""},
		{m3, "b", KindArray, "zarr.json", "zarr.json:true"},
		{m3, "h", KindGroup, "zarr.json", "zarr.json:true"},
		{m3, "odd", KindNone, "", ""},
	} {
		var asked []string
		n, ok := c.m.Node(c.rel, func(name string, inDoc bool) bool {
			asked = append(asked, fmt.Sprintf("%s:%v", name, inDoc))
			return true
		})
		if ok != (c.kind != KindNone) || ok && (n.Kind != c.kind || n.MetaFile != c.file) || strings.Join(asked, " ") != c.asked {
			t.Errorf("%s: %+v, %v, asked %v; want kind %d, %s, asked %s", c.rel, n, ok, asked, c.kind, c.file, c.asked)
		}
		if ok {
			if _, ok := c.m.Node(c.rel, func(string, bool) bool { return false }); ok {
				t.Errorf("%s: described although the hook refused it", c.rel)
			}
			if _, ok := c.m.Node(c.rel, nil); !ok {
				t.Errorf("%s: not described without a hook", c.rel)
			}
		}
	}
	n, _ := m2.Node("a", nil)
	a, err := n.Open(nil, nil)
	if err != nil || a.Shape[0] != 4 || string(a.Attrs) != `{"x":1}` {
		t.Errorf("the v2 array from consolidated metadata: %v, %v", a, err)
	}
	n, _ = m3.Node("b", nil)
	if a, err := n.Open(nil, nil); err != nil || a.Shape[0] != 6 {
		t.Errorf("the v3 array from consolidated metadata: %v, %v", a, err)
	}
}

// TestFindConsolidated walks up from a node to the group whose
// consolidated metadata describe it: the nearest that has some, with the
// node's key relative to it; not past a directory that is not a group,
// nor past the root, nor more than 64 directories up; local paths and key
// prefixes alike.
func TestFindConsolidated(t *testing.T) {
	doc := &ConsolidatedMeta{docs: map[string]json.RawMessage{}}
	for _, c := range []struct {
		path, root string
		docs       []string // the directories with consolidated metadata
		groups     []string // the other groups
		want       string   // the group found and rel, or ""
		visited    string
	}{
		{"/src/g/a", "/src", []string{"/src/g"}, nil, "/src/g a", "/src/g"},
		{"/src/g/s/a", "/src", []string{"/src/g"}, []string{"/src/g/s"}, "/src/g s/a", "/src/g/s /src/g"},
		{"/src/g/s/a", "/src", []string{"/src/g"}, nil, "", "/src/g/s"},                                // s is no group
		{"/src/a", "/src", nil, []string{"/src"}, "", "/src"},                                          // the root is looked at, not past
		{"/src/g/a", "/src/g", []string{"/src"}, []string{"/src/g"}, "", "/src/g"},                     // a group outside the root
		{"/a", "/", []string{"/"}, nil, "/ a", "/"},                                                    // the source is /
		{"pre/g/a", "pre", []string{"pre"}, []string{"pre/g"}, "pre g/a", "pre/g pre"},                 // a key prefix
		{"g/a", "", []string{""}, []string{"g"}, " g/a", "g "},                                         // the top of a bucket
		{"pre2/g/a", "pre", []string{"pre2", "pre2/g"}, nil, "", ""},                                   // outside the root
		{strings.Repeat("d/", 70) + "a", "", []string{""}, []string{"d"}, "", strings.Repeat("x", 64)}, // too deep
	} {
		var visited []string
		var found string
		m, rel := FindConsolidated(c.path, c.root, func(dir string) (*ConsolidatedMeta, bool) {
			visited = append(visited, dir)
			if slices.Contains(c.docs, dir) {
				found = dir
				return doc, true
			}
			return nil, slices.Contains(c.groups, dir) || strings.HasPrefix(dir, "d")
		})
		got := ""
		if m != nil {
			got = found + " " + rel
		}
		if got != c.want {
			t.Errorf("%s in %q: found %q, want %q", c.path, c.root, got, c.want)
		}
		if strings.HasPrefix(c.visited, "x") {
			if len(visited) != len(c.visited) {
				t.Errorf("%s: %d directories looked at, want %d", c.path, len(visited), len(c.visited))
			}
		} else if strings.Join(visited, " ") != c.visited {
			t.Errorf("%s in %q: looked at %q, want %q", c.path, c.root, strings.Join(visited, " "), c.visited)
		}
	}
}
