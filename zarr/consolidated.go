package zarr

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/bloscfs/bloscfs/pack"
)

// ConsolidatedMeta is one version of a group's consolidated metadata: its
// .zmetadata (v2), or the consolidated_metadata of its zarr.json (v3),
// which describe every node below the group. A reader that lists a group
// of arrays describes each array from them instead of reading each
// .zarray or zarr.json, as zarr.open_consolidated does.
//
// Whether an entry may stand for the node's own metadata files is the
// reader's to say, through a Fresh hook: a bucket, whose listings give
// each document's version, takes them as zarr-python does; a local tree
// takes an entry only while the node's own files are older than the
// document, so that a file changed after consolidation is read itself.
type ConsolidatedMeta struct {
	docs map[string]json.RawMessage // by key relative to the group: "a/.zarray", "a/b/zarr.json"
	node string                     // a zarr.json's node_type; "" for a .zmetadata
	size int64                      // the document's bytes, when it holds any documents
}

// consolidatedKey is the member of a v3 group's zarr.json that holds its
// consolidated metadata.
var consolidatedKey = []byte(`"consolidated_metadata"`)

// ParseConsolidatedMeta parses b, one version of a group's file name
// (".zmetadata" or "zarr.json"); what names it in errors. A zarr.json
// without consolidated metadata (an array's, or a group's without) gives
// metadata without documents, which still tell its node type. A
// malformed or unusable document gives an error and metadata without
// documents: the nodes below are then read one by one.
func ParseConsolidatedMeta(name string, b []byte, what string) (*ConsolidatedMeta, error) {
	c := &ConsolidatedMeta{}
	var err error
	if name == ".zmetadata" {
		c.docs, err = ParseConsolidated(b, what)
	} else {
		var n struct {
			NodeType string `json:"node_type"`
		}
		if json.Unmarshal(b, &n) == nil {
			c.node = n.NodeType
		}
		if c.node == "group" && bytes.Contains(b, consolidatedKey) {
			c.docs, err = ConsolidatedV3(b, what)
			if errors.Is(err, ErrNotExist) {
				err = nil
			}
		}
	}
	if err != nil {
		c.docs = nil
	}
	if c.docs != nil {
		c.size = int64(len(b))
	}
	return c, err
}

// HasDocs reports whether c describes any node.
func (c *ConsolidatedMeta) HasDocs() bool { return c != nil && c.docs != nil }

// NodeType returns the node_type of a zarr.json ("group", "array"), or ""
// (a .zmetadata, or a zarr.json that does not say).
func (c *ConsolidatedMeta) NodeType() string { return c.node }

// Size returns the bytes of the document when it describes nodes (0
// otherwise), for a cache's budget.
func (c *ConsolidatedMeta) Size() int64 { return c.size }

// Fresh reports whether the consolidated entry of a node may stand for
// its own metadata file name (".zarray", ".zattrs", ".zgroup" or
// "zarr.json" in the node's directory); inDoc tells whether the
// consolidated metadata hold that file (an array need not have
// .zattrs). A nil Fresh takes every entry.
type Fresh func(name string, inDoc bool) bool

// ConsolidatedNode is what consolidated metadata say of one node.
type ConsolidatedNode struct {
	Kind Kind // KindArray or KindGroup
	// MetaFile is the node's metadata file the entry stands for:
	// ".zarray" or "zarr.json" for an array, ".zgroup" or "zarr.json"
	// for a group.
	MetaFile    string
	meta, attrs json.RawMessage
}

// Node returns what c says of the node rel, relative to the group ("a",
// "a/b"): its zarr.json, else its .zarray (with its .zattrs if any),
// else its .zgroup. ok is false when c does not describe the node (a
// zarr.json of another node_type included), or fresh refuses one of its
// files.
func (c *ConsolidatedMeta) Node(rel string, fresh Fresh) (n ConsolidatedNode, ok bool) {
	if fresh == nil {
		fresh = func(string, bool) bool { return true }
	}
	if doc, found := c.docs[rel+"/zarr.json"]; found {
		var v3 struct {
			NodeType string `json:"node_type"`
		}
		json.Unmarshal(doc, &v3)
		switch v3.NodeType {
		case "group":
			n = ConsolidatedNode{Kind: KindGroup, MetaFile: "zarr.json"}
		case "array":
			n = ConsolidatedNode{Kind: KindArray, MetaFile: "zarr.json", meta: doc}
		default:
			return n, false
		}
		return n, fresh("zarr.json", true)
	}
	if doc, found := c.docs[rel+"/.zarray"]; found {
		attrs, hasAttrs := c.docs[rel+"/.zattrs"]
		n = ConsolidatedNode{Kind: KindArray, MetaFile: ".zarray", meta: doc, attrs: attrs}
		return n, fresh(".zarray", true) && fresh(".zattrs", hasAttrs)
	}
	if _, found := c.docs[rel+"/.zgroup"]; found {
		return ConsolidatedNode{Kind: KindGroup, MetaFile: ".zgroup"}, fresh(".zgroup", true)
	}
	return n, false
}

// Open opens the array n describes from its consolidated documents alone,
// over s, which holds its chunks (nothing is read from it now).
func (n ConsolidatedNode) Open(s Store, cache pack.BlockCache) (*Array, error) {
	if n.MetaFile == ".zarray" {
		return OpenV2Meta(s, "", n.meta, n.attrs, cache)
	}
	return OpenV3Meta(s, "", n.meta, cache)
}

// maxConsolidatedDepth bounds how many directories above a node
// FindConsolidated looks at.
const maxConsolidatedDepth = 64

// FindConsolidated returns the consolidated metadata that describe the
// node at path, from the nearest group above it, within root, that holds
// some, and path's key relative to that group ("a", "a/b"). Paths are
// slash-separated, without a trailing slash (a directory, or a key prefix:
// root "" is the top of a bucket). level(dir) returns the consolidated
// metadata of directory dir (nil when it has none, or none it can read
// now) and whether dir is a Zarr group. The walk stops at the first
// directory that is not a group, at root, and 64 directories up.
func FindConsolidated(path, root string, level func(dir string) (c *ConsolidatedMeta, group bool)) (*ConsolidatedMeta, string) {
	dir, rel := parentDir(path), baseName(path)
	for range maxConsolidatedDepth {
		if !within(dir, root) {
			return nil, ""
		}
		c, group := level(dir)
		if c.HasDocs() {
			return c, rel
		}
		if !group || dir == root || dir == "" {
			return nil, ""
		}
		rel = baseName(dir) + "/" + rel
		dir = parentDir(dir)
	}
	return nil, ""
}

// within reports whether dir is root or lies below it.
func within(dir, root string) bool {
	return root == "" || dir == root || strings.HasPrefix(dir, strings.TrimSuffix(root, "/")+"/")
}

// parentDir returns the directory of a slash-separated path: "" above a
// single name, "/" above a name at the top of an absolute path.
func parentDir(p string) string {
	switch i := strings.LastIndexByte(p, '/'); {
	case i > 0:
		return p[:i]
	case i == 0:
		return "/"
	}
	return ""
}

// baseName returns the last name of a slash-separated path.
func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }
