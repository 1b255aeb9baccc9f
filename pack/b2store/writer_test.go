package b2store

import (
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit/b2w"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// The test writer of python-blosc2's stores is internal/testkit/b2w
// (it follows python-blosc2 v4.11.0's source step by step); these are
// its names in this package's tests.

type (
	kv          = b2w.KV
	tuple       = b2w.Tuple
	memFile     = b2w.MemFile
	storeWriter = b2w.StoreWriter
	dictWriter  = b2w.DictWriter
)

var (
	newStoreWriter = b2w.NewStoreWriter
	newDictWriter  = b2w.NewDictWriter
)

// packb encodes v as python-blosc2's msgpack_packb does.
func packb(_ testing.TB, v any) []byte { return b2w.Packb(v) }

// version1 is the content of the marker metalayers: msgpack {"version": 1}.
func version1(_ testing.TB) []byte { return b2w.Version1() }

// writeFrame writes a contiguous frame (b2w.WriteFrame).
func writeFrame(_ testing.TB, plain []byte, chunksize, typesize int, meta, vlmeta []frame.Metalayer) []byte {
	return b2w.WriteFrame(plain, chunksize, typesize, meta, vlmeta)
}

// schunkWithVLMeta is a TreeStore's vlmeta SChunk (b2w.SChunkWithVLMeta).
func schunkWithVLMeta(_ testing.TB, vl []kv) []byte { return b2w.SChunkWithVLMeta(vl) }
