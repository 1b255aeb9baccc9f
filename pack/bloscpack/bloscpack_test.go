package bloscpack

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/pack"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func openFile(t testing.TB, path string) (*File, []byte) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(bytes.NewReader(raw), int64(len(raw)), filepath.Base(path), nil, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return f, raw
}

func readAll(t testing.TB, r io.ReaderAt, size int64) []byte {
	t.Helper()
	out := make([]byte, size)
	if n, err := r.ReadAt(out, 0); int64(n) != size || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt: %d bytes, %v", n, err)
	}
	return out
}

func blpFixtures(t testing.TB) []fixtures.Fixture {
	all, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	var out []fixtures.Fixture
	for _, f := range all {
		if f.Kind == "blp" {
			out = append(out, f)
		}
	}
	if len(out) < 30 {
		t.Fatalf("only %d blp fixtures", len(out))
	}
	return out
}

// TestFixtures reads every .blp fixture bit-exact, through pack.Open too.
func TestFixtures(t *testing.T) {
	for _, fx := range blpFixtures(t) {
		t.Run(fx.Name, func(t *testing.T) {
			f, raw := openFile(t, fx.Path)
			if f.Size() != fx.PlainSize {
				t.Fatalf("Size %d, want %d", f.Size(), fx.PlainSize)
			}
			got := readAll(t, f, f.Size())
			if sha(got) != fx.PlainSHA {
				t.Fatalf("sha256 %s, want %s", sha(got), fx.PlainSHA)
			}
			// Byte-wise reads are slow under -race: there, files up to
			// 64 KiB (make purego reads every file so).
			if f.Size() <= 64<<10 || !(testkit.RaceEnabled || testing.Short()) {
				if err := iotest.TestReader(io.NewSectionReader(f, 0, f.Size()), got); err != nil {
					t.Fatal(err)
				}
			}
			c, err := pack.Open(bytes.NewReader(raw), int64(len(raw)), fx.Name, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.Info().Format != "bloscpack" || !bytes.Equal(readAll(t, c, c.Size()), got) {
				t.Fatal("pack.Open view differs")
			}
			if want := fx.Params["metadata"]; want == "1" && f.Meta == nil {
				t.Fatal("metadata section not exposed")
			}
			in := f.Info()
			if want := fx.Params["checksum"]; want != "" && in.Checksum != want {
				t.Fatalf("checksum %q, want %q", in.Checksum, want)
			}
		})
	}
}

// TestRandomReads compares random ReadAt calls with the full decode.
func TestRandomReads(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"default_api_f64.blp", "no_offsets.blp", "codec_zstd.blp", "odd_size_ts8.blp"} {
		f, _ := openFile(t, filepath.Join(fixtures.Dir(), name))
		full := readAll(t, f, f.Size())
		for k := 0; k < 300; k++ {
			off := r.Int64N(f.Size() + 10)
			n := r.IntN(200000)
			buf := make([]byte, n)
			got, err := f.ReadAt(buf, off)
			wantN := int(max(0, min(int64(n), f.Size()-off)))
			if got != wantN || (wantN < n && err != io.EOF) || (wantN == n && err != nil) {
				t.Fatalf("%s ReadAt(%d, %d) = %d, %v", name, off, n, got, err)
			}
			if !bytes.Equal(buf[:got], full[min(off, f.Size()):min(off, f.Size())+int64(got)]) {
				t.Fatalf("%s ReadAt(%d, %d) differs", name, off, n)
			}
		}
	}
}

// TestInvalid names the expected error of every invalid .blp fixture.
func TestInvalid(t *testing.T) {
	want := map[string]struct {
		err     error
		mention string
	}{
		"invalid_blp_bad_checksum.blp":    {pack.ErrChecksum, "chunk 0"},
		"invalid_blp_bad_magic.blp":       {pack.ErrFormat, "bad magic"},
		"invalid_blp_format_version.blp":  {pack.ErrUnsupported, "format version 99"},
		"invalid_blp_huge_nchunks.blp":    {pack.ErrFormat, "nchunks 1099511627776"},
		"invalid_blp_offset_past_eof.blp": {pack.ErrFormat, "offsets[1]=7597 points past the end"},
		"invalid_blp_truncated.blp":       {pack.ErrFormat, "is truncated"},
	}
	all, err := fixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, fx := range all {
		if !fx.IsInvalid || !strings.HasSuffix(fx.Name, ".blp") {
			continue
		}
		seen++
		w, ok := want[fx.Name]
		if !ok {
			t.Errorf("%s: no expectation", fx.Name)
			continue
		}
		raw, _ := os.ReadFile(fx.Path)
		f, err := Open(bytes.NewReader(raw), int64(len(raw)), fx.Name, nil, Options{})
		if err == nil {
			_, err = f.ReadAt(make([]byte, f.Size()), 0)
		}
		if err == nil || !errors.Is(err, w.err) || !strings.Contains(err.Error(), fx.Name) ||
			!strings.Contains(strings.ReplaceAll(err.Error(), fx.Name, ""), w.mention) {
			t.Errorf("%s: err = %v, want %v mentioning %q and the file", fx.Name, err, w.err, w.mention)
		}
	}
	if seen != len(want) {
		t.Errorf("saw %d invalid .blp fixtures, expected %d", seen, len(want))
	}
}

