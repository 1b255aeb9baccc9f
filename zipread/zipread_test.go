package zipread

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"testing/iotest"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// counting is an io.ReaderAt that counts its reads, as an object store
// would count ranged GETs.
type counting struct {
	b     []byte
	reads atomic.Int64
	bytes atomic.Int64
}

func (c *counting) ReadAt(p []byte, off int64) (int, error) {
	c.reads.Add(1)
	c.bytes.Add(int64(len(p)))
	if off < 0 || off > int64(len(c.b)) {
		return 0, io.EOF
	}
	n := copy(p, c.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func fixtures(t testing.TB) []string {
	t.Helper()
	names, err := filepath.Glob("testdata/*.zip")
	if err != nil || len(names) < 5 {
		t.Fatalf("the zip fixtures (testdata/gen.py): %v %v", names, err)
	}
	return names
}

// TestFixtures reads every member of every fixture written by Python's
// zipfile (ZIP64 extra fields in the local headers only, deflated
// members, data descriptors, a stub before the archive, ZIP64 end
// records) and compares it with archive/zip's reading.
func TestFixtures(t *testing.T) {
	for _, path := range fixtures(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			c := &counting{b: b}
			a, err := Open(c, int64(len(b)), path)
			if err != nil {
				t.Fatal(err)
			}
			if n := c.reads.Load(); n != 1 {
				t.Errorf("Open made %d reads, want 1 (the suffix holds the directory)", n)
			}
			if a.Len() != len(zr.File) {
				t.Fatalf("%d members, archive/zip finds %d", a.Len(), len(zr.File))
			}
			for i, zf := range zr.File {
				m := a.Member(i)
				if m.Name != zf.Name || m.Size != int64(zf.UncompressedSize64) || m.CRC32 != zf.CRC32 || m.Err != nil {
					t.Fatalf("member %d: %+v, archive/zip: %s %d %08x", i, m, zf.Name, zf.UncompressedSize64, zf.CRC32)
				}
				if k, ok := a.Lookup(zf.Name); !ok || k != i {
					t.Fatalf("Lookup(%q) = %d %v, want %d", zf.Name, k, ok, i)
				}
				rc, err := zf.Open()
				if err != nil {
					t.Fatal(err)
				}
				want, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				got, err := a.ReadFile(i, 1<<20)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("ReadFile(%s): %d bytes, %v; want %d bytes", zf.Name, len(got), err, len(want))
				}
				r, err := a.Open(i)
				if zf.Method != zip.Store {
					if !errors.Is(err, ErrUnsupported) {
						t.Fatalf("Open of deflated %s: %v, want ErrUnsupported", zf.Name, err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				// A fresh archive for the byte-wise reads, so that they
				// resolve the member themselves.
				a2, err := Open(bytes.NewReader(b), int64(len(b)), path)
				if err != nil {
					t.Fatal(err)
				}
				r2, _ := a2.Open(i)
				if err := iotest.TestReader(io.NewSectionReader(r2, 0, r2.Size()), want); err != nil {
					t.Fatalf("%s: %v", zf.Name, err)
				}
				_ = r
			}
		})
	}
}

// TestFirstReads checks what the first read of a stored member costs:
// near its start, one read with the local header; elsewhere, the local
// header and then the data; once resolved, one read each.
func TestFirstReads(t *testing.T) {
	b, err := os.ReadFile("testdata/zip64.zip") // local extra fields longer than the central ones
	if err != nil {
		t.Fatal(err)
	}
	const member = "a/c/0/0" // 70,000 bytes
	want := payload(70000, 1)
	big := make([]byte, 0, 1<<21)
	for i := range 1 << 21 {
		big = append(big, byte(i*13))
	}
	for _, tc := range []struct {
		name      string
		data      []byte
		file      []byte
		off, n    int64
		reads     int64
		thenReads int64
	}{
		{"start", want, b, 0, 4096, 1, 1},
		{"end", want, b, 70000 - 4096, 4096, 1, 1}, // near the start too: 70,000 bytes
		{"whole", want, b, 0, 70000, 1, 1},
		{"big start", big, storedZip(t, big), 0, 4096, 1, 1},
		{"big end", big, storedZip(t, big), int64(len(big)) - 4096, 4096, 2, 1},
		{"big middle", big, storedZip(t, big), 1 << 20, 4096, 2, 1},
		{"big last byte", big, storedZip(t, big), int64(len(big)) - 1, 1, 2, 1},
		// Bytes between the data and the next record (nothing in the
		// directory says so): the data is where the local header says.
		{"gap end", big, build(t, []zm{{Name: "a/c/0/0", Data: big, Gap: []byte("garbage!")}, {Name: "z", Data: []byte("z")}}, nil), int64(len(big)) - 4096, 4096, 2, 1},
		{"gap last member", big, build(t, []zm{{Name: "z", Data: []byte("z")}, {Name: "a/c/0/0", Data: big, Gap: []byte("garbage!")}}, nil), int64(len(big)) - 100, 100, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &counting{b: tc.file}
			a, err := Open(c, int64(len(tc.file)), tc.name)
			if err != nil {
				t.Fatal(err)
			}
			i, ok := a.Lookup(member)
			if !ok {
				t.Fatal("no member")
			}
			r, err := a.Open(i)
			if err != nil {
				t.Fatal(err)
			}
			for k, wantReads := range []int64{tc.reads, tc.thenReads} {
				c.reads.Store(0)
				p := make([]byte, tc.n)
				n, err := r.ReadAt(p, tc.off)
				if err != nil && !(err == io.EOF && tc.off+tc.n == int64(len(tc.data))) {
					t.Fatal(err)
				}
				if int64(n) != tc.n || !bytes.Equal(p, tc.data[tc.off:tc.off+tc.n]) {
					t.Fatalf("read %d: wrong bytes (%d)", k, n)
				}
				if got := c.reads.Load(); got != wantReads {
					t.Errorf("read %d cost %d reads of the archive, want %d", k, got, wantReads)
				}
			}
		})
	}
}

// storedZip writes data as the stored member "a/c/0/0" between two
// others, with Python's layout: no data descriptor.
func storedZip(t testing.TB, data []byte) []byte {
	return build(t, []zm{{Name: "zarr.json", Data: []byte("{}")}, {Name: "a/c/0/0", Data: data}, {Name: "z", Data: []byte("tail")}}, nil)
}

func payload(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((i*7 + seed) % 251)
	}
	return b
}

