package zarr

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/bloscfs/bloscfs/shuffle"
)

// A filter is one decoding step of a v2 pipeline (numcodecs filters).
type filter interface {
	// encodedSize is the size of the filter's input for n decoded bytes,
	// or -1 when n is not a whole number of elements.
	encodedSize(n int64) int64
	// decode decodes src into dst of the decoded size.
	decode(dst, src []byte) error
	name() string
}

// number is one numeric element.
type number struct {
	isFloat bool
	f       float64
	i       int64 // integer value (bits of a uint64 for unsigned)
	signed  bool
}

func (d dtype) numeric() bool {
	switch d.kind {
	case 'b', 'i', 'u', 'f', 'M', 'm':
		return true
	}
	return false
}

func (d dtype) get(b []byte) number {
	bo := d.bo()
	switch d.kind {
	case 'f':
		switch d.size {
		case 2:
			return number{isFloat: true, f: f64FromF16(bo.Uint16(b))}
		case 4:
			return number{isFloat: true, f: float64(math.Float32frombits(bo.Uint32(b)))}
		}
		return number{isFloat: true, f: math.Float64frombits(bo.Uint64(b))}
	case 'u', 'b':
		var v uint64
		switch d.size {
		case 1:
			v = uint64(b[0])
		case 2:
			v = uint64(bo.Uint16(b))
		case 4:
			v = uint64(bo.Uint32(b))
		default:
			v = bo.Uint64(b)
		}
		return number{i: int64(v)}
	}
	var v int64
	switch d.size {
	case 1:
		v = int64(int8(b[0]))
	case 2:
		v = int64(int16(bo.Uint16(b)))
	case 4:
		v = int64(int32(bo.Uint32(b)))
	default:
		v = int64(bo.Uint64(b))
	}
	return number{i: v, signed: true}
}

// asFloat returns the value as a float64.
func (n number) asFloat() float64 {
	switch {
	case n.isFloat:
		return n.f
	case n.signed:
		return float64(n.i)
	}
	return float64(uint64(n.i))
}

// put stores n as d, converting as numpy's astype does (floats to
// integers truncate toward zero; integers wrap).
func (d dtype) put(b []byte, n number) {
	bo := d.bo()
	switch d.kind {
	case 'f':
		floatBits(b, n.asFloat(), d.size, bo)
	case 'b':
		if n.asFloat() != 0 {
			b[0] = 1
		} else {
			b[0] = 0
		}
	default:
		v := uint64(n.i)
		if n.isFloat {
			f := math.Trunc(n.f)
			switch {
			case math.IsNaN(f) || math.IsInf(f, 0):
				v = 1 << 63
			case d.kind == 'u' && f >= 0:
				if f >= 1<<64 {
					v = 0
				} else {
					v = uint64(f)
				}
			default:
				v = uint64(int64(f))
			}
		}
		putInt(b, v, d.size, bo)
	}
}

// round rounds f to the precision of float type d (numpy computes in the
// array's own precision).
func (d dtype) round(f float64) float64 {
	switch {
	case d.kind != 'f':
		return f
	case d.size == 4:
		return float64(float32(f))
	case d.size == 2:
		return f64FromF16(f16FromF64(f))
	}
	return f
}

// recode converts n elements of from (src) to to (dst).
func recode(dst []byte, to dtype, src []byte, from dtype) {
	for i, j := 0, 0; i+from.size <= len(src) && j+to.size <= len(dst); i, j = i+from.size, j+to.size {
		to.put(dst[j:], from.get(src[i:]))
	}
}

type filterConf struct {
	ID          string          `json:"id"`
	Dtype       string          `json:"dtype"`
	Astype      string          `json:"astype"`
	EncodeDtype string          `json:"encode_dtype"`
	DecodeDtype string          `json:"decode_dtype"`
	Elementsize int             `json:"elementsize"`
	Scale       json.RawMessage `json:"scale"`
	Offset      json.RawMessage `json:"offset"`
}

// numericType parses a filter's dtype, which must be a plain number type.
func numericType(s, what string) (dtype, error) {
	d, err := parseSimple(s)
	if err != nil {
		return d, err
	}
	if !d.numeric() {
		return d, fmt.Errorf("%w: filter %s dtype %q is not numeric", ErrUnsupported, what, s)
	}
	return d, nil
}

