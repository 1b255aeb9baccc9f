package b2store

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

func TestMsgpackToJSON(t *testing.T) {
	cases := []struct {
		in   any
		want string
	}{
		{nil, "null"}, {true, "true"}, {false, "false"}, {0, "0"}, {-1, "-1"}, {300, "300"},
		{int64(math.MinInt64), "-9223372036854775808"}, {uint64(math.MaxUint64), "18446744073709551615"},
		{0.5, "0.5"}, {float32(1.25), "1.25"}, {1e300, "1e+300"},
		{math.NaN(), `"NaN"`}, {math.Inf(1), `"Infinity"`}, {math.Inf(-1), `"-Infinity"`},
		{"a\"b\\c\n\x01\x7fé", `"a\"b\\c\n\u0001\u007fé"`}, {"\xff", `"\ufffd"`},
		{[]byte{0, 1, 2}, `{"$bytes":"AAEC"}`},
		{[]any{1, "x", []any{}}, `[1,"x",[]]`},
		{tuple{1, 2}, `[1,2]`}, {tuple{}, `[]`}, {[]any{"__tuple__"}, `[]`}, {[]any{"x", "__tuple__"}, `["x","__tuple__"]`},
		{[]kv{{"b", 1}, {"a", []kv{}}}, `{"b":1,"a":{}}`},
	}
	for _, tc := range cases {
		b := packb(t, tc.in)
		got, err := MsgpackToJSON(b, 1<<20)
		if err != nil || string(got) != tc.want {
			t.Errorf("%#v (%x): %s %v, want %s", tc.in, b, got, err, tc.want)
		}
	}
	raw := map[string]string{
		"c7032a616263":                  `{"$blosc2_cframe":3}`, // ext8, code 42
		"c7082b82a16b01a1760102":        "",                     // ext 43 with 2 bytes after its value
		"c7072b82a16b01a17601":          `{"$blosc2_object":{"k":1,"v":1}}`,
		"d40501":                        `{"$ext":5,"data":"AQ=="}`,
		"d6ffffffffff":                  `{"$ext":-1,"data":"/////w=="}`,
		"8101c0":                        "", // a non-string key
		"c0c0":                          "", // two values
		"dc0005c0":                      "", // truncated array
		"db7fffffff":                    "", // a 2 GiB string in 5 bytes
		"c1":                            "", // reserved code
		strings.Repeat("91", 65) + "c0": "", // nested too deep
		strings.Repeat("91", 64) + "c0": strings.Repeat("[", 64) + "null" + strings.Repeat("]", 64),
	}
	for in, want := range raw {
		b := unhex(t, in)
		got, err := MsgpackToJSON(b, 1<<20)
		if want == "" {
			if !errors.Is(err, ErrVLMeta) {
				t.Errorf("%s: %s %v, want ErrVLMeta", in, got, err)
			}
			continue
		}
		if err != nil || string(got) != want {
			t.Errorf("%s: %s %v, want %s", in, got, err, want)
		}
	}
	// The size limit.
	if _, err := MsgpackToJSON(packb(t, strings.Repeat("x", 100)), 50); !errors.Is(err, ErrVLMeta) {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := MsgpackToJSON(packb(t, []any{nil, nil, nil, nil, nil, nil}), 20); !errors.Is(err, ErrVLMeta) {
		t.Errorf("over the limit: %v", err)
	}
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b := make([]byte, len(s)/2)
	for i := range b {
		var v byte
		for _, c := range s[2*i : 2*i+2] {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= byte(c - '0')
			case c >= 'a' && c <= 'f':
				v |= byte(c - 'a' + 10)
			default:
				t.Fatalf("bad hex %q", s)
			}
		}
		b[i] = v
	}
	return b
}

// TestMsgpackNestedExtensions feeds MsgpackToJSON a 4 MiB binary value
// inside 60 nested extensions 43: each level is read in place, so that
// the bytes allocated stay near the value's size (copying the rest of
// the value at each level made 60 copies of it), and the value over the
// limit is an error.
func TestMsgpackNestedExtensions(t *testing.T) {
	const size, levels = 4 << 20, 60
	b := binary.BigEndian.AppendUint32([]byte{0xc6}, size)
	b = append(b, make([]byte, size)...)
	for range levels {
		h := binary.BigEndian.AppendUint32([]byte{0xc9}, uint32(len(b)))
		b = append(append(h, extStructured), b...)
	}
	mem := testkit.StartAlloc()
	_, err := MsgpackToJSON(b, 1<<20)
	if err == nil {
		t.Fatal("a 4 MiB value under a 1 MiB limit: no error")
	}
	if n := mem.Allocated(); n > 3*size {
		t.Errorf("%d MiB allocated for a %d MiB value nested %d deep", n>>20, size>>20, levels)
	}
	// The same nesting around a small value reads.
	small := []byte{0xa2, 'h', 'i'}
	for range levels {
		small = append([]byte{0xc7, byte(len(small)), extStructured}, small...)
	}
	got, err := MsgpackToJSON(small, 1<<20)
	if err != nil || !strings.HasSuffix(string(got), `"hi"`+strings.Repeat("}", levels)) {
		t.Errorf("small value nested %d deep: %s, %v", levels, got, err)
	}
}
