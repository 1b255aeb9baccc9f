package bloscpack

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/pack"
)

// TestMetadataLazy is finding 3 of issue 11 for Bloscpack: metadata that
// a few kilobytes of zlib expand to megabytes is not decoded by opening
// the file or by Info; Metadata decodes it on demand, bounded by
// pack.MaxMetaLayer with an error naming the file.
func TestMetadataLazy(t *testing.T) {
	js := []byte(`{"pad":"` + strings.Repeat(" ", 2<<20) + `"}`)
	p := DefaultParams()
	p.ChunkSize = 1 << 10
	p.Metadata = js
	src := []byte("hello, metadata")
	b := writeTemp(t, func(w io.WriteSeeker) error {
		wr, err := NewWriter(w, int64(len(src)), p)
		if err != nil {
			return err
		}
		if err := wr.AddChunk(src); err != nil {
			return err
		}
		return wr.Close()
	})
	var a, z runtime.MemStats
	runtime.ReadMemStats(&a)
	f, err := Open(bytes.NewReader(b), int64(len(b)), "meta.blp", pack.NoCache{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := f.Info()
	runtime.ReadMemStats(&z)
	if n := z.TotalAlloc - a.TotalAlloc; n > 1<<20 {
		t.Errorf("opening and describing a file with 2 MiB of metadata allocated %d bytes", n)
	}
	if _, ok := in.Meta["metadata"]; ok {
		t.Errorf("Info keeps 2 MiB of metadata")
	}
	if got, err := f.Metadata(); err != nil || !bytes.Equal(got, js) {
		t.Fatalf("Metadata: %d bytes, %v", len(got), err)
	}
	old := pack.MaxMetaLayer
	pack.MaxMetaLayer = 1 << 20
	defer func() { pack.MaxMetaLayer = old }()
	if _, err := f.Metadata(); !errors.Is(err, pack.ErrUnsupported) || !strings.Contains(err.Error(), "meta.blp") {
		t.Fatalf("Metadata past the limit: %v", err)
	}
}
