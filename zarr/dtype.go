package zarr

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bloscfs/bloscfs/npy"
)

// dtype is the element type of an array as an NPY file shows it.
type dtype struct {
	descr string // NPY 'descr' literal ("'<f8'", "[('x', '<f8')]")
	str   string // the simple type string ("<f8"); "" for structured
	kind  byte   // numpy kind: b i u f c S U V M m; 's' for structured
	order byte   // '<', '>' or '|'
	size  int    // bytes per element
}

// parseSimple parses a numpy simple type string, such as "<f8", "|S5",
// ">U3", "|b1", "<M8[ns]".
func parseSimple(s string) (dtype, error) {
	if err := checkItemsize(s); err != nil {
		return dtype{}, err
	}
	lit, size, err := npy.DescrLiteral(s)
	if err != nil || strings.HasPrefix(s, "[") || len(s) < 2 {
		return dtype{}, fmt.Errorf("%w: dtype %q", ErrFormat, s)
	}
	d := dtype{descr: lit, str: s, size: size}
	rest := s
	switch s[0] {
	case '<', '>', '|', '=':
		d.order, rest = s[0], s[1:]
	default:
		d.order = '<'
	}
	if d.order == '=' {
		d.order = '<'
	}
	d.kind = rest[0]
	switch d.kind {
	case '?':
		d.kind = 'b'
	case 'a':
		d.kind = 'S'
	}
	switch d.kind {
	case 'b', 'i', 'u', 'f', 'c', 'S', 'U', 'V', 'M', 'm':
	default:
		return dtype{}, fmt.Errorf("%w: dtype %q (object or unknown kind)", ErrUnsupported, s)
	}
	if (d.kind == 'f' && size != 2 && size != 4 && size != 8) || (d.kind == 'c' && size != 8 && size != 16) ||
		((d.kind == 'i' || d.kind == 'u') && size != 1 && size != 2 && size != 4 && size != 8) ||
		(d.kind == 'b' && size != 1) || ((d.kind == 'M' || d.kind == 'm') && size != 8) {
		return dtype{}, fmt.Errorf("%w: dtype %q", ErrUnsupported, s)
	}
	// np.save writes the dtype's canonical string: '|' for types without
	// byte order.
	if size == 1 || d.kind == 'S' || d.kind == 'V' {
		d.order = '|'
	}
	d.str = string(d.order) + rest
	if d.kind == 'b' {
		d.str = "|b1"
	}
	d.descr = "'" + d.str + "'"
	return d, nil
}

// checkItemsize refuses, before anything is built from it, a simple type
// string whose count (|S5, <U3, |V8) is not a number of 1 to
// MaxChunkBytes bytes: a size of 0, one that does not fit, or one whose
// product with 4 (U) would wrap.
func checkItemsize(s string) error {
	rest := strings.TrimLeft(s, "<>|=")
	if len(rest) < 2 {
		return nil // parsed (and refused) below
	}
	digits := rest[1:]
	if i := strings.IndexByte(digits, '['); i >= 0 {
		digits = digits[:i] // M8[ns]
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: dtype %q", ErrFormat, s)
	}
	if rest[0] == 'U' && n <= MaxChunkBytes {
		n *= 4
	}
	if n < 1 || n > MaxChunkBytes {
		return fmt.Errorf("%w: dtype %q: item size out of 1..%d bytes", ErrUnsupported, s, int64(MaxChunkBytes))
	}
	return nil
}

// parseV2Dtype parses the "dtype" of a .zarray: a simple type string or
// a structured list ([["x", "<f8"], ["y", "<i4", [2, 3]]]).
func parseV2Dtype(raw json.RawMessage) (dtype, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return parseSimple(s)
	}
	var sb strings.Builder
	if err := structLiteral(&sb, raw, 0); err != nil {
		return dtype{}, err
	}
	want, err := structSize(raw, 0)
	if err != nil {
		return dtype{}, err
	}
	lit, size, err := npy.DescrLiteral(sb.String())
	if err != nil || int64(size) != want {
		return dtype{}, fmt.Errorf("%w: structured dtype %.80s", ErrUnsupported, raw)
	}
	return dtype{descr: lit, kind: 's', order: '|', size: size}, nil
}