// zm is one member of an archive the tests build by hand, with every
// field open to a lie; ze edits its end record.
type (
	zm = testkit.ZipMember
	ze = testkit.ZipEnd
)

// build writes an archive of the members (testkit.BuildZip).
func build(t testing.TB, ms []zm, end *ze) []byte { return testkit.BuildZip(ms, end) }

func deflate(t testing.TB, b []byte) []byte { return testkit.Deflate(b) }

func u32(v uint32) *uint32 { return &v }

// TestHostile feeds the directory and the members lies: each refused
// member gives a clear error naming the archive and the member, and the
// others still read.
func TestHostile(t *testing.T) {
	good := zm{Name: "good", Data: []byte("good bytes")}
	zeros := make([]byte, 64<<20)
	bomb := deflate(t, zeros)
	longExtra := make([]byte, 1000) // a local extra field far longer than the central one
	binary.LittleEndian.PutUint16(longExtra, 0xcafe)
	binary.LittleEndian.PutUint16(longExtra[2:], 996)
	for _, tc := range []struct {
		name    string
		ms      []zm
		ed      *ze
		open    error // Open fails
		member  string
		readErr error // reading member fails
		want    []byte
	}{
		{name: "encrypted", ms: []zm{good, {Name: "x", Data: []byte("secret"), Flags: 1}}, member: "x", readErr: ErrUnsupported},
		{name: "method bzip2", ms: []zm{good, {Name: "x", Data: []byte("BZh9"), Method: 12}}, member: "x", readErr: ErrUnsupported},
		{name: "dotdot", ms: []zm{good, {Name: "a/../../etc/passwd", Data: []byte("x")}}, member: "a/../../etc/passwd", readErr: ErrUnsafe},
		{name: "absolute", ms: []zm{good, {Name: "/etc/passwd", Data: []byte("x")}}, member: "/etc/passwd", readErr: ErrUnsafe},
		{name: "backslash", ms: []zm{good, {Name: `a\..\b`, Data: []byte("x")}}, member: `a\..\b`, readErr: ErrUnsafe},
		{name: "duplicate", ms: []zm{good, {Name: "x", Data: []byte("one")}, {Name: "x", Data: []byte("two")}}, member: "x", readErr: ErrUnsafe},
		{name: "overlap", ms: []zm{good, {Name: "x", Data: bytes.Repeat([]byte("x"), 100)}, {Name: "y", Data: []byte("y"), HeaderOf: 2}}, member: "x", readErr: ErrUnsafe},
		{name: "overlap other", ms: []zm{good, {Name: "x", Data: bytes.Repeat([]byte("x"), 100)}, {Name: "y", Data: []byte("y"), HeaderOf: 2}}, member: "y", readErr: ErrUnsafe},
		{name: "stored sizes differ", ms: []zm{good, {Name: "x", Data: []byte("abc"), USize: 1 << 30}}, member: "x", readErr: ErrUnsafe},
		{name: "deflate bomb", ms: []zm{good, {Name: "x", Data: bomb, Method: Deflate, Plain: []byte("tiny")}}, member: "x", readErr: ErrFormat},
		{name: "deflate past the limit", ms: []zm{good, {Name: "x", Data: bomb, Method: Deflate, Plain: zeros}}, member: "x", readErr: ErrTooLarge},
		{name: "crc", ms: []zm{good, {Name: "x", Data: []byte("abc"), CRC: u32(1)}}, member: "x", readErr: ErrFormat},
		{name: "local name differs", ms: []zm{good, {Name: "x", Data: []byte("abc"), LocalName: "y"}}, member: "x", readErr: ErrFormat},
		{name: "local extra longer", ms: []zm{good, {Name: "x", Data: []byte("abc"), LocalExtra: longExtra}}, member: "x", want: []byte("abc")},
		{name: "directory past the end", ms: []zm{good}, ed: &ze{DirOffset: 1 << 30}, open: ErrFormat},
		{name: "count past the directory", ms: []zm{good}, ed: &ze{Count: 60000}, open: ErrFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := build(t, tc.ms, tc.ed)
			a, err := Open(bytes.NewReader(b), int64(len(b)), "hostile.zip")
			if tc.open != nil {
				if !errors.Is(err, tc.open) || !bytes.Contains([]byte(err.Error()), []byte("hostile.zip")) {
					t.Fatalf("Open: %v, want %v naming the archive", err, tc.open)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g, ok := a.Lookup("good")
			if !ok {
				t.Fatal("good member not found")
			}
			if got, err := a.ReadFile(g, 1<<20); err != nil || string(got) != "good bytes" {
				t.Fatalf("the good member: %q %v", got, err)
			}
			i, ok := a.Lookup(tc.member)
			if !ok {
				t.Fatalf("member %q not found", tc.member)
			}
			got, err := a.ReadFile(i, 1<<20)
			if tc.readErr == nil {
				if err != nil || !bytes.Equal(got, tc.want) {
					t.Fatalf("ReadFile: %q %v, want %q", got, err, tc.want)
				}
				r, err := a.Open(i)
				if err != nil {
					t.Fatal(err)
				}
				if err := iotest.TestReader(io.NewSectionReader(r, 0, r.Size()), tc.want); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.readErr) {
				t.Fatalf("ReadFile: %v, want %v", err, tc.readErr)
			}
			if msg := err.Error(); !bytes.Contains([]byte(msg), []byte("hostile.zip")) || !bytes.Contains([]byte(msg), []byte(tc.member)) {
				t.Fatalf("the error %q does not name the archive and the member", msg)
			}
			if m := a.Member(i); tc.readErr != ErrFormat && tc.readErr != ErrTooLarge && m.Err == nil {
				t.Fatalf("Member(%d).Err is nil", i)
			}
			if _, err := a.Open(i); tc.readErr != ErrFormat && tc.readErr != ErrTooLarge && err == nil {
				t.Fatal("Open of a refused member worked")
			}
		})
	}
}

// TestTruncated opens every prefix of a fixture: nothing panics, and
// a prefix that opens reads each member right or fails.
func TestTruncated(t *testing.T) {
	b, err := os.ReadFile("testdata/deflated.zip")
	if err != nil {
		t.Fatal(err)
	}
	full, err := Open(bytes.NewReader(b), int64(len(b)), "full")
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(b) {
		a, err := Open(bytes.NewReader(b[:n]), int64(n), "cut")
		if err != nil {
			continue
		}
		for i := range a.Len() {
			got, err := a.ReadFile(i, 1<<20)
			if err != nil {
				continue
			}
			want, _ := full.ReadFile(i, 1<<20)
			if !bytes.Equal(got, want) {
				t.Fatalf("prefix %d: member %d reads wrong", n, i)
			}
		}
	}
}

func TestList(t *testing.T) {
	b := build(t, []zm{
		{Name: "zarr.json"}, {Name: "a/zarr.json"}, {Name: "a/c/0/0"}, {Name: "a/c/0/1"},
		{Name: "a.b/x"}, {Name: "a0"}, {Name: "b/deep/x"}, {Name: "dir/"}, {Name: "../evil"},
	}, nil)
	a, err := Open(bytes.NewReader(b), int64(len(b)), "l")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a.b/", "a/", "a0", "b/", "dir/", "zarr.json"}},
		{"a", []string{"c/", "zarr.json"}},
		{"a/", []string{"c/", "zarr.json"}},
		{"a/c/0", []string{"0", "1"}},
		{"b", []string{"deep/"}},
		{"dir", nil},
		{"nothing", nil},
	} {
		if got := a.List(tc.prefix); !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

// TestDataOffset: a stored member's bytes start where archive/zip says,
// whether or not the member has been read.
func TestDataOffset(t *testing.T) {
	for _, path := range fixtures(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			continue // a fixture archive/zip refuses
		}
		a, err := Open(bytes.NewReader(b), int64(len(b)), path)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range zr.File {
			i, ok := a.Lookup(f.Name)
			if !ok || f.Method != zip.Store || a.Member(i).Err != nil {
				continue
			}
			r, err := a.Open(i)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := f.DataOffset()
			if got, err := r.DataOffset(); got != want || err != nil {
				t.Errorf("%s: %s: data at %d, %v; archive/zip says %d", path, f.Name, got, err, want)
			}
		}
	}
}

// TestDataOffsetGuess: the guess is where a member's bytes are when they
// end at the next record; a confirmed guess serves later reads without
// the local header; a guess outside the member's place is refused; a
// member with a data descriptor has none.
func TestDataOffsetGuess(t *testing.T) {
	data := payload(1<<20, 3)
	for _, gap := range [][]byte{nil, []byte("gap")} {
		b := build(t, []zm{{Name: "a", Data: []byte("x")}, {Name: "s", Data: data, Gap: gap}, {Name: "z", Data: []byte("z")}}, nil)
		c := &counting{b: b}
		a, err := Open(c, int64(len(b)), "g")
		if err != nil {
			t.Fatal(err)
		}
		i, _ := a.Lookup("s")
		r, _ := a.Open(i)
		d, known, ok := r.DataOffsetGuess()
		if known || !ok {
			t.Fatalf("gap %q: guess %d known %v ok %v", gap, d, known, ok)
		}
		if got := bytes.Equal(b[d:d+int64(len(data))], data); got != (gap == nil) {
			t.Fatalf("gap %q: the guess finds the Data: %v", gap, got)
		}
		if err := r.ConfirmDataOffset(d + 1000); !errors.Is(err, ErrFormat) {
			t.Errorf("a confirmed offset past the member's place: %v", err)
		}
		if gap == nil {
			if err := r.ConfirmDataOffset(d); err != nil {
				t.Fatal(err)
			}
			c.reads.Store(0)
			p := make([]byte, 100)
			if _, err := r.ReadAt(p, int64(len(data))-100); err != nil || !bytes.Equal(p, data[len(data)-100:]) {
				t.Fatalf("read after the confirmation: %v", err)
			}
			if n := c.reads.Load(); n != 1 {
				t.Errorf("%d reads after the confirmation, want 1 (no local header)", n)
			}
		}
	}
	b := build(t, []zm{{Name: "s", Data: data, Flags: flagDataDesc, Gap: make([]byte, 16)}}, nil) // room for the descriptor
	a, err := Open(bytes.NewReader(b), int64(len(b)), "dd")
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := r.DataOffsetGuess(); ok {
		t.Error("a member with a data descriptor has a guess")
	}
}

// exactCounting is counting with the ReadExact of an object store's
// reader.
type exactCounting struct{ *counting }

func (e exactCounting) ReadExact(p []byte, off int64) error {
	_, err := e.ReadAt(p, off)
	return err
}

// TestSuffix: Open reads the last SuffixSize bytes of a local archive,
// the last RequestSuffixSize of one in an object store, each in one read
// when the directory lies there.
func TestSuffix(t *testing.T) {
	b := storedZip(t, payload(4<<20, 5))
	for _, tc := range []struct {
		c    *counting
		want int64
	}{
		{&counting{b: b}, SuffixSize},
		{&counting{b: b}, RequestSuffixSize},
	} {
		r := io.ReaderAt(tc.c)
		if tc.want == RequestSuffixSize {
			r = exactCounting{tc.c}
		}
		if _, err := Open(r, int64(len(b)), "s"); err != nil {
			t.Fatal(err)
		}
		if n, got := tc.c.reads.Load(), tc.c.bytes.Load(); n != 1 || got != tc.want {
			t.Errorf("Open read %d bytes in %d reads, want %d in 1", got, n, tc.want)
		}
	}
}
