package npy

import (
	"strings"
	"testing"
)

// descrCases are dtypes as a .b2nd or a Zarr array stores them, with the
// 'descr' literal and item size DescrLiteral gives ("" for an error).
var descrCases = []struct {
	dtype string
	want  string
	size  int
}{
	{"<f8", "'<f8'", 8},
	{"|S5", "'|S5'", 5},
	{"<U3", "'<U3'", 12},
	{"|b1", "'|b1'", 1},
	{"<M8[ns]", "'<M8[ns]'", 8},
	{"[('a', '<f8', (37,)), ('b', '|S4')]", "[('a', '<f8', (37,)), ('b', '|S4')]", 300},
	{`[("x", "<i4"), ('y', [('p', '|u1'), ('q', '<u2', 3)],)]`, "[('x', '<i4'), ('y', [('p', '|u1'), ('q', '<u2', (3,))])]", 11},
	{`[('it\'s', '<i2')]`, `[('it\'s', '<i2')]`, 2},
	{"[('a', '<i4'), ]", "[('a', '<i4')]", 4},
	{"[('a', '<i4')], 'fortran_order': True, 'shape': (2, 3)} #]", "", 0},
	{"[('a', '<i4' + 'x')]", "", 0},
	{"[('a', '<q9')]", "", 0},
	{"[]", "", 0},
	{"[('a\n', '<i4')]", "", 0},
	{strings.Repeat("[('a', ", 40) + "'<i4'" + strings.Repeat(")]", 40), "", 0},
	{"<f8'", "", 0},
	{"O", "", 0},
	{"", "", 0},
}

// TestDescrLiteral checks the dtype grammar: valid dtypes are rebuilt
// canonically from their parse, with their item size; anything else
// (an injected header key, an unknown type, too deep a nesting) fails.
func TestDescrLiteral(t *testing.T) {
	for _, c := range descrCases {
		got, size, err := DescrLiteral(c.dtype)
		if c.want == "" {
			if err == nil {
				t.Errorf("DescrLiteral(%q) = %s, %d, want an error", c.dtype, got, size)
			}
			continue
		}
		if err != nil || got != c.want || size != c.size {
			t.Errorf("DescrLiteral(%q) = %s, %d, %v; want %s, %d", c.dtype, got, size, err, c.want, c.size)
		}
	}
}

// FuzzDescrLiteral checks that whatever a dtype string holds, DescrLiteral
// either fails or returns a literal that parses again to itself, with
// the same item size, and nothing but printable ASCII.
func FuzzDescrLiteral(f *testing.F) {
	for _, c := range descrCases {
		f.Add(c.dtype)
	}
	f.Fuzz(func(t *testing.T, d string) {
		lit, size, err := DescrLiteral(d)
		if err != nil {
			return
		}
		if size <= 0 {
			t.Fatalf("DescrLiteral(%q): item size %d", d, size)
		}
		for _, r := range lit {
			if r < 0x20 || r > 0x7E {
				t.Fatalf("DescrLiteral(%q) = %q: not printable ASCII", d, lit)
			}
		}
		// A simple type comes back quoted; a structured one as a list.
		again := lit
		if !strings.HasPrefix(lit, "[") {
			again = strings.Trim(lit, "'")
		}
		lit2, size2, err := DescrLiteral(again)
		if err != nil || lit2 != lit || size2 != size {
			t.Fatalf("DescrLiteral(%q) = %s, %d; again: %s, %d, %v", d, lit, size, lit2, size2, err)
		}
	})
}

// TestItemsizeBounds: counts past 2 GiB are unknown item sizes, also
// where four bytes a character would wrap ("<U" of 2^62+1 was 4).
func TestItemsizeBounds(t *testing.T) {
	for s, want := range map[string]int{
		"<f8": 8, "|S5": 5, "<U3": 12, "|V2147483648": 1 << 31,
		"<U4611686018427387905": -1, "|S9223372036854775807": -1, "|V2147483649": -1, "<U99999999999999999999": -1, "<U536870912": 1 << 31, "<U536870913": -1,
	} {
		if got := Itemsize(s); got != want {
			t.Errorf("Itemsize(%q) = %d, want %d", s, got, want)
		}
	}
}
