package npy

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestHeader checks the header text and padding.
func TestHeader(t *testing.T) {
	cases := []struct {
		shape []int64
		want  string
	}{
		{[]int64{123, 45}, "{'descr': '<f8', 'fortran_order': False, 'shape': (123, 45), }"},
		{[]int64{1000}, "{'descr': '<f8', 'fortran_order': False, 'shape': (1000,), }"},
		{nil, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }"},
	}
	for _, c := range cases {
		h := Header("'<f8'", c.shape)
		if len(h)%64 != 0 || h[len(h)-1] != '\n' || int(h[8])|int(h[9])<<8 != len(h)-10 {
			t.Errorf("header %q: bad length or padding", h)
		}
		if got := strings.TrimRight(string(h[10:]), " \n"); got != c.want {
			t.Errorf("dict %q, want %q", got, c.want)
		}
	}
	// A descr too long for version 1.0 switches to 2.0.
	long := "[" + strings.Repeat("('abcdefghij', '<f8'), ", 4000) + "]"
	h := Header(long, []int64{3})
	if h[6] != 2 || len(h)%64 != 0 || int(h[8])|int(h[9])<<8|int(h[10])<<16|int(h[11])<<24 != len(h)-12 {
		t.Fatalf("v2 header: version %d, length %d", h[6], len(h))
	}
}

// TestReadAt checks reads of an NPY file across its header and data: the
// bytes at every offset and length, io.EOF at and past the end, the data
// reader's error, and a negative offset.
func TestReadAt(t *testing.T) {
	hdr := Header("'|u1'", []int64{100})
	data := make([]byte, 100)
	for i := range data {
		data[i] = byte(i)
	}
	file := append(bytes.Clone(hdr), data...)
	size := int64(len(file))
	read := func(q []byte, at int64) error {
		if at < 0 || at+int64(len(q)) > int64(len(data)) {
			t.Fatalf("data read of %d bytes at %d: outside the data", len(q), at)
		}
		copy(q, data[at:])
		return nil
	}
	for _, off := range []int64{0, 1, int64(len(hdr)) - 1, int64(len(hdr)), size - 1, size, size + 5} {
		for _, n := range []int{0, 1, 10, len(hdr) + 200} {
			p := make([]byte, n)
			got, err := ReadAt("x.npy", hdr, size, p, off, read)
			want := int(max(0, min(int64(n), size-off)))
			if got != want || !bytes.Equal(p[:got], file[min(off, size):min(off, size)+int64(got)]) {
				t.Errorf("ReadAt(%d bytes at %d) = %d bytes, want %d of the file", n, off, got, want)
			}
			if wantEOF := n > 0 && off+int64(n) > size; wantEOF != (err == io.EOF) || err != nil && err != io.EOF {
				t.Errorf("ReadAt(%d bytes at %d): %v", n, off, err)
			}
		}
	}
	bad := errors.New("bad data")
	if _, err := ReadAt("x.npy", hdr, size, make([]byte, 10), int64(len(hdr)), func([]byte, int64) error { return bad }); !errors.Is(err, bad) {
		t.Errorf("a failing data read: %v", err)
	}
	if _, err := ReadAt("x.npy", hdr, size, make([]byte, 10), -1, read); err == nil || !strings.Contains(err.Error(), "x.npy") {
		t.Errorf("a negative offset: %v, want an error naming the file", err)
	}
}
