// Command stuckd is a FUSE daemon that makes the mistake bloscfs must
// never make: it stats its own mountpoint, over and over, from several
// threads. A SIGKILL that lands while one of those stats waits for the
// answer leaves the process unkillable (its last thread waits for a reply
// that only the dying process could give). The integration tests build it
// under the name bloscfs to show that `bloscfs unmount` clears such a
// daemon by aborting its FUSE connection.
//
//	stuckd mount -f SOURCE MOUNTPOINT
//
// It prints "ready" once the mount is up. SOURCE is not read. The mount
// holds one file, "f". STUCKD_MODE chooses the mistake:
//
//   - "" (stat): the stats above;
//   - "exit": it holds "f" open as its standard input, below /dev/fuse:
//     after a SIGKILL its exit closes the file, whose FLUSH waits for an
//     answer for good, after the process has released its memory (its
//     command line is gone);
//   - "slow": no mistake; a live daemon that answers a stat of the root
//     after 3 s (a busy mount that `bloscfs unmount` must not abort).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// root is the mount's root: one file, and a stat that may be slow.
type root struct {
	gofs.Inode
	slow bool
}

var _ = (gofs.NodeOnAdder)((*root)(nil))
var _ = (gofs.NodeGetattrer)((*root)(nil))

func (r *root) OnAdd(ctx context.Context) {
	f := &gofs.MemRegularFile{Data: []byte("stuckd\n"), Attr: fuse.Attr{Mode: 0o644}}
	r.AddChild("f", r.NewPersistentInode(ctx, f, gofs.StableAttr{}), false)
}

func (r *root) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if r.slow {
		time.Sleep(3 * time.Second)
	}
	out.Mode = syscall.S_IFDIR | 0o755
	return 0
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: stuckd mount -f SOURCE MOUNTPOINT")
		os.Exit(2)
	}
	mnt := os.Args[len(os.Args)-1]
	mode := os.Getenv("STUCKD_MODE")
	zero := time.Duration(0)
	server, err := gofs.Mount(mnt, &root{slow: mode == "slow"}, &gofs.Options{
		// No cached attributes: every stat is a request.
		AttrTimeout:  &zero,
		EntryTimeout: &zero,
		MountOptions: fuse.MountOptions{Name: "bloscfs", FsName: "stuckd", DirectMount: true},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	switch mode {
	case "exit":
		// A raw open (the runtime's poller would ask the mount too),
		// moved to fd 0, which the exit closes before /dev/fuse.
		fd, err := syscall.Open(filepath.Join(mnt, "f"), syscall.O_RDONLY, 0)
		if err == nil {
			err = syscall.Dup3(fd, 0, 0)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		syscall.Close(fd)
	case "slow":
	default:
		for i := 0; i < 8; i++ {
			go func() {
				for {
					var st syscall.Stat_t
					syscall.Stat(mnt, &st)
				}
			}()
		}
	}
	fmt.Println("ready")
	server.Wait()
}
