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
// It prints "ready" once the mount is up. SOURCE is not read.
package main

import (
	"fmt"
	"os"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: stuckd mount -f SOURCE MOUNTPOINT")
		os.Exit(2)
	}
	mnt := os.Args[len(os.Args)-1]
	zero := time.Duration(0)
	server, err := gofs.Mount(mnt, &gofs.Inode{}, &gofs.Options{
		// No cached attributes: every stat is a request.
		AttrTimeout:  &zero,
		EntryTimeout: &zero,
		MountOptions: fuse.MountOptions{Name: "bloscfs", FsName: "stuckd", DirectMount: true},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready")
	for i := 0; i < 8; i++ {
		go func() {
			for {
				var st syscall.Stat_t
				syscall.Stat(mnt, &st)
			}
		}()
	}
	server.Wait()
}
