package zarr

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Limits on metadata documents.
const (
	MaxMetaSize  = 64 << 20 // bytes of one JSON document (.zmetadata included)
	MaxMetaDepth = 64       // nesting of arrays and objects
	MaxDims      = 32       // dimensions of an array
	// MaxArrayBytes bounds the plain size of an array (and of the NPY view).
	MaxArrayBytes = 1 << 60
	// MaxChunkBytes bounds the plain size of one chunk (or inner chunk).
	MaxChunkBytes = 1 << 30
)

// checkJSON bounds a metadata document's size and nesting depth before
// it is decoded.
func checkJSON(b []byte, what string) error {
	if len(b) > MaxMetaSize {
		return fmt.Errorf("%s: %w: %d bytes exceeds %d", what, ErrFormat, len(b), MaxMetaSize)
	}
	depth := 0
	in, esc := false, false
	for _, c := range b {
		switch {
		case in:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				in = false
			}
		case c == '"':
			in = true
		case c == '{' || c == '[':
			if depth++; depth > MaxMetaDepth {
				return fmt.Errorf("%s: %w: nested deeper than %d", what, ErrFormat, MaxMetaDepth)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	if !json.Valid(b) {
		return fmt.Errorf("%s: %w: not JSON", what, ErrFormat)
	}
	return nil
}

// Kind is what a directory of a store is.
type Kind int

// Kinds of nodes.
const (
	KindNone  Kind = iota // not a Zarr node
	KindArray             // a Zarr array
	KindGroup             // a Zarr group
)

// nodeV3 is the common part of zarr.json.
type nodeV3 struct {
	ZarrFormat int             `json:"zarr_format"`
	NodeType   string          `json:"node_type"`
	Attributes json.RawMessage `json:"attributes"`
}

// Probe tells whether the node at path (a key prefix, "" for the root) is
// an array or a group, from its metadata objects. meta, when not nil, is
// consolidated metadata to look in first (keys relative to the store).
func Probe(s Store, path string) (Kind, error) {
	if b, err := GetMeta(s, JoinKey(path, "zarr.json")); err == nil {
		if err := checkJSON(b, JoinKey(path, "zarr.json")); err != nil {
			return KindNone, err
		}
		var n nodeV3
		if err := json.Unmarshal(b, &n); err != nil || n.ZarrFormat != 3 {
			return KindNone, fmt.Errorf("%s: %w: not zarr_format 3", JoinKey(path, "zarr.json"), ErrFormat)
		}
		switch n.NodeType {
		case "array":
			return KindArray, nil
		case "group":
			return KindGroup, nil
		}
		return KindNone, fmt.Errorf("%s: %w: node_type %q", JoinKey(path, "zarr.json"), ErrFormat, n.NodeType)
	} else if !errors.Is(err, ErrNotExist) {
		return KindNone, err
	}
	if _, err := s.GetRange(JoinKey(path, ".zarray"), 0, 0); err == nil {
		return KindArray, nil
	} else if !errors.Is(err, ErrNotExist) {
		return KindNone, err
	}
	if _, err := s.GetRange(JoinKey(path, ".zgroup"), 0, 0); err == nil {
		return KindGroup, nil
	} else if !errors.Is(err, ErrNotExist) {
		return KindNone, err
	}
	return KindNone, nil
}

// Consolidated reads the consolidated metadata (.zmetadata, v2) of the
// group at path: a map from keys relative to that group ("a/.zarray") to
// their JSON documents. It returns ErrNotExist when there is none.
func Consolidated(s Store, path string) (map[string]json.RawMessage, error) {
	key := JoinKey(path, ".zmetadata")
	b, err := GetMeta(s, key)
	if err != nil {
		return nil, err
	}
	return ParseConsolidated(b, key)
}

// zarrayV2 is a .zarray document.
type zarrayV2 struct {
	ZarrFormat int               `json:"zarr_format"`
	Shape      []int64           `json:"shape"`
	Chunks     []int64           `json:"chunks"`
	Dtype      json.RawMessage   `json:"dtype"`
	Compressor json.RawMessage   `json:"compressor"`
	FillValue  json.RawMessage   `json:"fill_value"`
	Order      string            `json:"order"`
	Filters    []json.RawMessage `json:"filters"`
	DimSep     string            `json:"dimension_separator"`
}

// checkGrid validates a shape and chunk shape: the element counts, byte
// sizes and chunk counts must not overflow or exceed the limits.
func checkGrid(shape, chunks []int64, itemsize int, what string) error {
	if itemsize < 1 || itemsize > MaxChunkBytes {
		// Also for a 0-d array, whose one chunk is one item.
		return fmt.Errorf("%s: %w: item size %d out of 1..%d bytes", what, ErrUnsupported, itemsize, int64(MaxChunkBytes))
	}
	if len(shape) > MaxDims || len(chunks) != len(shape) {
		return fmt.Errorf("%s: %w: %d dimensions, %d chunk dimensions", what, ErrFormat, len(shape), len(chunks))
	}
	total, chunk := uint64(itemsize), uint64(itemsize)
	for i := range shape {
		if shape[i] < 0 || chunks[i] <= 0 {
			return fmt.Errorf("%s: %w: shape %v, chunks %v", what, ErrFormat, shape, chunks)
		}
		hi, lo := bits.Mul64(total, uint64(shape[i]))
		if hi != 0 || lo > MaxArrayBytes {
			return fmt.Errorf("%s: %w: shape %v of %d-byte items exceeds %d bytes", what, ErrUnsupported, shape, itemsize, int64(MaxArrayBytes))
		}
		total = lo
		hi, lo = bits.Mul64(chunk, uint64(chunks[i]))
		if hi != 0 || lo > MaxChunkBytes {
			return fmt.Errorf("%s: %w: chunk shape %v exceeds %d bytes", what, ErrUnsupported, chunks, MaxChunkBytes)
		}
		chunk = lo
	}
	return nil
}

// parseV2 parses a .zarray (and the array's .zattrs, when given).
func parseV2(b []byte, what string) (*Array, error) {
	if err := checkJSON(b, what); err != nil {
		return nil, err
	}
	var z zarrayV2
	if err := json.Unmarshal(b, &z); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", what, ErrFormat, err)
	}
	if z.ZarrFormat != 2 {
		return nil, fmt.Errorf("%s: %w: zarr_format %d", what, ErrFormat, z.ZarrFormat)
	}
	dt, err := parseV2Dtype(z.Dtype)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := checkGrid(z.Shape, z.Chunks, dt.size, what); err != nil {
		return nil, err
	}
	a := &Array{Format: "zarr2", Shape: z.Shape, Chunks: z.Chunks, dt: dt}
	switch z.Order {
	case "C", "":
	case "F":
		a.fortran = true
	default:
		return nil, fmt.Errorf("%s: %w: order %q", what, ErrFormat, z.Order)
	}
	if a.fill, err = dt.fillValue(z.FillValue, false); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	sep := z.DimSep
	switch sep {
	case "":
		sep = "."
	case ".", "/":
	default:
		return nil, fmt.Errorf("%s: %w: dimension_separator %q", what, ErrFormat, sep)
	}
	a.key = v2Key(sep)
	if a.comp, err = parseV2Compressor(z.Compressor); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(z.Filters) > 16 {
		return nil, fmt.Errorf("%s: %w: %d filters", what, ErrUnsupported, len(z.Filters))
	}
	for _, fr := range z.Filters {
		f, err := parseFilter(fr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		a.filters = append(a.filters, f)
		a.Codecs = append(a.Codecs, f.name())
	}
	if a.comp != nil {
		a.Codecs = append(a.Codecs, a.comp.name())
	}
	return a, nil
}

// v2Key joins chunk coordinates with sep; a 0-d array's chunk is "0".
func v2Key(sep string) func([]int64) string {
	return func(c []int64) string {
		if len(c) == 0 {
			return "0"
		}
		var sb strings.Builder
		for i, v := range c {
			if i > 0 {
				sb.WriteString(sep)
			}
			sb.WriteString(strconv.FormatInt(v, 10))
		}
		return sb.String()
	}
}

// v3 metadata.
type namedConf struct {
	Name          string          `json:"name"`
	Configuration json.RawMessage `json:"configuration"`
}

type zarrJSON struct {
	ZarrFormat       int             `json:"zarr_format"`
	NodeType         string          `json:"node_type"`
	Shape            []int64         `json:"shape"`
	DataType         json.RawMessage `json:"data_type"`
	ChunkGrid        namedConf       `json:"chunk_grid"`
	ChunkKeyEncoding namedConf       `json:"chunk_key_encoding"`
	FillValue        json.RawMessage `json:"fill_value"`
	Codecs           []namedConf     `json:"codecs"`
	Attributes       json.RawMessage `json:"attributes"`
	StorageTrans     []namedConf     `json:"storage_transformers"`
}

// parseV3 parses an array's zarr.json.
func parseV3(b []byte, what string) (*Array, error) {
	if err := checkJSON(b, what); err != nil {
		return nil, err
	}
	var z zarrJSON
	if err := json.Unmarshal(b, &z); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", what, ErrFormat, err)
	}
	if z.ZarrFormat != 3 || z.NodeType != "array" {
		return nil, fmt.Errorf("%s: %w: not a zarr_format 3 array", what, ErrFormat)
	}
	if len(z.StorageTrans) > 0 {
		return nil, fmt.Errorf("%s: %w: storage transformers", what, ErrUnsupported)
	}
	dt, err := parseV3Dtype(z.DataType)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if z.ChunkGrid.Name != "regular" {
		return nil, fmt.Errorf("%s: %w: chunk_grid %q", what, ErrUnsupported, z.ChunkGrid.Name)
	}
	var grid struct {
		ChunkShape []int64 `json:"chunk_shape"`
	}
	if err := json.Unmarshal(z.ChunkGrid.Configuration, &grid); err != nil {
		return nil, fmt.Errorf("%s: %w: chunk_grid configuration", what, ErrFormat)
	}
	if err := checkGrid(z.Shape, grid.ChunkShape, dt.size, what); err != nil {
		return nil, err
	}
	a := &Array{Format: "zarr3", Shape: z.Shape, Chunks: grid.ChunkShape, dt: dt, Attrs: z.Attributes}
	if a.fill, err = dt.fillValue(z.FillValue, true); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var kc struct {
		Separator string `json:"separator"`
	}
	if len(z.ChunkKeyEncoding.Configuration) > 0 {
		if err := json.Unmarshal(z.ChunkKeyEncoding.Configuration, &kc); err != nil {
			return nil, fmt.Errorf("%s: %w: chunk_key_encoding", what, ErrFormat)
		}
	}
	switch z.ChunkKeyEncoding.Name {
	case "default":
		if kc.Separator == "" {
			kc.Separator = "/"
		}
		if kc.Separator != "/" && kc.Separator != "." {
			return nil, fmt.Errorf("%s: %w: separator %q", what, ErrFormat, kc.Separator)
		}
		sep := kc.Separator
		a.key = func(c []int64) string {
			var sb strings.Builder
			sb.WriteString("c")
			for _, v := range c {
				sb.WriteString(sep)
				sb.WriteString(strconv.FormatInt(v, 10))
			}
			return sb.String()
		}
	case "v2":
		if kc.Separator == "" {
			kc.Separator = "."
		}
		if kc.Separator != "/" && kc.Separator != "." {
			return nil, fmt.Errorf("%s: %w: separator %q", what, ErrFormat, kc.Separator)
		}
		a.key = v2Key(kc.Separator)
	default:
		return nil, fmt.Errorf("%s: %w: chunk_key_encoding %q", what, ErrUnsupported, z.ChunkKeyEncoding.Name)
	}
	ch, err := parseChain(z.Codecs, dt, a.Chunks, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	a.v3 = ch
	a.Codecs = ch.names()
	return a, nil
}

// ConsolidatedV3 reads the consolidated metadata of a v3 group's
// zarr.json document (its "consolidated_metadata", kind "inline"): a map
// from keys relative to the group ("a/b/zarr.json") to the zarr.json
// documents of its descendants. It returns ErrNotExist when the group has
// none.
func ConsolidatedV3(zarrJSON []byte, what string) (map[string]json.RawMessage, error) {
	if err := checkJSON(zarrJSON, what); err != nil {
		return nil, err
	}
	var doc struct {
		NodeType     string `json:"node_type"`
		Consolidated *struct {
			Kind     string                     `json:"kind"`
			Metadata map[string]json.RawMessage `json:"metadata"`
		} `json:"consolidated_metadata"`
	}
	if err := json.Unmarshal(zarrJSON, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", what, ErrFormat, err)
	}
	if doc.NodeType != "group" || doc.Consolidated == nil {
		return nil, fmt.Errorf("%s: no consolidated metadata: %w", what, ErrNotExist)
	}
	if doc.Consolidated.Kind != "inline" {
		return nil, fmt.Errorf("%s: %w: consolidated metadata of kind %q", what, ErrUnsupported, doc.Consolidated.Kind)
	}
	out := make(map[string]json.RawMessage, len(doc.Consolidated.Metadata))
	for k, v := range doc.Consolidated.Metadata {
		if !ValidKey(k) {
			return nil, fmt.Errorf("%s: %w: consolidated key %q", what, ErrFormat, k)
		}
		out[k+"/zarr.json"] = v
	}
	return out, nil
}

// ParseConsolidated reads a .zmetadata document (v2): a map from keys
// relative to its group ("a/.zarray") to their JSON documents.
func ParseConsolidated(b []byte, what string) (map[string]json.RawMessage, error) {
	if err := checkJSON(b, what); err != nil {
		return nil, err
	}
	var doc struct {
		Format   int                        `json:"zarr_consolidated_format"`
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Format != 1 {
		return nil, fmt.Errorf("%s: %w: not zarr_consolidated_format 1", what, ErrFormat)
	}
	return doc.Metadata, nil
}
