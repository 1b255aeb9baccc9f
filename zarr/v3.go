package zarr

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
)

// chain is a v3 codec pipeline.
type chain struct {
	perm   []int        // composite transpose order (nil: none)
	big    bool         // bytes codec stores big-endian numbers
	bb     []compressor // bytes-to-bytes codecs, in encoding order
	shard  *sharding    // array-to-bytes sharding_indexed, or nil
	dt     dtype
	shape  []int64 // chunk shape the chain encodes
	nbytes int64   // plain bytes of one chunk
	list   []string
	// bound[i] is the most that decoding bb[i] may produce: exactly
	// nbytes for bb[0], else the largest input bb[i-1] can decode from
	// (its largest encoding of bound[i-1]). raw bounds the encoded chunk.
	bound []int64
	raw   int64
}

// sharding is a sharding_indexed codec.
type sharding struct {
	inner   []int64 // inner chunk shape
	per     []int64 // inner chunks per shard, per dimension
	n       int64   // inner chunks per shard
	chain   *chain  // inner chunks' codecs
	idxCRC  bool    // index followed by its crc32c
	idxBig  bool    // index numbers big-endian
	atStart bool    // index at the start of the shard
}

// indexSize is the encoded size of a shard index.
func (s *sharding) indexSize() int64 {
	n := 16 * s.n
	if s.idxCRC {
		n += 4
	}
	return n
}

func (c *chain) names() []string { return c.list }

// maxIndexEntries bounds the inner chunks of one shard (its index is 16
// bytes per entry).
const maxIndexEntries = 1 << 22

// parseChain parses a v3 codecs list for chunks of shape.
func parseChain(codecs []namedConf, dt dtype, shape []int64, depth int) (*chain, error) {
	if depth > 2 {
		return nil, fmt.Errorf("%w: sharding nested too deep", ErrUnsupported)
	}
	if len(codecs) > 16 {
		return nil, fmt.Errorf("%w: %d codecs", ErrUnsupported, len(codecs))
	}
	c := &chain{dt: dt, shape: shape, nbytes: int64(dt.size)}
	for _, d := range shape {
		c.nbytes *= d
	}
	k := 0
	// array -> array
	for ; k < len(codecs) && codecs[k].Name == "transpose"; k++ {
		var conf struct {
			Order []int `json:"order"`
		}
		if err := json.Unmarshal(codecs[k].Configuration, &conf); err != nil || len(conf.Order) != len(shape) {
			return nil, fmt.Errorf("%w: transpose order %.80s for %d dimensions", ErrFormat, codecs[k].Configuration, len(shape))
		}
		seen := make([]bool, len(shape))
		for _, o := range conf.Order {
			if o < 0 || o >= len(shape) || seen[o] {
				return nil, fmt.Errorf("%w: transpose order %v", ErrFormat, conf.Order)
			}
			seen[o] = true
		}
		if c.perm == nil {
			c.perm = conf.Order
		} else {
			p := make([]int, len(shape))
			for i := range p {
				p[i] = c.perm[conf.Order[i]]
			}
			c.perm = p
		}
		c.list = append(c.list, "transpose")
	}
	// array -> bytes
	if k >= len(codecs) {
		return nil, fmt.Errorf("%w: no array-to-bytes codec", ErrFormat)
	}
	switch ab := codecs[k]; ab.Name {
	case "bytes":
		var conf struct {
			Endian string `json:"endian"`
		}
		if len(ab.Configuration) > 0 {
			if err := json.Unmarshal(ab.Configuration, &conf); err != nil {
				return nil, fmt.Errorf("%w: bytes configuration %.80s", ErrFormat, ab.Configuration)
			}
		}
		switch conf.Endian {
		case "little", "":
		case "big":
			c.big = true
		default:
			return nil, fmt.Errorf("%w: endian %q", ErrFormat, conf.Endian)
		}
		c.list = append(c.list, "bytes")
	case "sharding_indexed":
		if c.perm != nil {
			return nil, fmt.Errorf("%w: transpose before sharding_indexed", ErrUnsupported)
		}
		s, err := parseSharding(ab.Configuration, dt, shape, depth)
		if err != nil {
			return nil, err
		}
		c.shard = s
		c.list = append(c.list, "sharding_indexed")
		c.list = append(c.list, s.chain.list...)
	default:
		return nil, fmt.Errorf("%w: codec %q", ErrUnsupported, ab.Name)
	}
	k++
	// bytes -> bytes
	for ; k < len(codecs); k++ {
		cc, err := parseV3BytesCodec(codecs[k])
		if err != nil {
			return nil, err
		}
		c.bb = append(c.bb, cc)
		c.list = append(c.list, cc.name())
	}
	if c.shard != nil && len(c.bb) > 0 {
		// Inner chunks are read with ranged reads; a compressed shard
		// would have to be read whole.
		return nil, fmt.Errorf("%w: bytes-to-bytes codecs after sharding_indexed", ErrUnsupported)
	}
	c.bound = make([]int64, len(c.bb))
	c.raw = c.nbytes
	for i, cc := range c.bb {
		c.bound[i] = c.raw
		c.raw = cc.maxEncoded(c.raw)
	}
	return c, nil
}

