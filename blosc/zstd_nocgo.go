//go:build !cgo || purego || !linux

package blosc

// libzstdDecodeBatch is never called without libzstd (libzstd() is nil).
func libzstdDecodeBatch(dst, src []byte, jobs []int64) (int, error) {
	panic("blosc: libzstd is not in this build")
}
