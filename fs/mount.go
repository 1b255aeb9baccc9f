package fs

// Mounting a view, local (Mount) or of a bucket (MountRemote), and the
// checks of a mountpoint before mount(2).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/bloscfs/bloscfs/remote"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Mount serves a view of source at mountpoint and returns once the mount
// is ready. The caller waits on the server and unmounts it.
func Mount(source, mountpoint string, opts Options) (*Server, *FS, error) {
	// As the mount table will show it: a mountpoint given through a
	// symbolic link is found there (MountAt), unmounted and aborted.
	mountpoint, err := ResolveMountpoint(mountpoint)
	if err != nil {
		return nil, nil, fmt.Errorf("mountpoint: %w", err)
	}
	root, f, err := New(source, opts)
	if err != nil {
		return nil, nil, err
	}
	if err := checkMountpoint(mountpoint, f.source); err != nil {
		return nil, nil, err
	}
	o := f.mountOptions()
	// The source's modes, exactly: without this go-fuse shows a mode-000
	// file as 0644 and lets other users in.
	o.NullPermissions = true
	server, err := serve(mountpoint, root, o, !opts.NoSelfAccess)
	if err != nil {
		return nil, nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	raiseReadahead(mountpoint, f.opts.Logger)
	if !opts.ReadOnly {
		go f.cleanTemp()
	}
	return server, f, nil
}

// mountOptions returns the options every mount of f is made with, local
// or remote: the options for the kernel (-o ones, default_permissions
// with allow_other, ro), the mount flags (noatime, …: mount(2)'s flags as
// root, added to nosuid and nodev), the FUSE parameters, and how long the
// kernel keeps names and attributes. The source shown in /proc/mounts is
// Options.FsName, else the source directory or s3:// location.
func (f *FS) mountOptions() *gofs.Options {
	opts := f.opts
	attr := opts.AttrTimeout
	neg := time.Duration(0)
	mo := fuse.MountOptions{
		FsName:        opts.FsName,
		Name:          "bloscfs",
		MaxWrite:      preferredIO, // 1 MiB READs (with read_ahead_kb raised after the mount)
		DisableSplice: true,        // a 1 MiB reply does not fit the default pipe
		MaxBackground: 64,
		AllowOther:    opts.AllowOther,
		DirectMount:   true,
		Debug:         opts.Debug,
		Logger:        opts.Logger,
		Options:       append([]string(nil), opts.ExtraOptions...),
	}
	if opts.MountFlags != 0 {
		mo.DirectMountFlags = syscall.MS_NOSUID | syscall.MS_NODEV | opts.MountFlags
	}
	if mo.FsName == "" {
		mo.FsName = f.source
	}
	if opts.AllowOther {
		mo.Options = append(mo.Options, "default_permissions")
	}
	if opts.ReadOnly {
		mo.Options = append(mo.Options, "ro")
	}
	return &gofs.Options{
		MountOptions:    mo,
		AttrTimeout:     &attr,
		EntryTimeout:    &attr,
		NegativeTimeout: &neg,
		Logger:          opts.Logger,
	}
}

// checkMountpoint refuses a mountpoint that is already a mount, or that
// lies inside the source (the daemon must never serve its own mount).
func checkMountpoint(mnt, source string) error {
	abs, err := filepath.Abs(mnt)
	if err != nil {
		return err
	}
	// Look in the mount table first: a stat of a dead FUSE mount fails
	// with ENOTCONN, which says nothing of how to clear it.
	if m, mounted, err := MountAt(abs); err == nil && mounted {
		if strings.HasPrefix(m.FSType, "fuse") && deadMount(abs) {
			return fmt.Errorf("mountpoint %s is a dead FUSE mount (%s): its daemon has exited; clear it with 'bloscfs unmount %s', then mount again", abs, m.Source, abs)
		}
		return fmt.Errorf("mountpoint %s is busy: something is already mounted there (bloscfs unmount %s)", abs, abs)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("mountpoint %s: %w", abs, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("mountpoint %s: not a directory", abs)
	}
	// The daemon reads the source by path: a mountpoint inside it, or
	// above it, would send the daemon through its own mount.
	realMnt, err1 := filepath.EvalSymlinks(abs)
	realSrc, err2 := filepath.EvalSymlinks(source)
	if err1 == nil && err2 == nil {
		if within(realMnt, realSrc) {
			return fmt.Errorf("mountpoint %s is inside the source %s", abs, source)
		}
		if within(realSrc, realMnt) {
			return fmt.Errorf("the source %s is inside the mountpoint %s", source, abs)
		}
	}
	return nil
}

// deadMount reports whether the FUSE mount at dir has lost its daemon.
func deadMount(dir string) bool { return ProbeMount(dir, 2*time.Second) == MountDead }

// MountState is what a look at a FUSE mount finds.
type MountState int

// What ProbeMount finds.
const (
	MountAlive MountState = iota // it answers
	MountDead                    // its daemon is gone: ENOTCONN
	MountHung                    // no answer within the time given
)

// ProbeMount stats dir aside, waiting at most d: a mount whose daemon
// hangs holds the stat until its connection is aborted. It is for looking
// at other mounts (or at this mountpoint before it is mounted): never at
// the mount this process serves.
func ProbeMount(dir string, d time.Duration) MountState {
	done := make(chan error, 1)
	go func() {
		var st unix.Stat_t
		done <- unix.Stat(dir, &st)
	}()
	select {
	case err := <-done:
		if errors.Is(err, syscall.ENOTCONN) {
			return MountDead
		}
		return MountAlive
	case <-time.After(d):
		return MountHung
	}
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// MountRemote serves a read-only view of prefix in store at mountpoint
// and returns once the mount is ready. It first checks that the bucket
// exists and the credentials are accepted, and lists the prefix, so that
// a mount that cannot work refuses to start.
func MountRemote(store *remote.Store, prefix, mountpoint string, opts Options) (*Server, *RemoteFS, error) {
	mountpoint, err := ResolveMountpoint(mountpoint)
	if err != nil {
		return nil, nil, fmt.Errorf("mountpoint: %w", err)
	}
	ctx := context.Background()
	if err := store.Check(ctx); err != nil {
		return nil, nil, err
	}
	root, r := NewRemote(store, prefix, opts)
	if _, err := store.List(ctx, r.prefix); err != nil {
		return nil, nil, err
	}
	if err := checkMountpoint(mountpoint, ""); err != nil {
		return nil, nil, err
	}
	o := r.f.mountOptions()
	// A bucket has no owners or modes: its files are the mount's user's.
	o.UID, o.GID = r.uid, r.gid
	server, err := serve(mountpoint, root, o, !opts.NoSelfAccess)
	if err != nil {
		return nil, nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	raiseReadahead(mountpoint, r.f.opts.Logger)
	return server, r, nil
}
