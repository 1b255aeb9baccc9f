package zarr

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/zipread"
)

// hostileZarrMembers are the members of a group of two v2 arrays,
// good/ and bad/ (testkit.ZarrZipGroup), whose chunks bad/0 (ms[5],
// stored) and bad/1 (ms[6], deflated) the rules below spoil.
func hostileZarrMembers() ([]testkit.ZipMember, []byte) {
	return testkit.ZarrZipGroup("good", "bad")
}

// TestZipTreeHostile checks each bad-ZIP rule on a group of two arrays:
// the bad member is refused (an error naming the archive and the
// member, a problem of the tree), the other array reads, and what the
// reads allocate stays bounded whatever the archive claims.
func TestZipTreeHostile(t *testing.T) {
	bomb := testkit.DeflateZeros(256 << 20)
	cases := []struct {
		name    string
		edit    func(ms []testkit.ZipMember) []testkit.ZipMember
		problem string // in Problems (a name never shown); "" for none: the read names the member
		readErr error  // of reading bad.npy; nil: it reads
		errText string // in that error
	}{
		{"encrypted", func(ms []testkit.ZipMember) []testkit.ZipMember {
			ms[5].Flags |= 1
			return ms
		}, "", zipread.ErrUnsupported, `bad/0`},
		{"unknown method", func(ms []testkit.ZipMember) []testkit.ZipMember {
			ms[5].Method = 93 // zstd
			return ms
		}, "", zipread.ErrUnsupported, `bad/0`},
		{"overlapping members", func(ms []testkit.ZipMember) []testkit.ZipMember {
			ms[6].HeaderOf = 6 // bad/1's entry points at bad/0's bytes
			return ms
		}, "", zipread.ErrUnsafe, `bad/`},
		{"dot-dot name", func(ms []testkit.ZipMember) []testkit.ZipMember {
			return append(ms, testkit.ZipMember{Name: "bad/../../etc/passwd", Data: []byte("x")})
		}, `"bad/../../etc/passwd"`, nil, ""},
		{"absolute name", func(ms []testkit.ZipMember) []testkit.ZipMember {
			return append(ms, testkit.ZipMember{Name: "/bad/0", Data: []byte("x")})
		}, `"/bad/0"`, nil, ""},
		{"duplicate name", func(ms []testkit.ZipMember) []testkit.ZipMember {
			return append(ms, testkit.ZipMember{Name: "bad/0", Data: bytes.Repeat([]byte{1}, 400)})
		}, "", zipread.ErrUnsafe, `bad/0`},
		{"deflate bomb", func(ms []testkit.ZipMember) []testkit.ZipMember {
			ms[5] = testkit.ZipMember{Name: "bad/0", Data: bomb, Method: 8, USize: 256 << 20, Plain: []byte{}}
			return ms
		}, "", ErrTooLarge, `bad/0`},
		{"lying deflate bomb", func(ms []testkit.ZipMember) []testkit.ZipMember {
			ms[5] = testkit.ZipMember{Name: "bad/0", Data: bomb, Method: 8, USize: 400, Plain: make([]byte, 400)}
			return ms
		}, "", zipread.ErrFormat, `bad/0`},
		{"plain deflate bomb", func(ms []testkit.ZipMember) []testkit.ZipMember {
			return append(ms, testkit.ZipMember{Name: "bomb.bin", Data: bomb, Method: 8, USize: 256 << 20, Plain: []byte{}})
		}, "", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms, plain := hostileZarrMembers()
			b := testkit.BuildZip(c.edit(ms), nil)
			mem := testkit.StartAlloc()
			tr, err := OpenZipTree(bytes.NewReader(b), int64(len(b)), "hostile.zarr.zip", nil)
			if err != nil {
				t.Fatal(err)
			}
			probs := fmt.Sprint(tr.Problems())
			if c.problem != "" && (!strings.Contains(probs, c.problem) || !strings.Contains(probs, "hostile.zarr.zip")) {
				t.Errorf("problems %s, want one naming the archive and %s", probs, c.problem)
			}
			if c.problem == "" && len(tr.Problems()) > 0 {
				t.Errorf("problems %s, want none (the read names the member)", probs)
			}
			ents, err := tr.ReadDir("")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if strings.Contains(e.Name, "..") || strings.HasPrefix(e.Name, "/") {
					t.Errorf("an unsafe name is shown: %q", e.Name)
				}
			}
			good := readTreeFile(t, tr, "good.npy")
			if !bytes.HasSuffix(good, plain) {
				t.Error("good.npy does not read what was written")
			}
			bad, err := tr.Open("bad.npy")
			if err != nil {
				t.Fatal(err)
			}
			p := make([]byte, bad.Size())
			_, err = bad.ReadAt(p, 0)
			switch {
			case c.readErr == nil && err != nil:
				t.Errorf("bad.npy: %v", err)
			case c.readErr != nil && !errors.Is(err, c.readErr):
				t.Errorf("bad.npy: %v, want %v", err, c.readErr)
			case c.readErr != nil && (!strings.Contains(err.Error(), "hostile.zarr.zip") || !strings.Contains(err.Error(), c.errText)):
				t.Errorf("bad.npy: %q does not name the archive and %s", err, c.errText)
			}
			if c.name == "plain deflate bomb" {
				if _, err := tr.Open("bomb.bin"); !errors.Is(err, zipread.ErrTooLarge) || !strings.Contains(err.Error(), "bomb.bin") {
					t.Errorf("bomb.bin: %v, want ErrTooLarge naming it", err)
				}
			}
			// Nothing inflated a bomb: the reads allocated a few times
			// the archive's size.
			if got := mem.Allocated(); got > 16<<20+4*uint64(len(b)) {
				t.Errorf("the reads allocated %d bytes for an archive of %d", got, len(b))
			}
		})
	}
	t.Run("metadata bomb", func(t *testing.T) {
		// bad/.zarray (ms[4]) a deflate bomb, honest about its size and
		// lying: bad is a folder and a problem naming the archive and
		// the array; good still reads; the inflate stops at the bound
		// of one document.
		for _, usize := range []int64{256 << 20, 400} {
			ms, plain := hostileZarrMembers()
			ms[4] = testkit.ZipMember{Name: "bad/.zarray", Data: bomb, Method: 8, USize: usize, Plain: make([]byte, min(usize, 400))}
			b := testkit.BuildZip(ms, nil)
			mem := testkit.StartAlloc()
			tr, err := OpenZipTree(bytes.NewReader(b), int64(len(b)), "hostile.zarr.zip", nil)
			if err != nil {
				t.Fatal(err)
			}
			ents, err := tr.ReadDir("")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if e.Name == "bad.npy" {
					t.Errorf("claims %d: bad.npy is shown", usize)
				}
			}
			if probs := fmt.Sprint(tr.Problems()); !strings.Contains(probs, "hostile.zarr.zip") || !strings.Contains(probs, "bad") {
				t.Errorf("claims %d: problems %s, want one naming the archive and bad", usize, probs)
			}
			if !bytes.HasSuffix(readTreeFile(t, tr, "good.npy"), plain) {
				t.Errorf("claims %d: good.npy does not read what was written", usize)
			}
			if got := mem.Allocated(); got > MaxMetaSize+16<<20 {
				t.Errorf("claims %d: listing allocated %d MiB", usize, got>>20)
			}
		}
	})
	t.Run("directory past the end", func(t *testing.T) {
		ms, _ := hostileZarrMembers()
		b := testkit.BuildZip(ms, &testkit.ZipEnd{DirOffset: 1 << 30})
		_, err := OpenZipTree(bytes.NewReader(b), int64(len(b)), "hostile.zarr.zip", nil)
		if err == nil || errors.Is(err, pack.ErrFormat) || !errors.Is(err, zipread.ErrFormat) || !strings.Contains(err.Error(), "hostile.zarr.zip") {
			t.Errorf("%v: want an error naming the archive, not ErrFormat (not shown as a plain file)", err)
		}
	})
	t.Run("not zarr", func(t *testing.T) {
		for _, b := range [][]byte{
			testkit.BuildZip([]testkit.ZipMember{{Name: "readme.txt", Data: []byte("hi")}, {Name: "data/.zarray", Data: []byte("{}")}}, nil),
			testkit.BuildZip([]testkit.ZipMember{{Name: "a/x", Data: []byte("hi")}, {Name: "b/.zgroup", Data: []byte("{}")}}, nil),
			[]byte("not a zip at all"),
		} {
			if _, err := OpenZipTree(bytes.NewReader(b), int64(len(b)), "plain.zip", nil); !errors.Is(err, ErrNotZarrZip) || !errors.Is(err, pack.ErrFormat) {
				t.Errorf("%v, want ErrNotZarrZip", err)
			}
		}
	})
	t.Run("root array that does not open", func(t *testing.T) {
		b := testkit.BuildZip([]testkit.ZipMember{{Name: ".zarray", Data: []byte(`{"zarr_format":2,"shape":[2],"chunks":[1],"dtype":"|O","compressor":null,"fill_value":0,"order":"C"}`)}}, nil)
		_, err := OpenZipTree(bytes.NewReader(b), int64(len(b)), "obj.zip", nil)
		if !errors.Is(err, pack.ErrFormat) || errors.Is(err, ErrNotZarrZip) || !strings.Contains(err.Error(), "obj.zip") {
			t.Errorf("%v, want pack.ErrFormat naming the archive", err)
		}
	})
	t.Run("array that does not open", func(t *testing.T) {
		ms, _ := hostileZarrMembers()
		ms[4].Data = []byte(`{"zarr_format":2,"shape":[2],"chunks":[1],"dtype":"<f8","compressor":{"id":"zfpy"},"fill_value":0,"order":"C"}`)
		b := testkit.BuildZip(ms, nil)
		tr, err := OpenZipTree(bytes.NewReader(b), int64(len(b)), "h.zip", nil)
		if err != nil {
			t.Fatal(err)
		}
		e, err := tr.Stat("bad")
		if err != nil || !e.Dir {
			t.Fatalf("bad: %+v %v, want the folder shown as it is", e, err)
		}
		if ents, _ := tr.ReadDir("bad"); len(ents) != 3 {
			t.Errorf("bad/ lists %+v", ents)
		}
		if p := tr.Problems(); len(p) != 1 || !strings.Contains(p[0].Error(), "h.zip: bad") || !errors.Is(p[0], pack.ErrUnsupported) {
			t.Errorf("problems %v, want one note (pack.ErrUnsupported) naming h.zip: bad", p)
		}
	})
}

