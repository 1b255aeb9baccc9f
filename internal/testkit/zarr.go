package testkit

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"strings"
)

// ShardedZarr returns the objects of a Zarr v3 array (keys relative to
// the array: "zarr.json", "c/0", ...) of n float64 elements holding their
// own index (element i is float64(i)), stored as shards of shard elements
// with inner chunks of inner elements (inner codec bytes, index bytes +
// crc32c at the shard's end), as the specification lays them out. shard
// must divide n and inner shard.
func ShardedZarr(n, shard, inner int) map[string][]byte {
	out := map[string][]byte{"zarr.json": ShardedZarrMeta(n, shard, inner)}
	for s := 0; s*shard < n; s++ {
		out[fmt.Sprintf("c/%d", s)] = ShardedZarrShard(s, shard, inner)
	}
	return out
}

// ShardedZarrMeta returns the zarr.json of the array ShardedZarr
// describes.
func ShardedZarrMeta(n, shard, inner int) []byte {
	return []byte(fmt.Sprintf(`{"zarr_format":3,"node_type":"array","shape":[%d],"data_type":"float64",
"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[%d]}},
"chunk_key_encoding":{"name":"default"},"fill_value":0,
"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[%d],
 "codecs":[{"name":"bytes","configuration":{"endian":"little"}}],
 "index_codecs":[{"name":"bytes","configuration":{"endian":"little"}},{"name":"crc32c"}],
 "index_location":"end"}}],"attributes":{}}`, n, shard, inner))
}

// ShardedZarrShard returns shard s of the array ShardedZarr describes
// (its object "c/s"), for a writer that streams the shards of an array
// too large to hold.
func ShardedZarrShard(s, shard, inner int) []byte {
	body := make([]byte, 0, shard*8+shard/inner*16+4)
	var idx []byte
	for c := 0; c < shard/inner; c++ {
		idx = binary.LittleEndian.AppendUint64(idx, uint64(len(body)))
		idx = binary.LittleEndian.AppendUint64(idx, uint64(inner*8))
		for i := range inner {
			body = binary.LittleEndian.AppendUint64(body, math.Float64bits(float64(s*shard+c*inner+i)))
		}
	}
	idx = binary.LittleEndian.AppendUint32(idx, crc32.Checksum(idx, crc32.MakeTable(crc32.Castagnoli)))
	return append(body, idx...)
}

// ReadZarrManifest reads the MANIFEST.tsv of the Zarr fixtures (a header
// line, then per array its path, the sha256 of its .npy and more
// columns): array path → sha256.
func ReadZarrManifest(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Scan()
	for sc.Scan() {
		if p := strings.Split(sc.Text(), "\t"); len(p) >= 2 {
			out[p[0]] = p[1]
		}
	}
	return out, sc.Err()
}
