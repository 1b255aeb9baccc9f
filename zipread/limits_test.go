package zipread

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

// TestUnder lists the members below a prefix, in name order.
func TestUnder(t *testing.T) {
	var ms []zm
	for _, n := range []string{"b/2", "a/1", "a/0", "a0", "ab/x", "a/c/d", "z"} {
		ms = append(ms, zm{Name: n, Data: []byte(n)})
	}
	b := build(t, ms, nil)
	a, err := Open(bytes.NewReader(b), int64(len(b)), "t.zip")
	if err != nil {
		t.Fatal(err)
	}
	for prefix, want := range map[string][]string{
		"a/": {"a/0", "a/1", "a/c/d"},
		"a":  {"a/0", "a/1", "a/c/d", "a0", "ab/x"},
		"":   {"a/0", "a/1", "a/c/d", "a0", "ab/x", "b/2", "z"},
		"c":  nil,
		"z":  {"z"},
	} {
		var got []string
		for i := range a.Under(prefix) {
			got = append(got, a.Member(i).Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("Under(%q) = %v, want %v", prefix, got, want)
		}
	}
	for i := range a.Under("") {
		if a.Member(i).Name == "a/1" {
			break // stopping early is allowed
		}
	}
}

// TestNoArchive: bytes with no end record are ErrNoArchive (and
// ErrFormat); a directory past the end of the file is ErrFormat only.
func TestNoArchive(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("PK"), bytes.Repeat([]byte("not a zip "), 1000)} {
		if _, err := Open(bytes.NewReader(b), int64(len(b)), "x.zip"); !errors.Is(err, ErrNoArchive) || !errors.Is(err, ErrFormat) {
			t.Errorf("%d bytes: %v, want ErrNoArchive", len(b), err)
		}
	}
	off := uint32(1 << 30)
	b := build(t, []zm{{Name: "a", Data: []byte("a")}}, &ze{DirOffset: off})
	if _, err := Open(bytes.NewReader(b), int64(len(b)), "x.zip"); errors.Is(err, ErrNoArchive) || !errors.Is(err, ErrFormat) {
		t.Errorf("a directory past the end: %v, want ErrFormat without ErrNoArchive", err)
	}
}

