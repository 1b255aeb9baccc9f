package npy

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// A structured NumPy dtype, as a .b2nd stores it: the list literal that
// numpy.lib.format.dtype_to_descr writes, such as
// [('x', '<f8'), ('y', '<i4', (2, 3)), ('z', [('a', '|u1')])].
// The string comes from the file, so it is data: it is parsed with
// NumPy's grammar and written back from the parse, never copied into the
// NPY header as it is.
type dtypeField struct {
	name  string
	typ   dtypeNode
	shape []int64
}

type dtypeNode struct {
	simple string       // a simple type ("<f8"), or
	fields []dtypeField // a structured one
}

const (
	maxDtypeDepth  = 16
	maxDtypeFields = 4096
	maxDtypeSize   = 1 << 31
)

var errDtype = errors.New("not a NumPy dtype literal")

type dtypeParser struct {
	s      string
	pos    int
	fields int
}

// parseStructuredDtype parses a structured dtype list literal.
func parseStructuredDtype(s string) (dtypeNode, error) {
	p := &dtypeParser{s: s}
	n, err := p.list(0)
	if err != nil {
		return n, err
	}
	p.space()
	if p.pos != len(p.s) {
		return n, errDtype
	}
	return n, nil
}

func (p *dtypeParser) space() {
	for p.pos < len(p.s) && p.s[p.pos] == ' ' {
		p.pos++
	}
}

func (p *dtypeParser) eat(c byte) bool {
	p.space()
	if p.pos < len(p.s) && p.s[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

func (p *dtypeParser) peek() byte {
	p.space()
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

// list parses '[' field (',' field)* [','] ']'.
func (p *dtypeParser) list(depth int) (dtypeNode, error) {
	if depth > maxDtypeDepth || !p.eat('[') {
		return dtypeNode{}, errDtype
	}
	var n dtypeNode
	for {
		if p.eat(']') {
			break
		}
		f, err := p.field(depth)
		if err != nil {
			return n, err
		}
		if p.fields++; p.fields > maxDtypeFields {
			return n, errDtype
		}
		n.fields = append(n.fields, f)
		if p.eat(',') {
			continue
		}
		if !p.eat(']') {
			return n, errDtype
		}
		break
	}
	if len(n.fields) == 0 {
		return n, errDtype
	}
	return n, nil
}

// field parses '(' name ',' type [',' shape] [','] ')'.
func (p *dtypeParser) field(depth int) (dtypeField, error) {
	var f dtypeField
	if !p.eat('(') {
		return f, errDtype
	}
	name, err := p.str()
	if err != nil {
		return f, err
	}
	f.name = name
	if !p.eat(',') {
		return f, errDtype
	}
	if p.peek() == '[' {
		if f.typ, err = p.list(depth + 1); err != nil {
			return f, err
		}
	} else {
		s, err := p.str()
		if err != nil {
			return f, err
		}
		if Itemsize(s) <= 0 {
			return f, errDtype
		}
		f.typ.simple = s
	}
	if p.eat(',') {
		if p.eat(')') {
			return f, nil
		}
		if f.shape, err = p.shape(); err != nil {
			return f, err
		}
		p.eat(',')
	}
	if !p.eat(')') {
		return f, errDtype
	}
	return f, nil
}

// shape parses an int or a tuple of ints.
func (p *dtypeParser) shape() ([]int64, error) {
	if !p.eat('(') {
		v, err := p.int()
		return []int64{v}, err
	}
	var out []int64
	for {
		if p.eat(')') {
			return out, nil
		}
		v, err := p.int()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if len(out) > 32 {
			return nil, errDtype
		}
		if !p.eat(',') {
			if !p.eat(')') {
				return nil, errDtype
			}
			return out, nil
		}
	}
}

func (p *dtypeParser) int() (int64, error) {
	p.space()
	start := p.pos
	for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		p.pos++
	}
	if p.pos == start || p.pos-start > 9 {
		return 0, errDtype
	}
	return strconv.ParseInt(p.s[start:p.pos], 10, 64)
}

// str parses a Python string literal in single or double quotes, with
// backslash escapes of the quote and the backslash only. Names hold
// printable ASCII.
func (p *dtypeParser) str() (string, error) {
	p.space()
	if p.pos >= len(p.s) || (p.s[p.pos] != '\'' && p.s[p.pos] != '"') {
		return "", errDtype
	}
	q := p.s[p.pos]
	p.pos++
	var sb strings.Builder
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		p.pos++
		switch {
		case c == q:
			return sb.String(), nil
		case c == '\\':
			if p.pos >= len(p.s) {
				return "", errDtype
			}
			e := p.s[p.pos]
			p.pos++
			if e != '\\' && e != '\'' && e != '"' {
				return "", errDtype
			}
			sb.WriteByte(e)
		case c < 0x20 || c > 0x7E:
			return "", errDtype
		default:
			sb.WriteByte(c)
		}
	}
	return "", errDtype
}

// itemsize returns the size of one element of the dtype (fields are
// packed, as NumPy's list form describes them), or -1.
func (n dtypeNode) itemsize() int64 {
	if n.fields == nil {
		return int64(Itemsize(n.simple))
	}
	var total int64
	for _, f := range n.fields {
		sz := f.typ.itemsize()
		if sz < 0 {
			return -1
		}
		for _, d := range f.shape {
			sz *= d
			if sz > maxDtypeSize {
				return -1
			}
		}
		if total += sz; total > maxDtypeSize {
			return -1
		}
	}
	return total
}

// literal writes the dtype back as a Python literal.
func (n dtypeNode) literal(sb *strings.Builder) {
	if n.fields == nil {
		sb.WriteString(pyString(n.simple))
		return
	}
	sb.WriteByte('[')
	for i, f := range n.fields {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteByte('(')
		sb.WriteString(pyString(f.name))
		sb.WriteString(", ")
		f.typ.literal(sb)
		if f.shape != nil {
			sb.WriteString(", (")
			for j, d := range f.shape {
				if j > 0 {
					sb.WriteString(", ")
				}
				sb.WriteString(strconv.FormatInt(d, 10))
			}
			if len(f.shape) == 1 {
				sb.WriteByte(',')
			}
			sb.WriteByte(')')
		}
		sb.WriteByte(')')
	}
	sb.WriteByte(']')
}

// pyString quotes printable ASCII s as a Python string literal.
func pyString(s string) string {
	var sb strings.Builder
	sb.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == '\'' {
			sb.WriteByte('\\')
		}
		sb.WriteByte(s[i])
	}
	sb.WriteByte('\'')
	return sb.String()
}

