// Package integration holds black-box tests of the built bloscfs binary on
// real FUSE mounts. It has no code of its own: everything is in the
// _test.go files.
//
// TestMain builds ./cmd/bloscfs once into a temporary directory (and, for
// the concurrency test, a second copy with -race). Each test copies
// testdata/fixtures (or files it makes) into a fresh source directory,
// mounts it on a fresh mountpoint with the real `bloscfs mount` (daemonized,
// or with -f in a child process where the test needs the foreground
// process) and reads it with real programs: sha256sum, dd, cmp, rsync,
// fio, df, ls and python3 with numpy. Every mount is unmounted in
// t.Cleanup, also after a failure: `bloscfs unmount`, then `umount -l`,
// then the daemon is killed; the cleanup then checks that the mountpoint
// has left /proc/self/mountinfo.
//
// The tests need root (go-fuse mounts with DirectMount) and /dev/fuse. When
// not root they skip, unless CI is set: then they fail, as they do when a
// program they use is missing (`make test` installs fuse3, fio, rsync and
// python3-numpy). TestMemoryBound streams a 512 MiB file and is skipped
// with -short.
package integration
