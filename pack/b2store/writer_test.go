package b2store

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// This file is the test writer of python-blosc2's stores: it follows
// src/blosc2/embed_store.py, dict_store.py and tree_store.py of
// python-blosc2 v4.11.0 (and v3.7.0, where they differ) step by step,
// with frames written by pack/frame's writer. Values' frames are taken as
// they are from c-blosc2's fixtures (testdata/fixtures).

// memFile is an in-memory io.WriteSeeker.
type memFile struct {
	b   []byte
	pos int64
}

func (m *memFile) Write(p []byte) (int, error) {
	end := m.pos + int64(len(p))
	if end > int64(len(m.b)) {
		m.b = append(m.b, make([]byte, end-int64(len(m.b)))...)
	}
	copy(m.b[m.pos:], p)
	m.pos = end
	return len(p), nil
}

func (m *memFile) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += m.pos
	case io.SeekEnd:
		off += int64(len(m.b))
	}
	m.pos = off
	return off, nil
}

// kv is one entry of an ordered msgpack map (Python dicts keep their
// insertion order, and so does msgpack.packb).
type kv struct {
	k string
	v any
}

// tuple is a Python tuple: python-blosc2 packs it as a list whose first
// element is "__tuple__" (blosc2_ext.encode_tuple).
type tuple []any

