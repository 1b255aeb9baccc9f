package all

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/internal/testkit/gridfiles"
	"github.com/bloscfs/bloscfs/pack"
)

// TestFixtureCanary decodes every chunk of every valid fixture whole, and
// every block on its own, into a window of a larger buffer whose bytes in
// front and spare capacity behind hold a guard pattern; no guard byte may
// change. The chunks decoded in order must give the manifest's sha256.
// Then the no-cache paths that decode neighbouring blocks and chunks into
// one buffer at the same time (WriteTo, as unpack and verify use it, and
// one ReadAt of the whole view) must give the same bytes.
func TestFixtureCanary(t *testing.T) {
	fx, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fx {
		if !f.ValidPlain {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			c, closer, err := pack.OpenPath(f.Path, pack.NoCache{})
			if err != nil {
				t.Fatal(err)
			}
			defer closer.Close()
			src, ok := c.(pack.ChunkSource)
			if !ok {
				t.Fatalf("%T is no ChunkSource", c)
			}
			var serial []byte
			for i := 0; i < src.NumChunks(); i++ {
				ch, err := src.OpenChunk(i)
				if err != nil {
					t.Fatalf("chunk %d: %v", i, err)
				}
				cn := testkit.NewCanary(int(ch.Nbytes))
				if err := ch.Decode(cn.Dst()); err != nil {
					t.Fatalf("chunk %d: %v", i, err)
				}
				if err := cn.Check(); err != nil {
					t.Fatalf("chunk %d: Decode %s", i, err)
				}
				serial = append(serial, cn.Dst()...)
				for b := 0; b < ch.NumBlocks(); b++ {
					off, bl := ch.BlockOffset(b), ch.BlockLen(b)
					cb := testkit.NewCanary(bl)
					if err := ch.DecodeBlock(cb.Dst(), b); err != nil {
						t.Fatalf("chunk %d block %d: %v", i, b, err)
					}
					if err := cb.Check(); err != nil {
						t.Fatalf("chunk %d: DecodeBlock(%d) %s", i, b, err)
					}
					if !bytes.Equal(cb.Dst(), cn.Dst()[off:off+int64(bl)]) {
						t.Fatalf("chunk %d: block %d differs from the whole decode", i, b)
					}
				}
			}
			sum := sha256.Sum256(serial)
			want := f.PlainSHA
			if f.Kind == "b2nd" {
				want = f.RawSHA // the padded super-chunk, not the C-order array
			}
			if want != "" && hex.EncodeToString(sum[:]) != want {
				t.Fatalf("chunks decode to sha %x, want %s", sum, want)
			}

			v := ContainerView(c)
			var buf bytes.Buffer
			if _, err := v.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			if d := gridfiles.FirstDiff(buf.Bytes(), serial); d >= 0 {
				t.Fatalf("WriteTo without a cache differs from the serial decode at offset %d", d)
			}
			cn := testkit.NewCanary(int(c.Size()))
			if n, err := c.ReadAt(cn.Dst(), 0); n != int(c.Size()) || (err != nil && err != io.EOF) {
				t.Fatalf("ReadAt of the whole view: %d bytes, %v", n, err)
			}
			if err := cn.Check(); err != nil {
				t.Fatalf("ReadAt of the whole view %s", err)
			}
			if d := gridfiles.FirstDiff(cn.Dst(), serial); d >= 0 {
				t.Fatalf("ReadAt of the whole view without a cache differs from the serial decode at offset %d", d)
			}
		})
	}
}
