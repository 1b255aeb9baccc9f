package writes

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tracked is a compressed file of the source whose content the test
// knows at every step.
type tracked struct {
	view, disk string
	want       []byte
	params     string // info.params() it must keep
	format     string
}

// basicEnv is the state TestBasicWrites shares among its steps.
type basicEnv struct {
	t              *testing.T
	root, src, mnt string
	m              *mount
	files          map[string]*tracked // by view name
}

// addFixture copies a fixture into the source as disk and tracks it.
func (e *basicEnv) addFixture(fx, disk string) *tracked {
	e.t.Helper()
	p := filepath.Join(e.src, disk)
	copyFile(e.t, fixture(e.t, fx), p)
	view, _ := strings.CutSuffix(disk, filepath.Ext(disk))
	in := infoOf(e.t, p)
	tr := &tracked{view: view, disk: disk, want: unpack(e.t, p), params: in.params(), format: in.Format}
	e.files[view] = tr
	return tr
}

// disk returns the current bytes of a tracked file's container.
func (e *basicEnv) diskBytes(t testing.TB, tr *tracked) []byte {
	t.Helper()
	return readFile(t, filepath.Join(e.src, tr.disk))
}

// check verifies a tracked file after a change: the container on disk
// has its format and parameters, decodes to the expected content, and
// the mount shows that content under the view name.
func (e *basicEnv) check(t *testing.T, tr *tracked) {
	t.Helper()
	p := filepath.Join(e.src, tr.disk)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: the container is gone from the source: %v", tr.disk, err)
	}
	if got := infoOf(t, p).params(); got != tr.params {
		t.Errorf("%s: stored parameters changed:\n got %s\nwant %s", tr.disk, got, tr.params)
	}
	if got := unpack(t, p); !bytes.Equal(got, tr.want) {
		t.Errorf("%s: bloscfs unpack of the source: %s", tr.disk, firstDiff(got, tr.want))
	}
	if e.m != nil {
		got, err := os.ReadFile(e.m.Path(tr.view))
		if err != nil {
			t.Errorf("reading %s through the mount: %v", tr.view, err)
		} else if !bytes.Equal(got, tr.want) {
			t.Errorf("%s through the mount: %s", tr.view, firstDiff(got, tr.want))
		}
	}
}

// patch returns b with p written at off (zero-filling a gap).
func patch(b []byte, off int, p []byte) []byte {
	out := slices.Clone(b)
	if end := off + len(p); end > len(out) {
		out = append(out, make([]byte, end-len(out))...)
	}
	copy(out[off:], p)
	return out
}

// resized returns b cut or zero-extended to n bytes.
func resized(b []byte, n int) []byte {
	if n <= len(b) {
		return slices.Clone(b[:n])
	}
	return append(slices.Clone(b), make([]byte, n-len(b))...)
}

// pyPatch writes the content of a data file at off of path opened 'r+b'
// with Debian's python3.
const pyPatch = `
import sys
path, off = sys.argv[1], int(sys.argv[2])
data = open(sys.argv[3], 'rb').read()
with open(path, 'r+b') as f:
    f.seek(off)
    f.write(data)
`

// pyMmap writes the content of a data file at off of path through a
// MAP_SHARED mapping, then
// msyncs and unmaps.
const pyMmap = `
import mmap, sys
path, off = sys.argv[1], int(sys.argv[2])
data = open(sys.argv[3], 'rb').read()
with open(path, 'r+b') as f:
    m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    m[off:off + len(data)] = data
    m.flush()
    m.close()
`

// npPatch sets float64 elements [lo, hi) of path to -1.5*k with a numpy
// memmap (MAP_SHARED), flushes and drops it.
const npPatch = `
import sys
import numpy as np
path, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
a = np.memmap(path, dtype='<f8', mode='r+')
a[lo:hi] = np.arange(hi - lo, dtype='<f8') * -1.5
a.flush()
del a
`

// npyPatch sets float64 elements [lo, hi) of an .npy file to -1.5*k
// through np.load(mmap_mode='r+').
const npyPatch = `
import sys
import numpy as np
path, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
a = np.load(path, mmap_mode='r+')
a[lo:hi] = np.arange(hi - lo, dtype='<f8') * -1.5
a.flush()
del a
`

