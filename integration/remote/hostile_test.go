package remote_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit/hostile"
)

// TestHostileZarrBucket is issue 33's acceptance test in a bucket: the
// hostile Zarr inputs that can travel to an object store (every codec
// bomb, dictionary and item size, and a .zattrs of 65 MiB; not the FIFOs
// and sparse files) as NAME.zarr prefixes beside a sound array, mounted
// with --cache-size 64MiB. Every listing, stat and read returns within
// seconds, hostile data fail with EIO, the daemon's peak RSS stays under
// 512 MiB, and the sound array reads bit-exact.
func TestHostileZarrBucket(t *testing.T) {
	setup.Require(t)
	dir := t.TempDir()
	ins, err := hostile.WriteZarr(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	want, err := hostile.WriteGoodZarr(filepath.Join(dir, "good"))
	if err != nil {
		t.Fatal(err)
	}
	const bucket = "hostile"
	s := newStore(t, bucket)
	ctx := context.Background()
	if err := s.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		top, rest, _ := strings.Cut(filepath.ToSlash(rel), "/")
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return s.Upload(ctx, top+".zarr/"+rest, bytes.NewReader(b))
	})
	if err != nil {
		t.Fatal(err)
	}
	m := mountRemote(t, "s3://"+bucket, "--cache-size", "64MiB")
	hostile.CheckZarrMount(t, m.Dir, ins, "good", want, m.PID)
	if log := m.LogText(); !strings.Contains(log, "big_zattrs") {
		t.Errorf("the 65 MiB .zattrs is not logged:\n%s", log)
	}
}