// TestZipTreeMetaKept lists a zipped group of eight arrays whose
// .zarray documents are 20 MiB each (spaces, deflated to KiB): what the
// tree keeps of them stays within maxTreeMeta, the arrays past it are
// folders and problems, and MemSize counts what is kept, so that the
// tree cache's budget sees it.
func TestZipTreeMetaKept(t *testing.T) {
	const arrays, pad = 8, 20 << 20
	ms := []testkit.ZipMember{{Name: ".zgroup", Data: []byte(`{"zarr_format":2}`)}}
	for i := range arrays {
		doc := append([]byte(`{"zarr_format":2,"shape":[4],"chunks":[4],"dtype":"<f8","compressor":null,"fill_value":0,"order":"C","filters":null}`), bytes.Repeat([]byte{' '}, pad)...)
		var z bytes.Buffer
		w, _ := flate.NewWriter(&z, flate.BestSpeed)
		w.Write(doc)
		w.Close()
		ms = append(ms, testkit.ZipMember{Name: fmt.Sprintf("a%d/.zarray", i), Data: z.Bytes(), Method: 8, Plain: doc})
	}
	b := testkit.BuildZip(ms, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tr, err := OpenZipTree(bytes.NewReader(b), int64(len(b)), "meta.zarr.zip", nil)
	if err != nil {
		t.Fatal(err)
	}
	es, err := tr.ReadDir("")
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	arraysShown := 0
	for _, e := range es {
		if !e.Dir && strings.HasSuffix(e.Name, ".npy") {
			arraysShown++
		}
	}
	t.Logf("%d of %d arrays shown; heap kept %d MiB; MemSize %d MiB; problems %v", arraysShown, arrays, kept>>20, tr.MemSize()>>20, tr.Problems())
	if kept > maxTreeMeta+16<<20 {
		t.Errorf("heap kept after listing: %d MiB, more than the %d MiB bound + 16", kept>>20, maxTreeMeta>>20)
	}
	if arraysShown == 0 || arraysShown == arrays {
		t.Errorf("%d of %d arrays shown; want those within the bound only", arraysShown, arrays)
	}
	if tr.MemSize() < int64(arraysShown)*pad {
		t.Errorf("MemSize %d, less than the %d documents kept", tr.MemSize(), arraysShown)
	}
	if !strings.Contains(fmt.Sprint(tr.Problems()), "meta.zarr.zip") {
		t.Errorf("no problem names the archive: %v", tr.Problems())
	}
	runtime.KeepAlive(tr)
}
