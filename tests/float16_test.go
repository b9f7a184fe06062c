package tests

import (
	"encoding/binary"
	"math"

	"github.com/puremetal/puremetal/gdn/spec"
)

// Conversions between float32 and the kernels' 16-bit element types, for
// building inputs and reading results: narrowing rounds to nearest even,
// widening is exact. (A shared 16-bit float package is to replace these.)

// toBF16 rounds f to the nearest bfloat16, ties to even; a NaN stays a
// quiet NaN.
func toBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// toF16 rounds f to the nearest IEEE binary16, ties to even: overflow to
// infinity, subnormals below 2^-14.
func toF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int(u>>23) & 0xff
	frac := u & 0x7fffff
	switch {
	case exp == 0xff && frac != 0:
		return sign | 0x7e00 | uint16(frac>>13)
	case exp == 0xff || exp > 127+15:
		return sign | 0x7c00
	case exp >= 127-14:
		h := uint32(exp-127+15)<<10 | frac>>13
		return sign | uint16(roundHalfEven(h, frac&0x1fff, 13))
	}
	shift := 126 - exp
	if exp == 0 || shift > 24 {
		return sign
	}
	m := frac | 0x800000
	return sign | uint16(roundHalfEven(m>>shift, m&(1<<shift-1), uint(shift)))
}

// roundHalfEven rounds q, whose low n bits rem were shifted out, to
// nearest, ties to even; a carry moves to the next binade or infinity.
func roundHalfEven(q, rem uint32, n uint) uint32 {
	half := uint32(1) << (n - 1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return q
}

func fromF16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
	case frac == 0:
		return math.Float32frombits(sign)
	}
	v := float32(frac) * (1.0 / (1 << 24)) // subnormal: frac * 2^-24, exact
	if sign != 0 {
		v = -v
	}
	return v
}

// roundTo returns x rounded to type t and widened back to float32.
func roundTo(t spec.ElemType, x float32) float32 {
	switch t {
	case spec.F16:
		return fromF16(toF16(x))
	case spec.BF16:
		return fromBF16(toBF16(x))
	}
	return x
}

// roundAll rounds every element of x to type t, in place, and returns x.
func roundAll(t spec.ElemType, x []float32) []float32 {
	for i := range x {
		x[i] = roundTo(t, x[i])
	}
	return x
}

// encode returns the bytes of x as elements of type t, little-endian (the
// values are rounded to t).
func encode(t spec.ElemType, x []float32) []byte {
	b := make([]byte, t.Size()*len(x))
	for i, v := range x {
		switch t {
		case spec.F16:
			binary.LittleEndian.PutUint16(b[2*i:], toF16(v))
		case spec.BF16:
			binary.LittleEndian.PutUint16(b[2*i:], toBF16(v))
		default:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
	}
	return b
}

// decode widens little-endian elements of type t to float32.
func decode(t spec.ElemType, b []byte) []float32 {
	x := make([]float32, len(b)/t.Size())
	for i := range x {
		switch t {
		case spec.F16:
			x[i] = fromF16(binary.LittleEndian.Uint16(b[2*i:]))
		case spec.BF16:
			x[i] = fromBF16(binary.LittleEndian.Uint16(b[2*i:]))
		default:
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	return x
}