// TestSkipChecksums reads a file with a bad checksum when asked to.
func TestSkipChecksums(t *testing.T) {
	raw, _ := os.ReadFile(filepath.Join(fixtures.Dir(), "invalid_blp_bad_checksum.blp"))
	f, err := Open(bytes.NewReader(raw), int64(len(raw)), "x", nil, Options{SkipChecksums: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 100), 0); err != nil {
		t.Fatal(err)
	}
}

// writeTemp runs fn on a new temp file and returns the file's bytes.
func writeTemp(t testing.TB, fn func(w io.WriteSeeker) error) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.blp")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := fn(out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEmptyFile checks bloscpack's own 140-byte empty file.
func TestEmptyFile(t *testing.T) {
	b := writeTemp(t, func(w io.WriteSeeker) error {
		wr, err := NewWriter(w, 0, DefaultParams())
		if err != nil {
			return err
		}
		return wr.Close()
	})
	if len(b) != 140 {
		t.Fatalf("empty file of %d bytes, bloscpack writes 140", len(b))
	}
	want, _ := os.ReadFile(filepath.Join(fixtures.Dir(), "empty.blp"))
	if !bytes.Equal(b[:32], want[:32]) {
		t.Fatalf("header %x, bloscpack's %x", b[:32], want[:32])
	}
	f, err := Open(bytes.NewReader(b), int64(len(b)), "empty", nil, Options{})
	if err != nil || f.Size() != 0 {
		t.Fatalf("reopen: %v, size %d", err, f.Size())
	}
}

// TestWriter writes files with every checksum, with and without offsets
// and metadata, and reads them back.
func TestWriter(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	src := make([]byte, 300001)
	for i := range src {
		src[i] = byte(i/1000) ^ byte(r.IntN(2))
	}
	for id := range Checksums {
		for _, noOff := range []bool{false, true} {
			p := DefaultParams()
			p.Checksum, p.NoOffsets, p.ChunkSize = id, noOff, 65536
			p.Metadata = []byte(`{"dtype":"'<f8'","shape":[37500],"order":"C","container":"numpy"}`)
			b := writeTemp(t, func(w io.WriteSeeker) error {
				wr, err := NewWriter(w, int64(len(src)), p)
				if err != nil {
					return err
				}
				for off := 0; off < len(src); off += 65536 {
					if err := wr.AddChunk(src[off:min(off+65536, len(src))]); err != nil {
						return err
					}
				}
				return wr.Close()
			})
			f, err := Open(bytes.NewReader(b), int64(len(b)), "w", nil, Options{})
			if err != nil {
				t.Fatalf("checksum %d offsets %v: %v", id, !noOff, err)
			}
			if !bytes.Equal(readAll(t, f, f.Size()), src) || !bytes.Equal(metadata(t, f), p.Metadata) {
				t.Fatalf("checksum %d offsets %v: read back differs", id, !noOff)
			}
		}
	}
}