// TestInflateClaim: a deflated member that claims more than deflate can
// make of its bytes (1032 to 1) is refused before its size is
// allocated; one at deflate's best ratio reads.
func TestInflateClaim(t *testing.T) {
	zeros := make([]byte, 8<<20)
	b := build(t, []zm{
		{Name: "liar", Data: []byte{3, 0}, Method: Deflate, Plain: []byte{}, USize: 64 << 20},
		{Name: "zeros", Data: deflate(t, zeros), Method: Deflate, Plain: zeros},
	}, nil)
	a, err := Open(bytes.NewReader(b), int64(len(b)), "x.zip")
	if err != nil {
		t.Fatal(err)
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.TotalAlloc
	if _, err := a.ReadFile(0, 1<<30); !errors.Is(err, ErrFormat) {
		t.Errorf("liar: %v, want ErrFormat", err)
	}
	runtime.ReadMemStats(&m)
	if n := m.TotalAlloc - before; n > 1<<20 {
		t.Errorf("refusing the liar allocated %d bytes", n)
	}
	if got, err := a.ReadFile(1, 1<<30); err != nil || !bytes.Equal(got, zeros) {
		t.Errorf("zeros: %d bytes, %v", len(got), err)
	}
}

// TestInflateShort: a deflated member whose stream ends before the size
// its directory entry claims is ErrFormat, not io.ErrUnexpectedEOF: a
// caller reading a range of it (a Zarr store) takes the latter for a
// range past the member's end.
func TestInflateShort(t *testing.T) {
	plain := bytes.Repeat([]byte("zarr"), 100)
	b := build(t, []zm{{Name: "short", Data: deflate(t, plain[:40]), Method: Deflate, Plain: plain}}, nil)
	a, err := Open(bytes.NewReader(b), int64(len(b)), "x.zip")
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.ReadFile(0, 1<<20)
	if !errors.Is(err, ErrFormat) || errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(fmt.Sprint(err), "short: ") || !strings.Contains(fmt.Sprint(err), "inflates to 40 bytes, not 400") {
		t.Errorf("%v, want ErrFormat (not io.ErrUnexpectedEOF) naming the member and what it inflates to", err)
	}
}

// TestListUnclean: a name that is not a clean relative path is never
// listed, whatever else is wrong with its member (a duplicate, bytes
// shared with another).
func TestListUnclean(t *testing.T) {
	b := build(t, []zm{
		{Name: "../x", Data: []byte("a")}, {Name: "../x", Data: []byte("b")},
		{Name: "a/../../y", Data: []byte("c")}, {Name: "z", Data: []byte("d"), HeaderOf: 3},
		{Name: "ok", Data: []byte("e")},
	}, nil)
	a, err := Open(bytes.NewReader(b), int64(len(b)), "x.zip")
	if err != nil {
		t.Fatal(err)
	}
	if got := a.List(""); !slices.Equal(got, []string{"ok", "z"}) {
		t.Errorf("List(\"\") = %q", got)
	}
	if got := a.List("a"); len(got) != 0 {
		t.Errorf("List(\"a\") = %q", got)
	}
}

// TestReadFiles reads every member of every fixture with ReadFiles, in
// one read of the archive where they lie together, and compares each
// with ReadFile's bytes; members refused, too large, or far apart are
// answered each.
func TestReadFiles(t *testing.T) {
	for _, path := range fixtures(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Open(bytes.NewReader(b), int64(len(b)), path)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ gap, span int64 }{{1 << 30, 1 << 30}, {0, 1 << 30}, {0, 100}, {1 << 30, 4096}} {
			r := &counting{b: b}
			a, _ := Open(r, int64(len(b)), path)
			r.reads.Store(0)
			idx := make([]int, a.Len())
			for i := range idx {
				idx[i] = a.Len() - 1 - i
			}
			got := map[int]bool{}
			a.ReadFiles(idx, 1<<20, c.gap, c.span, func(i int, b []byte, err error) {
				if got[i] {
					t.Errorf("%s: member %d answered twice", path, i)
				}
				got[i] = true
				w, werr := want.ReadFile(i, 1<<20)
				if (err == nil) != (werr == nil) || !bytes.Equal(b, w) {
					t.Errorf("%s: member %d: %d bytes, %v; ReadFile: %d bytes, %v", path, i, len(b), err, len(w), werr)
				}
			})
			if len(got) != a.Len() {
				t.Errorf("%s: %d of %d members answered", path, len(got), a.Len())
			}
			if c.gap == 1<<30 && c.span == 1<<30 && r.reads.Load() > 1 {
				t.Errorf("%s: ReadFiles of every member made %d reads, want 1", path, r.reads.Load())
			}
		}
	}
	// A refused member and one past max are answered with their errors.
	b := build(t, []zm{{Name: "a", Data: []byte("abc")}, {Name: "e", Data: []byte("x"), Flags: 1}, {Name: "big", Data: make([]byte, 100)}}, nil)
	a, _ := Open(bytes.NewReader(b), int64(len(b)), "x.zip")
	errs := map[int]error{}
	a.ReadFiles([]int{0, 1, 2}, 10, 0, 1<<20, func(i int, b []byte, err error) { errs[i] = err })
	if errs[0] != nil || !errors.Is(errs[1], ErrUnsupported) || !errors.Is(errs[2], ErrTooLarge) {
		t.Errorf("errors %v", errs)
	}
}

// TestDataOffsetOnce: a stored member's data starts where DataOffset says,
// found with one small read, once.
func TestDataOffsetOnce(t *testing.T) {
	b := build(t, []zm{{Name: "a", Data: []byte("abc")}, {Name: "bb", Data: []byte("defg"), LocalExtra: make([]byte, 40)}}, nil)
	r := &counting{b: b}
	a, _ := Open(r, int64(len(b)), "x.zip")
	r.reads.Store(0)
	for i, want := range []string{"abc", "defg"} {
		m, err := a.Open(i)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			off, err := m.DataOffset()
			if err != nil || string(b[off:off+int64(len(want))]) != want {
				t.Errorf("member %d: data at %d (%v)", i, off, err)
			}
		}
	}
	if n := r.reads.Load(); n != 2 {
		t.Errorf("%d reads, want 2 (a local header each)", n)
	}
}

