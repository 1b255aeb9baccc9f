package hostile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
)

// TestWriteAll checks that every crafted file opens as what it claims.
func TestWriteAll(t *testing.T) {
	dir := t.TempDir()
	names, err := WriteAll(dir, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		st, _ := os.Stat(p)
		v, err := all.OpenView(p, pack.NoCache{})
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		t.Logf("%s: %d bytes on disk, %d plain, %d chunks", n, st.Size(), v.Size, v.Container.Info().Chunks)
		v.Close()
	}
}
