package b2store

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"

	"github.com/bloscfs/bloscfs/pack/frame"
)

// VLMeta is a set of variable-length metadata (a frame's vlmetalayers):
// names, and values that python-blosc2 packs as msgpack, shown as JSON
// (docs/FORMATS.md §14.8) for extended attributes. A nil *VLMeta is an
// empty set.
type VLMeta struct {
	name  string
	fr    *frame.Frame
	names []string
}

// Names returns the names, in the frame's order.
func (v *VLMeta) Names() []string {
	if v == nil {
		return nil
	}
	return slices.Clone(v.names)
}

// Raw returns the value of name as stored: msgpack, decompressed (at most
// pack.MaxMetaLayer bytes).
func (v *VLMeta) Raw(name string) ([]byte, error) {
	if v == nil || !slices.Contains(v.names, name) {
		return nil, fmt.Errorf("%s: vlmeta %q: %w", v.storeName(), name, ErrNotFound)
	}
	return v.fr.VLMeta(name)
}

// JSON returns the value of name as JSON text of at most MaxVLMetaJSON
// bytes; a value that is not one msgpack value JSON can show gives an
// error wrapping ErrVLMeta.
func (v *VLMeta) JSON(name string) ([]byte, error) {
	b, err := v.Raw(name)
	if err != nil {
		return nil, err
	}
	j, err := MsgpackToJSON(b, MaxVLMetaJSON)
	if err != nil {
		return nil, fmt.Errorf("%s: vlmeta %q: %w", v.name, name, err)
	}
	return j, nil
}

// Shown returns the value of name as its extended attribute shows it:
// its JSON, or, for a value that is not one msgpack value JSON can show
// (c-blosc2's own tools write plain strings), {"$raw": "<base64>"} of
// its bytes; at most MaxVLMetaJSON bytes either way.
func (v *VLMeta) Shown(name string) ([]byte, error) {
	j, err := v.JSON(name)
	if err == nil || !errors.Is(err, ErrVLMeta) {
		return j, err
	}
	b, rerr := v.Raw(name)
	if rerr != nil {
		return nil, rerr
	}
	if n := base64.StdEncoding.EncodedLen(len(b)) + len(`{"$raw":""}`); n > MaxVLMetaJSON {
		return nil, fmt.Errorf("%s: vlmeta %q: %w: %d bytes, not msgpack, too large to show", v.name, name, ErrVLMeta, len(b))
	}
	return []byte(`{"$raw":"` + base64.StdEncoding.EncodeToString(b) + `"}`), nil
}

func (v *VLMeta) storeName() string {
	if v == nil {
		return "store"
	}
	return v.name
}
