package hostile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"syscall"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/npy"
	"github.com/klauspost/compress/gzip"
)

// Hostile Zarr arrays: small files whose metadata or chunks claim huge
// sizes, dictionaries or item sizes, FIFOs where metadata, chunks or
// shards are expected, and sparse files where metadata or shard indexes
// are. A reader must answer each with an error (or the right bytes)
// within bounded memory and time, and never block.

// ZarrInput is one hostile Zarr array that WriteZarr writes.
type ZarrInput struct {
	Name string // the array's directory under the root
	What string // what it does to a reader that does not bound it
	// Opens reports that the array's metadata are sound: it opens (and
	// is shown as NAME.npy), and reading its data fails.
	Opens bool
	// LocalOnly marks an input that cannot travel to an object store (a
	// FIFO; a sparse file, which would be uploaded in full).
	LocalOnly bool
}

// ZstdBomb returns a zstd frame of RLE blocks, without a content size,
// that decodes to n zero bytes (n a multiple of 128 KiB): 4 bytes per
// 128 KiB, so 768 MiB take 24 KiB.
func ZstdBomb(n int64) []byte {
	const block = 128 << 10
	b := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x38} // magic; no size, no checksum; window 128 KiB
	for left := n; left > 0; left -= block {
		h := uint32(1<<1) | uint32(block)<<3 // RLE block of 128 KiB
		if left <= block {
			h |= 1 // last block
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 0)
	}
	return b
}