func parseV3BytesCodec(n namedConf) (compressor, error) {
	switch n.Name {
	case "blosc":
		return bloscCodec{}, nil
	case "gzip":
		return parseV2Compressor(json.RawMessage(`{"id":"gzip"}`))
	case "zstd":
		return zstdCodec{}, nil
	case "crc32c":
		return crc32cCodec{}, nil
	}
	return nil, fmt.Errorf("%w: codec %q", ErrUnsupported, n.Name)
}

func parseSharding(raw json.RawMessage, dt dtype, shape []int64, depth int) (*sharding, error) {
	var conf struct {
		ChunkShape    []int64     `json:"chunk_shape"`
		Codecs        []namedConf `json:"codecs"`
		IndexCodecs   []namedConf `json:"index_codecs"`
		IndexLocation string      `json:"index_location"`
	}
	if err := json.Unmarshal(raw, &conf); err != nil {
		return nil, fmt.Errorf("%w: sharding_indexed configuration: %v", ErrFormat, err)
	}
	if err := checkGrid(shape, conf.ChunkShape, dt.size, "sharding_indexed"); err != nil {
		return nil, err
	}
	s := &sharding{inner: conf.ChunkShape, per: make([]int64, len(shape)), n: 1}
	for i := range shape {
		if shape[i]%conf.ChunkShape[i] != 0 {
			return nil, fmt.Errorf("%w: inner chunk shape %v does not divide shard shape %v", ErrFormat, conf.ChunkShape, shape)
		}
		s.per[i] = shape[i] / conf.ChunkShape[i]
		s.n *= s.per[i]
		if s.n > maxIndexEntries {
			return nil, fmt.Errorf("%w: more than %d inner chunks per shard", ErrUnsupported, maxIndexEntries)
		}
	}
	switch conf.IndexLocation {
	case "end", "":
	case "start":
		s.atStart = true
	default:
		return nil, fmt.Errorf("%w: index_location %q", ErrFormat, conf.IndexLocation)
	}
	// The index codecs: bytes, then optionally crc32c.
	ic := conf.IndexCodecs
	if len(ic) == 0 || len(ic) > 2 || ic[0].Name != "bytes" || (len(ic) == 2 && ic[1].Name != "crc32c") {
		return nil, fmt.Errorf("%w: index_codecs other than bytes[, crc32c]", ErrUnsupported)
	}
	var bc struct {
		Endian string `json:"endian"`
	}
	if len(ic[0].Configuration) > 0 {
		if err := json.Unmarshal(ic[0].Configuration, &bc); err != nil {
			return nil, fmt.Errorf("%w: index bytes codec", ErrFormat)
		}
	}
	s.idxBig = bc.Endian == "big"
	s.idxCRC = len(ic) == 2
	inner, err := parseChain(conf.Codecs, dt, conf.ChunkShape, depth+1)
	if err != nil {
		return nil, fmt.Errorf("sharding_indexed inner codecs: %w", err)
	}
	if inner.shard != nil {
		return nil, fmt.Errorf("%w: nested sharding_indexed", ErrUnsupported)
	}
	s.chain = inner
	return s, nil
}

