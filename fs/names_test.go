package fs

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

func ents(valid map[string]bool, names ...string) []diskEntry {
	var out []diskEntry
	for _, n := range names {
		dir := strings.HasSuffix(n, "/")
		n = strings.TrimSuffix(n, "/")
		v, ok := valid[n]
		out = append(out, diskEntry{name: n, dir: dir, container: func() bool { return !ok || v }})
	}
	return out
}

func render(es []entry) string {
	var parts []string
	for _, e := range es {
		s := e.view
		if e.view != e.disk {
			s += "<" + e.disk
		}
		if e.compressed {
			s += "*"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func TestMapNames(t *testing.T) {
	for _, tc := range []struct {
		names []string
		bad   []string // suffixed names that do not parse
		want  string
	}{
		{[]string{"a.blp", "b.b2frame", "c.b2nd", "d.blosc", "e.b2f", "f.b2", "plain.txt"}, nil,
			"a<a.blp* b<b.b2frame* c.npy<c.b2nd* d<d.blosc* e<e.b2f* f<f.b2* plain.txt"},
		// Collision with a plain file: the container keeps its full name.
		{[]string{"x", "x.blp"}, nil, "x x.blp*"},
		// Two containers with one stem: both keep their full names.
		{[]string{"x.blp", "x.b2frame"}, nil, "x.b2frame* x.blp*"},
		// .b2nd collides with a plain .npy of the same stem.
		{[]string{"arr.npy", "arr.b2nd"}, nil, "arr.b2nd* arr.npy"},
		// A file that does not parse stays raw, and frees the stem.
		{[]string{"x.blp", "x.b2frame"}, []string{"x.blp"}, "x<x.b2frame* x.blp"},
		// Sparse frame directories and plain directories.
		{[]string{"s.b2frame/", "dir/"}, nil, "dir s<s.b2frame*"},
		// Temp files are hidden.
		{[]string{".bloscfs-stage-1", "a.blp"}, nil, "a<a.blp*"},
		// A bare suffix is no stem.
		{[]string{".blp", "b2"}, nil, ".blp b2"},
	} {
		valid := map[string]bool{}
		for _, b := range tc.bad {
			valid[b] = false
		}
		if got := render(mapNames(ents(valid, tc.names...))); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.names, got, tc.want)
		}
	}
}

// TestCandidatesAgree checks that resolving one name over its candidate
// entries gives what the whole directory listing gives, for random
// directories.
func TestCandidatesAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	stems := []string{"x", "y", "x.npy", "x.blp", "z"}
	sufs := []string{"", ".blp", ".b2frame", ".b2nd", ".npy", ".blosc", ".b2"}
	for it := 0; it < 3000; it++ {
		set := map[string]bool{}
		for k := r.IntN(6); k >= 0; k-- {
			set[stems[r.IntN(len(stems))]+sufs[r.IntN(len(sufs))]] = true
		}
		valid := map[string]bool{}
		var names []string
		for n := range set {
			names = append(names, n)
			valid[n] = r.IntN(4) != 0
		}
		sort.Strings(names)
		full := map[string]entry{}
		for _, e := range mapNames(ents(valid, names...)) {
			full[e.view] = e
		}
		probe := append(append([]string{}, names...), "x", "y.npy", "x.blp", "q", "x.npy.b2nd")
		for _, name := range probe {
			var sub []string
			for _, c := range diskCandidates(name) {
				if set[c] {
					sub = append(sub, c)
				}
			}
			var got *entry
			for _, e := range mapNames(ents(valid, sub...)) {
				if e.view == name {
					got = &e
				}
			}
			want, ok := full[name]
			if (got != nil) != ok || (ok && *got != want) {
				t.Fatalf("dir %v valid %v: %q resolves to %v over candidates %v, %v over the listing",
					names, valid, name, got, sub, fmt.Sprint(want, ok))
			}
		}
	}
}
