package writes

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pyBloscpack decodes a Bloscpack file on its own, with python-blosc
// (c-blosc 1.x) for the chunks, following FORMATS §9: the 32-byte
// header, the optional metadata section, the offsets table, and every
// chunk followed by its checksum. It walks the chunks both through the
// offsets and back to back (as bloscpack's own reader does), checks that
// the two agree, verifies every checksum and chunk size, and writes the
// concatenated plain bytes to argv[2]. It prints "nchunks chunk_size
// last_chunk checksum".
const pyBloscpack = `
import hashlib, struct, sys, zlib
import blosc
KINDS = [(None, 0), ('adler32', 4), ('crc32', 4), ('md5', 16), ('sha1', 20),
         ('sha224', 28), ('sha256', 32), ('sha384', 48), ('sha512', 64)]
def digest(kind, data):
    if kind == 'adler32':
        return struct.pack('<I', zlib.adler32(data) & 0xffffffff)
    if kind == 'crc32':
        return struct.pack('<I', zlib.crc32(data) & 0xffffffff)
    return hashlib.new(kind, data).digest()
path, out = sys.argv[1], sys.argv[2]
b = open(path, 'rb').read()
assert b[:4] == b'blpk', 'bad magic %r' % b[:4]
version, options, cks, typesize = b[4], b[5], b[6], b[7]
assert version == 3, 'format version %d' % version
assert options & ~3 == 0, 'options %#x' % options
chunk_size, last_chunk, nchunks, max_app = struct.unpack_from('<iiqq', b, 8)
assert nchunks >= 1, 'nchunks %d' % nchunks
pos = 32
if options & 2:
    assert b[pos:pos + 8] == b'JSON\0\0\0\0', 'metadata magic %r' % b[pos:pos + 8]
    meta_cks, meta_codec = b[pos + 9], b[pos + 10]
    meta_size, meta_max, meta_comp = struct.unpack_from('<III', b, pos + 12)
    data = b[pos + 32:pos + 32 + meta_comp]
    kind, size = KINDS[meta_cks]
    if size:
        at = pos + 32 + meta_max
        assert b[at:at + size] == digest(kind, data), 'metadata checksum'
    if meta_codec == 1:
        data = zlib.decompress(data)
    assert len(data) == meta_size, 'metadata size'
    pos += 32 + meta_max + size
assert options & 1, 'no offsets table'
offsets = struct.unpack_from('<%dq' % (nchunks + max_app), b, pos)
assert all(o == -1 for o in offsets[nchunks:]), 'spare offset slots are not -1'
kind, csize = KINDS[cks]
walk = pos + 8 * (nchunks + max_app)
plain = bytearray()
for i in range(nchunks):
    off = offsets[i]
    assert off == walk, 'chunk %d: offsets say %d, walking the chunks says %d' % (i, off, walk)
    version, flags, ts, _ = b[off:off + 4]
    nbytes, blocksize, cbytes = struct.unpack_from('<iii', b, off + 4)
    chunk = b[off:off + cbytes]
    assert len(chunk) == cbytes, 'chunk %d truncated' % i
    if csize:
        assert b[off + cbytes:off + cbytes + csize] == digest(kind, chunk), 'chunk %d: %s mismatch' % (i, kind)
    d = blosc.decompress(chunk)
    want = chunk_size if i < nchunks - 1 else last_chunk
    assert len(d) == nbytes == want, 'chunk %d: %d bytes, header nbytes %d, want %d' % (i, len(d), nbytes, want)
    plain += d
    walk = off + cbytes + csize
open(out, 'wb').write(plain)
print(nchunks, chunk_size, last_chunk, kind)
`

