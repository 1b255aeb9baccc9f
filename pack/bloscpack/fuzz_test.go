package bloscpack

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/fixtures"
	"github.com/bloscfs/bloscfs/internal/testutil"
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
		mem := testutil.StartAlloc()
		defer func() { mem.Check(t, len(b), 64<<10) }() // the read buffer
		file, err := Open(bytes.NewReader(b), int64(len(b)), "fuzz", pack.NoCache{}, Options{})
		if err != nil {
			return
		}
		_ = file.Info()
		_, _ = file.Metadata()
		if file.Size() > 16<<20 {
			return
		}
		buf := make([]byte, 64<<10)
		for off := int64(0); off < file.Size(); off += int64(len(buf)) {
			if _, err := file.ReadAt(buf, off); err != nil && err != io.EOF {
				return
			}
		}
	})
}
