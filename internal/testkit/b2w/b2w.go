// Package b2w writes python-blosc2's stores for tests: an EmbedStore
// (.b2e), a DictStore or TreeStore directory (.b2d) and its .b2z, step by
// step as src/blosc2/embed_store.py, dict_store.py and tree_store.py of
// python-blosc2 v4.11.0 (and v3.7.0, where they differ) write them, with
// frames written by bloscfs's frame writer (pack/frame); values' frames
// are given (c-blosc2's fixtures, or the caller's). docs/FORMATS.md §14
// describes the format.
//
// python-blosc2 4.x cannot be installed on the machines that run the
// tests (it needs numpy ≥ 2.1): this writer stands in for it. Its inputs
// are the tests' own, so that a failure to encode or write one is a bug
// of the test: it panics.
package b2w

import (
	"archive/zip"
	"bytes"
	"cmp"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// The metalayers that mark a store's frame, and the names python-blosc2
// gives the parts of a store.
const (
	MarkerEmbed = "b2embed" // EmbedStore; every store's embed.b2e before 4.1
	MarkerDict  = "b2dict"  // a DictStore's embed.b2e (4.1 and later)
	MarkerTree  = "b2tree"  // a TreeStore's embed.b2e (4.1 and later)

	EmbedFile      = "embed.b2e"       // a store directory's embed store
	EmbedMap       = "estore_metadata" // the vlmetalayer of the embed map
	ObjectRegistry = "_object_registry"
	VLMetaKey      = "__vlmeta__" // last segment of a TreeStore's vlmeta keys
)

// externalExts are the suffixes of a store directory's value files.
var externalExts = []string{".b2nd", ".b2f", ".b2b"}

// MemFile is an in-memory io.WriteSeeker.
type MemFile struct {
	B   []byte
	pos int64
}

// Write writes p at the current position.
func (m *MemFile) Write(p []byte) (int, error) {
	end := m.pos + int64(len(p))
	if end > int64(len(m.B)) {
		m.B = append(m.B, make([]byte, end-int64(len(m.B)))...)
	}
	copy(m.B[m.pos:], p)
	m.pos = end
	return len(p), nil
}

// Seek moves the position.
func (m *MemFile) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += m.pos
	case io.SeekEnd:
		off += int64(len(m.B))
	}
	m.pos = off
	return off, nil
}

// KV is one entry of an ordered msgpack map (Python dicts keep their
// insertion order, and so does msgpack.packb): a key, a string, and its
// value. ([]KV is the map.)
type KV [2]any

// Key returns the entry's key.
func (p KV) Key() string { return p[0].(string) }

// Value returns the entry's value.
func (p KV) Value() any { return p[1] }

// Tuple is a Python tuple: python-blosc2 packs it as a list whose first
// element is "__tuple__" (blosc2_ext.encode_tuple).
type Tuple []any

// Packb encodes v as python-blosc2's msgpack_packb does: the smallest
// integer forms, str for strings, bin for bytes, ordered maps ([]KV).
func Packb(v any) []byte {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	e.UseCompactInts(true)
	var enc func(v any) error
	enc = func(v any) error {
		switch x := v.(type) {
		case []KV:
			if err := e.EncodeMapLen(len(x)); err != nil {
				return err
			}
			for _, p := range x {
				if err := e.EncodeString(p.Key()); err != nil {
					return err
				}
				if err := enc(p.Value()); err != nil {
					return err
				}
			}
			return nil
		case Tuple:
			return enc(append([]any{"__tuple__"}, x...))
		case []any:
			if err := e.EncodeArrayLen(len(x)); err != nil {
				return err
			}
			for _, y := range x {
				if err := enc(y); err != nil {
					return err
				}
			}
			return nil
		case int:
			return e.EncodeInt(int64(x))
		case int64:
			return e.EncodeInt(x)
		case float64:
			return e.EncodeFloat64(x)
		}
		return e.Encode(v)
	}
	must(enc(v))
	return buf.Bytes()
}

// Version1 is the content of the marker metalayers: msgpack {"version": 1}.
func Version1() []byte { return Packb([]KV{{"version", 1}}) }

