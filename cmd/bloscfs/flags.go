package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/pack/bloscpack"
	"github.com/spf13/pflag"
)

// codecNames lists the codecs new files can be written with.
const codecNames = "blosclz, lz4, lz4hc, zlib or zstd"

// filterNames lists the filter pipelines --filter takes.
const filterNames = "shuffle, bitshuffle, none, delta,shuffle, shuffle,bytedelta, truncprec:N,shuffle"

// chunkSizeHint says what --chunk-size takes.
const chunkSizeHint = "takes " + sizeHint + ", from 1 byte to 2GiB"

// newCodec returns the codec --codec names, one that can write.
func newCodec(name string) (int, error) {
	c, ok := blosc.CodecByName(name)
	if c == blosc.CodecSnappy && ok {
		return 0, badFlag("codec", name, "snappy is read but not written (as by c-blosc2): use "+codecNames)
	}
	if !ok || c > blosc.CodecZstd {
		return 0, badFlag("codec", name, "not a codec: use "+codecNames)
	}
	return c, nil
}

// checkLevels checks --clevel and --typesize.
func checkLevels(clevel, typesize int) error {
	if clevel < 0 || clevel > 9 {
		return badFlag("clevel", fmt.Sprint(clevel), "a compression level is 0 (none) to 9 (most)")
	}
	if typesize < 1 || typesize > 255 {
		return badFlag("typesize", fmt.Sprint(typesize), "an element size is 1 to 255 bytes")
	}
	return nil
}

// validParams checks the parameters of new chunks that no single flag
// decides (a filter that needs a typesize, or the Blosc1 format), in
// words without the codec package's prefix.
func validParams(p blosc.Params) error {
	err := blosc.ValidateParams(p)
	if err == nil {
		return nil
	}
	msg := err.Error()
	if errors.Is(err, blosc.ErrUnsupported) {
		msg = strings.TrimPrefix(msg, blosc.ErrUnsupported.Error()+": ")
	}
	if p.Blosc1 && strings.Contains(msg, "Blosc1") {
		msg = "Bloscpack files hold Blosc1 chunks, which take one filter: shuffle, bitshuffle or none"
	}
	return usageError(fmt.Sprintf("--filter %q with --typesize %d: %s", blosc.FilterString(p.Filters, p.FiltersMeta), p.Typesize, msg))
}

// optionValueError says in words why -o NAME=VALUE was refused: pflag
// hands on strconv's message, which names Go functions.
func optionValueError(f *pflag.Flag, err error) string {
	if k := valueKind(f.Value.Type()); k != "" {
		return k
	}
	return err.Error()
}

// checksumNames lists the Bloscpack checksums.
func checksumNames() string {
	var names []string
	for _, c := range bloscpack.Checksums {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}
