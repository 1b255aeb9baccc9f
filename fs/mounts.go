package fs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The daemon never makes a system call on a path inside its own mount:
// such a call is a request that only the daemon itself can answer, and a
// SIGKILL that arrives while one is waiting leaves the process unkillable
// (the last thread waits for an answer that the dying process can no
// longer give, so /dev/fuse is never closed and the connection never
// aborted). Everything this file needs to know about a mount comes from
// /proc/self/mountinfo, and a mount is served without go-fuse's start-up
// "poll hack", which opens a file through the new mount.

// MountInfo is one line of /proc/self/mountinfo.
type MountInfo struct {
	// ID is the mount's ID, unique among the mounts that exist at one
	// time (the kernel hands a freed ID out again).
	ID     uint64
	Dir    string // the mountpoint
	Source string // the mount's source (fsname)
	FSType string // fuse.bloscfs for ours
	// Major and Minor are the device of the mount; for a FUSE mount the
	// whole device number names its connection (Conn).
	Major, Minor uint32
}

// Conn returns the name of a FUSE mount's connection in the FUSE control
// filesystem (/sys/fs/fuse/connections): the kernel's internal number of
// the mount's device, major<<20 | minor (MKDEV), in decimal.
func (m MountInfo) Conn() string {
	return strconv.FormatUint(uint64(m.Major)<<20|uint64(m.Minor), 10)
}

// Dev returns the mount's device as "MAJOR:MINOR".
func (m MountInfo) Dev() string { return fmt.Sprintf("%d:%d", m.Major, m.Minor) }

// Stamp names the mount among those that exist with it: "ID MAJOR:MINOR".
// A mount stacked on a directory has another stamp than the one below
// it, as long as that one exists: the kernel hands out a freed mount ID
// and device number again.
func (m MountInfo) Stamp() string { return fmt.Sprintf("%d %s", m.ID, m.Dev()) }