// structSize computes the item size of a structured dtype (which
// structLiteral has checked), refusing any sum or product past
// MaxChunkBytes before it can wrap.
func structSize(raw json.RawMessage, depth int) (int64, error) {
	var fields [][]json.RawMessage
	if depth > 8 || json.Unmarshal(raw, &fields) != nil {
		return 0, fmt.Errorf("%w: dtype %.80s", ErrFormat, raw)
	}
	tooBig := fmt.Errorf("%w: structured dtype %.80s: item size out of 1..%d bytes", ErrUnsupported, raw, int64(MaxChunkBytes))
	var total int64
	for _, parts := range fields {
		var n int64
		var typ string
		if json.Unmarshal(parts[1], &typ) == nil {
			d, err := parseSimple(typ)
			if err != nil {
				return 0, err
			}
			n = int64(d.size)
		} else {
			var err error
			if n, err = structSize(parts[1], depth+1); err != nil {
				return 0, err
			}
		}
		if len(parts) == 3 {
			var shape []int64
			if err := json.Unmarshal(parts[2], &shape); err != nil {
				return 0, fmt.Errorf("%w: dtype field shape %.80s", ErrFormat, parts[2])
			}
			for _, d := range shape {
				if d < 0 || (d > 0 && n > MaxChunkBytes/d) {
					return 0, tooBig
				}
				n *= d
			}
		}
		if total += n; total > MaxChunkBytes {
			return 0, tooBig
		}
	}
	if total < 1 {
		return 0, tooBig
	}
	return total, nil
}

