package zipread

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// TestUnder lists the members below a prefix, in name order.
func TestUnder(t *testing.T) {
	var ms []zm
	for _, n := range []string{"b/2", "a/1", "a/0", "a0", "ab/x", "a/c/d", "z"} {
		ms = append(ms, zm{name: n, data: []byte(n)})
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
	b := build(t, []zm{{name: "a", data: []byte("a")}}, &zedit{cdOffset: &off})
	if _, err := Open(bytes.NewReader(b), int64(len(b)), "x.zip"); errors.Is(err, ErrNoArchive) || !errors.Is(err, ErrFormat) {
		t.Errorf("a directory past the end: %v, want ErrFormat without ErrNoArchive", err)
	}
}