// npyHeaderLen returns the length of the header of an .npy file.
func npyHeaderLen(t testing.TB, b []byte) int {
	t.Helper()
	if len(b) < 12 || string(b[:6]) != "\x93NUMPY" {
		t.Fatalf("not an .npy file")
	}
	if b[6] == 1 {
		return 10 + int(binary.LittleEndian.Uint16(b[8:]))
	}
	return 12 + int(binary.LittleEndian.Uint32(b[8:]))
}

// TestBasicWrites writes through a real mount with real programs and
// checks the source after every step, after an unmount and after a
// remount.
func TestBasicWrites(t *testing.T) {
	setup.Require(t)
	requireTool(t, "cp", "sh", "truncate", "ls")
	py := python(t)
	pyNP := python(t, "numpy")
	root, src, mnt := newDirs(t)
	e := &basicEnv{t: t, root: root, src: src, mnt: mnt, files: map[string]*tracked{}}

	cliLog := e.addFixture("default_cli_log.blp", "cli_log.blp")        // 3 × 1 MiB, blosclz
	ts4 := e.addFixture("typesize4.blp", "ts4.blp")                     // 3 × 50000
	lz4 := e.addFixture("codec_lz4_l5.b2frame", "lz4.b2frame")          // 4 × 64 KiB
	trunc := e.addFixture("codec_lz4_l5.b2frame", "replace_me.b2frame") // for >
	nd := e.addFixture("ndarray_f64_2d.blp", "nd2d.blp")                // metadata section
	meta := e.addFixture("metalayers.b2frame", "meta.b2frame")          // metalayers
	shorter := e.addFixture("typesize8.blp", "shorter.blp")
	longer := e.addFixture("codec_zstd_l5.b2frame", "longer.b2frame")
	zeroF := e.addFixture("codec_zlib_l1.b2frame", "zero.b2frame")
	zeroB := e.addFixture("typesize2.blp", "zero_blp.blp")
	ext := e.addFixture("typesize2.b2frame", "extend.b2frame")
	mm := e.addFixture("codec_zstd_l1.b2frame", "mmap.b2frame")
	owned := e.addFixture("checksum_crc32.blp", "owned.blp")
	applog := e.addFixture("codec_lz4_l5.b2frame", "applog.b2frame")
	copyFile(t, fixture(t, "sparse_frame.b2frame"), filepath.Join(src, "sparse.b2frame"))
	readOnly := map[string][]byte{"sparse": unpack(t, filepath.Join(src, "sparse.b2frame"))}
	copyFile(t, fixture(t, "nd_f64_1d.b2nd"), filepath.Join(src, "array.b2nd"))
	arrInfo := infoOf(t, filepath.Join(src, "array.b2nd"))
	arr := &tracked{view: "array.npy", disk: "array.b2nd", want: unpack(t, filepath.Join(src, "array.b2nd")),
		params: arrInfo.params(), format: arrInfo.Format}
	e.files[arr.view] = arr

	e.m = mountBG(t, src, mnt)

	// step runs one change; before and after are the container bytes
	// around it, for the chunk comparisons.
	step := func(name string, tr *tracked, change func(t *testing.T), keep []int) {
		t.Run(name, func(t *testing.T) {
			before := e.diskBytes(t, tr)
			change(t)
			e.check(t, tr)
			if keep != nil {
				sameChunks(t, tr.disk, before, e.diskBytes(t, tr), keep)
			}
		})
	}

	t.Run("cp new file", func(t *testing.T) {
		data := seriesBytes(5<<20+12345, 1)
		in := filepath.Join(root, "in.dat")
		if err := os.WriteFile(in, data, 0o644); err != nil {
			t.Fatal(err)
		}
		mustRun(t, "cp", in, e.m.Path("copied"))
		tr := &tracked{view: "copied", disk: "copied.b2frame", want: data,
			params: info{Format: "b2frame", Codec: "zstd", Clevel: 5, Typesize: 8, Filters: "shuffle", ChunkSize: 1 << 20}.params()}
		e.files["copied"] = tr
		e.check(t, tr)
		if in := infoOf(t, filepath.Join(src, "copied.b2frame")); in.Chunks != 6 {
			t.Errorf("copied.b2frame has %d chunks, want 6 of 1 MiB", in.Chunks)
		}
		ls := strings.Fields(string(mustRun(t, "ls", "-a", mnt)))
		if !slices.Contains(ls, "copied") || slices.Contains(ls, "copied.b2frame") {
			t.Errorf("ls -a of the mount: %v; want copied (not copied.b2frame)", ls)
		}
	})

	t.Run("shell redirections", func(t *testing.T) {
		mustRun(t, "sh", "-c", `printf 'first line\n' > "$1"`, "sh", e.m.Path("notes"))
		mustRun(t, "sh", "-c", `printf 'second line\n' >> "$1"`, "sh", e.m.Path("notes"))
		tr := &tracked{view: "notes", disk: "notes.b2frame", want: []byte("first line\nsecond line\n"),
			params: info{Format: "b2frame", Codec: "zstd", Clevel: 5, Typesize: 8, Filters: "shuffle", ChunkSize: 1 << 20}.params()}
		e.files["notes"] = tr
		e.check(t, tr)
	})

	app := seriesBytes(40000, 7)
	step(">> appends to a .blp (O_APPEND)", ts4, func(t *testing.T) {
		in := filepath.Join(root, "append.dat")
		if err := os.WriteFile(in, app, 0o644); err != nil {
			t.Fatal(err)
		}
		mustRun(t, "sh", "-c", `cat "$1" >> "$2"`, "sh", in, e.m.Path(ts4.view))
		ts4.want = append(ts4.want, app...)
	}, []int{0, 1})

	step("> replaces a .b2frame (O_TRUNC)", trunc, func(t *testing.T) {
		mustRun(t, "sh", "-c", `printf 'replaced\n' > "$1"`, "sh", e.m.Path(trunc.view))
		trunc.want = []byte("replaced\n")
	}, nil)

	hashes := bytes.Repeat([]byte("#"), 3000)
	step("python r+b patch of a .blp", cliLog, func(t *testing.T) {
		off := 1<<20 + 4096
		runPy(t, py, pyPatch, e.m.Path(cliLog.view), strconv.Itoa(off), e.dataFile(t, hashes))
		cliLog.want = patch(cliLog.want, off, hashes)
	}, []int{0, 2})

	step("python r+b patch of a .b2frame", lz4, func(t *testing.T) {
		off, p := 2*65536+100, seriesBytes(500, 99)
		runPy(t, py, pyPatch, e.m.Path(lz4.view), strconv.Itoa(off), e.dataFile(t, p))
		lz4.want = patch(lz4.want, off, p)
	}, []int{0, 1, 3})

	step("numpy memmap patch of a .blp with metadata", nd, func(t *testing.T) {
		runPy(t, pyNP, npPatch, e.m.Path(nd.view), "5", "15")
		p := make([]byte, 80)
		for k := 0; k < 10; k++ {
			binary.LittleEndian.PutUint64(p[8*k:], math.Float64bits(float64(k)*-1.5))
		}
		nd.want = patch(nd.want, 40, p)
	}, []int{1, 2})

	step("python r+b patch of a .b2frame with metalayers", meta, func(t *testing.T) {
		p := []byte("metalayers stay!")
		runPy(t, py, pyPatch, e.m.Path(meta.view), "70000", e.dataFile(t, p))
		meta.want = patch(meta.want, 70000, p)
	}, []int{0})

	step("truncate shorter", shorter, func(t *testing.T) {
		mustRun(t, "truncate", "-s", "60000", e.m.Path(shorter.view))
		shorter.want = resized(shorter.want, 60000)
	}, []int{0})

	step("truncate longer", longer, func(t *testing.T) {
		mustRun(t, "truncate", "-s", "500000", e.m.Path(longer.view))
		longer.want = resized(longer.want, 500000)
	}, []int{0, 1, 2})

	for _, tr := range []*tracked{zeroF, zeroB} {
		t.Run("truncate to zero and grow again "+tr.disk, func(t *testing.T) {
			mustRun(t, "truncate", "-s", "0", e.m.Path(tr.view))
			tr.want = nil
			p := filepath.Join(src, tr.disk)
			if got := unpack(t, p); len(got) != 0 {
				t.Errorf("%s after truncate -s 0 decodes to %d bytes", tr.disk, len(got))
			}
			if in := infoOf(t, p); in.Format != tr.format {
				t.Errorf("%s after truncate -s 0: format %s, want %s", tr.disk, in.Format, tr.format)
			}
			if st, err := os.Stat(e.m.Path(tr.view)); err != nil || st.Size() != 0 {
				t.Errorf("stat %s through the mount after truncate -s 0: %v, %v", tr.view, st, err)
			}
			// Data written again get the original parameters.
			d := seriesBytes(100000, 3)
			runPy(t, py, pyPatch, e.m.Path(tr.view), "0", e.dataFile(t, d))
			tr.want = d
			e.check(t, tr)
		})
	}

	step("write past the end extends with a hole", ext, func(t *testing.T) {
		d := seriesBytes(10000, 5)
		off := len(ext.want) + 5000
		runPy(t, py, pyPatch, e.m.Path(ext.view), strconv.Itoa(off), e.dataFile(t, d))
		ext.want = patch(ext.want, off, d)
	}, []int{0})

	step("python mmap MAP_SHARED write, msync, close", mm, func(t *testing.T) {
		p := bytes.Repeat([]byte("M"), 100)
		runPy(t, py, pyMmap, e.m.Path(mm.view), "70000", e.dataFile(t, p))
		mm.want = patch(mm.want, 70000, p)
	}, []int{0, 2, 3})

	// A process that keeps a file open for appending while its name is
	// stat'ed: the second append must land after the first. (The kernel
	// keeps the name of a compressed file for an hour, so that the stat
	// asks the daemon nothing: fs's TestAppendAcrossLookup mounts with
	// shorter timeouts and waits for the kernel to look the name up
	// again, whose reply must carry the staged size.)
	step("O_APPEND writer, its name stat'ed between appends", applog, func(t *testing.T) {
		f, err := os.OpenFile(e.m.Path(applog.view), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		a, b := bytes.Repeat([]byte("A"), 1000), bytes.Repeat([]byte("B"), 1000)
		if _, err := f.Write(a); err != nil {
			t.Fatal(err)
		}
		want := int64(len(applog.want) + len(a))
		if st, err := os.Stat(e.m.Path(applog.view)); err != nil || st.Size() != want {
			t.Errorf("stat by name after an append (file still open): size %d, %v; want %d", st.Size(), err, want)
		}
		if st, err := f.Stat(); err != nil || st.Size() != want {
			t.Errorf("fstat after that stat: size %d, %v; want %d", st.Size(), err, want)
		}
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		applog.want = append(append(applog.want, a...), b...)
	}, []int{0, 1, 2})

	t.Run("mode, owner and xattrs survive a rewrite", func(t *testing.T) {
		v := e.m.Path(owned.view)
		if err := os.Chmod(v, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(v, 1234, 2345); err != nil {
			t.Fatal(err)
		}
		// On the source: setxattr through the mount is TestNamespace's.
		p := filepath.Join(src, owned.disk)
		if err := unix.Setxattr(p, "user.test", []byte("hello"), 0); err != nil {
			t.Fatalf("setxattr on the source: %v", err)
		}
		var before syscall.Stat_t
		if err := syscall.Stat(p, &before); err != nil {
			t.Fatal(err)
		}
		old := readFile(t, p)
		d := bytes.Repeat([]byte{0xA5}, 2000)
		runPy(t, py, pyPatch, v, "40000", e.dataFile(t, d)) // in chunk 1 of 5
		owned.want = patch(owned.want, 40000, d)
		e.check(t, owned)
		sameChunks(t, owned.disk, old, readFile(t, p), []int{0, 2, 3, 4})
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Ino == before.Ino {
			t.Logf("note: %s kept its inode (rewritten in place?)", p)
		}
		if st.Mode&0o7777 != 0o640 || st.Uid != 1234 || st.Gid != 2345 {
			t.Errorf("%s after the rewrite: mode %o uid %d gid %d, want 640 1234 2345", p, st.Mode&0o7777, st.Uid, st.Gid)
		}
		buf := make([]byte, 64)
		n, err := unix.Getxattr(p, "user.test", buf)
		if err != nil || string(buf[:n]) != "hello" {
			t.Errorf("user.test of %s after the rewrite: %q, %v; want hello", p, buf[:max(n, 0)], err)
		}
	})

	t.Run("sparse frames are read-only", func(t *testing.T) {
		for _, flags := range []int{unix.O_WRONLY, unix.O_RDWR, unix.O_RDONLY | unix.O_TRUNC} {
			fd, err := unix.Open(e.m.Path("sparse"), flags, 0)
			if err == nil {
				unix.Close(fd)
			}
			if err != unix.EROFS {
				t.Errorf("open sparse flags %#x: %v, want EROFS", flags, err)
			}
		}
		if err := os.Truncate(e.m.Path("sparse"), 10); errnoOf(err) != unix.EROFS {
			t.Errorf("truncate sparse: %v, want EROFS", err)
		}
		if left := waitNoHidden(t, src, 2*time.Second); len(left) > 0 {
			t.Errorf("refused writes to a sparse frame left staging files: %v", left)
		}
	})

	step("numpy mmap r+ of a .b2nd's .npy view", arr, func(t *testing.T) {
		runPy(t, pyNP, npyPatch, e.m.Path(arr.view), "100", "110")
		hl := npyHeaderLen(t, arr.want)
		p := make([]byte, 80)
		for k := 0; k < 10; k++ {
			binary.LittleEndian.PutUint64(p[8*k:], math.Float64bits(float64(k)*-1.5))
		}
		arr.want = patch(arr.want, hl+800, p)
		// The kernel writes back the whole first page of the mapping:
		// .npy bytes [0, 4096) are elements [0, 496), chunks 0 and 1.
	}, []int{2, 3})

	t.Run("a .b2nd's .npy header and size are fixed", func(t *testing.T) {
		f, err := os.OpenFile(e.m.Path(arr.view), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("XXXX"), 0); errnoOf(err) != unix.EPERM {
			t.Errorf("a write over the .npy magic: %v, want EPERM", err)
		}
		if _, err := f.WriteAt([]byte("X"), int64(len(arr.want))); errnoOf(err) != unix.EFBIG {
			t.Errorf("a write past the end of the .npy view: %v, want EFBIG", err)
		}
		if err := f.Truncate(int64(len(arr.want)) + 8); err == nil {
			t.Errorf("ftruncate of the .npy view to a new size succeeded")
		}
		if err := f.Close(); err != nil {
			t.Errorf("close after refused writes: %v", err)
		}
		// truncate(2) by path, with no file open: refused, and nothing
		// may stay behind in the source.
		for _, size := range []int64{0, 10, int64(len(arr.want)) + 8} {
			if err := os.Truncate(e.m.Path(arr.view), size); err == nil {
				t.Errorf("truncate -s %d of the .npy view succeeded", size)
			} else if en := errnoOf(err); en != unix.EPERM && en != unix.EFBIG {
				t.Errorf("truncate -s %d of the .npy view: %v, want EPERM or EFBIG", size, err)
			}
		}
		if left := waitNoHidden(t, src, 3*time.Second); len(left) > 0 {
			t.Errorf("a refused truncate(2) of a .b2nd's .npy view (no file open) left staging files in the source: %v", left)
		}
		if _, err := os.ReadFile(e.m.Path(arr.view)); err != nil {
			t.Errorf("reading the .npy view after refused truncate(2) calls: %v", err)
		}
		e.check(t, arr)
	})

	// What the source holds survives the unmount and a new mount.
	e.m.MustUnmount(t)
	e.m = nil
	if left := hiddenIn(src); len(left) > 0 {
		t.Errorf("temp files left in the source after the unmount: %v", left)
	}
	t.Run("after unmount", func(t *testing.T) {
		for _, tr := range e.files {
			e.check(t, tr)
		}
	})
	e.m = mountBG(t, src, mnt)
	t.Run("after remount", func(t *testing.T) {
		var want []string
		for _, tr := range e.files {
			e.check(t, tr)
			want = append(want, tr.view)
		}
		for view, content := range readOnly {
			want = append(want, view)
			if got, err := os.ReadFile(e.m.Path(view)); err != nil || !bytes.Equal(got, content) {
				t.Errorf("%s through the mount: %v, %s", view, err, firstDiff(got, content))
			}
		}
		sort.Strings(want)
		got := strings.Fields(string(mustRun(t, "ls", "-A", mnt)))
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("ls -A of the mount:\n got %v\nwant %v", got, want)
		}
	})
	e.m.MustUnmount(t)
}

// dataFile stores b in a fresh file outside the mount for a program to
// read, and returns its path.
func (e *basicEnv) dataFile(t testing.TB, b []byte) string {
	t.Helper()
	f, err := os.CreateTemp(e.root, "data-*")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}
