//go:build amd64 && !purego

package shuffle

func canUnshuffleStreams(t int) bool { return (t == 4 || t == 8) && useAVX2 }

// unshuffleStreams runs the kernel over the whole groups of 32 elements
// and returns how many elements it did.
func unshuffleStreams(dst []byte, streams [][]byte, n int) int {
	if !canUnshuffleStreams(len(streams)) || n < avx2.width {
		return 0
	}
	nv := n - n%avx2.width
	if len(streams) == 4 {
		var p [4]*byte
		for j := range p {
			p[j] = &streams[j][0]
		}
		unshuffle4GatherAVX2(&dst[0], &p, nv/avx2.width)
		return nv
	}
	var p [8]*byte
	for j := range p {
		p[j] = &streams[j][0]
	}
	unshuffle8GatherAVX2(&dst[0], &p, nv/avx2.width)
	return nv
}