// WriteFrame returns a contiguous frame of plain bytes in chunks of
// chunksize with default compression (zstd, clevel 5, shuffle) at
// typesize, with metalayers and vlmetalayers (values as given: msgpack,
// for python-blosc2's).
func WriteFrame(plain []byte, chunksize, typesize int, meta, vlmeta []frame.Metalayer) []byte {
	m := &MemFile{}
	w, err := frame.NewWriter(m, frame.Params{
		Chunk: blosc.DefaultParams(typesize), ChunkSize: chunksize,
		Metalayers: meta, VLMetalayers: vlmeta,
	})
	must(err)
	for off := 0; off < len(plain); off += chunksize {
		must(w.AddChunk(plain[off:min(off+chunksize, len(plain))]))
	}
	must(w.Close())
	return m.B
}

// SChunkWithVLMeta is blosc2.SChunk() (no data; chunksize 2**24,
// typesize 8) with vlmeta set, as a TreeStore keeps a (sub)tree's vlmeta,
// serialized by to_cframe().
func SChunkWithVLMeta(vl []KV) []byte {
	var ms []frame.Metalayer
	for _, p := range vl {
		ms = append(ms, frame.Metalayer{Name: p.Key(), Value: Packb(p.Value())})
	}
	return WriteFrame(nil, 1<<24, 8, nil, ms)
}

// ObjectFrame is an SChunk of plain bytes marked with metalayer meta
// ("vlarray", "batcharray", …): a kind bloscfs lists but does not read.
// Its content is not what python-blosc2 puts there; only its marker
// matters.
func ObjectFrame(meta string, plain []byte) []byte {
	return WriteFrame(plain, 1<<16, 1, []frame.Metalayer{{Name: meta, Value: Version1()}}, nil)
}

// mapEntry is an embed map entry as EmbedStore.__setitem__ writes it.
type mapEntry struct {
	offset, length int64
	urlbase, path  string
}

// StoreWriter is an EmbedStore being written (python-blosc2's
// EmbedStore with its default SChunk backing): values' frames appended to
// the SChunk bytes, the map kept in insertion order.
type StoreWriter struct {
	ChunkSize int    // 2**13 (3.7.1 and later), 2**16 (3.7.0)
	Marker    string // b2embed, or b2dict/b2tree (4.1 and later)
	Data      []byte // the SChunk bytes so far
	// ExtraVL are more vlmetalayers of the store's frame (a TreeStore's
	// _object_registry).
	ExtraVL []KV
	keys    []string
	m       map[string]mapEntry
}

// NewStoreWriter starts an EmbedStore marked marker in chunks of
// chunksize bytes.
func NewStoreWriter(marker string, chunksize int) *StoreWriter {
	return &StoreWriter{ChunkSize: chunksize, Marker: marker, m: map[string]mapEntry{}}
}

// Set is EmbedStore.__setitem__ of a value whose to_cframe() is fr.
func (w *StoreWriter) Set(key string, fr []byte) {
	w.Del(key)
	w.m[key] = mapEntry{offset: int64(len(w.Data)), length: int64(len(fr))}
	w.keys = append(w.keys, key)
	w.Data = append(w.Data, fr...)
}

// SetC2 stores a C2Array: a reference only.
func (w *StoreWriter) SetC2(key, urlbase, path string) {
	w.Del(key)
	w.m[key] = mapEntry{urlbase: urlbase, path: path}
	w.keys = append(w.keys, key)
}

// Del is EmbedStore.__delitem__: the map forgets the key, the bytes stay.
func (w *StoreWriter) Del(key string) {
	if _, ok := w.m[key]; ok {
		delete(w.m, key)
		w.keys = slices.DeleteFunc(w.keys, func(k string) bool { return k == key })
	}
}

// Metadata is the "estore_metadata" value: {"embed_map": …,
// "current_offset": …}.
func (w *StoreWriter) Metadata() []byte {
	var em []KV
	for _, k := range w.keys {
		e := w.m[k]
		if e.urlbase != "" {
			em = append(em, KV{k, []KV{{"urlbase", e.urlbase}, {"path", e.path}}})
		} else {
			em = append(em, KV{k, []KV{{"offset", e.offset}, {"length", e.length}}})
		}
	}
	return Packb([]KV{{"embed_map", em}, {"current_offset", len(w.Data)}})
}