// decode decodes one encoded chunk (not sharded) into its C-order,
// little-endian bytes.
// Each stage's output is bounded before it is allocated (see bound).
func (c *chain) decode(raw []byte) ([]byte, error) {
	if int64(len(raw)) > c.raw {
		return nil, fmt.Errorf("%w: encoded chunk of %d bytes, more than %d for a %d-byte chunk", ErrCorrupt, len(raw), c.raw, c.nbytes)
	}
	b := raw
	var err error
	for i := len(c.bb) - 1; i >= 0; i-- {
		if b, err = c.bb[i].decompress(b, c.bound[i], i == 0); err != nil {
			return nil, err
		}
	}
	if int64(len(b)) != c.nbytes {
		return nil, fmt.Errorf("%w: chunk decodes to %d bytes, want %d", ErrCorrupt, len(b), c.nbytes)
	}
	if len(c.bb) == 0 {
		b = slices.Clone(b)
	}
	if c.big {
		swapElements(b, c.dt)
	}
	if c.perm != nil {
		tshape := make([]int64, len(c.shape))
		for i, p := range c.perm {
			tshape[i] = c.shape[p]
		}
		out := make([]byte, len(b))
		untranspose(out, b, c.shape, tshape, c.perm, c.dt.size)
		b = out
	}
	return b, nil
}

// direct reports whether the chain's chunks are Blosc chunks holding the
// plain chunk bytes as they are (so they can be decoded block by block).
func (c *chain) direct() bool {
	return c.shard == nil && c.perm == nil && (!c.big || c.dt.size == 1 || c.dt.kind == 'V') &&
		len(c.bb) == 1 && c.bb[0].bloscChunk()
}

// swapElements turns big-endian numbers little-endian in place.
func swapElements(b []byte, d dtype) {
	w := d.size
	switch d.kind {
	case 'c':
		w /= 2
	case 'V', 'S', 'b':
		return
	}
	if w <= 1 {
		return
	}
	for i := 0; i+w <= len(b); i += w {
		slices.Reverse(b[i : i+w])
	}
}

// untranspose writes into dst (C order over shape) the array src holds
// in C order over tshape, where tshape[i] = shape[perm[i]].
func untranspose(dst, src []byte, shape, tshape []int64, perm []int, size int) {
	nd := len(shape)
	// strides of dst, in src's axis order
	dstStride := make([]int64, nd)
	st := int64(size)
	for i := nd - 1; i >= 0; i-- {
		for j, p := range perm {
			if p == i {
				dstStride[j] = st
			}
		}
		st *= shape[i]
	}
	idx := make([]int64, nd)
	var off int64
	for s := 0; s+size <= len(src); s += size {
		copy(dst[off:off+int64(size)], src[s:])
		for d := nd - 1; d >= 0; d-- {
			idx[d]++
			off += dstStride[d]
			if idx[d] < tshape[d] {
				break
			}
			off -= dstStride[d] * idx[d]
			idx[d] = 0
		}
	}
}

// shardIndex is a checked shard index: offset and size of each inner
// chunk, 16 bytes each as the shard stores them (missing: offset = size
// = 2^64-1). It holds the bytes read, not a decoded copy.
type shardIndex struct {
	b   []byte
	big bool
}

// entry returns the offset and size of inner chunk i.
func (x *shardIndex) entry(i int64) (off, n uint64) {
	if x.big {
		return binary.BigEndian.Uint64(x.b[16*i:]), binary.BigEndian.Uint64(x.b[16*i+8:])
	}
	return binary.LittleEndian.Uint64(x.b[16*i:]), binary.LittleEndian.Uint64(x.b[16*i+8:])
}

// parseIndex checks an encoded shard index: every entry is missing, or
// an inner chunk no larger than the inner codecs can have written.
func (s *sharding) parseIndex(b []byte) (*shardIndex, error) {
	if int64(len(b)) != s.indexSize() {
		return nil, fmt.Errorf("%w: shard index of %d bytes, want %d", ErrCorrupt, len(b), s.indexSize())
	}
	if s.idxCRC {
		var err error
		if b, err = (crc32cCodec{}).decompress(b, 16*s.n, true); err != nil {
			return nil, fmt.Errorf("shard index: %w", err)
		}
	}
	x := &shardIndex{b: b, big: s.idxBig}
	for i := int64(0); i < s.n; i++ {
		off, n := x.entry(i)
		if off == math.MaxUint64 && n == math.MaxUint64 {
			continue
		}
		if n > uint64(s.chain.raw) || off > math.MaxInt64-n {
			return nil, fmt.Errorf("%w: shard index entry %d: %d bytes at %d (an inner chunk has at most %d)", ErrCorrupt, i, n, off, s.chain.raw)
		}
	}
	return x, nil
}
