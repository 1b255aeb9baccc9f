package b2store

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// python-blosc2's msgpack extension codes (src/blosc2/msgpack_utils.py).
const (
	extCFrame     = 42 // a Blosc2 object as its cframe (to_cframe)
	extStructured = 43 // a msgpack map {"kind", "version", ...}: Ref, C2Array, lazy expressions
)

var errTooLarge = errors.New("over the size limit")

// mpReader walks msgpack held in memory with vmihailenco/msgpack's
// decoder. The decoder is used for codes and lengths only: every length
// is checked against the bytes left before anything is read or
// allocated, and nesting is bounded (the decoder's own Skip and
// DecodeInterface recurse without bound and size maps by what they
// claim).
type mpReader struct {
	b []byte // what r reads
	r *bytes.Reader
	d *msgpack.Decoder
}

func newMPReader(b []byte) *mpReader {
	r := bytes.NewReader(b)
	// bytes.Reader is an io.ByteScanner: the decoder reads it directly,
	// without a buffer of its own, so r.Len() is what is left.
	return &mpReader{b: b, r: r, d: msgpack.NewDecoder(r)}
}

func (m *mpReader) left() int { return m.r.Len() }

func (m *mpReader) pos(total int) int { return total - m.r.Len() }

func (m *mpReader) peek() (byte, error) {
	c, err := m.d.PeekCode()
	if err != nil {
		return 0, truncated(err)
	}
	return c, nil
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("truncated msgpack")
	}
	return err
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func isArray(c byte) bool {
	return (c >= msgpcode.FixedArrayLow && c <= msgpcode.FixedArrayHigh) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isInt(c byte) bool {
	if msgpcode.IsFixedNum(c) {
		return true
	}
	switch c {
	case msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64,
		msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64:
		return true
	}
	return false
}

// mapLen reads a map header; each entry takes at least two bytes.
func (m *mpReader) mapLen() (int, error) {
	n, err := m.d.DecodeMapLen()
	if err != nil {
		return 0, truncated(err)
	}
	if n < 0 || n > m.left()/2 {
		return 0, fmt.Errorf("map of %d entries in %d bytes", n, m.left())
	}
	return n, nil
}

// arrayLen reads an array header; each element takes at least a byte.
func (m *mpReader) arrayLen() (int, error) {
	n, err := m.d.DecodeArrayLen()
	if err != nil {
		return 0, truncated(err)
	}
	if n < 0 || n > m.left() {
		return 0, fmt.Errorf("array of %d elements in %d bytes", n, m.left())
	}
	return n, nil
}

// raw reads the n bytes of a string, binary or extension body; more than
// limit bytes are skipped and reported with errTooLarge.
func (m *mpReader) raw(n, limit int) ([]byte, error) {
	if n < 0 || n > m.left() {
		return nil, fmt.Errorf("%d bytes claimed, %d left", n, m.left())
	}
	if n > limit {
		m.r.Seek(int64(n), io.SeekCurrent)
		return nil, fmt.Errorf("%w: %d bytes (at most %d)", errTooLarge, n, limit)
	}
	b := make([]byte, n)
	io.ReadFull(m.r, b)
	return b, nil
}

// str reads a msgpack str of at most limit bytes. A binary value is not a
// string (python-blosc2 packs with use_bin_type=True).
func (m *mpReader) str(limit int) (string, error) {
	c, err := m.peek()
	if err != nil {
		return "", err
	}
	if !msgpcode.IsString(c) {
		return "", fmt.Errorf("%s where a string is expected", codeName(c))
	}
	n, err := m.d.DecodeBytesLen()
	if err != nil {
		return "", truncated(err)
	}
	b, err := m.raw(n, limit)
	return string(b), err
}

// skip passes over one value, however deeply nested, without recursion:
// it counts the values still to pass (each takes at least a byte).
func (m *mpReader) skip() error {
	for pending := 1; pending > 0; pending-- {
		c, err := m.peek()
		if err != nil {
			return err
		}
		switch {
		case isArray(c):
			n, err := m.arrayLen()
			if err != nil {
				return err
			}
			pending += n
		case isMap(c):
			n, err := m.mapLen()
			if err != nil {
				return err
			}
			pending += 2 * n
		case msgpcode.IsString(c) || msgpcode.IsBin(c):
			n, err := m.d.DecodeBytesLen()
			if err != nil {
				return truncated(err)
			}
			if err := m.pass(n); err != nil {
				return err
			}
		case msgpcode.IsExt(c):
			_, n, err := m.d.DecodeExtHeader()
			if err != nil {
				return truncated(err)
			}
			if err := m.pass(n); err != nil {
				return err
			}
		default:
			if err := m.value(nil, 0); err != nil { // a scalar
				return err
			}
		}
		if pending-1 > m.left() {
			return fmt.Errorf("%d values claimed, %d bytes left", pending-1, m.left())
		}
	}
	return nil
}

// codeName names a msgpack type for messages.
func codeName(c byte) string {
	switch {
	case c == msgpcode.Nil:
		return "nil"
	case c == msgpcode.True || c == msgpcode.False:
		return "a boolean"
	case isInt(c):
		return "an integer"
	case c == msgpcode.Float || c == msgpcode.Double:
		return "a float"
	case msgpcode.IsString(c):
		return "a string"
	case msgpcode.IsBin(c):
		return "binary"
	case isArray(c):
		return "an array"
	case isMap(c):
		return "a map"
	case msgpcode.IsExt(c):
		return "an extension"
	}
	return fmt.Sprintf("code %#02x", c)
}

// jsonOut is the JSON text being built, bounded by limit.
type jsonOut struct {
	b     []byte
	limit int
}

func (o *jsonOut) put(s ...string) error {
	for _, x := range s {
		o.b = append(o.b, x...)
	}
	if len(o.b) > o.limit {
		return fmt.Errorf("%w: JSON text over %d bytes", errTooLarge, o.limit)
	}
	return nil
}

func (o *jsonOut) putString(s string) error {
	o.b = appendJSONString(o.b, s)
	return o.put()
}

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes
// U+FFFD, as encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// value walks one msgpack value, writing it as JSON to o (nil: skip it).
// Arrays and maps recurse, at most maxNesting deep.
// The mapping is the one python-blosc2 readers see through
// msgpack_unpackb, in JSON terms (docs/FORMATS.md §14.8).
func (m *mpReader) value(o *jsonOut, depth int) error {
	if depth > maxNesting {
		return fmt.Errorf("nested deeper than %d levels", maxNesting)
	}
	put := func(s ...string) error {
		if o == nil {
			return nil
		}
		return o.put(s...)
	}
	c, err := m.peek()
	if err != nil {
		return err
	}
	switch {
	case c == msgpcode.Nil:
		m.r.ReadByte()
		return put("null")
	case c == msgpcode.True || c == msgpcode.False:
		m.r.ReadByte()
		return put(strconv.FormatBool(c == msgpcode.True))
	case c == msgpcode.Uint64:
		u, err := m.d.DecodeUint64()
		if err != nil {
			return truncated(err)
		}
		return put(strconv.FormatUint(u, 10))
	case isInt(c):
		v, err := m.d.DecodeInt64()
		if err != nil {
			return truncated(err)
		}
		return put(strconv.FormatInt(v, 10))
	case c == msgpcode.Float:
		f, err := m.d.DecodeFloat32()
		if err != nil {
			return truncated(err)
		}
		return put(jsonFloat(float64(f), 32))
	case c == msgpcode.Double:
		f, err := m.d.DecodeFloat64()
		if err != nil {
			return truncated(err)
		}
		return put(jsonFloat(f, 64))
	case msgpcode.IsString(c):
		n, err := m.d.DecodeBytesLen()
		if err != nil {
			return truncated(err)
		}
		if o == nil {
			return m.pass(n)
		}
		b, err := m.raw(n, o.limit)
		if err != nil {
			return err
		}
		return o.putString(string(b))
	case msgpcode.IsBin(c):
		n, err := m.d.DecodeBytesLen()
		if err != nil {
			return truncated(err)
		}
		if o == nil {
			return m.pass(n)
		}
		b, err := m.raw(n, o.limit)
		if err != nil {
			return err
		}
		return put(`{"$bytes":"`, base64.StdEncoding.EncodeToString(b), `"}`)
	case o == nil && (isArray(c) || isMap(c) || msgpcode.IsExt(c)):
		return m.skip()
	case isArray(c):
		return m.array(o, depth)
	case isMap(c):
		return m.object(o, depth)
	case msgpcode.IsExt(c):
		return m.ext(o, depth)
	}
	return fmt.Errorf("reserved msgpack code %#02x", c)
}

// pass skips n bytes of a value's body.
func (m *mpReader) pass(n int) error {
	if n < 0 || n > m.left() {
		return fmt.Errorf("%d bytes claimed, %d left", n, m.left())
	}
	m.r.Seek(int64(n), io.SeekCurrent)
	return nil
}

// jsonFloat writes a float as JSON; NaN and the infinities, which JSON
// has no numbers for, as the strings Python's json module writes bare.
func jsonFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return `"NaN"`
	case math.IsInf(f, 1):
		return `"Infinity"`
	case math.IsInf(f, -1):
		return `"-Infinity"`
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

// array writes an array; python-blosc2's tuples (lists whose first
// element is the string "__tuple__") lose that marker, as its decoder
// turns them into tuples.
func (m *mpReader) array(o *jsonOut, depth int) error {
	n, err := m.arrayLen()
	if err != nil {
		return err
	}
	if err := o.put("["); err != nil {
		return err
	}
	first := true
	for i := range n {
		if i == 0 {
			if c, err := m.peek(); err == nil && msgpcode.IsString(c) {
				s, err := m.str(o.limit)
				if err != nil {
					return err
				}
				if s == "__tuple__" {
					continue
				}
				o.b = appendJSONString(o.b, s)
				first = false
				continue
			}
		}
		if !first {
			if err := o.put(","); err != nil {
				return err
			}
		}
		first = false
		if err := m.value(o, depth+1); err != nil {
			return err
		}
	}
	return o.put("]")
}

// object writes a map. Keys must be strings, as Python's msgpack
// (strict_map_key) and json both require.
func (m *mpReader) object(o *jsonOut, depth int) error {
	n, err := m.mapLen()
	if err != nil {
		return err
	}
	if err := o.put("{"); err != nil {
		return err
	}
	for i := range n {
		if i > 0 {
			if err := o.put(","); err != nil {
				return err
			}
		}
		k, err := m.str(o.limit)
		if err != nil {
			return fmt.Errorf("map key: %w", err)
		}
		o.b = appendJSONString(o.b, k)
		if err := o.put(":"); err != nil {
			return err
		}
		if err := m.value(o, depth+1); err != nil {
			return err
		}
	}
	return o.put("}")
}

// ext writes an extension value: python-blosc2's Blosc2 objects (code 42,
// a cframe: its length only) and structured references (code 43, a
// msgpack map, shown as JSON); others as their code and bytes.
func (m *mpReader) ext(o *jsonOut, depth int) error {
	id, n, err := m.d.DecodeExtHeader()
	if err != nil {
		return truncated(err)
	}
	if n < 0 || n > m.left() {
		return fmt.Errorf("extension of %d bytes, %d left", n, m.left())
	}
	switch id {
	case extCFrame:
		m.r.Seek(int64(n), io.SeekCurrent)
		return o.put(`{"$blosc2_cframe":`, strconv.Itoa(n), "}")
	case extStructured:
		// Read in place, not copied: nested 64 deep, copies of the rest
		// of the value made 64 times its size.
		at := len(m.b) - m.left()
		inner := newMPReader(m.b[at : at+n : at+n])
		m.pass(n)
		if err := o.put(`{"$blosc2_object":`); err != nil {
			return err
		}
		if err := inner.value(o, depth+1); err != nil {
			return fmt.Errorf("extension 43: %w", err)
		}
		if inner.left() != 0 {
			return fmt.Errorf("extension 43: %d bytes after its value", inner.left())
		}
		return o.put("}")
	}
	b, err := m.raw(n, o.limit)
	if err != nil {
		return err
	}
	return o.put(`{"$ext":`, strconv.Itoa(int(id)), `,"data":"`, base64.StdEncoding.EncodeToString(b), `"}`)
}

// MsgpackToJSON returns the JSON text of b, which must hold exactly one
// msgpack value, as python-blosc2 packs vlmeta values (docs/FORMATS.md,
// §14.8): at most limit bytes of it, nesting at most 64 deep.
func MsgpackToJSON(b []byte, limit int) ([]byte, error) {
	m := newMPReader(b)
	o := &jsonOut{limit: limit}
	if err := m.value(o, 0); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrVLMeta, err)
	}
	if m.left() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the msgpack value (not msgpack?)", ErrVLMeta, m.left())
	}
	return o.b, nil
}
