// Package writes holds black-box tests of the write path of a bloscfs
// mount: the built binary mounts a source directory for real, real
// programs (cp, sh, truncate, python3, numpy) write through it, and the
// tests check what lands in the source with `bloscfs unpack` and
// `bloscfs info`, with the container packages, and with Debian's
// python3-blosc.
//
// The tests need root (go-fuse's DirectMount, tmpfs mounts). They skip
// when not root and CI is unset, and fail when CI is set and something is
// missing. Every mount is undone in t.Cleanup, also after a failure.
//
//	go test ./integration/writes/                       # the default run (a few minutes)
//	BLOSCFS_LONG=1 go test -timeout 90m ./integration/writes/
//	                                                    # long run (what `make test-long` is
//	                                                    # meant to run): 150 crash iterations
//	                                                    # instead of 24, 200000 random
//	                                                    # operations per file instead of 10000
//	BLOSCFS_FSX_SEED=N go test -run TestRandomOps ./integration/writes/
//	                                                    # replay one random-operations seed
//	                                                    # (BLOSCFS_FSX_OPS=N operations per file;
//	                                                    # BLOSCFS_FSX_FDONLY=1: only calls on one
//	                                                    # open descriptor, no path lookups)
//	BLOSCFS_CRASH_SEED=N go test -run TestCrashSafety ./integration/writes/
//	                                                    # replay the kill delays of a crash run
//	go test -run '^$' -bench BenchmarkWrite -benchtime=1x -timeout 60m ./integration/writes/
//	                                                    # write throughput and patch latency;
//	                                                    # BLOSCFS_BENCH_SIZE=MiB (default 1024)
//
// The tests:
//   - TestBasicWrites: cp, shell > and >>, python r+b patches, numpy and
//     python mmap writes, truncation and extension through a mount; the
//     source keeps its format and parameters, untouched chunks stay
//     byte-identical, and the content survives an unmount and a remount.
//   - TestNamespace: mkdir, rmdir, rename, unlink, symlink, chmod, chown,
//     utimens, user xattrs and hard links reach the source; temp and
//     staging files never show in the view during a long write.
//   - TestCrashSafety: the daemon is SIGKILLed at random moments (some
//     during recompression, some right after a confirmed fsync) while a
//     child process rewrites a 64 MiB file; the source always decodes to a
//     complete version, never older than the last confirmed fsync, and a
//     new mount removes the stale temp files.
//   - TestOutOfSpace: on a full tmpfs the writer gets ENOSPC (or EIO) at
//     fsync or close, the original stays intact and no temp file is left.
//   - TestRandomOps: seeded fsx-style operations (write, read, truncate,
//     mmap read and write, fsync, reopen) against an in-memory model.
//   - TestInteropBloscpack: Bloscpack files written through the mount are
//     decoded chunk by chunk by python3-blosc (c-blosc 1.x).
//   - TestNewFileFlags: new files get the mount's --codec, --clevel,
//     --filter, --typesize and --chunk-size in both new-file formats.
//   - BenchmarkWrite: cp into the mount against `bloscfs pack`, daemon
//     peak RSS, and the latency of a 4 KiB patch + fsync at two file sizes.
package writes
