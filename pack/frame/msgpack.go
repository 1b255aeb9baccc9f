package frame

import (
	"encoding/binary"
	"fmt"

	"github.com/bloscfs/bloscfs/pack"
)

// cursor reads the fixed-marker msgpack of frame headers, trailers and the
// b2nd metalayer. Every read is bounds-checked; errors wrap pack.ErrFormat
// and name the structure (what) and the position (base+p).
type cursor struct {
	b    []byte
	p    int
	base int64 // position of b[0] in the file, for messages
	what string
}

func (c *cursor) errf(format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d: "+format, append([]any{pack.ErrFormat, c.what, c.base + int64(c.p)}, args...)...)
}

func (c *cursor) need(n int) error {
	if n < 0 || n > len(c.b)-c.p {
		return c.errf("need %d bytes, %d left", n, len(c.b)-c.p)
	}
	return nil
}

func (c *cursor) u8() (byte, error) {
	if err := c.need(1); err != nil {
		return 0, err
	}
	v := c.b[c.p]
	c.p++
	return v, nil
}

// expect consumes one marker byte that must equal m.
func (c *cursor) expect(m byte, name string) error {
	if err := c.need(1); err != nil {
		return err
	}
	if c.b[c.p] != m {
		return c.errf("%s marker %#02x, want %#02x", name, c.b[c.p], m)
	}
	c.p++
	return nil
}

func (c *cursor) u16() (uint16, error) {
	if err := c.need(2); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint16(c.b[c.p:])
	c.p += 2
	return v, nil
}

func (c *cursor) u32() (uint32, error) {
	if err := c.need(4); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint32(c.b[c.p:])
	c.p += 4
	return v, nil
}

func (c *cursor) u64() (uint64, error) {
	if err := c.need(8); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint64(c.b[c.p:])
	c.p += 8
	return v, nil
}

func (c *cursor) take(n int) ([]byte, error) {
	if err := c.need(n); err != nil {
		return nil, err
	}
	v := c.b[c.p : c.p+n]
	c.p += n
	return v, nil
}

// fixint reads a msgpack positive fixint (0…127).
func (c *cursor) fixint(name string) (int, error) {
	v, err := c.u8()
	if err != nil {
		return 0, err
	}
	if v >= 0x80 {
		c.p--
		return 0, c.errf("%s: marker %#02x is not a positive fixint", name, v)
	}
	return int(v), nil
}

// str reads a msgpack string of any width (fixstr, str8, str16, str32).
func (c *cursor) str(name string) ([]byte, error) {
	m, err := c.u8()
	if err != nil {
		return nil, err
	}
	var n uint32
	switch {
	case m >= 0xA0 && m <= 0xBF:
		n = uint32(m & 0x1F)
	case m == 0xD9:
		v, err := c.u8()
		if err != nil {
			return nil, err
		}
		n = uint32(v)
	case m == 0xDA:
		v, err := c.u16()
		if err != nil {
			return nil, err
		}
		n = uint32(v)
	case m == 0xDB:
		if n, err = c.u32(); err != nil {
			return nil, err
		}
	default:
		c.p--
		return nil, c.errf("%s: marker %#02x is not a string", name, m)
	}
	if int64(n) > int64(len(c.b)-c.p) {
		return nil, c.errf("%s: string of %d bytes, %d left", name, n, len(c.b)-c.p)
	}
	return c.take(int(n))
}

// metaEntry is one metalayer or vlmetalayer: its name and stored content
// (the bytes after the bin32 marker and length).
type metaEntry struct {
	name  string
	value []byte
}