// packb encodes v as python-blosc2's msgpack_packb does: the smallest
// integer forms, str for strings, bin for bytes, ordered maps.
func packb(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	e.UseCompactInts(true)
	var enc func(v any) error
	enc = func(v any) error {
		switch x := v.(type) {
		case []kv:
			if err := e.EncodeMapLen(len(x)); err != nil {
				return err
			}
			for _, p := range x {
				if err := e.EncodeString(p.k); err != nil {
					return err
				}
				if err := enc(p.v); err != nil {
					return err
				}
			}
			return nil
		case tuple:
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
	if err := enc(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// version1 is the content of the marker metalayers: msgpack {"version": 1}.
func version1(t testing.TB) []byte { return packb(t, []kv{{"version", 1}}) }

// writeFrame writes a contiguous frame of plain bytes in chunks of
// chunksize with default compression (zstd, clevel 5, shuffle) at
// typesize, with metalayers and vlmetalayers (values given as msgpack).
func writeFrame(t testing.TB, plain []byte, chunksize, typesize int, meta, vlmeta []frame.Metalayer) []byte {
	t.Helper()
	m := &memFile{}
	w, err := frame.NewWriter(m, frame.Params{
		Chunk: blosc.DefaultParams(typesize), ChunkSize: chunksize,
		Metalayers: meta, VLMetalayers: vlmeta,
	})
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(plain); off += chunksize {
		if err := w.AddChunk(plain[off:min(off+chunksize, len(plain))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return m.b
}

// schunkWithVLMeta is blosc2.SChunk() (no data; chunksize 2**24,
// typesize 8) with vlmeta set, as TreeStore keeps a (sub)tree's vlmeta,
// serialized by to_cframe().
func schunkWithVLMeta(t testing.TB, vl []kv) []byte {
	var ms []frame.Metalayer
	for _, p := range vl {
		ms = append(ms, frame.Metalayer{Name: p.k, Value: packb(t, p.v)})
	}
	return writeFrame(t, nil, 1<<24, 8, nil, ms)
}

// objectFrame is an SChunk marked with metalayer meta ("vlarray",
// "batcharray", …): a kind the package lists but does not read. Its
// content is not what python-blosc2 puts there; only its marker matters.
func objectFrame(t testing.TB, meta string) []byte {
	return writeFrame(t, []byte("objects, not read"), 1<<16, 1, []frame.Metalayer{{Name: meta, Value: version1(t)}}, nil)
}

// mapEntry is an embed map entry as EmbedStore.__setitem__ writes it.
type mapEntry struct {
	offset, length int64
	urlbase, path  string
}

// storeWriter is an EmbedStore being written (python-blosc2's
// EmbedStore with its default SChunk backing): values' frames appended to
// the SChunk bytes, the map kept in insertion order.
type storeWriter struct {
	chunksize int    // 2**13 (3.7.1 and later), 2**16 (3.7.0)
	marker    string // b2embed, or b2dict/b2tree (4.1 and later)
	data      []byte
	keys      []string
	m         map[string]mapEntry
	extraVL   []kv // more vlmetalayers of the store's frame (TreeStore's _object_registry)
}

func newStoreWriter(marker string, chunksize int) *storeWriter {
	return &storeWriter{chunksize: chunksize, marker: marker, m: map[string]mapEntry{}}
}

// set is EmbedStore.__setitem__ of a value whose to_cframe() is fr.
func (w *storeWriter) set(key string, fr []byte) {
	w.del(key)
	w.m[key] = mapEntry{offset: int64(len(w.data)), length: int64(len(fr))}
	w.keys = append(w.keys, key)
	w.data = append(w.data, fr...)
}

// setC2 stores a C2Array: a reference only.
func (w *storeWriter) setC2(key, urlbase, path string) {
	w.del(key)
	w.m[key] = mapEntry{urlbase: urlbase, path: path}
	w.keys = append(w.keys, key)
}

// del is EmbedStore.__delitem__: the map forgets the key, the bytes stay.
func (w *storeWriter) del(key string) {
	if _, ok := w.m[key]; ok {
		delete(w.m, key)
		w.keys = slices.DeleteFunc(w.keys, func(k string) bool { return k == key })
	}
}

// metadata is the "estore_metadata" value: {"embed_map": …,
// "current_offset": …}.
func (w *storeWriter) metadata(t testing.TB) []byte {
	var em []kv
	for _, k := range w.keys {
		e := w.m[k]
		if e.urlbase != "" {
			em = append(em, kv{k, []kv{{"urlbase", e.urlbase}, {"path", e.path}}})
		} else {
			em = append(em, kv{k, []kv{{"offset", e.offset}, {"length", e.length}}})
		}
	}
	return packb(t, []kv{{"embed_map", em}, {"current_offset", len(w.data)}})
}

// frame returns the store's frame: an SChunk of typesize 1 in chunks of
// chunksize (the last one shorter), default compression, the marker
// metalayer, and the map in the estore_metadata vlmetalayer.
func (w *storeWriter) frame(t testing.TB) []byte {
	vl := []frame.Metalayer{{Name: VLMetaEmbedMap, Value: w.metadata(t)}}
	for _, p := range w.extraVL {
		vl = append(vl, frame.Metalayer{Name: p.k, Value: packb(t, p.v)})
	}
	return writeFrame(t, w.data, w.chunksize, 1, []frame.Metalayer{{Name: w.marker, Value: version1(t)}}, vl)
}

// dictWriter is a DictStore or TreeStore directory being written: values
// of at least threshold bytes (nbytes, uncompressed) go to a file of
// their own, the others into the embed store. C2Arrays always go into
// the embed store.
type dictWriter struct {
	threshold int64
	tree      bool
	es        *storeWriter
	files     map[string][]byte // relative path → content
}

func newDictWriter(marker string, chunksize int, threshold int64) *dictWriter {
	return &dictWriter{threshold: threshold, tree: marker == MarkerTree, es: newStoreWriter(marker, chunksize), files: map[string][]byte{}}
}

// set is DictStore.__setitem__ of a value of nbytes uncompressed bytes
// whose frame is fr; ext is its external suffix (.b2nd, .b2f, .b2b).
func (d *dictWriter) set(key string, fr []byte, nbytes int64, ext string) {
	for _, e := range externalExts {
		delete(d.files, key[1:]+e)
	}
	d.es.del(key)
	if nbytes >= d.threshold {
		d.files[key[1:]+ext] = fr
		return
	}
	d.es.set(key, fr)
}

// setVLMeta is TreeStore.vlmeta[name] = value for the (sub)tree at path
// ("" for the root): the first write stores an empty SChunk at
// <path>/__vlmeta__, and every write stores it again with the vlmeta
// so far (_persist_vlmeta: in the embed store a delete and a new value,
// leaving the old bytes behind; a file is rewritten).
func (d *dictWriter) setVLMeta(t testing.TB, path string, vl *[]kv, name string, value any) {
	key := path + "/" + vlmetaKey
	if len(*vl) == 0 {
		d.set(key, schunkWithVLMeta(t, nil), 0, ".b2f")
	}
	*vl = append(*vl, kv{name, value})
	fr := schunkWithVLMeta(t, *vl)
	if _, ok := d.files[key[1:]+".b2f"]; ok {
		d.files[key[1:]+".b2f"] = fr
		return
	}
	d.es.set(key, fr)
}

// write writes the directory: every file, and embed.b2e.
func (d *dictWriter) write(t testing.TB, dir string) {
	t.Helper()
	files := map[string][]byte{EmbedFile: d.es.frame(t)}
	for p, b := range d.files {
		files[p] = b
	}
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