// structLiteral writes a JSON structured dtype as NumPy's list literal.
func structLiteral(sb *strings.Builder, raw json.RawMessage, depth int) error {
	if depth > 8 {
		return fmt.Errorf("%w: structured dtype nested too deep", ErrUnsupported)
	}
	var fields []json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || len(fields) == 0 {
		return fmt.Errorf("%w: dtype %.80s", ErrFormat, raw)
	}
	sb.WriteByte('[')
	for i, f := range fields {
		var parts []json.RawMessage
		if err := json.Unmarshal(f, &parts); err != nil || len(parts) < 2 || len(parts) > 3 {
			return fmt.Errorf("%w: dtype field %.80s", ErrFormat, f)
		}
		var name, typ string
		if err := json.Unmarshal(parts[0], &name); err != nil {
			return fmt.Errorf("%w: dtype field name %.80s", ErrFormat, parts[0])
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(" + strconv.Quote(name) + ", ")
		if json.Unmarshal(parts[1], &typ) == nil {
			if _, err := parseSimple(typ); err != nil {
				return err
			}
			sb.WriteString(strconv.Quote(typ))
		} else if err := structLiteral(sb, parts[1], depth+1); err != nil {
			return err
		}
		if len(parts) == 3 {
			var shape []int64
			if err := json.Unmarshal(parts[2], &shape); err != nil || len(shape) > 32 {
				return fmt.Errorf("%w: dtype field shape %.80s", ErrFormat, parts[2])
			}
			sb.WriteString(", (")
			for j, d := range shape {
				if j > 0 {
					sb.WriteString(", ")
				}
				sb.WriteString(strconv.FormatInt(d, 10))
			}
			if len(shape) == 1 {
				sb.WriteByte(',')
			}
			sb.WriteByte(')')
		}
		sb.WriteByte(')')
	}
	sb.WriteByte(']')
	return nil
}

// v3 data type names and their little-endian numpy strings.
var v3Types = map[string]string{
	"bool": "|b1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
	"uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
	"float16": "<f2", "float32": "<f4", "float64": "<f8",
	"complex64": "<c8", "complex128": "<c16",
}

// parseV3Dtype parses a v3 data_type name. The view shows numbers in
// little-endian order whatever the bytes codec stored.
func parseV3Dtype(raw json.RawMessage) (dtype, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return dtype{}, fmt.Errorf("%w: data_type %.80s (an extension object)", ErrUnsupported, raw)
	}
	if np, ok := v3Types[s]; ok {
		return parseSimple(np)
	}
	if bits, ok := strings.CutPrefix(s, "r"); ok {
		n, err := strconv.Atoi(bits)
		if err == nil && n > 0 && n%8 == 0 && n <= 1<<20 {
			return parseSimple("|V" + strconv.Itoa(n/8))
		}
	}
	return dtype{}, fmt.Errorf("%w: data_type %q", ErrUnsupported, s)
}

// bo returns the byte order of the type.
func (d dtype) bo() binary.ByteOrder {
	if d.order == '>' {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// floatBits encodes f in a float type of size n.
func floatBits(b []byte, f float64, n int, bo binary.ByteOrder) {
	switch n {
	case 2:
		bo.PutUint16(b, f16FromF64(f))
	case 4:
		bo.PutUint32(b, math.Float32bits(float32(f)))
	default:
		bo.PutUint64(b, math.Float64bits(f))
	}
}

// f16FromF64 converts to IEEE half precision, rounding to nearest even.
func f16FromF64(f float64) uint16 {
	b := math.Float32bits(float32(f))
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xFF) - 127 + 15
	man := b & 0x7FFFFF
	switch {
	case b&0x7FFFFFFF > 0x7F800000: // NaN
		return sign | 0x7E00
	case exp >= 31:
		return sign | 0x7C00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint(14 - exp)
		h := man >> shift
		rem := man & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | man>>13
	rem := man & 0x1FFF
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++
	}
	return sign | uint16(h)
}

// f64FromF16 converts half precision to float64.
func f64FromF16(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h >> 10 & 0x1F)
	man := float64(h & 0x3FF)
	switch exp {
	case 0:
		return sign * man * math.Pow(2, -24)
	case 31:
		if man != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * (1 + man/1024) * math.Pow(2, float64(exp-15))
}

// putNaN stores numpy's NaN (the quiet NaN with no payload).
func putNaN(out []byte, n int, bo binary.ByteOrder) {
	switch n {
	case 2:
		bo.PutUint16(out, 0x7E00)
	case 4:
		bo.PutUint32(out, 0x7FC00000)
	default:
		bo.PutUint64(out, 0x7FF8000000000000)
	}
}

// jsonFloat decodes a float fill value: a number or "NaN", "Infinity",
// "-Infinity"; hex ("0x7fc00000") gives raw bits when bits is not nil.
func jsonFloat(raw json.RawMessage, n int, bo binary.ByteOrder, out []byte) error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "NaN":
			putNaN(out, n, bo)
		case "Infinity":
			floatBits(out, math.Inf(1), n, bo)
		case "-Infinity":
			floatBits(out, math.Inf(-1), n, bo)
		default:
			h, ok := strings.CutPrefix(s, "0x")
			if !ok || len(h) != 2*n {
				return fmt.Errorf("%w: float fill_value %q", ErrFormat, s)
			}
			v, err := strconv.ParseUint(h, 16, 64)
			if err != nil {
				return fmt.Errorf("%w: float fill_value %q", ErrFormat, s)
			}
			switch n {
			case 2:
				bo.PutUint16(out, uint16(v))
			case 4:
				bo.PutUint32(out, uint32(v))
			default:
				bo.PutUint64(out, v)
			}
		}
		return nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return fmt.Errorf("%w: float fill_value %.40s", ErrFormat, raw)
	}
	floatBits(out, f, n, bo)
	return nil
}

// putInt stores an integer of the type's size (two's complement wraps,
// as numpy's casts do).
func putInt(out []byte, v uint64, n int, bo binary.ByteOrder) {
	switch n {
	case 1:
		out[0] = byte(v)
	case 2:
		bo.PutUint16(out, uint16(v))
	case 4:
		bo.PutUint32(out, uint32(v))
	default:
		bo.PutUint64(out, v)
	}
}

// jsonInt decodes an integer fill value exactly.
func jsonInt(raw json.RawMessage) (uint64, error) {
	s := strings.TrimSpace(string(raw))
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return uint64(v), nil
	}
	if v, err := strconv.ParseUint(s, 10, 64); err == nil {
		return v, nil
	}
	// Integral floats ("1.0", "1e3").
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return uint64(int64(f)), nil
	}
	return 0, fmt.Errorf("%w: integer fill_value %.40s", ErrFormat, raw)
}

// maxFillItem is the largest item whose fill value is kept as an item:
// a larger one (a |V or |S dtype of more than a MiB) may only be filled
// with zeros, kept as one zero byte, so that opening (listing) an array
// of 1 GiB items allocates nothing of their size.
const maxFillItem = 1 << 20

