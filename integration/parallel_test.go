package integration

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/gridfiles"
)

// TestParallelDecodeMatchesSerial is the differential test of the paths
// that decode on several cores into one buffer: for Bloscpack files and
// frames written over the parameter grid (every codec, no shuffle,
// shuffle, bitshuffle and delta, typesizes 1, 8 and 3, 1 KiB and
// whole-chunk blocks, split and unsplit; several chunks of a size that is
// not a power of two; a smaller grid under the race detector), the built binary's `unpack -` (twice), `verify`
// and `cat` through a mount must give what a serial single-goroutine
// decode gives. GOMAXPROCS is 4 for every program, so that goroutines
// interleave even on two cores. A decoder that wrote past its output (the
// zstd overshoot) made `unpack -` print wrong bytes here.
func TestParallelDecodeMatchesSerial(t *testing.T) {
	setup.Require(t)
	t.Setenv("GOMAXPROCS", "4")
	src := t.TempDir()
	g := gridfiles.Small()
	if testkit.RaceEnabled {
		g = gridfiles.Tiny() // this process writes and decodes the files
	}
	files, err := gridfiles.Write(src, g)
	if err != nil {
		t.Fatal(err)
	}
	serial := map[string][]byte{}
	for _, f := range files {
		b, err := gridfiles.SerialDecode(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if d := gridfiles.FirstDiff(b, f.Plain); d >= 0 {
			t.Fatalf("%s: the serial decode differs from what was written at offset %d", f.Name, d)
		}
		serial[f.Path] = b
	}

	for rep := 0; rep < 2; rep++ {
		for _, f := range files {
			r := testkit.Run(cmdTimeout, bin, "unpack", f.Path, "-")
			if r.Err != nil {
				t.Fatalf("unpack %s -: %v", f.Name, r)
			}
			if d := gridfiles.FirstDiff(r.Stdout, serial[f.Path]); d >= 0 {
				t.Fatalf("unpack %s/%s - (run %d) differs from the serial decode at offset %d", f.Dir, f.Name, rep, d)
			}
		}
	}

	r := testkit.Run(cmdTimeout, bin, "verify", "--json", src)
	if r.Err != nil {
		t.Fatalf("verify %s: %v\n%s", src, r, r.Stdout)
	}
	var recs []struct {
		Path string `json:"path"`
		OK   bool   `json:"ok"`
	}
	if err := json.Unmarshal(r.Stdout, &recs); err != nil {
		t.Fatalf("verify --json: %v", err)
	}
	if len(recs) != len(files) {
		t.Fatalf("verify checked %d files, want %d", len(recs), len(files))
	}
	for _, rec := range recs {
		if !rec.OK {
			t.Errorf("verify: %s failed", rec.Path)
		}
	}

	m := mountDaemon(t, src)
	for _, f := range files {
		p := m.Path(filepath.Join(f.Dir, f.Stem))
		out := mustRun(t, "cat", p)
		if d := gridfiles.FirstDiff(out, serial[f.Path]); d >= 0 {
			t.Fatalf("cat %s through the mount differs from the serial decode at offset %d", p, d)
		}
	}
	t.Logf("%d files: unpack twice, verify and a mount read each", len(files))
}
