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
