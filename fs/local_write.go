package fs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/bufs"
	"github.com/bloscfs/bloscfs/internal/ordered"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/pack/bloscpack"
	"github.com/bloscfs/bloscfs/pack/frame"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// NewFormat says how files created through the mount are stored.
type NewFormat string

// New-file formats.
const (
	NewB2Frame NewFormat = "b2frame" // name.b2frame, zstd clevel 5 shuffle (blosc.DefaultParams)
	NewBlp     NewFormat = "blp"     // name.blp, bloscpack's defaults
	NewPlain   NewFormat = "none"    // a plain file
)

// newToken returns a random name part for this mount's temp files.
func newToken() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// tempFile is a hidden file beside the originals, for staging or
// recompression. It keeps its directory open and renames and removes
// itself relative to it, so that a rename of the directory while the file
// is being written does not lose it. It is locked (flock) while open, so
// that another mount's cleanup of stale temp files leaves it alone.
type tempFile struct {
	*os.File
	dir  *os.File // the directory holding it
	name string   // its name in dir
}

// tempFile creates a temp file of kind ("stage", "tmp") in dir.
func (f *FS) tempFile(dir, kind string) (*tempFile, error) {
	d, err := pack.OpenSourceDir(dir)
	if err != nil {
		return nil, err
	}
	if kind == "stage" {
		// A stage is never renamed into place: it has no name, so that it
		// keeps no directory from being removed while its file (moved
		// elsewhere, or unlinked) is still open, and leaves nothing
		// behind after a crash.
		if fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600); err == nil {
			return &tempFile{File: os.NewFile(uintptr(fd), filepath.Join(dir, TempPrefix+kind)), dir: d}, nil
		}
	}
	t, err := os.CreateTemp(dir, TempPrefix+kind+"-"+f.token+"-*")
	if err != nil {
		d.Close()
		return nil, err
	}
	unix.Flock(int(t.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	return &tempFile{File: t, dir: d, name: filepath.Base(t.Name())}, nil
}

// path names the file through its open directory: it stays valid when
// the directory is renamed.
func (t *tempFile) path() string {
	return fmt.Sprintf("/proc/self/fd/%d/%s", t.dir.Fd(), t.name)
}

// remove closes and removes the file.
func (t *tempFile) remove() {
	t.File.Close()
	if t.name != "" {
		unix.Unlinkat(int(t.dir.Fd()), t.name, 0)
	}
	t.dir.Close()
}

// renameOver renames the (closed) file to path, replacing what is there,
// and syncs both directories.
func (t *tempFile) renameOver(path string) error {
	defer t.dir.Close()
	if err := unix.Renameat(int(t.dir.Fd()), t.name, unix.AT_FDCWD, path); err != nil {
		unix.Unlinkat(int(t.dir.Fd()), t.name, 0)
		return &os.LinkError{Op: "rename", Old: t.name, New: path, Err: err}
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return err
	}
	return t.dir.Sync() // where it came from, if another directory
}

// removeIfStale removes a temp file that no live process holds locked.
func removeIfStale(p string) bool {
	t, _, err := pack.OpenSource(p, false) // a FIFO named like a temp file must not block
	if err != nil {
		return false
	}
	defer t.Close()
	if unix.Flock(int(t.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false // a live mount is using it
	}
	return os.Remove(p) == nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := pack.OpenSourceDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// writable reports whether open flags ask for writing.
func writable(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
}

// startStage sets up the stage of n for writing (n.smu held).
func (n *blobNode) startStage() syscall.Errno {
	if n.stage != nil {
		return 0
	}
	if n.fs.stopping.Load() {
		return syscall.EIO
	}
	p, sparse := n.diskPath()
	if p == "" {
		return syscall.ENOENT
	}
	if sparse {
		n.fs.warnOnce("%s: sparse frames are read-only through the mount", p)
		return syscall.EROFS
	}
	tf, err := n.fs.tempFile(filepath.Dir(p), "stage")
	if err != nil {
		return gofs.ToErrno(err)
	}
	var base io.ReaderAt
	var size int64
	if n.view != nil {
		base, size = n.view, n.view.Size
	}
	n.stage = newStage(tf.File, base, size)
	n.stage.temp = tf
	n.fs.stages.Store(n, struct{}{})
	return 0
}

// dropStageIfIdle frees the stage when no writer uses it (n.smu held).
func (n *blobNode) dropStageIfIdle() {
	if n.writers == 0 {
		n.dropStage()
	}
}

// dropStage frees the staging space (n.smu held).
func (n *blobNode) dropStage() {
	if n.stage != nil {
		n.stage.dropStream()
		n.stage.temp.remove()
		n.stage = nil
		n.fs.stages.Delete(n)
	}
	n.clearTimes()
}

// Shutdown stops the write path before the daemon exits with files still
// open on the mount (SIGTERM or SIGINT while the mount is busy). Commits
// and creations of new files that are running finish; then every stage
// is dropped with its temp files, so that the source holds each file as
// its last commit left it (the old file whole) and no hidden file of this
// mount. Writes staged
// since the last commit (no fsync or close yet) are dropped, as a crash
// would drop them, and their writers are told: from now on every write,
// fsync and close of a compressed file, and every open for writing,
// fails with EIO. Plain files are written through and lose nothing.
func (f *FS) Shutdown() {
	f.createMu.Lock()
	already := f.stopping.Swap(true)
	f.createMu.Unlock()
	if already {
		return
	}
	f.creating.Wait() // a new file's temp file is linked or removed
	dropped := 0
	f.stages.Range(func(k, _ any) bool {
		n := k.(*blobNode)
		n.smu.Lock() // waits for a running commit
		if n.stage != nil {
			dropped++
			if p, _ := n.diskPath(); p != "" && n.stage.changed(n.baseSize()) {
				f.opts.Logger.Printf("%s: shutting down: writes since its last commit (fsync or close) are dropped; the file keeps its committed content", p)
			}
			n.dropStage()
		}
		n.smu.Unlock()
		return true
	})
	if dropped > 0 {
		f.opts.Logger.Printf("shutting down: %d files open for writing were closed without a commit", dropped)
	}
}

// baseSize is the size of the committed content (n.smu held).
func (n *blobNode) baseSize() int64 {
	if n.view == nil {
		return 0
	}
	return n.view.Size
}

// commit recompresses the staged content into a hidden temp file beside
// the original, syncs it, renames it over the original and syncs the
// directory: a crash leaves the old file or the new one, never a mix.
// Chunks no write touched are copied, not re-encoded (n.smu held). The
// content of a stream is in its temp file already: if committing it fails
// the writes are lost, and the stage breaks so that no later commit
// writes what it no longer holds.
func (n *blobNode) commit() (err error) {
	st := n.stage
	if st == nil {
		return nil
	}
	if st.broken != nil {
		p, _ := n.diskPath()
		return fmt.Errorf("%s: not committed: %w", p, st.broken)
	}
	if !st.changed(n.baseSize()) {
		return nil
	}
	if n.isGone() {
		// Unlinked while open: nothing to store. The stage stays, so
		// that the open handles read what was written until the last
		// one closes.
		return nil
	}
	p, _ := n.diskPath()
	if p == "" {
		return fmt.Errorf("%s: no longer in the source: %w", n.Path(nil), syscall.ENOENT)
	}
	// From the point where the disk name is taken for good to the rename,
	// no rename, unlink or link through the mount runs: the new file
	// cannot land on a name given meanwhile to another file, or bring
	// back one just unlinked. A stream's last chunk is finished under the
	// lock (its data then live only in the temp file); a staged file is
	// compressed before it.
	locked := false
	defer func() {
		if locked {
			n.fs.nsMu.RUnlock()
		}
	}()
	var tmp *tempFile
	if s := st.stream; s != nil {
		n.fs.nsMu.RLock()
		locked = true
		if n.isGone() {
			return nil
		}
		st.stream = nil
		defer func() {
			if err != nil && st.broken == nil {
				st.broken = fmt.Errorf("committing the streamed writes: %w", err)
			}
		}()
		tmp = s.tmp
		if err := s.finish(); err != nil {
			s.abort()
			return fmt.Errorf("%s: recompressing: %w", p, err)
		}
	} else {
		var err error
		if tmp, err = n.fs.tempFile(filepath.Dir(p), "tmp"); err != nil {
			return err
		}
		if err := n.writeContainer(tmp.File, st); err != nil {
			tmp.remove()
			return fmt.Errorf("%s: recompressing: %w", p, err)
		}
	}
	fail := func(err error) error {
		tmp.remove()
		return fmt.Errorf("%s: recompressing: %w", p, err)
	}
	if h := n.fs.opts.failCommit; h != nil {
		if err := h(); err != nil {
			return fail(err)
		}
	}
	if !locked {
		n.fs.nsMu.RLock()
		locked = true
	}
	if n.isGone() {
		// Unlinked, or replaced by a rename, while it was compressed:
		// nothing to store (the stage stays for the open handles).
		tmp.remove()
		return nil
	}
	if p, _ = n.diskPath(); p == "" {
		return fail(fmt.Errorf("%s: no longer in the source: %w", n.Path(nil), syscall.ENOENT))
	}
	if err := copyMeta(p, tmp.File); err != nil {
		return fail(err)
	}
	if err := n.commitTimes(tmp.path()); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	var tst syscall.Stat_t
	if err := syscall.Fstat(int(tmp.Fd()), &tst); err != nil {
		return fail(err)
	}
	var old syscall.Stat_t
	oldErr := syscall.Lstat(p, &old)
	oldID := n.fs.diskID(p, &old)
	n.fs.remapID(tmp.path(), &tst, n.StableAttr()) // before the new file is visible
	if err := tmp.File.Close(); err != nil {
		return fail(err)
	}
	if err := tmp.renameOver(p); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	n.mu.Lock()
	n.ino = tst.Ino
	n.mu.Unlock()
	if oldErr == nil && old.Nlink > 1 && n.file != nil {
		// The old file lives on under its other names: they are
		// another file now.
		if syscall.Fstat(int(n.file.Fd()), &old) == nil && old.Nlink > 0 {
			n.fs.orphanID(oldID)
		}
	}
	// Serve the new file; the stage starts over from it.
	c := n.fs.blockCache()
	v, err := all.OpenView(p, c)
	if err != nil {
		return fmt.Errorf("%s: reopening after recompression: %w", p, err)
	}
	c.setCodec(v.Container.Info().Codec)
	n.setView(v, p)
	n.clearTimes()
	if err := st.file.Truncate(0); err != nil {
		return err
	}
	st.reset(v, v.Size)
	return nil
}

// writeContainer writes the staged content as a container of the
// original's format and parameters (or of the new-file format).
func (n *blobNode) writeContainer(w *os.File, st *stage) error {
	var c pack.Container
	if n.view != nil {
		c = n.view.Container
	}
	if n.view != nil && n.view.NPY {
		return n.writeArray(w, st)
	}
	if n.created && n.baseSize() == 0 {
		// Made through this mount and still empty: the mount's codec
		// parameters (a Bloscpack file does not record its level).
		return n.fs.writeNew(w, st, st.size, n.format)
	}
	switch c := c.(type) {
	case pack.Rewritable:
		return pack.Rewrite(w, c, st, st.size, st.rewriteRanges(n.baseSize()))
	case *pack.ChunkFile:
		// One bare chunk: compress it again with its own parameters.
		h := c.Info()
		p := blosc.Params{Codec: codecOf(h.Codec), Clevel: 5, Typesize: h.Typesize, Filters: h.Filters, FiltersMeta: h.FiltersMeta, Blosc1: h.Version == blosc.VersionBlosc1}
		if p.Blosc1 {
			p.Filters, p.FiltersMeta = [6]uint8{0, 0, 0, 0, 0, h.Filters[5]}, [6]uint8{}
		}
		plain := make([]byte, st.size)
		if err := readFullAt(st, plain, 0); err != nil {
			return err
		}
		out, err := blosc.Compress(nil, plain, p)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	case nil:
		return n.fs.writeNew(w, st, st.size, n.format)
	default:
		return fmt.Errorf("%w: %s containers cannot be rewritten", pack.ErrUnsupported, c.Info().Format)
	}
}

// codecOf maps a codec name back to its compcode (blosclz if unknown).
func codecOf(name string) int {
	if c, ok := blosc.CodecByName(name); ok && c != blosc.CodecSnappy {
		return c
	}
	return blosc.CodecBloscLZ
}

// writeNew writes plain content as a new container of the mount's
// new-file format and codec parameters, compressing chunks on all cores.
func (f *FS) writeNew(w io.WriteSeeker, content io.ReaderAt, size int64, format NewFormat) error {
	cs := f.opts.NewChunkSize
	if content == nil {
		content = zeroReader{}
	}
	var (
		compress func(plain []byte) ([]byte, error)
		add      func(chunk []byte, plainLen int) error
		closeW   func() error
	)
	if format == NewBlp {
		p := bloscpack.DefaultParams()
		p.Blosc = f.opts.NewParams
		p.Blosc.Blosc1 = true
		p.ChunkSize = cs
		p.KeepChunkSize = true // an empty file still records the chunk size
		wr, err := bloscpack.NewWriter(w, size, p)
		if err != nil {
			return err
		}
		compress = func(plain []byte) ([]byte, error) { return blosc.Compress(nil, plain, p.Blosc) }
		add = func(chunk []byte, _ int) error { return wr.AddRawChunk(chunk, nil) }
		closeW = wr.Close
	} else {
		wr, err := frame.NewWriter(w, frame.Params{Chunk: f.opts.NewParams, ChunkSize: int(cs)})
		if err != nil {
			return err
		}
		compress, add, closeW = wr.Compress, wr.AddCompressed, wr.Close
	}
	// Chunks of zeros that the content knows of without reading (a
	// truncation that extended the file) are compressed once: a frame
	// records them as special zero chunks, which take no space.
	zr, _ := content.(pack.ZeroRanger)
	zeros := pack.ZeroChunks(compress)
	n := int((size + cs - 1) / cs)
	var plains bufs.Pool
	for first := 0; first < n; first += newBatch {
		err := ordered.Run(min(newBatch, n-first), func(k int) ([]byte, error) {
			off := int64(first+k) * cs
			ln := min(cs, size-off)
			if zr != nil && zr.IsZero(off, ln) {
				return zeros(ln)
			}
			b := plains.Get(int(ln))
			defer plains.Put(b) // the chunk compress returns is new memory
			if err := readFullAt(content, *b, off); err != nil {
				return nil, err
			}
			return compress(*b)
		}, func(k int, chunk []byte) error {
			return add(chunk, int(min(cs, size-int64(first+k)*cs)))
		})
		if err != nil {
			return err
		}
	}
	return closeW()
}

// newBatch is how many chunks writeNew has planned and in flight at a
// time, so that its memory does not grow with the number of chunks.
const newBatch = 1024

// maxChunks bounds the chunks of a file written through the mount (and so
// its plain size: 1 TiB with 1 MiB chunks): the offsets of every chunk
// are held while the file is written, and a Bloscpack file reserves ten
// times as many slots. A larger size gives EFBIG at once.
const maxChunks = 1 << 20

// newSuffix returns the disk suffix of a new file's format.
func (f NewFormat) suffix() string {
	if f == NewBlp {
		return ".blp"
	}
	return ".b2frame"
}

// cleanTemp removes temp and staging files left by earlier mounts (a
// crash during recompression leaves the original intact and a temp file
// beside it). Files of this mount carry its token and are kept.
func (f *FS) cleanTemp() {
	filepath.WalkDir(f.source, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && p != f.source && strings.HasSuffix(d.Name(), ".b2frame") {
			if _, err := os.Stat(filepath.Join(p, "chunks.b2frame")); err == nil {
				return filepath.SkipDir // a sparse frame holds no temp files
			}
		}
		if !d.IsDir() && hiddenName(d.Name()) && !strings.Contains(d.Name(), "-"+f.token+"-") && removeIfStale(p) {
			f.opts.Logger.Printf("removed stale temp file %s", p)
		}
		return nil
	})
}

// Write stores bytes in the stage.
func (h *blobHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n := h.n
	n.smu.Lock()
	defer n.smu.Unlock()
	if n.fs.stopping.Load() {
		return 0, syscall.EIO
	}
	if n.stage == nil {
		return 0, syscall.EBADF
	}
	if errno := n.checkArrayWrite(data, off); errno != 0 {
		return 0, errno
	}
	// A file larger than a commit may write (a frame that claims more
	// chunks than maxChunks) cannot be changed at all: its commit would
	// copy millions of chunk entries.
	if end := off + int64(len(data)); max(end, n.stage.size) > n.maxSize() {
		return 0, syscall.EFBIG
	}
	if off == 0 && len(data) > 0 {
		n.maybeStream()
	}
	w, err := n.stage.WriteAt(data, off)
	if w > 0 {
		n.touch()
	}
	if err != nil {
		return uint32(w), gofs.ToErrno(err)
	}
	return uint32(w), 0
}

// maybeStream starts a stream for a new, still empty .b2frame file whose
// first write is at its start (n.smu held). Without one the writes are
// staged as usual.
func (n *blobNode) maybeStream() {
	st := n.stage
	n.mu.Lock()
	created, format := n.created, n.format
	n.mu.Unlock()
	if st.stream != nil || st.broken != nil || st.size != 0 || len(st.dirty) > 0 ||
		!created || n.baseSize() != 0 || format != NewB2Frame || n.fs.opts.noStream {
		return
	}
	p, _ := n.diskPath()
	if p == "" {
		return
	}
	tmp, err := n.fs.tempFile(filepath.Dir(p), "tmp")
	if err != nil {
		return
	}
	s, err := newStreamer(tmp, frame.Params{Chunk: n.fs.opts.NewParams, ChunkSize: int(n.fs.opts.NewChunkSize)})
	if err != nil {
		tmp.remove()
		return
	}
	st.stream = s
}

// Flush commits when the last writable handle closes, so that close(2)
// reports a failed recompression (ENOSPC, EIO) to the writer.
func (h *blobHandle) Flush(ctx context.Context) syscall.Errno {
	if !h.writable {
		return 0
	}
	n := h.n
	n.smu.Lock()
	defer n.smu.Unlock()
	if n.writers > 1 && !n.fs.stopping.Load() {
		return 0
	}
	return n.commitErrno()
}

// Fsync commits: data confirmed by fsync survive a crash of the daemon.
func (h *blobHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	n := h.n
	n.smu.Lock()
	defer n.smu.Unlock()
	return n.commitErrno()
}

func (n *blobNode) commitErrno() syscall.Errno {
	if n.fs.stopping.Load() {
		return syscall.EIO // Shutdown dropped what this commit would have written
	}
	if err := n.commit(); err != nil {
		n.fs.opts.Logger.Printf("%v", err)
		return gofs.ToErrno(unwrapErrno(err))
	}
	return 0
}

// unwrapErrno returns the syscall error inside err (ENOSPC, …), or EIO.
func unwrapErrno(err error) error {
	var errno syscall.Errno
	for e := err; e != nil; {
		if x, ok := e.(syscall.Errno); ok {
			errno = x
			break
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	if errno == 0 {
		if pe, ok := err.(*os.PathError); ok {
			return pe.Err
		}
		return syscall.EIO
	}
	return errno
}

// maxSize returns the largest plain size the file may grow to through
// the mount: maxChunks chunks of its chunk size (n.smu held).
func (n *blobNode) maxSize() int64 {
	cs := n.fs.opts.NewChunkSize
	if n.view != nil && !(n.created && n.baseSize() == 0) {
		switch c := n.view.Container.(type) {
		case *pack.ChunkFile:
			return 1<<31 - 1 - blosc.ExtHeaderLen
		default:
			if s, ok := c.(pack.ChunkSizer); ok {
				cs = s.NewChunkSize()
			}
		}
	}
	return max(cs, 1) * maxChunks
}

// touch records that the content changed now (n.smu held): the file
// shows it as its modification and change times until its commit, which
// gives them to the new file.
func (n *blobNode) touch() {
	now := time.Now()
	n.mtime, n.ctime = now, now
}

// truncateStaged changes the size through a stage (n.smu held). Without
// an open writable handle the change is committed at once.
func (n *blobNode) truncateStaged(size int64) syscall.Errno {
	if errno := n.startStage(); errno != 0 {
		return errno
	}
	defer n.dropStageIfIdle() // without a writer, the stage lives for this call
	if n.view != nil && n.view.NPY && size != n.view.Size {
		p, _ := n.diskPath()
		n.fs.opts.Logger.Printf("%s: refused: resizing the .npy view of a .b2nd array from %d to %d bytes", p, n.view.Size, size)
		return syscall.EPERM
	}
	if size > n.stage.size && size > n.maxSize() {
		return syscall.EFBIG
	}
	if err := n.stage.truncate(size); err != nil {
		return gofs.ToErrno(err)
	}
	n.touch()
	if n.writers == 0 {
		return n.commitErrno()
	}
	return 0
}

var (
	_ = (gofs.FileWriter)((*blobHandle)(nil))
	_ = (gofs.FileFlusher)((*blobHandle)(nil))
	_ = (gofs.FileFsyncer)((*blobHandle)(nil))
	_ = fuse.FOPEN_KEEP_CACHE
)

// writeEmpty creates an empty container of format at path, atomically,
// with permission bits perm and, when root, the caller as owner.
func (f *FS) writeEmpty(path string, format NewFormat, perm uint32, ctx context.Context) error {
	f.createMu.Lock()
	if f.stopping.Load() {
		f.createMu.Unlock()
		return syscall.EIO // Shutdown has begun: nothing new is written
	}
	f.creating.Add(1)
	f.createMu.Unlock()
	defer f.creating.Done()
	dir := filepath.Dir(path)
	tf, err := f.tempFile(dir, "tmp")
	if err != nil {
		return err
	}
	defer tf.remove() // the name is gone after the link
	tmp := tf.File
	if err := f.writeNew(tmp, nil, 0, format); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(os.FileMode(perm)); err != nil {
		tmp.Close()
		return err
	}
	if caller, ok := fuse.FromContext(ctx); ok && os.Getuid() == 0 {
		tmp.Chown(int(caller.Uid), int(caller.Gid))
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil { // fails if path appeared meanwhile
		return err
	}
	return syncDir(dir)
}

// zeroReader reads zeros.
type zeroReader struct{}

func (zeroReader) ReadAt(p []byte, off int64) (int, error) { clear(p); return len(p), nil }

// IsZero reports that every range holds zeros (pack.ZeroRanger).
func (zeroReader) IsZero(off, n int64) bool { return true }

// copyMeta gives the new file of a recompression the original's
// permissions, owner and extended attributes.
func copyMeta(orig string, tmp *os.File) error {
	var st syscall.Stat_t
	if err := syscall.Stat(orig, &st); err != nil {
		return err
	}
	if err := tmp.Chmod(os.FileMode(st.Mode & 0o777)); err != nil {
		return err
	}
	if st.Mode&(syscall.S_ISUID|syscall.S_ISGID|syscall.S_ISVTX) != 0 {
		syscall.Fchmod(int(tmp.Fd()), st.Mode&0o7777)
	}
	if err := tmp.Chown(int(st.Uid), int(st.Gid)); err != nil && !os.IsPermission(err) {
		return err
	}
	sz, err := unix.Llistxattr(orig, nil)
	if err != nil || sz <= 0 {
		return nil // no attributes, or none supported
	}
	names := make([]byte, sz)
	if sz, err = unix.Llistxattr(orig, names); err != nil {
		return nil
	}
	for _, name := range strings.Split(strings.TrimRight(string(names[:sz]), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		vs, err := unix.Lgetxattr(orig, name, nil)
		if err != nil {
			continue
		}
		val := make([]byte, vs)
		if vs, err = unix.Lgetxattr(orig, name, val); err != nil {
			continue
		}
		if err := unix.Fsetxattr(int(tmp.Fd()), name, val[:vs], 0); err != nil && name[:5] == "user." {
			return fmt.Errorf("copying extended attribute %s: %w", name, err)
		}
	}
	return nil
}

// checkArrayWrite refuses writes to a .b2nd's .npy view that would change
// its header or its size: only the array's data can be written (n.smu
// held).
func (n *blobNode) checkArrayWrite(data []byte, off int64) syscall.Errno {
	if n.view == nil || !n.view.NPY {
		return 0
	}
	p, _ := n.diskPath()
	end := off + int64(len(data))
	if end > n.view.Size {
		n.fs.opts.Logger.Printf("%s: refused: a write at [%d,%d) past the end of the array's .npy view (%d bytes)", p, off, end, n.view.Size)
		return syscall.EFBIG
	}
	hdr := n.view.ReaderAt.(*frame.NPYView).Header()
	if off < int64(len(hdr)) {
		cur := hdr[off:min(end, int64(len(hdr)))]
		if string(cur) != string(data[:len(cur)]) {
			n.fs.opts.Logger.Printf("%s: refused: a write at [%d,%d) would change the .npy header (shape and dtype are fixed)", p, off, end)
			return syscall.EPERM
		}
	}
	return 0
}

// writeArray rewrites a .b2nd from its staged .npy view: the chunks that
// the written elements fall in are laid out again from the C-order data,
// the others are copied verbatim.
func (n *blobNode) writeArray(w *os.File, st *stage) error {
	fr := n.view.Container.(*frame.Frame)
	a := fr.Array()
	hl := int64(len(n.view.ReaderAt.(*frame.NPYView).Header()))
	is := int64(a.Itemsize)
	cb := a.ChunkBytes()
	var dirty []pack.Range
	seen := map[int64]bool{}
	for _, r := range st.dirty {
		s, e := max(r.Off-hl, 0), r.Off+r.Len-hl
		if e <= s {
			continue // only header bytes, unchanged
		}
		a.ChunksTouched(s/is, (e+is-1)/is, func(c int64) {
			if !seen[c] {
				seen[c] = true
				dirty = append(dirty, pack.Range{Off: c * cb, Len: cb})
			}
		})
	}
	data := io.NewSectionReader(st, hl, st.size-hl)
	return pack.Rewrite(w, fr, a.NewRawChunkReader(data), fr.Size(), dirty)
}

var _ = (gofs.FileAllocater)((*blobHandle)(nil))

// Allocate serves fallocate(2) on a compressed file. There is no space
// to reserve: a compressed file is written anew at its commit. Mode 0
// extends the file to off+size when it is shorter (the new bytes are
// zeros, as a truncation makes them); FALLOC_FL_KEEP_SIZE does nothing.
// Other modes (punching holes, zeroing, collapsing or inserting ranges)
// give EOPNOTSUPP.
func (h *blobHandle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if !h.writable {
		return syscall.EBADF
	}
	if mode&^unix.FALLOC_FL_KEEP_SIZE != 0 {
		return syscall.EOPNOTSUPP
	}
	end := off + size
	if end < off || end > 1<<62 {
		return syscall.EFBIG
	}
	n := h.n
	n.smu.Lock()
	defer n.smu.Unlock()
	if n.stage == nil {
		return syscall.EBADF
	}
	if mode&unix.FALLOC_FL_KEEP_SIZE != 0 || int64(end) <= n.stage.size {
		return 0
	}
	if n.view != nil && n.view.NPY {
		return syscall.EFBIG // an array's view has a fixed size
	}
	if int64(end) > n.maxSize() {
		return syscall.EFBIG
	}
	if err := n.stage.truncate(int64(end)); err != nil {
		return gofs.ToErrno(err)
	}
	n.touch()
	return 0
}
