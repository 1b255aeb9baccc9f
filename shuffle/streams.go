package shuffle

// UnshuffleStreams is Unshuffle for a block whose byte streams lie apart
// rather than back to back: streams[j] holds byte j of every element, so
// that a caller can pass stored streams where they lie (in a compressed
// block, say) instead of copying them together first. The typesize is
// len(streams); len(dst) must be a multiple of it, and each stream must
// hold len(dst)/typesize bytes. Use it where CanUnshuffleStreams reports
// a fast kernel; elsewhere it is correct but slow.
func UnshuffleStreams(dst []byte, streams [][]byte) {
	t := len(streams)
	if t < 1 || len(dst)%t != 0 {
		panic("shuffle: UnshuffleStreams: dst is not a whole number of elements")
	}
	n := len(dst) / t
	for _, s := range streams {
		if len(s) != n {
			panic("shuffle: UnshuffleStreams: a stream's length differs from the element count")
		}
	}
	from := unshuffleStreams(dst, streams, n)
	for j, s := range streams {
		for i := from; i < n; i++ {
			dst[i*t+j] = s[i]
		}
	}
}

// CanUnshuffleStreams reports whether UnshuffleStreams has a fast kernel
// for typesize t in this build and on this CPU.
func CanUnshuffleStreams(t int) bool { return canUnshuffleStreams(t) }

// UnshufflePlanes writes items [e, e+m) of a block of n items of t
// bytes, kept as its byte planes (plane j, planes[j*n:(j+1)*n], holds
// byte j of each item), to dst[:m*t]. Where the planes run on past the
// items asked for (or before them), the last partial group of the fast
// kernel is unshuffled whole into scratch and its part copied out, so
// that a short range (a row of a chunk, 180 items) costs a call or two
// of the kernel rather than a byte loop.
func UnshufflePlanes(dst, planes []byte, t, n, e, m int) {
	if t < 1 || n < 0 || e < 0 || m < 0 || n > len(planes)/t || e > n-m || len(dst) < m*t {
		panic("shuffle: UnshufflePlanes: items or planes out of range")
	}
	if m == 0 {
		return
	}
	done := unshufflePlanes(dst, planes, t, n, e, m)
	for j := range t {
		p := planes[j*n+e : j*n+e+m]
		for i := done; i < m; i++ {
			dst[i*t+j] = p[i]
		}
	}
}

// UnshufflePlanesRows is UnshufflePlanes for rows of m items each: row r
// takes items [e+r*skip, e+r*skip+m) of a block of n items of t bytes,
// kept as its byte planes, to dst[r*stride:r*stride+m*t]. The rows of an
// N-D array's chunk that one read of its view takes lie so (skip is the
// chunk's row length in items, stride the view's in bytes): one call
// serves them all, where a call per row costs more than its bytes' copy.
func UnshufflePlanesRows(dst []byte, stride int, planes []byte, t, n, e, m, rows, skip int) {
	if rows <= 0 || m <= 0 {
		return
	}
	if t < 1 || n < 0 || e < 0 || skip < 0 || stride < 0 || n > len(planes)/t || e > n-m || len(dst) < m*t ||
		skip > 0 && rows-1 > (n-m-e)/skip || stride > 0 && rows-1 > (len(dst)-m*t)/stride {
		panic("shuffle: UnshufflePlanesRows: rows out of range")
	}
	if unshufflePlanesRows(dst, stride, planes, t, n, e, m, rows, skip) {
		return
	}
	for r := range rows {
		UnshufflePlanes(dst[r*stride:r*stride+m*t], planes, t, n, e+r*skip, m)
	}
}