// Mounts lists the mounts of this process's namespace, in the order of
// /proc/self/mountinfo (a later mount on the same directory is above an
// earlier one).
func Mounts() ([]MountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []MountInfo
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
		line := sc.Text()
		before, after, ok := strings.Cut(line, " - ")
		f, fa := strings.Fields(before), strings.Fields(after)
		if !ok || len(f) < 5 || len(fa) < 2 {
			continue
		}
		m := MountInfo{Dir: UnescapeMount(f[4]), FSType: fa[0], Source: UnescapeMount(fa[1])}
		m.ID, _ = strconv.ParseUint(f[0], 10, 64)
		if maj, min, ok := strings.Cut(f[2], ":"); ok {
			a, err1 := strconv.ParseUint(maj, 10, 32)
			b, err2 := strconv.ParseUint(min, 10, 32)
			if err1 == nil && err2 == nil {
				m.Major, m.Minor = uint32(a), uint32(b)
			}
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// MountAt returns the topmost mount whose mountpoint is path (ok false
// when nothing is mounted there).
func MountAt(path string) (m MountInfo, ok bool, err error) {
	ms, err := Mounts()
	for _, x := range ms {
		if x.Dir == path {
			m, ok = x, true
		}
	}
	return m, ok, err
}

// ResolveMountpoint returns path made absolute and with its symbolic
// links resolved, as /proc/self/mountinfo shows mountpoints, without
// looking at what a mount there shows (the stat of a mount whose daemon
// hangs would hang too): the directories above it are resolved with
// EvalSymlinks, and the last component is only read as a link
// (readlink, which no mount is asked to answer). A last component that
// does not exist is left as it is.
func ResolveMountpoint(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	for range 40 {
		dir, base := filepath.Split(abs)
		if base == "" {
			return abs, nil
		}
		rdir, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return "", err
		}
		cur := filepath.Join(rdir, base)
		target, err := os.Readlink(cur)
		if err != nil {
			return cur, nil // not a link
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(rdir, target)
		}
		abs = filepath.Clean(target)
	}
	return "", fmt.Errorf("%s: %w", path, syscall.ELOOP)
}

// IsMountpoint reports whether path is the mountpoint of a mount, from
// /proc/self/mountinfo.
func IsMountpoint(path string) (bool, error) {
	_, ok, err := MountAt(path)
	return ok, err
}

// UnescapeMount undoes the octal escapes of /proc/mounts and
// /proc/self/mountinfo (\040 for a space, …).
func UnescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// raiseReadahead lets the kernel send 1 MiB READs: MaxReadAhead cannot go
// beyond the bdi's read_ahead_kb (128 by default), which only root may
// raise. The bdi is named by the mount's device number, read from
// /proc/self/mountinfo (a stat of the mountpoint would be a request to
// this very daemon). Failure is quiet: the mount works, a little slower.
func raiseReadahead(mnt string, logger *log.Logger) {
	m, ok, _ := MountAt(mnt)
	if !ok {
		return
	}
	path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", m.Major, m.Minor)
	if err := os.WriteFile(path, []byte("1024"), 0); err != nil && logger != nil && os.Getuid() == 0 {
		logger.Printf("could not raise %s: %v", path, err)
	}
}

// Server is a served mount: go-fuse's server and the mountpoint, with
// the way to take the mount down that fits how it was made.
type Server struct {
	*fuse.Server
	dir string
}

// Dir returns the mountpoint.
func (s *Server) Dir() string { return s.dir }

// serve mounts root at dir and starts serving it. It returns once the
// mount is in place; requests that come before the first one is read
// wait in the kernel.
//
// go-fuse's WaitMount, which fs.Mount calls, also runs a "poll hack": it
// opens a file through the new mount and polls it, so that the kernel
// learns at once that the mount answers POLL with ENOSYS. That matters
// only to a process that opens files of the mount it serves itself (the
// Go runtime registers every file it opens with its epoll, which sends a
// POLL to the server and waits for the answer): in-process mounts, as
// the tests of this package make. The daemon never does, and for it the
// hack is a danger: a SIGKILL during that open leaves the process
// unkillable. So the hack runs only when pollHack is set
// (Options.NoSelfAccess unset).
func serve(dir string, root gofs.InodeEmbedder, o *gofs.Options, pollHack bool) (*Server, error) {
	srv, err := fuse.NewServer(gofs.NewNodeFS(root, o), dir, &o.MountOptions)
	if err != nil {
		return nil, err
	}
	go srv.Serve()
	if pollHack {
		if err := srv.WaitMount(); err != nil {
			srv.Unmount()
			return nil, err
		}
	}
	return &Server{Server: srv, dir: dir}, nil
}

// Unmount unmounts the mount and waits until the server has stopped. It
// fails with EBUSY while files are open there (go-fuse's own Unmount
// turns that into fusermount3's text).
func (s *Server) Unmount() error {
	var err error
	delay := time.Duration(0)
	for try := 0; try < 5; try++ {
		// As go-fuse does: the kernel may still hold files that were
		// just closed.
		if err = Unmount(s.dir, false); err == nil {
			break
		}
		delay = 2*delay + 5*time.Millisecond
		time.Sleep(delay)
	}
	if err != nil {
		return err
	}
	s.Server.Wait()
	return nil
}

// Detach unmounts lazily: the mount leaves the namespace at once, and
// the files open there keep working until they are closed or this
// process exits.
func (s *Server) Detach() error { return Unmount(s.dir, true) }

// Unmount unmounts the mount at dir: with umount2(2) as root, else with
// fusermount3 -u (which lets a user unmount the mounts it made). lazy
// detaches a busy mount (MNT_DETACH, fusermount3 -z). A symbolic link
// at dir is not followed (UMOUNT_NOFOLLOW): dir must be the mountpoint
// itself (see ResolveMountpoint).
func Unmount(dir string, lazy bool) error {
	flags := unix.UMOUNT_NOFOLLOW
	if lazy {
		flags |= syscall.MNT_DETACH
	}
	err := syscall.Unmount(dir, flags)
	if err == nil || !errors.Is(err, syscall.EPERM) {
		return err
	}
	bin, lerr := fusermount()
	if lerr != nil {
		return err
	}
	arg := "-u"
	if lazy {
		arg = "-uz"
	}
	out, ferr := exec.Command(bin, arg, "--", dir).CombinedOutput()
	if ferr != nil {
		msg := strings.TrimSpace(string(out))
		if strings.Contains(msg, "Device or resource busy") {
			return syscall.EBUSY
		}
		if msg == "" {
			msg = ferr.Error()
		}
		return errors.New(msg)
	}
	return nil
}

// fusermount finds fusermount3, also where PATH is empty (mount(8) runs
// helpers with a minimal environment).
func fusermount() (string, error) {
	if p, err := exec.LookPath("fusermount3"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/bin/fusermount3", "/usr/bin/fusermount3", "/usr/local/bin/fusermount3"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("fusermount3 not found (apt-get install fuse3)")
}

// WatchAutoUnmount is the watcher of a mount made with auto_unmount: a
// small process of its own, started before the mount is made, that reads
// r (a pipe whose other end only the daemon holds) until it ends, which
// happens when the daemon exits, however it exits. If a bloscfs mount is
// then still at dir and dead (its daemon gone, a look at it fails with
// ENOTCONN), it unmounts it lazily, so that dir is an empty directory
// again; a mount that was unmounted cleanly, or one that still answers
// after watchGrace, is left alone. It unmounts without following a
// symbolic link at dir.
//
// The watcher unmounts only the daemon's mount. The daemon writes that
// mount's device ("MAJOR:MINOR") once it is mounted, and an empty line
// when it finds no bloscfs mount at dir then, or fails to mount: then
// only a mount of that device is unmounted, and none at all after an
// empty line. A daemon killed between mount(2) and that line writes
// nothing: then its mount is the bloscfs mount at dir that was not there
// before it mounted, when the topmost mount at dir had the stamp below
// (MountInfo.Stamp, or NothingBelow). With below "" (not known: a daemon
// older than this rule) or a pipe that fails to read, a daemon that said
// nothing is taken to have no mount. Should the mount below go away
// before the daemon mounts, its mount may get the same stamp and is then
// left: the rule errs towards leaving a mount, never towards unmounting
// another.
//
// fusermount3's own auto_unmount is not used: the fusermount3 of fuse
// 3.14 checks the dead mount with its root privileges, which a mount
// without allow_other refuses (EACCES instead of ENOTCONN), so that a
// user's mount was never cleaned.
func WatchAutoUnmount(dir, below string, r io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(r, 64)) // returns when the daemon is gone
	if err != nil {
		return fmt.Errorf("reading the daemon's pipe: %w", err)
	}
	dev := strings.TrimSpace(string(b))
	m, ok, err := MountAt(dir)
	if err != nil || !ok || m.FSType != "fuse.bloscfs" {
		return err
	}
	switch {
	case len(b) == 0 && below != "" && m.Stamp() != below:
		dev = m.Dev() // mounted since the daemon started: its own
	case dev != m.Dev(): // m.Dev() is never ""
		return nil // not known to be the daemon's mount
	}
	// The pipe ends when the dying daemon closes it, which may come just
	// before it closes /dev/fuse: until then the connection stands, and a
	// stat answered from the kernel's attribute cache succeeds. So a
	// mount that answers is looked at again for a while.
	for deadline := time.Now().Add(watchGrace); ; {
		switch ProbeMount(dir, 2*time.Second) {
		case MountDead:
			return Unmount(dir, true)
		case MountHung:
			return nil
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
		if m2, ok, err := MountAt(dir); err != nil || !ok || m2.Dev() != dev || m2.FSType != "fuse.bloscfs" {
			return err // unmounted meanwhile, or another mount now
		}
	}
}

// NothingBelow is the stamp WatchAutoUnmount is given when nothing was
// mounted at the mountpoint before the daemon mounted there.
const NothingBelow = "none"

// watchGrace is how long the watcher keeps looking at a mount that still
// answers once the daemon's end of the pipe is closed.
const watchGrace = 2 * time.Second
