//go:build !amd64 || purego

package shuffle

func canUnshuffleStreams(int) bool { return false }

func unshuffleStreams([]byte, [][]byte, int) int { return 0 }
