// Package all registers every container format with pack.Open: import it
// for its side effect.
//
//	import _ "github.com/bloscfs/bloscfs/pack/all"
package all

import (
	"io"

	"github.com/bloscfs/bloscfs/pack"
	_ "github.com/bloscfs/bloscfs/pack/bloscpack" // .blp
	_ "github.com/bloscfs/bloscfs/pack/frame"     // .b2frame, sparse frames, .b2nd
)

func init() {
	// A bare chunk has no magic: its test is the weakest, so it goes last.
	pack.RegisterFormat(pack.Format{
		Name:  "chunk",
		Match: pack.MatchChunk,
		Head:  pack.ChunkFileHead,
		Open: func(r io.ReaderAt, size int64, name string, cache pack.BlockCache) (pack.Container, error) {
			return pack.OpenChunkFile(r, size, name, cache)
		},
	})
}