// fillValue decodes a fill value into one element (for an item larger
// than maxFillItem, whose fill must be zeros, one zero byte: a pattern
// of zeros all the same). v3 selects the v3 encodings (hex floats, byte
// arrays for r*) over v2's base64.
func (d dtype) fillValue(raw json.RawMessage, v3 bool) ([]byte, error) {
	if d.size > maxFillItem {
		if len(raw) != 0 && string(raw) != "null" {
			var b []byte
			var s string
			var bs []int
			switch {
			case json.Unmarshal(raw, &bs) == nil && v3:
				b = make([]byte, 0, len(bs))
				for _, v := range bs {
					b = append(b, byte(v))
				}
			case json.Unmarshal(raw, &s) == nil && d.kind == 'U':
				b = []byte(s)
			case json.Unmarshal(raw, &s) == nil:
				var err error
				if b, err = base64.StdEncoding.DecodeString(s); err != nil {
					return nil, fmt.Errorf("%w: fill_value %.40q is not base64", ErrFormat, s)
				}
			default:
				if v, err := jsonInt(raw); err != nil || v != 0 {
					return nil, fmt.Errorf("%w: fill_value %.40s", ErrFormat, raw)
				}
			}
			if slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
				return nil, fmt.Errorf("%w: a fill value other than zeros for an item of %d bytes", ErrUnsupported, d.size)
			}
		}
		return []byte{0}, nil
	}
	out := make([]byte, d.size)
	if len(raw) == 0 || string(raw) == "null" {
		return out, nil // v2: no fill value; zarr leaves such chunks undefined, shown as zeros
	}
	bo := d.bo()
	switch d.kind {
	case 'b':
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			v, err2 := jsonInt(raw)
			if err2 != nil {
				return nil, fmt.Errorf("%w: bool fill_value %.40s", ErrFormat, raw)
			}
			b = v != 0
		}
		if b {
			out[0] = 1
		}
	case 'i', 'u', 'M', 'm':
		var s string
		if json.Unmarshal(raw, &s) == nil && s == "NaT" {
			putInt(out, 1<<63, d.size, bo)
			break
		}
		v, err := jsonInt(raw)
		if err != nil {
			return nil, err
		}
		putInt(out, v, d.size, bo)
	case 'f':
		if err := jsonFloat(raw, d.size, bo, out); err != nil {
			return nil, err
		}
	case 'c':
		var parts []json.RawMessage
		if err := json.Unmarshal(raw, &parts); err != nil || len(parts) != 2 {
			// zarr 2 writes a complex fill of 0 as a plain number.
			if err := jsonFloat(raw, d.size/2, bo, out); err != nil {
				return nil, fmt.Errorf("%w: complex fill_value %.40s", ErrFormat, raw)
			}
			return out, nil
		}
		for i, p := range parts {
			if err := jsonFloat(p, d.size/2, bo, out[i*d.size/2:]); err != nil {
				return nil, err
			}
		}
	case 'U':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			if v, err2 := jsonInt(raw); err2 == nil && v == 0 {
				return out, nil
			}
			return nil, fmt.Errorf("%w: string fill_value %.40s", ErrFormat, raw)
		}
		for i := 0; len(s) > 0 && 4*i < d.size; i++ {
			r, n := utf8.DecodeRuneInString(s)
			s = s[n:]
			bo.PutUint32(out[4*i:], uint32(r))
		}
	default: // S, V, structured
		if v3 {
			var bs []int
			if err := json.Unmarshal(raw, &bs); err != nil || len(bs) != d.size {
				return nil, fmt.Errorf("%w: raw fill_value %.40s", ErrFormat, raw)
			}
			for i, v := range bs {
				out[i] = byte(v)
			}
			return out, nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			if v, err2 := jsonInt(raw); err2 == nil && v == 0 {
				return out, nil
			}
			return nil, fmt.Errorf("%w: fill_value %.40s", ErrFormat, raw)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%w: fill_value %q is not base64", ErrFormat, s)
		}
		if d.kind != 'S' && len(b) != d.size {
			return nil, fmt.Errorf("%w: fill_value of %d bytes for a %d-byte dtype", ErrFormat, len(b), d.size)
		}
		copy(out, b)
	}
	return out, nil
}