// parseMetaSection parses a metalayer section (FORMATS §5.3, §5.5):
//
//	93 CD hh hh DE nn nn { fixstr name, D2 int32 offset }×n DC nn nn { C6 len content }×n
//
// b holds the bytes the offsets are relative to (the frame header, or the
// trailer); the section starts at b[start]. Values are located through
// their offsets, as c-blosc2 does, and must lie in b[valuesMin:valuesMax].
// The map-size field is ignored (c-blosc2 computes it differently for the
// two sections).
func parseMetaSection(b []byte, start int, base int64, what string, maxN int, valuesMax int) ([]metaEntry, int, error) {
	c := &cursor{b: b[:valuesMax], p: start, base: base, what: what}
	if err := c.expect(0x93, "fixarray(3)"); err != nil {
		return nil, 0, err
	}
	if err := c.expect(0xCD, "uint16 map size"); err != nil {
		return nil, 0, err
	}
	if _, err := c.u16(); err != nil {
		return nil, 0, err
	}
	if err := c.expect(0xDE, "map16"); err != nil {
		return nil, 0, err
	}
	n16, err := c.u16()
	if err != nil {
		return nil, 0, err
	}
	n := int(n16)
	if n > maxN {
		return nil, 0, c.errf("%d entries, at most %d allowed", n, maxN)
	}
	type ent struct {
		name string
		off  int64
	}
	ents := make([]ent, 0, n)
	seen := make(map[string]bool, n)
	for i := 0; i < n; i++ {
		m, err := c.u8()
		if err != nil {
			return nil, 0, err
		}
		if m < 0xA0 || m > 0xBF {
			c.p--
			return nil, 0, c.errf("entry %d: name marker %#02x is not a fixstr", i, m)
		}
		name, err := c.take(int(m & 0x1F))
		if err != nil {
			return nil, 0, err
		}
		if seen[string(name)] {
			return nil, 0, c.errf("duplicate name %q", name)
		}
		seen[string(name)] = true
		if err := c.expect(0xD2, "int32 offset"); err != nil {
			return nil, 0, err
		}
		off, err := c.u32()
		if err != nil {
			return nil, 0, err
		}
		ents = append(ents, ent{string(name), int64(int32(off))})
	}
	if err := c.expect(0xDC, "array16"); err != nil {
		return nil, 0, err
	}
	n2, err := c.u16()
	if err != nil {
		return nil, 0, err
	}
	if int(n2) != n {
		c.p -= 2
		return nil, 0, c.errf("array of %d values for %d names", n2, n)
	}
	valuesMin := c.p
	out := make([]metaEntry, 0, n)
	end := valuesMin
	for _, e := range ents {
		if e.off < int64(valuesMin) || e.off+5 > int64(valuesMax) {
			return nil, 0, fmt.Errorf("%w: %s: value of %q at offset %d outside [%d,%d)", pack.ErrFormat, what, e.name, e.off, valuesMin, valuesMax)
		}
		vc := &cursor{b: b[:valuesMax], p: int(e.off), base: base, what: what}
		if err := vc.expect(0xC6, "bin32 value of "+e.name); err != nil {
			return nil, 0, err
		}
		l, err := vc.u32()
		if err != nil {
			return nil, 0, err
		}
		if int64(l) > int64(valuesMax-vc.p) {
			return nil, 0, vc.errf("value of %q: %d bytes, only %d left", e.name, l, valuesMax-vc.p)
		}
		v := b[vc.p : vc.p+int(l)]
		out = append(out, metaEntry{e.name, v})
		end = max(end, vc.p+int(l))
	}
	return out, end, nil
}

// appendMetaSection encodes a metalayer section. first is the position
// (relative to what the offsets count from) of the 0x93 byte; header
// sections count the map size from the 0x93 byte, trailer sections from
// the byte after it (c-blosc2 does both).
func appendMetaSection(dst []byte, ms []metaEntry, first int, countFrom93 bool) []byte {
	mapSize := 3 + 3
	for _, m := range ms {
		mapSize += 1 + len(m.name) + 5
	}
	if countFrom93 {
		mapSize++
	}
	dst = append(dst, 0x93, 0xCD)
	dst = binary.BigEndian.AppendUint16(dst, uint16(mapSize))
	dst = append(dst, 0xDE)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(ms)))
	// The values start after the names, offsets and the array16 header.
	pos := first + 1 + 3 + 3 + 3
	for _, m := range ms {
		pos += 1 + len(m.name) + 5
	}
	for _, m := range ms {
		dst = append(dst, 0xA0|byte(len(m.name)))
		dst = append(dst, m.name...)
		dst = append(dst, 0xD2)
		dst = binary.BigEndian.AppendUint32(dst, uint32(pos))
		pos += 5 + len(m.value)
	}
	dst = append(dst, 0xDC)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(ms)))
	for _, m := range ms {
		dst = append(dst, 0xC6)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.value)))
		dst = append(dst, m.value...)
	}
	return dst
}
