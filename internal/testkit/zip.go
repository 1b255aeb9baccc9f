package testkit

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
)

// ZipMember is one member of an archive BuildZip writes, with every
// field a hostile archive may set wrong.
type ZipMember struct {
	Name   string
	Data   []byte // the member's bytes as stored (compressed for Deflate)
	Method uint16 // 0 stored, 8 deflate, others as given
	Flags  uint16 // general purpose flags (1: encrypted, 8: data descriptor)
	// Plain is the uncompressed bytes (for the sizes and CRC-32) when
	// Data is compressed; nil: Data.
	Plain []byte
	// USize, when not 0, is the uncompressed size the headers claim.
	USize int64
	// HeaderOf, when ≥ 1, makes the central entry point at the local
	// header of member HeaderOf-1 (two entries sharing bytes).
	HeaderOf int
	// LocalExtra is the local header's extra field.
	LocalExtra []byte
	// Gap is bytes after the member's data, before the next record
	// (nothing in the directory tells of them).
	Gap []byte
	// CRC, when not nil, is the CRC-32 the headers claim.
	CRC *uint32
	// CentralExtra is the central directory entry's extra field.
	CentralExtra []byte
	// LocalName, when not "", is the name the local header gives.
	LocalName string
}

// ZipEnd edits the end record of an archive BuildZip writes.
type ZipEnd struct {
	// DirOffset, when not 0, is the central directory offset the end
	// record claims.
	DirOffset uint32
	// Count, when not 0, is the number of members it claims.
	Count uint16
}

// BuildZip writes a ZIP archive of the members, in order, byte by byte
// as the headers say: for tests of archives no writer would make. No
// ZIP64 but for the count: past 65,535 members, a ZIP64 end record and
// its locator hold it (the end record says 0xFFFF, "see ZIP64").
func BuildZip(ms []ZipMember, end *ZipEnd) []byte {
	var out bytes.Buffer
	le := binary.LittleEndian
	offs := make([]uint32, len(ms))
	sizes := func(m ZipMember) (crc uint32, usize uint32) {
		plain := m.Plain
		if plain == nil {
			plain = m.Data
		}
		usize = uint32(len(plain))
		if m.USize != 0 {
			usize = uint32(m.USize)
		}
		crc = crc32.ChecksumIEEE(plain)
		if m.CRC != nil {
			crc = *m.CRC
		}
		return crc, usize
	}
	for i, m := range ms {
		offs[i] = uint32(out.Len())
		crc, usize := sizes(m)
		name := m.Name
		if m.LocalName != "" {
			name = m.LocalName
		}
		h := make([]byte, 30)
		le.PutUint32(h, 0x04034b50)
		le.PutUint16(h[4:], 20)
		le.PutUint16(h[6:], m.Flags)
		le.PutUint16(h[8:], m.Method)
		le.PutUint32(h[14:], crc)
		le.PutUint32(h[18:], uint32(len(m.Data)))
		le.PutUint32(h[22:], usize)
		le.PutUint16(h[26:], uint16(len(name)))
		le.PutUint16(h[28:], uint16(len(m.LocalExtra)))
		out.Write(h)
		out.WriteString(name)
		out.Write(m.LocalExtra)
		out.Write(m.Data)
		out.Write(m.Gap)
	}
	cd := out.Len()
	for i, m := range ms {
		crc, usize := sizes(m)
		off := offs[i]
		if m.HeaderOf > 0 {
			off = offs[m.HeaderOf-1]
		}
		h := make([]byte, 46)
		le.PutUint32(h, 0x02014b50)
		le.PutUint16(h[4:], 20)
		le.PutUint16(h[6:], 20)
		le.PutUint16(h[8:], m.Flags)
		le.PutUint16(h[10:], m.Method)
		le.PutUint32(h[16:], crc)
		le.PutUint32(h[20:], uint32(len(m.Data)))
		le.PutUint32(h[24:], usize)
		le.PutUint16(h[28:], uint16(len(m.Name)))
		le.PutUint16(h[30:], uint16(len(m.CentralExtra)))
		le.PutUint32(h[42:], off)
		out.Write(h)
		out.WriteString(m.Name)
		out.Write(m.CentralExtra)
	}
	cdLen := out.Len() - cd
	if len(ms) > 0xffff {
		r := le.AppendUint32(nil, 0x06064b50)
		r = le.AppendUint64(r, 44) // the record's size past this field
		r = le.AppendUint16(r, 45)
		r = le.AppendUint16(r, 45)
		r = le.AppendUint64(r, 0) // this disk, the directory's disk
		r = le.AppendUint64(r, uint64(len(ms)))
		r = le.AppendUint64(r, uint64(len(ms)))
		r = le.AppendUint64(r, uint64(cdLen))
		r = le.AppendUint64(r, uint64(cd))
		l := le.AppendUint32(nil, 0x07064b50)
		l = le.AppendUint32(l, 0)
		l = le.AppendUint64(l, uint64(out.Len()))
		l = le.AppendUint32(l, 1)
		out.Write(r)
		out.Write(l)
	}
	count := uint16(min(len(ms), 0xffff))
	e := make([]byte, 22)
	le.PutUint32(e, 0x06054b50)
	le.PutUint16(e[8:], count)
	le.PutUint16(e[10:], count)
	le.PutUint32(e[12:], uint32(cdLen))
	le.PutUint32(e[16:], uint32(cd))
	if end != nil && end.DirOffset != 0 {
		le.PutUint32(e[16:], end.DirOffset)
	}
	if end != nil && end.Count != 0 {
		le.PutUint16(e[8:], end.Count)
		le.PutUint16(e[10:], end.Count)
	}
	out.Write(e)
	return out.Bytes()
}

// Deflate compresses b with raw deflate (a ZIP member's method 8).
func Deflate(b []byte) []byte {
	var out bytes.Buffer
	w, _ := flate.NewWriter(&out, flate.BestCompression)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

// DeflateZeros compresses n zero bytes with raw deflate without making
// them: the bytes of a deflate bomb.
func DeflateZeros(n int64) []byte {
	var out bytes.Buffer
	w, _ := flate.NewWriter(&out, flate.BestCompression)
	zeros := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, int64(len(zeros)))
		w.Write(zeros[:k])
		n -= k
	}
	w.Close()
	return out.Bytes()
}

// ZarrZipGroup returns the members of a zipped Zarr v2 group holding
// one array per name: 200 uint32 (element i is 7i) in two chunks of
// 100, the first stored, the second deflated (members ".zgroup", then
// NAME/.zarray, NAME/0, NAME/1 for each name, in order), and the
// arrays' data (the same for each).
func ZarrZipGroup(names ...string) ([]ZipMember, []byte) {
	plain := make([]byte, 800)
	for i := range 200 {
		binary.LittleEndian.PutUint32(plain[4*i:], uint32(i*7))
	}
	zarray := []byte(`{"zarr_format":2,"shape":[200],"chunks":[100],"dtype":"<u4","compressor":null,"fill_value":0,"order":"C","filters":null}`)
	ms := []ZipMember{{Name: ".zgroup", Data: []byte(`{"zarr_format":2}`)}}
	for _, n := range names {
		ms = append(ms,
			ZipMember{Name: n + "/.zarray", Data: zarray},
			ZipMember{Name: n + "/0", Data: plain[:400]},
			ZipMember{Name: n + "/1", Data: Deflate(plain[400:]), Method: 8, Plain: plain[400:]})
	}
	return ms, plain
}
