// Package npy writes NumPy's .npy format: the header (version 1.0, or 2.0
// when the header needs it) for a dtype and shape, the 'descr' literal of
// a dtype string checked against NumPy's grammar, and ReadAt, which
// serves reads of an .npy file from its header and its array data.
package npy

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Header builds an NPY header for a C-order array: magic, version 1.0
// (2.0 when needed), length, and the dict padded with spaces and a
// newline to a multiple of 64 bytes.
func Header(descr string, shape []int64) []byte {
	return HeaderOrder(descr, shape, false)
}

// HeaderOrder builds an NPY header as Header does, with
// 'fortran_order' True when fortran is set (the data then follow in
// Fortran order, as np.save writes an F-contiguous array).
func HeaderOrder(descr string, shape []int64, fortran bool) []byte {
	var sb strings.Builder
	sb.WriteString("{'descr': ")
	sb.WriteString(descr)
	if fortran {
		sb.WriteString(", 'fortran_order': True, 'shape': (")
	} else {
		sb.WriteString(", 'fortran_order': False, 'shape': (")
	}
	for i, s := range shape {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.FormatInt(s, 10))
	}
	if len(shape) == 1 {
		sb.WriteString(",")
	}
	sb.WriteString("), }")
	// np.save leaves room for the growth axis (the first, or the last in
	// Fortran order) to reach 21 digits.
	if len(shape) > 0 {
		g := shape[0]
		if fortran {
			g = shape[len(shape)-1]
		}
		sb.WriteString(strings.Repeat(" ", max(0, 21-len(strconv.FormatInt(g, 10)))))
	}
	dict := sb.String()
	for _, ver := range []byte{1, 2} {
		pre := 10
		if ver == 2 {
			pre = 12
		}
		total := pre + len(dict) + 1
		total += (64 - total%64) % 64
		hl := total - pre
		if ver == 1 && hl > 65535 {
			continue
		}
		out := make([]byte, 0, total)
		out = append(out, "\x93NUMPY"...)
		out = append(out, ver, 0)
		if ver == 1 {
			out = append(out, byte(hl), byte(hl>>8))
		} else {
			out = append(out, byte(hl), byte(hl>>8), byte(hl>>16), byte(hl>>24))
		}
		out = append(out, dict...)
		for len(out) < total-1 {
			out = append(out, ' ')
		}
		return append(out, '\n')
	}
	panic("unreachable")
}

// ReadAt serves ReadAt of an NPY file of size bytes whose header is
// hdr: the header from hdr, the rest from data, which reads len(q) bytes
// of the array data at offset at (past the header). name is for errors.
func ReadAt(name string, hdr []byte, size int64, p []byte, off int64, data func(q []byte, at int64) error) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", name, off)
	}
	if off >= size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := len(p)
	if int64(want) > size-off {
		p = p[:size-off]
	}
	n := 0
	if hl := int64(len(hdr)); off < hl {
		n = copy(p, hdr[off:])
	}
	if n < len(p) {
		if err := data(p[n:], off+int64(n)-int64(len(hdr))); err != nil {
			return 0, err
		}
	}
	if len(p) < want {
		return len(p), io.EOF
	}
	return len(p), nil
}
