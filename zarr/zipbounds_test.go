package zarr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/zipread"
)

// Lying tests of the bounds of a zipped tree: archives that claim or hold
// more than a bound allows, refused cleanly within it.

// TestZipTreeProblemsBounded lies about how much is wrong with an
// archive: 300 members whose names cannot be shown (found when it is
// opened), 300 array folders whose .zarray does not parse or asks for a
// dtype that is refused (found when their directory is listed), and
// both. The tree keeps maxProblems-1 of them, each naming the archive
// and the member or folder, and counts the rest in a last one; the
// dropped names are counted, not formatted.
func TestZipTreeProblemsBounded(t *testing.T) {
	const name = "problems.zip"
	bad := func(ms []testkit.ZipMember, n int) []testkit.ZipMember {
		for i := range n {
			doc := `{"zarr_format":2,"shape":[` // cut short
			if i%2 == 1 {
				doc = `{"zarr_format":2,"shape":[2],"chunks":[1],"dtype":"|O","compressor":null,"fill_value":0,"order":"C"}`
			}
			ms = append(ms, testkit.ZipMember{Name: fmt.Sprintf("b%03d/.zarray", i), Data: []byte(doc)})
		}
		return ms
	}
	unsafe := func(ms []testkit.ZipMember, n int) []testkit.ZipMember {
		for i := range n {
			ms = append(ms, testkit.ZipMember{Name: fmt.Sprintf("../u%05d", i), Data: []byte("x")})
		}
		return ms
	}
	group := []testkit.ZipMember{{Name: ".zgroup", Data: []byte(`{"zarr_format":2}`)}}
	for _, c := range []struct {
		what          string
		ms            []testkit.ZipMember
		arrays, total int
	}{
		{"unsafe names", unsafe(group, 300), 0, 300},
		{"broken arrays", bad(group, 300), 300, 300},
		{"both", bad(unsafe(group, 200), 200), 200, 400},
	} {
		t.Run(c.what, func(t *testing.T) {
			b := testkit.BuildZip(c.ms, nil)
			tr, err := OpenZipTree(bytes.NewReader(b), int64(len(b)), name, nil)
			if err != nil {
				t.Fatal(err)
			}
			ents, err := tr.ReadDir("")
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != 1+c.arrays {
				t.Errorf("the root lists %d entries, want .zgroup and %d folders", len(ents), c.arrays)
			}
			for _, e := range ents[1:] {
				if !e.Dir || !strings.HasPrefix(e.Name, "b") {
					t.Errorf("entry %+v, want an array that does not open shown as its folder", e)
					break
				}
			}
			p := tr.Problems()
			if len(p) != maxProblems {
				t.Fatalf("%d problems, want %d: %d kept and one counting the rest", len(p), maxProblems, maxProblems-1)
			}
			seen := map[string]bool{}
			for _, e := range p[:maxProblems-1] {
				named := strings.HasPrefix(e.Error(), name+`: "../u`) || strings.HasPrefix(e.Error(), name+": b")
				if !named || seen[e.Error()] {
					t.Errorf("problem %q: want one naming %s and the member or folder, once", e, name)
				}
				seen[e.Error()] = true
			}
			want := fmt.Sprintf("%s: %d more problems", name, c.total-(maxProblems-1))
			if got := p[maxProblems-1].Error(); got != want {
				t.Errorf("last problem %q, want %q", got, want)
			}
			// A second listing finds nothing new.
			if _, err := tr.ReadDir(""); err != nil || len(tr.Problems()) != maxProblems || tr.Problems()[maxProblems-1].Error() != want {
				t.Errorf("after a second listing: %v, problems end %q", err, tr.Problems()[len(tr.Problems())-1])
			}
		})
	}
	t.Run("dropped names are not formatted", func(t *testing.T) {
		// 20,000 unsafe names: opening the tree allocates little beyond
		// what opening the archive and checking each member's name take
		// (measured alone), not an error for each name dropped.
		const n = 20000
		b := testkit.BuildZip(unsafe(group, n), nil)
		mem := testkit.StartAlloc()
		a, err := zipread.Open(bytes.NewReader(b), int64(len(b)), name)
		if err != nil {
			t.Fatal(err)
		}
		for i := range a.Len() {
			if m := a.Member(i); i > 0 && (m.Err == nil || ValidKey(m.Name)) {
				t.Fatalf("member %d is not refused for its name", i)
			}
		}
		dir := mem.Allocated()
		mem = testkit.StartAlloc()
		tr, err := OpenZipTree(bytes.NewReader(b), int64(len(b)), name, nil)
		if err != nil {
			t.Fatal(err)
		}
		tree := mem.Allocated()
		t.Logf("archive and members %d KiB, tree %d KiB", dir>>10, tree>>10)
		if tree > dir+512<<10 {
			t.Errorf("opening the tree of %d unsafe names allocated %d KiB, the archive and its members %d KiB: more than 512 KiB for %d problems", n, tree>>10, dir>>10, maxProblems)
		}
		if p := tr.Problems(); len(p) != maxProblems || !strings.HasSuffix(p[len(p)-1].Error(), fmt.Sprintf(" %d more problems", n-(maxProblems-1))) {
			t.Errorf("%d problems, the last %q", len(p), p[len(p)-1])
		}
	})
}

