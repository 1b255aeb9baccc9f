package zarr

import (
	"errors"
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