// TestInteropBloscpack writes Bloscpack files through the mount (new
// files with --new-format blp, and patches and appends to files written
// by bloscpack) and has python3-blosc decode every chunk of each.
func TestInteropBloscpack(t *testing.T) {
	setup.Require(t)
	requireTool(t, "cp", "sh")
	py := python(t, "blosc")
	root, src, mnt := newDirs(t)
	want := map[string][]byte{} // disk name → plain content

	for _, fx := range []struct{ fixture, disk string }{
		{"default_cli_log.blp", "cli_log.blp"},     // 3 × 1 MiB, blosclz, adler32
		{"ndarray_f64_2d.blp", "nd2d.blp"},         // metadata section
		{"checksum_sha256.blp", "sha256.blp"},      // another checksum kind
		{"typesize4.blp", "ts4.blp"},               // appended to
		{"noshuffle_ts8.blp", "noshuffle_ts8.blp"}, // no shuffle
	} {
		copyFile(t, fixture(t, fx.fixture), filepath.Join(src, fx.disk))
		want[fx.disk] = unpack(t, filepath.Join(src, fx.disk))
	}
	dataFile := func(b []byte) string {
		f, err := os.CreateTemp(root, "data-*")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		return f.Name()
	}
	patchThrough := func(m *mount, disk string, off int, p []byte) {
		t.Helper()
		view := strings.TrimSuffix(disk, ".blp")
		runPy(t, python(t), pyPatch, m.Path(view), strconv.Itoa(off), dataFile(p))
		want[disk] = patch(want[disk], off, p)
	}

	// Mount 1: new files as Bloscpack with the mount's default codec
	// (zstd) in 256 KiB chunks, and patches of bloscpack's files.
	m := mountFG(t, src, mnt, "--new-format", "blp", "--chunk-size", "256KiB")
	big := seriesBytes(3<<20+4321, 8)
	in := filepath.Join(root, "big.dat")
	if err := os.WriteFile(in, big, 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "cp", in, m.Path("new_zstd"))
	want["new_zstd.blp"] = big
	mustRun(t, "sh", "-c", `printf 'one line\n' > "$1"`, "sh", m.Path("tiny"))
	want["tiny.blp"] = []byte("one line\n")
	patchThrough(m, "cli_log.blp", 1<<20+777, bytes.Repeat([]byte("patched "), 500))
	patchThrough(m, "nd2d.blp", 100000-50, seriesBytes(400, 9)) // across chunks 0 and 1
	patchThrough(m, "sha256.blp", 5000, seriesBytes(3000, 10))
	app := seriesBytes(70000, 11) // fills the last chunk and adds two
	mustRun(t, "sh", "-c", `cat "$1" >> "$2"`, "sh", dataFile(app), m.Path("ts4"))
	want["ts4.blp"] = append(want["ts4.blp"], app...)
	patchThrough(m, "noshuffle_ts8.blp", 0, []byte("head"))
	m.MustUnmount(t)

	// Mount 2: other parameters for new files.
	m = mountFG(t, src, mnt, "--new-format", "blp", "--codec", "lz4", "--clevel", "9", "--filter", "bitshuffle",
		"--typesize", "4", "--chunk-size", "100KiB")
	mustRun(t, "cp", in, m.Path("new_lz4"))
	want["new_lz4.blp"] = big
	m.MustUnmount(t)

	for disk, w := range want {
		t.Run(disk, func(t *testing.T) {
			p := filepath.Join(src, disk)
			if in := infoOf(t, p); in.Format != "bloscpack" {
				t.Fatalf("%s is stored as %s, want bloscpack", disk, in.Format)
			}
			out := filepath.Join(root, disk+".plain")
			desc := runPy(t, py, pyBloscpack, p, out)
			got := readFile(t, out)
			if !bytes.Equal(got, w) {
				t.Errorf("%s decoded chunk by chunk by python-blosc: %s", disk, firstDiff(got, w))
			}
			t.Logf("%s: nchunks chunk_size last_chunk checksum = %s", disk, strings.TrimSpace(desc))
		})
	}
}

// TestNewFileFlags checks that files created through the mount get the
// mount's --codec, --clevel, --filter, --typesize and --chunk-size, in
// both new-file formats, whether written by cp or grown from an empty
// file later.
func TestNewFileFlags(t *testing.T) {
	setup.Require(t)
	requireTool(t, "cp", "touch")
	root, src, mnt := newDirs(t)
	data := seriesBytes(1<<20+12345, 12)
	in := filepath.Join(root, "in.dat")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"b2frame", "blp"} {
		t.Run(format, func(t *testing.T) {
			m := mountFG(t, src, mnt, "--new-format", format, "--codec", "lz4", "--clevel", "9",
				"--filter", "bitshuffle", "--typesize", "4", "--chunk-size", "100KiB")
			mustRun(t, "cp", in, m.Path("copied_"+format))
			mustRun(t, "touch", m.Path("grown_"+format))
			if err := os.WriteFile(m.Path("grown_"+format), data, 0o644); err != nil {
				t.Fatal(err)
			}
			m.MustUnmount(t)
			for _, name := range []string{"copied_", "grown_"} {
				p := filepath.Join(src, name+format+"."+format)
				in := infoOf(t, p)
				want := info{Format: in.Format, Codec: "lz4", Clevel: in.Clevel, Typesize: 4, Filters: "bitshuffle", ChunkSize: 100 << 10, Checksum: in.Checksum}
				if format == "b2frame" {
					want.Format, want.Clevel = "b2frame", 9 // Blosc1 chunks of a .blp do not record the level
				} else {
					want.Format, want.Checksum = "bloscpack", "adler32"
				}
				if in.params() != want.params() {
					t.Errorf("%s:\n got %s\nwant %s", filepath.Base(p), in.params(), want.params())
				}
				if got := unpack(t, p); !bytes.Equal(got, data) {
					t.Errorf("%s: %s", filepath.Base(p), firstDiff(got, data))
				}
			}
		})
	}
}
