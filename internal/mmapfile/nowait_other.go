//go:build !linux

package mmapfile

import "os"

// readCached reads nothing: the caller reads p the ordinary way.
func readCached(f *os.File, p []byte, off int64) int { return 0 }

// Pread is an *os.File (ReadAt reads the ordinary way here).
type Pread struct{ *os.File }