// GzipBomb returns a gzip stream of n zero bytes (about n/1000 bytes).
func GzipBomb(n int64) ([]byte, error) {
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, 1)
	if err != nil {
		return nil, err
	}
	z := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(z)) {
		if _, err := w.Write(z[:min(left, int64(len(z)))]); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// BloscClaims returns a 32-byte Blosc2 chunk of special zeros whose
// header claims nbytes plain bytes.
func BloscClaims(nbytes int32) []byte {
	b := make([]byte, blosc.ExtHeaderLen)
	b[0], b[1], b[2], b[3] = blosc.VersionStable, 1, 0x05, 1
	binary.LittleEndian.PutUint32(b[4:], uint32(nbytes))
	binary.LittleEndian.PutUint32(b[8:], uint32(min(nbytes, 1<<20)))
	binary.LittleEndian.PutUint32(b[12:], blosc.ExtHeaderLen)
	b[31] = byte(blosc.SpecialZero) << 4
	return b
}

// LZMAAloneDict returns a 17-byte LZMA "alone" stream whose header asks
// for a dictionary of 2 GiB - 1 and does not tell its size.
func LZMAAloneDict() []byte {
	b := []byte{0x5D, 0xFF, 0xFF, 0xFF, 0x7F}
	b = append(b, bytes.Repeat([]byte{0xFF}, 8)...)
	return append(b, 0, 0, 0, 0)
}

// XZDict returns an xz stream of one empty block whose LZMA2 filter asks
// for a dictionary of 3 GiB.
func XZDict() []byte {
	le := binary.LittleEndian
	b := []byte{0xFD, '7', 'z', 'X', 'Z', 0, 0, 0} // no check
	b = le.AppendUint32(b, crc32.ChecksumIEEE(b[6:8]))
	hdr := []byte{2, 0, 0x21, 1, 39, 0, 0, 0} // 12 bytes; LZMA2, dictionary code 39
	hdr = le.AppendUint32(hdr, crc32.ChecksumIEEE(hdr))
	b = append(b, hdr...)
	b = append(b, 0, 0, 0, 0) // LZMA2 end, padding
	idx := []byte{0, 1, 13, 0}
	idx = le.AppendUint32(idx, crc32.ChecksumIEEE(idx))
	b = append(b, idx...)
	foot := le.AppendUint32(nil, uint32(len(idx)/4-1))
	foot = append(foot, 0, 0)
	b = le.AppendUint32(b, crc32.ChecksumIEEE(foot))
	return append(append(b, foot...), 'Y', 'Z')
}

// ShardEntries is the number of inner chunks of each shard of the
// sparse_shards input: its index is 64 MiB.
const ShardEntries = 1 << 22

// ShardFiles is the number of shards of the sparse_shards input.
const ShardFiles = 8

func v2meta(shape, dtype, comp string) string {
	return fmt.Sprintf(`{"zarr_format":2,"shape":%s,"chunks":%s,"dtype":%q,"compressor":%s,"fill_value":0,"order":"C","filters":null}`, shape, shape, dtype, comp)
}

func v3meta(shape, chunk, dtype, codecs string) string {
	return fmt.Sprintf(`{"zarr_format":3,"node_type":"array","shape":%s,"data_type":%q,"chunk_grid":{"name":"regular","configuration":{"chunk_shape":%s}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":%s}`, shape, dtype, chunk, codecs)
}

// WriteZarr writes every hostile Zarr array under root (which must
// exist), each in a directory of its own, and returns them. With local
// false, the inputs that cannot travel to an object store are left out,
// and the large metadata document is a real file of 65 MiB instead of a
// sparse one of 1 GiB.
func WriteZarr(root string, local bool) ([]ZarrInput, error) {
	var out []ZarrInput
	var err error
	put := func(in ZarrInput, files map[string][]byte) {
		if err != nil || (in.LocalOnly && !local) {
			return
		}
		for name, b := range files {
			p := filepath.Join(root, in.Name, name)
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return
			}
			if err = os.WriteFile(p, b, 0o644); err != nil {
				return
			}
		}
		out = append(out, in)
	}
	u1 := func(comp string) []byte { return []byte(v2meta("[32]", "|u1", comp)) }
	put(ZarrInput{Name: "zstd_bomb", Opens: true, What: "a 24 KiB zstd chunk of a 32-byte array that inflates to 768 MiB"},
		map[string][]byte{".zarray": u1(`{"id":"zstd","level":1}`), "0": ZstdBomb(768 << 20)})
	gz, gerr := GzipBomb(1 << 30)
	if gerr != nil {
		return nil, gerr
	}
	put(ZarrInput{Name: "gzip_before_blosc", Opens: true, What: "a v3 gzip stage before blosc (1 MiB chunks) that inflates to 1 GiB"},
		map[string][]byte{"zarr.json": []byte(v3meta("[1048576]", "[1048576]", "uint8", `[{"name":"bytes"},{"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"noshuffle","typesize":1,"blocksize":0}},{"name":"gzip","configuration":{"level":1}}]`)), "c/0": gz})
	put(ZarrInput{Name: "blosc_claims_2g", Opens: true, What: "a 32-byte Blosc zeros chunk in the middle of a v3 chain that claims 2,000,000,000 bytes"},
		map[string][]byte{"zarr.json": []byte(v3meta("[32]", "[32]", "uint8", `[{"name":"bytes"},{"name":"crc32c"},{"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"noshuffle","typesize":1,"blocksize":0}}]`)), "c/0": BloscClaims(2_000_000_000)})
	put(ZarrInput{Name: "lz4_prefix", Opens: true, What: "an LZ4 chunk whose size prefix claims 1 GiB"},
		map[string][]byte{".zarray": u1(`{"id":"lz4","acceleration":1}`), "0": {0, 0, 0, 0x40, 0}})
	put(ZarrInput{Name: "lzma_alone_dict", Opens: true, What: `a 17-byte LZMA "alone" chunk that asks for a 2 GiB dictionary`},
		map[string][]byte{".zarray": u1(`{"id":"lzma","format":2,"check":-1,"preset":null,"filters":null}`), "0": LZMAAloneDict()})
	put(ZarrInput{Name: "xz_dict", Opens: true, What: "an xz chunk whose LZMA2 filter asks for a 3 GiB dictionary"},
		map[string][]byte{".zarray": u1(`{"id":"lzma","format":1,"check":-1,"preset":null,"filters":null}`), "0": XZDict()})
	put(ZarrInput{Name: "v_huge_0d", What: "a 0-d array of |V1099511627776 (a 1 TiB item)"},
		map[string][]byte{".zarray": []byte(`{"zarr_format":2,"shape":[],"chunks":[],"dtype":"|V1099511627776","compressor":null,"fill_value":null,"order":"C","filters":null}`)})
	put(ZarrInput{Name: "u_wrap", What: "<U4611686018427387905, whose item size wraps to 4"},
		map[string][]byte{".zarray": []byte(v2meta("[1]", "<U4611686018427387905", "null"))})
	put(ZarrInput{Name: "s_max", What: "|S9223372036854775807"},
		map[string][]byte{".zarray": []byte(v2meta("[1]", "|S9223372036854775807", "null"))})
	put(ZarrInput{Name: "struct_wrap", What: "a structured dtype whose sub-array shape wraps its item size"},
		map[string][]byte{".zarray": []byte(`{"zarr_format":2,"shape":[1],"chunks":[1],"dtype":[["a","<u4",[4611686018427387905]]],"compressor":null,"fill_value":null,"order":"C","filters":null}`)})
	good := []byte(v2meta("[4]", "|u1", "null"))
	if local {
		put(ZarrInput{Name: "sparse_zattrs", What: "a sparse .zattrs of 1 GiB beside a sound .zarray", LocalOnly: true},
			map[string][]byte{".zarray": good, "0": {1, 2, 3, 4}})
		put(ZarrInput{Name: "sparse_zarray", What: "a sparse .zarray of 1 GiB", LocalOnly: true}, map[string][]byte{})
		put(ZarrInput{Name: "sparse_zarr_json", What: "a sparse zarr.json of 1 GiB", LocalOnly: true}, map[string][]byte{})
		for _, f := range []string{"sparse_zattrs/.zattrs", "sparse_zarray/.zarray", "sparse_zarr_json/zarr.json"} {
			if err == nil {
				err = sparse(filepath.Join(root, f), 1<<30)
			}
		}
	} else {
		big := append([]byte(`{"pad":"`), bytes.Repeat([]byte{'x'}, 65<<20)...)
		put(ZarrInput{Name: "big_zattrs", What: "a .zattrs of 65 MiB beside a sound .zarray"},
			map[string][]byte{".zarray": good, "0": {1, 2, 3, 4}, ".zattrs": append(big, `"}`...)})
	}
	put(ZarrInput{Name: "fifo_zattrs", What: "a FIFO as .zattrs beside a sound .zarray", LocalOnly: true},
		map[string][]byte{".zarray": good, "0": {1, 2, 3, 4}})
	put(ZarrInput{Name: "fifo_chunk", Opens: true, What: "a FIFO as the chunk of a zlib array", LocalOnly: true},
		map[string][]byte{".zarray": u1(`{"id":"zlib","level":1}`)})
	put(ZarrInput{Name: "fifo_shard", Opens: true, What: "a FIFO as the shard of a sharded array", LocalOnly: true},
		map[string][]byte{"zarr.json": []byte(v3meta("[32]", "[32]", "uint8", `[{"name":"sharding_indexed","configuration":{"chunk_shape":[8],"codecs":[{"name":"bytes"}],"index_codecs":[{"name":"bytes"}]}}]`))})
	put(ZarrInput{Name: "fifo_zarr_json", What: "a FIFO as zarr.json", LocalOnly: true}, map[string][]byte{})
	if local && err == nil {
		for _, f := range []string{"fifo_zattrs/.zattrs", "fifo_chunk/0", "fifo_shard/c/0", "fifo_zarr_json/zarr.json"} {
			os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755)
			if err = syscall.Mkfifo(filepath.Join(root, f), 0o644); err != nil {
				break
			}
		}
	}
	shards := map[string][]byte{"zarr.json": []byte(v3meta(fmt.Sprintf("[%d]", ShardFiles*ShardEntries), fmt.Sprintf("[%d]", ShardEntries), "uint8",
		`[{"name":"sharding_indexed","configuration":{"chunk_shape":[1],"codecs":[{"name":"bytes"}],"index_codecs":[{"name":"bytes","configuration":{"endian":"little"}}],"index_location":"end"}}]`))}
	put(ZarrInput{Name: "sparse_shards", Opens: true, LocalOnly: true, What: fmt.Sprintf("%d sparse shards, each a %d MiB index of empty inner chunks", ShardFiles, 16*ShardEntries>>20)}, shards)
	if local && err == nil {
		for i := range ShardFiles {
			if err = sparse(filepath.Join(root, "sparse_shards", "c", fmt.Sprint(i)), 16*ShardEntries); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sparse makes path a sparse file of size bytes.
func sparse(path string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteGoodZarr writes a sound Zarr v2 array at dir: 2^20 float64 (a
// ramp of sines), Blosc LZ4 with shuffle, in 8 chunks of 1 MiB. It
// returns what its .npy view must read as.
func WriteGoodZarr(dir string) ([]byte, error) {
	const n, per = 1 << 20, 1 << 17
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	meta := `{"zarr_format":2,"shape":[1048576],"chunks":[131072],"dtype":"<f8","compressor":{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1,"blocksize":0},"fill_value":0.0,"order":"C","filters":null}`
	if err := os.WriteFile(filepath.Join(dir, ".zarray"), []byte(meta), 0o644); err != nil {
		return nil, err
	}
	data := make([]byte, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint64(data[8*i:], math.Float64bits(float64(i)*0.25+math.Sin(float64(i)/100)))
	}
	p := blosc.Params{Codec: blosc.CodecLZ4, Clevel: 5, Typesize: 8, Blosc1: true}
	p.Filters[5] = blosc.FilterShuffle
	for c := range n / per {
		chunk, err := blosc.Compress(nil, data[8*per*c:8*per*(c+1)], p)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(c)), chunk, 0o644); err != nil {
			return nil, err
		}
	}
	return append(npy.Header("'<f8'", []int64{n}), data...), nil
}
