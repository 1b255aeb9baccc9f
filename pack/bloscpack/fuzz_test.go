package bloscpack

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/fixtures"
	"github.com/bloscfs/bloscfs/pack"
)

// FuzzOpen opens arbitrary bytes as a Bloscpack file and, when that
// works, reads all of it: it must never panic, hang or allocate beyond
// what the input can justify.
func FuzzOpen(f *testing.F) {
	all, err := fixtures.Load()
	if err != nil {
		f.Fatal(err)
	}
	for _, fx := range all {
		if strings.HasSuffix(fx.Name, ".blp") {
			b, err := os.ReadFile(fx.Path)
			if err != nil {
				f.Fatal(err)
			}
			// Large seeds make every mutation slow; the small fixtures
			// already cover every checksum kind and layout.
			if len(b) <= 64<<10 {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		mem := testkit.StartAlloc()
		// The target's own: the canaried read buffer and its pattern.
		defer func() { mem.Check(t, len(b), 64<<10+testkit.CanaryFront+testkit.CanaryBack+1<<20) }()
		file, err := Open(bytes.NewReader(b), int64(len(b)), "fuzz", pack.NoCache{}, Options{})
		if err != nil {
			return
		}
		_ = file.Info()
		_, _ = file.Metadata()
		if file.Size() > 16<<20 {
			return
		}
		// Reads without a cache decode the blocks of one call in
		// parallel into windows of the caller's buffer: none may write
		// outside it.
		cn := testkit.NewCanary(64 << 10)
		buf := cn.Dst()
		for off := int64(0); off < file.Size(); off += int64(len(buf)) {
			_, err := file.ReadAt(buf, off)
			if cerr := cn.Check(); cerr != nil {
				t.Fatalf("ReadAt(%d) (err %v) %s", off, err, cerr)
			}
			if err != nil && err != io.EOF {
				return
			}
		}
	})
}