// simpleDescr is compiled on first use, not at start.
var simpleDescr = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([<>|=]?)([a-zA-Z?])(\d*)(\[[A-Za-z0-9]+\])?$`)
})

// Itemsize returns the item size of a simple NumPy dtype string ("<f8",
// "|S5"), or -1 when it cannot tell or it exceeds 2 GiB (a "<U" count
// whose four bytes a character would wrap).
func Itemsize(s string) int {
	m := simpleDescr().FindStringSubmatch(s)
	if m == nil {
		return -1
	}
	n := -1
	if m[3] != "" {
		v, err := strconv.Atoi(m[3])
		if err != nil {
			return -1
		}
		if v > maxDtypeSize {
			return -1
		}
		n = v
	}
	switch m[2] {
	case "?":
		return 1
	case "b", "i", "u", "f", "c", "S", "a", "V", "M", "m":
		return n
	case "U":
		if n < 0 || n > maxDtypeSize/4 {
			return -1
		}
		return 4 * n
	}
	return -1
}

// DescrLiteral checks a NumPy dtype as a simple type string ("<f8",
// "|S5") or a structured list literal ("[('x', '<f8'), ('y', '<i4', (2,))]")
// and returns the NPY 'descr' literal rebuilt from its parse (never the
// input copied) and the item size. It fails on anything else, and on a
// dtype whose item size is unknown or exceeds 2 GiB.
func DescrLiteral(d string) (string, int, error) {
	for _, r := range d {
		if r < 0x20 || r > 0x7E {
			return "", 0, errDtype
		}
	}
	if strings.HasPrefix(d, "[") {
		n, err := parseStructuredDtype(d)
		if err != nil {
			return "", 0, err
		}
		sz := n.itemsize()
		if sz <= 0 {
			return "", 0, errDtype
		}
		var sb strings.Builder
		n.literal(&sb)
		return sb.String(), int(sz), nil
	}
	n := Itemsize(d)
	if n <= 0 {
		return "", 0, errDtype
	}
	return pyString(d), n, nil
}
