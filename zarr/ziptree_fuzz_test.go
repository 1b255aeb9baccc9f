package zarr

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// zipSeeds returns small zipped stores: the hostile archives of
// TestZipTreeHostile's rules (without the bombs' megabytes), and
// zarrita's blosc and fill groups and a sharded array zipped as RFC-9
// says.
func zipSeeds(f *testing.F) [][]byte {
	var out [][]byte
	ms, _ := hostileZarrMembers()
	out = append(out, testkit.BuildZip(ms, nil))
	for _, edit := range []func([]testkit.ZipMember) []testkit.ZipMember{
		func(ms []testkit.ZipMember) []testkit.ZipMember { ms[5].Flags |= 1; return ms },
		func(ms []testkit.ZipMember) []testkit.ZipMember { ms[6].HeaderOf = 6; return ms },
		func(ms []testkit.ZipMember) []testkit.ZipMember {
			return append(ms, testkit.ZipMember{Name: "bad/0", Data: []byte("x")}, testkit.ZipMember{Name: "../x", Data: []byte("x")})
		},
		func(ms []testkit.ZipMember) []testkit.ZipMember {
			ms[5] = testkit.ZipMember{Name: "bad/0", Data: testkit.DeflateZeros(1 << 20), Method: 8, USize: 400, Plain: make([]byte, 400)}
			return ms
		},
	} {
		ms, _ := hostileZarrMembers()
		out = append(out, testkit.BuildZip(edit(ms), nil))
	}
	dir := f.TempDir()
	for _, src := range []string{"blosc", "fill"} {
		zp := filepath.Join(dir, src+".zip")
		zipStore(f, filepath.Join("../testdata/zarr/zarrita/v3", src), zp)
		b, err := os.ReadFile(zp)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	writeSharded(f, dir, "s", shardSpec{shape: []int64{20, 10}, shard: []int64{8, 10}, inner: []int64{4, 5}, codec: "crc32c"})
	zipStore(f, filepath.Join(dir, "s"), filepath.Join(dir, "s.ozx"), "--deflate")
	b, err := os.ReadFile(filepath.Join(dir, "s.ozx"))
	if err != nil {
		f.Fatal(err)
	}
	return append(out, b)
}

// FuzzZipTree opens arbitrary bytes as a zipped store, lists every
// directory (up to 256 entries in all) and reads the first and last 4
// KiB of every file. Nothing may panic, and what it allocates stays
// under the fuzz bound of the input, deflate's largest expansion of it
// (a member is inflated at most twice: listed, read), and a bound per
// array read from its metadata (as FuzzZarrRead's).
func FuzzZipTree(f *testing.F) {
	for _, b := range zipSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := testkit.StartAlloc()
		own := 3 * (1032*uint64(len(data)) + 1024) // deflate expands at most 1032 to 1
		tr, err := OpenZipTree(bytes.NewReader(data), int64(len(data)), "fuzz.zip", nil)
		if err != nil {
			mem.Check(t, len(data), own)
			return
		}
		seen := 0
		var walk func(p string)
		read := func(p string) {
			c, err := tr.Open(p)
			if err != nil {
				return
			}
			if z, ok := c.(*ZipArray); ok {
				const n = 4096
				touched := min(z.NumChunks(), n+1)
				per := 4*z.ChunkBytes() + 2*z.maxStored() + 64<<10
				if per > (256<<20)/max(1, touched) {
					return // too much to fuzz quickly, as FuzzZarrRead
				}
				own += uint64(touched * per)
			}
			p0 := make([]byte, min(c.Size(), 4096))
			own += 2 * uint64(len(p0))
			c.ReadAt(p0, 0)
			c.ReadAt(p0, c.Size()-int64(len(p0)))
		}
		walk = func(p string) {
			ents, err := tr.ReadDir(p)
			if err != nil {
				return
			}
			for _, e := range ents {
				if seen++; seen > 256 {
					return
				}
				if _, err := tr.Stat(JoinKey(p, e.Name)); err != nil {
					t.Fatalf("%s listed, but Stat: %v", JoinKey(p, e.Name), err)
				}
				if e.Dir {
					walk(JoinKey(p, e.Name))
				} else {
					read(JoinKey(p, e.Name))
				}
			}
		}
		if tr.Root().Dir {
			walk("")
		} else {
			read("")
		}
		tr.Problems()
		mem.Check(t, len(data), own)
	})
}