// Frame returns the store's frame: an SChunk of typesize 1 in chunks of
// ChunkSize (the last one shorter), default compression, the marker
// metalayer, and the map in the estore_metadata vlmetalayer.
func (w *StoreWriter) Frame() []byte {
	vl := []frame.Metalayer{{Name: EmbedMap, Value: w.Metadata()}}
	for _, p := range w.ExtraVL {
		vl = append(vl, frame.Metalayer{Name: p.Key(), Value: Packb(p.Value())})
	}
	return WriteFrame(w.Data, w.ChunkSize, 1, []frame.Metalayer{{Name: w.Marker, Value: Version1()}}, vl)
}

// DictWriter is a DictStore or TreeStore directory being written: values
// of at least Threshold bytes (nbytes, uncompressed) go to a file of
// their own, the others into the embed store. C2Arrays always go into
// the embed store.
type DictWriter struct {
	Threshold int64
	Tree      bool // a TreeStore (vlmeta at __vlmeta__ keys)
	ES        *StoreWriter
	Files     map[string][]byte // relative path → content
}

// NewDictWriter starts a store directory whose embed store is marked
// marker (b2tree: a TreeStore) in chunks of chunksize, with the
// embedding threshold.
func NewDictWriter(marker string, chunksize int, threshold int64) *DictWriter {
	return &DictWriter{Threshold: threshold, Tree: marker == MarkerTree, ES: NewStoreWriter(marker, chunksize), Files: map[string][]byte{}}
}

// Set is DictStore.__setitem__ of a value of nbytes uncompressed bytes
// whose frame is fr; ext is its external suffix (.b2nd, .b2f, .b2b).
func (d *DictWriter) Set(key string, fr []byte, nbytes int64, ext string) {
	for _, e := range externalExts {
		delete(d.Files, key[1:]+e)
	}
	d.ES.Del(key)
	if nbytes >= d.Threshold {
		d.Files[key[1:]+ext] = fr
		return
	}
	d.ES.Set(key, fr)
}

// SetVLMeta is TreeStore.vlmeta[name] = value for the (sub)tree at path
// ("" for the root): the first write stores an empty SChunk at
// <path>/__vlmeta__, and every write stores it again with the vlmeta so
// far (_persist_vlmeta: in the embed store a delete and a new value,
// leaving the old bytes behind; a file is rewritten). vl holds the
// subtree's vlmeta so far.
func (d *DictWriter) SetVLMeta(path string, vl *[]KV, name string, value any) {
	key := path + "/" + VLMetaKey
	if len(*vl) == 0 {
		d.Set(key, SChunkWithVLMeta(nil), 0, ".b2f")
	}
	*vl = append(*vl, KV{name, value})
	fr := SChunkWithVLMeta(*vl)
	if _, ok := d.Files[key[1:]+".b2f"]; ok {
		d.Files[key[1:]+".b2f"] = fr
		return
	}
	d.ES.Set(key, fr)
}

// Contents returns every file of the directory, embed.b2e included.
func (d *DictWriter) Contents() map[string][]byte {
	files := map[string][]byte{EmbedFile: d.ES.Frame()}
	for p, b := range d.Files {
		files[p] = b
	}
	return files
}

// Write writes the directory dir: every file, and embed.b2e.
func (d *DictWriter) Write(dir string) {
	for p, b := range d.Contents() {
		full := filepath.Join(dir, filepath.FromSlash(p))
		must(os.MkdirAll(filepath.Dir(full), 0o755))
		must(os.WriteFile(full, b, 0o644))
	}
}

// B2Z returns files (path → content) as the ZIP archive DictStore.to_b2z
// writes (Go's archive/zip here, Python's zipfile there): every member
// stored, the largest first (ties in path order), embed.b2e last.
func B2Z(files map[string][]byte) []byte {
	var names []string
	for p := range files {
		if p != EmbedFile {
			names = append(names, p)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(files[b]), len(files[a])), strings.Compare(a, b))
	})
	if _, ok := files[EmbedFile]; ok {
		names = append(names, EmbedFile)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		f, err := zw.CreateHeader(&zip.FileHeader{Name: n, Method: zip.Store})
		must(err)
		_, err = f.Write(files[n])
		must(err)
	}
	must(zw.Close())
	return buf.Bytes()
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