// zip64End rewrites the end of archive b (as build writes it: a 22-byte
// end record, no comment) as a ZIP64 archive's: a ZIP64 end record and
// its locator before the end record, whose own fields say "see ZIP64".
// The ZIP64 record says count members, a directory of cdSize bytes at
// cdOff; the locator points at locOff (-1: at the record).
func zip64End(b []byte, count, cdSize, cdOff uint64, locOff int64) []byte {
	le := binary.LittleEndian
	end := len(b) - 22
	out := append([]byte(nil), b[:end]...)
	if locOff < 0 {
		locOff = int64(end)
	}
	r := le.AppendUint32(nil, 0x06064b50)
	r = le.AppendUint64(r, 44)
	r = le.AppendUint16(r, 45)
	r = le.AppendUint16(r, 45)
	r = le.AppendUint32(r, 0)
	r = le.AppendUint32(r, 0)
	r = le.AppendUint64(r, count)
	r = le.AppendUint64(r, count)
	r = le.AppendUint64(r, cdSize)
	r = le.AppendUint64(r, cdOff)
	out = append(out, r...)
	l := le.AppendUint32(nil, 0x07064b50)
	l = le.AppendUint32(l, 0)
	l = le.AppendUint64(l, uint64(locOff))
	l = le.AppendUint32(l, 1)
	out = append(out, l...)
	e := append([]byte(nil), b[end:]...)
	le.PutUint16(e[8:], 0xffff)
	le.PutUint16(e[10:], 0xffff)
	le.PutUint32(e[12:], 0xffffffff)
	le.PutUint32(e[16:], 0xffffffff)
	return append(out, e...)
}

// TestZip64EndLies opens archives whose ZIP64 end record or locator lie
// (counts and directory sizes past the bounds, a directory past its end,
// more members than its bytes hold, a locator past the end or at no
// record): each is an error naming the archive, and none allocates what
// it claims. The honest record opens.
func TestZip64EndLies(t *testing.T) {
	b := build(t, []zm{{Name: "good", Data: []byte("good bytes")}}, nil)
	le := binary.LittleEndian
	cdSize, cdOff := uint64(le.Uint32(b[len(b)-10:])), uint64(le.Uint32(b[len(b)-6:]))
	for _, tc := range []struct {
		name string
		b    []byte
		want error // nil: opens
	}{
		{"honest", zip64End(b, 1, cdSize, cdOff, -1), nil},
		{"members past MaxMembers", zip64End(b, 1<<40, cdSize, cdOff, -1), ErrUnsupported},
		{"directory past MaxDirectory", zip64End(b, 1, 1<<40, cdOff, -1), ErrUnsupported},
		{"directory past its end", zip64End(b, 1, cdSize, 1<<40, -1), ErrFormat},
		{"more members than the directory holds", zip64End(b, 1<<20, cdSize, cdOff, -1), ErrFormat},
		{"locator past the end", zip64End(b, 1, cdSize, cdOff, 1<<40), ErrFormat},
		{"locator at no record", zip64End(b, 1, cdSize, cdOff, 0), ErrFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := testkit.StartAlloc()
			a, err := Open(bytes.NewReader(tc.b), int64(len(tc.b)), "lying.zip")
			if n := mem.Allocated(); n > 1<<20 {
				t.Errorf("Open allocated %d KiB", n>>10)
			}
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				i, ok := a.Lookup("good")
				if got, err := a.ReadFile(i, 1<<20); !ok || err != nil || string(got) != "good bytes" {
					t.Fatalf("good: %q %v", got, err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "lying.zip") {
				t.Fatalf("Open: %v, want %v naming the archive", err, tc.want)
			}
		})
	}
}
