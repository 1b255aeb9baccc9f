//go:build !amd64 || purego

package shuffle

// Kernels names the implementation the transforms use on this CPU:
// "avx2", "sse2" or "portable".
func Kernels() string { return "portable" }
