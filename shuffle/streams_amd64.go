//go:build amd64 && !purego

package shuffle

func canUnshuffleStreams(t int) bool { return (t == 4 || t == 8) && useAVX2 }

// unshuffleStreams runs the kernel over the whole groups of 32 elements
// and, where n is not a multiple of 32, over the group that ends with
// the last element (it overlaps the group before and stores the same
// bytes there again): it does all n elements when there are 32 or more,
// and returns how many it did. A row of an N-D chunk (180 float32, say)
// then costs two calls of the kernel, not one and 80 byte stores.
func unshuffleStreams(dst []byte, streams [][]byte, n int) int {
	w := avx2.width
	if !canUnshuffleStreams(len(streams)) || n < w {
		return 0
	}
	run := func(from, groups int) {
		if len(streams) == 4 {
			var p [4]*byte
			for j := range p {
				p[j] = &streams[j][from]
			}
			unshuffle4GatherAVX2(&dst[from*4], &p, groups)
			return
		}
		var p [8]*byte
		for j := range p {
			p[j] = &streams[j][from]
		}
		unshuffle8GatherAVX2(&dst[from*8], &p, groups)
	}
	run(0, n/w)
	if n%w != 0 {
		run(n-w, 1)
	}
	return n
}

// unshufflePlanes runs the kernel over UnshufflePlanes's items in whole
// groups, the last one into scratch where the planes hold a whole group
// around it, and returns how many items it did (the first ones).
func unshufflePlanes(dst, planes []byte, t, n, e, m int) int {
	w := avx2.width
	if !canUnshuffleStreams(t) || n < w {
		return 0
	}
	var p [8]*byte
	run := func(to *byte, from, groups int) {
		for j := range t {
			p[j] = &planes[j*n+from]
		}
		if t == 4 {
			unshuffle4GatherAVX2(to, (*[4]*byte)(p[:4]), groups)
		} else {
			unshuffle8GatherAVX2(to, &p, groups)
		}
	}
	whole := m - m%w
	if whole > 0 {
		run(&dst[0], e, whole/w)
	}
	r := m - whole
	if r == 0 {
		return m
	}
	// The last r items: the group that starts with them, or the one
	// that ends with them.
	lo := e + whole
	if lo+w > n {
		lo = e + m - w
	}
	if lo < 0 {
		return whole
	}
	var tmp [8 * 32]byte
	run(&tmp[0], lo, 1)
	copy(dst[whole*t:m*t], tmp[(e+whole-lo)*t:])
	return m
}

// unshufflePlanesRows runs the rows kernel, where there is one for t and
// the rows are a group long or more, and reports whether it did.
func unshufflePlanesRows(dst []byte, stride int, planes []byte, t, n, e, m, rows, skip int) bool {
	if !canUnshuffleStreams(t) || m < avx2.width {
		return false
	}
	if t == 4 {
		unshuffle4RowsAVX2(&dst[0], &planes[e], n, m, rows, skip, stride)
	} else {
		unshuffle8RowsAVX2(&dst[0], &planes[e], n, m, rows, skip, stride)
	}
	return true
}
