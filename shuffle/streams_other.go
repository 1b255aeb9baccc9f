//go:build !amd64 || purego

package shuffle

func canUnshuffleStreams(int) bool { return false }

func unshuffleStreams([]byte, [][]byte, int) int { return 0 }

func unshufflePlanes([]byte, []byte, int, int, int, int) int { return 0 }

func unshufflePlanesRows([]byte, int, []byte, int, int, int, int, int, int) bool { return false }
