package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestZarrStores runs info, verify and unpack on the committed v3 stores
// (zarrita's): a group walks its arrays, and unpack writes the bytes
// np.save writes for what zarrita reads.
func TestZarrStores(t *testing.T) {
	root := "../../testdata/zarr/zarrita"
	want := map[string]string{}
	f, err := os.Open(filepath.Join(root, "MANIFEST.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	sc.Scan()
	for sc.Scan() {
		p := strings.Split(sc.Text(), "\t")
		want[p[0]] = p[1]
	}
	f.Close()
	r := bloscfs(t, "info", "--json", filepath.Join(root, "v3"))
	var recs []map[string]any
	if err := json.Unmarshal(r.stdout, &recs); err != nil || r.code != 0 || len(recs) != len(want) {
		t.Fatalf("info --json GROUP: exit %d, %d records for %d arrays (%v) %s", r.code, len(recs), len(want), err, r.stderr)
	}
	if recs[0]["format"] != "zarr3" || recs[0]["stored_size"] == 0.0 {
		t.Errorf("info record: %v", recs[0])
	}
	if r := bloscfs(t, "verify", filepath.Join(root, "v3")); r.code != 0 {
		t.Fatalf("verify GROUP: exit %d, %s%s", r.code, r.stdout, r.stderr)
	}
	out := filepath.Join(t.TempDir(), "a.npy")
	for _, p := range []string{"v3/blosc/lz4_bitshuffle", "v3/fill/nan", "v3/dims/d4"} {
		if r := bloscfs(t, "unpack", "-f", filepath.Join(root, p), out); r.code != 0 {
			t.Fatalf("unpack %s: exit %d, %s", p, r.code, r.stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != want[p] {
			t.Errorf("unpack %s: not np.save's bytes of zarrita's read", p)
		}
	}
}