// parseFilter parses one numcodecs filter configuration.
func parseFilter(raw json.RawMessage) (filter, error) {
	var c filterConf
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%w: filter %.80s", ErrFormat, raw)
	}
	switch c.ID {
	case "delta":
		d, err := numericType(c.Dtype, "delta")
		if err != nil {
			return nil, err
		}
		a := d
		if c.Astype != "" {
			if a, err = numericType(c.Astype, "delta"); err != nil {
				return nil, err
			}
		}
		return &deltaFilter{dt: d, as: a}, nil
	case "astype", "quantize":
		dec, enc := c.DecodeDtype, c.EncodeDtype
		if c.ID == "quantize" {
			dec, enc = c.Dtype, c.Astype
			if enc == "" {
				enc = dec
			}
		}
		d, err := numericType(dec, c.ID)
		if err != nil {
			return nil, err
		}
		e, err := numericType(enc, c.ID)
		if err != nil {
			return nil, err
		}
		return &astypeFilter{id: c.ID, dt: d, as: e}, nil
	case "fixedscaleoffset":
		d, err := numericType(c.Dtype, c.ID)
		if err != nil {
			return nil, err
		}
		a := d
		if c.Astype != "" {
			if a, err = numericType(c.Astype, c.ID); err != nil {
				return nil, err
			}
		}
		f := &scaleOffsetFilter{dt: d, as: a, scale: 1}
		if len(c.Scale) > 0 && json.Unmarshal(c.Scale, &f.scale) != nil {
			return nil, fmt.Errorf("%w: fixedscaleoffset scale %.40s", ErrFormat, c.Scale)
		}
		if len(c.Offset) > 0 && json.Unmarshal(c.Offset, &f.offset) != nil {
			return nil, fmt.Errorf("%w: fixedscaleoffset offset %.40s", ErrFormat, c.Offset)
		}
		return f, nil
	case "shuffle":
		if c.Elementsize < 0 || c.Elementsize > 1<<16 {
			return nil, fmt.Errorf("%w: shuffle elementsize %d", ErrFormat, c.Elementsize)
		}
		if c.Elementsize == 0 {
			c.Elementsize = 4 // numcodecs' default
		}
		return shuffleFilter(c.Elementsize), nil
	case "packbits":
		return packbitsFilter{}, nil
	case "bitround":
		return identityFilter("bitround"), nil
	}
	return nil, fmt.Errorf("%w: filter %q", ErrUnsupported, c.ID)
}

// deltaFilter undoes numcodecs.Delta: a cumulative sum of the encoded
// differences, accumulated as numpy's cumsum does (64-bit integers, floats
// in the encoded precision), stored as dtype.
type deltaFilter struct{ dt, as dtype }

func (f *deltaFilter) name() string { return "delta" }

func (f *deltaFilter) encodedSize(n int64) int64 {
	if n%int64(f.dt.size) != 0 {
		return -1
	}
	return n / int64(f.dt.size) * int64(f.as.size)
}

func (f *deltaFilter) decode(dst, src []byte) error {
	var acc int64
	var facc float64
	float := f.as.kind == 'f'
	for i, j := 0, 0; i+f.as.size <= len(src); i, j = i+f.as.size, j+f.dt.size {
		v := f.as.get(src[i:])
		if float {
			facc = f.as.round(facc + v.f)
			f.dt.put(dst[j:], number{isFloat: true, f: facc})
		} else {
			acc += v.i
			f.dt.put(dst[j:], number{i: acc, signed: true})
		}
	}
	return nil
}

// astypeFilter undoes numcodecs.AsType and Quantize: the stored type is
// cast to the decoded one.
type astypeFilter struct {
	id     string
	dt, as dtype
}

func (f *astypeFilter) name() string { return f.id }

func (f *astypeFilter) encodedSize(n int64) int64 {
	if n%int64(f.dt.size) != 0 {
		return -1
	}
	return n / int64(f.dt.size) * int64(f.as.size)
}

func (f *astypeFilter) decode(dst, src []byte) error {
	recode(dst, f.dt, src, f.as)
	return nil
}

// scaleOffsetFilter undoes numcodecs.FixedScaleOffset: enc / scale +
// offset, computed in float64 (in float32 for a float32 encoding), cast
// to dtype.
type scaleOffsetFilter struct {
	dt, as        dtype
	scale, offset float64
}

func (f *scaleOffsetFilter) name() string { return "fixedscaleoffset" }

func (f *scaleOffsetFilter) encodedSize(n int64) int64 {
	if n%int64(f.dt.size) != 0 {
		return -1
	}
	return n / int64(f.dt.size) * int64(f.as.size)
}

func (f *scaleOffsetFilter) decode(dst, src []byte) error {
	for i, j := 0, 0; i+f.as.size <= len(src); i, j = i+f.as.size, j+f.dt.size {
		v := f.as.get(src[i:]).asFloat()
		v = f.as.round(f.as.round(v/f.scale) + f.offset)
		f.dt.put(dst[j:], number{isFloat: true, f: v})
	}
	return nil
}

// shuffleFilter undoes numcodecs.Shuffle (a byte shuffle of elementsize;
// bytes past the last whole element are kept as they are).
type shuffleFilter int

func (f shuffleFilter) name() string              { return "shuffle" }
func (f shuffleFilter) encodedSize(n int64) int64 { return n }

func (f shuffleFilter) decode(dst, src []byte) error {
	es := int(f)
	whole := len(src) / es * es
	if es <= 1 || whole == 0 {
		copy(dst, src)
		return nil
	}
	shuffle.Unshuffle(dst[:whole], src[:whole], es)
	copy(dst[whole:], src[whole:])
	return nil
}

// packbitsFilter undoes numcodecs.PackBits: a byte giving the padding
// bits of the last byte, then the booleans eight to a byte, most
// significant bit first.
type packbitsFilter struct{}

func (packbitsFilter) name() string              { return "packbits" }
func (packbitsFilter) encodedSize(n int64) int64 { return 1 + (n+7)/8 }

func (packbitsFilter) decode(dst, src []byte) error {
	if len(src) == 0 || int(src[0]) != (8-len(dst)%8)%8 {
		return fmt.Errorf("%w: packbits padding does not match the chunk size", ErrCorrupt)
	}
	for i := range dst {
		dst[i] = src[1+i/8] >> (7 - uint(i%8)) & 1
	}
	return nil
}

// identityFilter is a filter whose decoding changes nothing (bitround).
type identityFilter string

func (f identityFilter) name() string              { return string(f) }
func (f identityFilter) encodedSize(n int64) int64 { return n }
func (f identityFilter) decode(dst, src []byte) error {
	copy(dst, src)
	return nil
}