// TestZipTreePrefetchBudget lies about the size of the metadata a
// listing reads ahead: 16 v3 arrays whose folders each hold a .zattrs
// claiming 16 MiB (17 KiB of deflate that inflate to no such thing, and
// that nothing but the read-ahead reads for a v3 array), the first four
// filling the 64 MiB of prefetchBudget with their zarr.json, then an
// array whose .zarray claims 1 GiB (more than MaxMetaSize). The listing
// reads ahead at most 64 MiB of them: what it allocates stays within the
// budget, not the 256 MiB claimed; the zarr.json past the budget are
// read on their own, every array is listed and reads, and the 1 GiB
// document is refused unread, a problem naming the archive and the
// array.
func TestZipTreePrefetchBudget(t *testing.T) {
	// The budget as documented (prefetchBudget); a test against the
	// constant itself would pass whatever it is raised to.
	const budget = 64 << 20
	const name, arrays, claim = "prefetch.zip", 16, budget / 4
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	noise := make([]byte, 17<<10)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	junk := testkit.Deflate(noise) // inflates to 17 KiB, claimed to be 16 MiB
	ms := []testkit.ZipMember{{Name: "zarr.json", Data: []byte(`{"zarr_format":3,"node_type":"group"}`)}}
	for k := range arrays {
		zj := []byte(`{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes"}]}`)
		d := fmt.Sprintf("a%02d/", k)
		ms = append(ms,
			testkit.ZipMember{Name: d + ".zattrs", Data: junk, Method: 8, USize: claim - int64(len(zj))},
			testkit.ZipMember{Name: d + "c/0", Data: []byte{byte(k), 1, 2, 3}},
			testkit.ZipMember{Name: d + "zarr.json", Data: zj})
	}
	ms = append(ms, testkit.ZipMember{Name: "big/.zarray", Data: junk, Method: 8, USize: 1 << 30})
	b := testkit.BuildZip(ms, nil)
	r := &countingReader{b: b}
	mem := testkit.StartAlloc()
	tr, err := OpenZipTree(r, int64(len(b)), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.reads.Store(0)
	ents, err := tr.ReadDir("")
	if err != nil {
		t.Fatal(err)
	}
	got := mem.Allocated()
	t.Logf("listing: %d MiB allocated, %d reads of the archive", got>>20, r.reads.Load())
	if got > budget+8<<20 {
		t.Errorf("listing allocated %d MiB: more than the %d MiB read-ahead budget + 8 (the archive claims %d MiB)", got>>20, budget>>20, arrays*claim>>20)
	}
	// The four zarr.json within the budget are read ahead in one read
	// with the documents beside them; the twelve past it one read each;
	// big/.zarray is not read.
	if n := r.reads.Load(); n != 1+arrays-4 {
		t.Errorf("listing made %d reads of the archive, want %d: one read ahead, then each zarr.json past the budget", n, 1+arrays-4)
	}
	if len(ents) != arrays+2 {
		t.Fatalf("the root lists %d entries, want %d arrays, big and zarr.json", len(ents), arrays)
	}
	for k, e := range ents[:arrays] {
		if want := fmt.Sprintf("a%02d.npy", k); e.Name != want || e.Dir || e.Info.Format != "zarr3" {
			t.Errorf("entry %d: %+v, want the array %s", k, e, want)
			continue
		}
		if got := readTreeFile(t, tr, e.Name); !bytes.HasSuffix(got, []byte{byte(k), 1, 2, 3}) {
			t.Errorf("%s reads %v", e.Name, got)
		}
	}
	if e := ents[arrays]; e.Name != "big" || !e.Dir {
		t.Errorf("entry %+v, want big shown as a folder", e)
	}
	p := tr.Problems()
	if len(p) != 1 || !errors.Is(p[0], ErrTooLarge) || !strings.Contains(p[0].Error(), name+": big") || !strings.Contains(p[0].Error(), "big/.zarray") {
		t.Errorf("problems %v, want one: big/.zarray too large, naming %s", p, name)
	}
}

// TestZipShardHostile lies with a zipped sharded array's index, as
// TestShardHostile does in a directory: shard a/c/0 of a group's array
// (two inner chunks of 16 bytes, the index and its crc32c at the end)
// has an inner chunk far past the shard, one running past the shard's
// end into the next member's bytes, offsets at and past int64's end, a
// huge size, a wrong checksum, a short inner chunk, or is cut below its
// index; deflated, its stream ends before its claimed size, or it
// claims more than the array can have written. Each is an error of the
// read naming the archive, the shard's key and what is wrong, within a
// few MiB and seconds, for a stored shard read in place (locally and
// from an object store) and a deflated one; the other shard reads.
func TestZipShardHostile(t *testing.T) {
	const name = "shards.zip"
	dir := t.TempDir()
	want := writeSharded(t, dir, "a", shardSpec{shape: []int64{16}, shard: []int64{8}, inner: []int64{4}})
	file := func(p string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, "a", p))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	meta, orig, shard1 := file("zarr.json"), file("c/0"), file("c/1")
	if len(orig) != 2*16+2*16+4 {
		t.Fatalf("shard c/0 of %d bytes, want two inner chunks of 16 and the index", len(orig))
	}
	entry := func(i int, off, n uint64) []byte {
		b := bytes.Clone(orig)
		idx := b[len(b)-2*16-4:]
		binary.LittleEndian.PutUint64(idx[16*i:], off)
		binary.LittleEndian.PutUint64(idx[16*i+8:], n)
		binary.LittleEndian.PutUint32(idx[32:], crc32.Checksum(idx[:32], castagnoli()))
		return b
	}
	flipped := bytes.Clone(orig)
	flipped[len(flipped)-1] ^= 1
	rng := rand.New(rand.NewChaCha8([32]byte{2}))
	noise := make([]byte, 66<<10)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	cases := []struct {
		what  string
		shard []byte // c/0, stored or deflated as the others
		// zipped, when set, is c/0 as the archive holds it (deflated
		// only).
		zipped *testkit.ZipMember
		want   error
		text   string // what is wrong, in the error
	}{
		{"inner chunk far past the shard", entry(1, 1<<40, 16), nil, ErrCorrupt, "inner chunk 1 at [1099511627776,+16) past the shard's end"},
		{"inner chunk into the next member", entry(1, uint64(len(orig))-8, 16), nil, ErrCorrupt, "inner chunk 1 at [60,+16) past the shard's end"},
		{"inner chunk at the largest offset", entry(1, math.MaxInt64-16, 16), nil, ErrCorrupt, "past the shard's end"},
		{"inner chunk offset past int64", entry(1, 1<<63, 16), nil, ErrCorrupt, "shard index entry 1: 16 bytes at 9223372036854775808"},
		{"inner chunk of a huge size", entry(1, 0, 1<<62), nil, ErrCorrupt, "shard index entry 1: 4611686018427387904 bytes"},
		{"short inner chunk", entry(0, 0, 12), nil, ErrCorrupt, "inner chunk 0: corrupt Zarr chunk: chunk decodes to 12 bytes, want 16"},
		{"index checksum wrong", flipped, nil, ErrChecksum, "shard index: checksum mismatch"},
		{"shard shorter than its index", orig[:10], nil, ErrCorrupt, "shard shorter than its 36-byte index"},
		{"deflated shard that inflates short", nil,
			&testkit.ZipMember{Name: "a/c/0", Data: testkit.Deflate(orig[:40]), Method: 8, Plain: orig},
			ErrCorrupt, "inflates to 40 bytes, not 68"},
		{"deflated shard claiming 64 MiB", nil,
			&testkit.ZipMember{Name: "a/c/0", Data: testkit.Deflate(noise), Method: 8, USize: 64 << 20},
			ErrTooLarge, "a deflated member of 67108864 bytes, more than the 68 its array can have written"},
	}
	for _, mode := range []string{"stored", "object store", "deflated"} {
		for _, c := range cases {
			if c.zipped != nil && mode != "deflated" {
				continue
			}
			t.Run(mode+"/"+c.what, func(t *testing.T) {
				member := func(name string, b []byte) testkit.ZipMember {
					if mode == "deflated" {
						return testkit.ZipMember{Name: name, Data: testkit.Deflate(b), Method: 8, Plain: b}
					}
					return testkit.ZipMember{Name: name, Data: b}
				}
				bad := member("a/c/0", c.shard)
				if c.zipped != nil {
					bad = *c.zipped
				}
				b := testkit.BuildZip([]testkit.ZipMember{
					{Name: "zarr.json", Data: []byte(`{"zarr_format":3,"node_type":"group"}`)},
					{Name: "a/zarr.json", Data: meta},
					bad,
					member("a/c/1", shard1),
				}, nil)
				var r io.ReaderAt = &countingReader{b: b}
				if mode == "object store" {
					r = requestReader{r.(*countingReader)}
				}
				var err error
				var other []byte
				mem := testkit.StartAlloc()
				withinSeconds(t, "", func() {
					tr, oerr := OpenZipTree(r, int64(len(b)), name, nil)
					if oerr != nil {
						t.Error(oerr)
						return
					}
					a, oerr := tr.Open("a.npy")
					if oerr != nil {
						t.Error(oerr)
						return
					}
					hdr := a.Size() - int64(len(want))
					p := make([]byte, len(want))
					if _, err = a.ReadAt(p, hdr); err == nil {
						return
					}
					other = make([]byte, len(want)/2)
					if _, oerr := a.ReadAt(other, hdr+int64(len(want)/2)); oerr != nil {
						t.Errorf("shard c/1: %v", oerr)
					}
				})
				t.Logf("read: %v", err)
				if got := mem.Allocated(); got > 4<<20 {
					t.Errorf("allocated %d KiB", got>>10)
				}
				if msg := fmt.Sprint(err); !errors.Is(err, c.want) || !strings.Contains(msg, name+": ") || !strings.Contains(msg, "a/c/0") || !strings.Contains(msg, c.text) {
					t.Fatalf("read: %v, want %v naming %s and a/c/0: %s", err, c.want, name, c.text)
				}
				if !bytes.Equal(other, want[len(want)/2:]) {
					t.Errorf("shard c/1 reads %v", other)
				}
			})
		}
	}
}