// TestRewrite rewrites every valid fixture with patches and a new size,
// and checks the content, the parameters, the metadata and that untouched
// chunks were copied verbatim.
func TestRewrite(t *testing.T) {
	for _, fx := range blpFixtures(t) {
		t.Run(fx.Name, func(t *testing.T) {
			f, _ := openFile(t, fx.Path)
			old := readAll(t, f, f.Size())
			for _, tc := range []struct {
				name  string
				size  int64
				dirty []pack.Range
			}{
				{"same", f.Size(), nil},
				{"patch", f.Size(), []pack.Range{{Off: f.Size() / 3, Len: 10}, {Off: f.Size() / 2, Len: 1}}},
				{"grow", f.Size() + 70001, []pack.Range{{Off: f.Size(), Len: 70001}}},
				{"shrink", f.Size() / 2, nil},
				{"empty", 0, nil},
			} {
				want := make([]byte, tc.size)
				copy(want, old)
				for k, d := range tc.dirty {
					for j := d.Off; j < d.Off+d.Len && j < tc.size; j++ {
						want[j] = byte(j) ^ byte(k+1)
					}
				}
				b := writeTemp(t, func(w io.WriteSeeker) error {
					return pack.Rewrite(w, f, bytes.NewReader(want), tc.size, tc.dirty)
				})
				g, err := Open(bytes.NewReader(b), int64(len(b)), "rewritten", nil, Options{})
				if err != nil {
					t.Fatalf("%s: reopen: %v", tc.name, err)
				}
				if got := readAll(t, g, g.Size()); !bytes.Equal(got, want) {
					t.Fatalf("%s: content differs (%d bytes, want %d)", tc.name, len(got), len(want))
				}
				if g.Header.Checksum != f.Header.Checksum || g.Header.Typesize != f.Header.Typesize ||
					!bytes.Equal(metadata(t, g), metadata(t, f)) || (tc.size > 0 && g.NewChunkSize() != f.NewChunkSize()) {
					t.Fatalf("%s: parameters changed: %+v → %+v", tc.name, f.Header, g.Header)
				}
				// Chunks no patch touched are byte-identical.
				for i := 0; i < min(f.NumChunks(), g.NumChunks()); i++ {
					if f.ChunkOffset(i+1) > tc.size || f.ChunkOffset(i+1) != g.ChunkOffset(i+1) {
						break
					}
					touched := false
					for _, d := range tc.dirty {
						touched = touched || (d.Off < f.ChunkOffset(i+1) && d.Off+d.Len > f.ChunkOffset(i))
					}
					if touched {
						continue
					}
					a, _ := f.rawChunk(i)
					ab := make([]byte, a)
					f.readAt(ab, f.offsets[i], "")
					bb := make([]byte, a)
					g.readAt(bb, g.offsets[i], "")
					if !bytes.Equal(ab, bb) {
						t.Fatalf("%s: untouched chunk %d was re-encoded", tc.name, i)
					}
				}
			}
		})
	}
}

// TestPythonBloscDecodesOurChunks decodes every chunk of a file we write
// with Debian's python3-blosc (c-blosc 1.21), as bloscpack would.
func TestPythonBloscDecodesOurChunks(t *testing.T) {
	py := pythonBlosc(t)
	src := make([]byte, 1<<20+12345)
	for i := range src {
		src[i] = byte(i / 3000)
	}
	for _, codec := range []int{blosc.CodecBloscLZ, blosc.CodecLZ4, blosc.CodecLZ4HC, blosc.CodecZlib, blosc.CodecZstd} {
		p := DefaultParams()
		p.Blosc.Codec, p.ChunkSize = codec, 256<<10
		b := writeTemp(t, func(w io.WriteSeeker) error {
			wr, err := NewWriter(w, int64(len(src)), p)
			if err != nil {
				return err
			}
			for off := 0; off < len(src); off += int(p.ChunkSize) {
				if err := wr.AddChunk(src[off:min(off+int(p.ChunkSize), len(src))]); err != nil {
					return err
				}
			}
			return wr.Close()
		})
		dir := t.TempDir()
		f, _ := Open(bytes.NewReader(b), int64(len(b)), "x", nil, Options{})
		for i := 0; i < f.NumChunks(); i++ {
			cb, _ := f.rawChunk(i)
			os.WriteFile(filepath.Join(dir, string(rune('a'+i))+".chunk"), b[f.offsets[i]:f.offsets[i]+cb], 0o644)
		}
		out := runPython(t, py, `
import blosc, glob, sys, hashlib
h = hashlib.sha256()
for f in sorted(glob.glob(sys.argv[1] + "/*.chunk")):
    h.update(blosc.decompress(open(f, "rb").read()))
print(h.hexdigest())
`, dir)
		if strings.TrimSpace(out) != sha(src) {
			t.Fatalf("%s: python-blosc decodes our chunks to %s, want %s", blosc.CodecName(codec), out, sha(src))
		}
	}
}

func metadata(t testing.TB, f *File) []byte {
	t.Helper()
	b, err := f.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
