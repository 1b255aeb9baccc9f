//go:build unix && !linux

package zarr

import "golang.org/x/sys/unix"

// openBeneath opens key, a valid key, through the store's os.Root.
func (s *DirStore) openBeneath(key string) (int, error) { return s.openRoot(key) }

// idOf returns the identity of the file st describes.
func idOf(st *unix.Stat_t) fileID {
	mt, ct := st.Mtim, st.Ctim
	return fileID{
		dev: uint64(st.Dev), ino: uint64(st.Ino), size: st.Size,
		mtime: mt.Nano(), ctime: ct.Nano(),
	}
}
