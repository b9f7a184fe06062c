// Package half converts between float32 and the two 16-bit floating-point
// formats of GPU buffers: [Float16], IEEE-754 binary16 (Metal's half), and
// [BFloat16], bfloat16 (Metal's bfloat), the upper 16 bits of a binary32.
//
// Widening to float32 is exact. Narrowing from float32 rounds to nearest,
// ties to even (IEEE-754's default rounding, the rounding puremetal's
// kernels apply at write-back): a value too large for the format becomes an infinity of its sign, a value
// too small becomes a subnormal or a zero of its sign, and a NaN stays a
// NaN with its quiet bit set, keeping the sign and the upper bits of its
// payload.
//
// The slice functions convert whole buffers without allocating: element
// slices of either type or of uint16 (such as mtl.Slice[uint16] of a Metal
// buffer), and little-endian bytes (a buffer's contents on Apple silicon,
// or a raw file).
package half

import (
	"encoding/binary"
	"math"
)

// Float16 holds the bits of an IEEE-754 binary16 value: 1 sign bit, 5
// exponent bits (bias 15) and 10 fraction bits. Its largest finite value is
// 65504; its smallest positive subnormal is 2^-24.
type Float16 uint16

// BFloat16 holds the bits of a bfloat16 value: 1 sign bit, 8 exponent bits
// (bias 127, as binary32) and 7 fraction bits. It is the upper half of the
// binary32 with the same sign and exponent, so it has float32's range with
// 8 bits of precision.
type BFloat16 uint16

// ToFloat16 returns the binary16 value nearest f, ties to even.
func ToFloat16(f float32) Float16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	frac := b & 0x7fffff
	switch {
	case exp == 0xff && frac != 0: // NaN: quiet, upper payload bits kept
		return Float16(sign | 0x7e00 | uint16(frac>>13))
	case exp == 0xff:
		return Float16(sign | 0x7c00)
	case exp > 127+15: // 2^16 and above: past the largest finite value
		return Float16(sign | 0x7c00)
	case exp >= 127-14: // a normal binary16 unless rounding carries
		h := uint32(exp-127+15)<<10 | frac>>13
		return Float16(sign | uint16(roundShifted(h, frac&0x1fff, 13)))
	}
	// Below 2^-14: a binary16 subnormal, a multiple of 2^-24. A float32
	// subnormal (exp == 0) is far below 2^-25 and rounds to zero.
	shift := 126 - exp // the value is m * 2^(exp-150) = (m >> shift) * 2^-24
	if exp == 0 || shift > 24 {
		return Float16(sign)
	}
	m := frac | 0x800000
	return Float16(sign | uint16(roundShifted(m>>shift, m&(1<<shift-1), uint(shift))))
}

// roundShifted rounds q, the upper bits of a value whose lowest n bits rem
// were shifted out, to nearest, ties to even. A carry out of q's fraction
// bits moves it to the next binade, or to infinity, as the formats'
// encodings require.
func roundShifted(q, rem uint32, n uint) uint32 {
	half := uint32(1) << (n - 1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return q
}

// Float32 returns h as a float32, exactly. A NaN stays a NaN with its quiet
// bit set.
func (h Float16) Float32() float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch exp {
	case 0x1f:
		if frac != 0 {
			frac |= 0x200
		}
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case 0: // zero or subnormal: frac * 2^-24, exact in float32
		return math.Float32frombits(sign | math.Float32bits(float32(frac)*0x1p-24))
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}

// IsNaN reports whether h is a NaN.
func (h Float16) IsNaN() bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }

// ToBFloat16 returns the bfloat16 value nearest f, ties to even.
func ToBFloat16(f float32) BFloat16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: quiet, upper payload bits kept
		return BFloat16(b>>16 | 0x40)
	}
	return BFloat16(roundShifted(b>>16, b&0xffff, 16))
}

// Float32 returns h as a float32, exactly. A NaN stays a NaN with its quiet
// bit set.
func (h BFloat16) Float32() float32 {
	if h.IsNaN() {
		h |= 0x40
	}
	return math.Float32frombits(uint32(h) << 16)
}

// IsNaN reports whether h is a NaN.
func (h BFloat16) IsNaN() bool { return h&0x7f80 == 0x7f80 && h&0x7f != 0 }

// NarrowFloat16 rounds src into dst with [ToFloat16] and returns the number
// of elements converted, the smaller of len(dst) and len(src), as copy does.
func NarrowFloat16[E ~uint16](dst []E, src []float32) int { return narrow(dst, src, ToFloat16) }

// WidenFloat16 converts binary16 src into dst exactly and returns the
// number of elements converted, the smaller of len(dst) and len(src).
func WidenFloat16[E ~uint16](dst []float32, src []E) int { return widen(dst, src, Float16.Float32) }

// NarrowBFloat16 rounds src into dst with [ToBFloat16] and returns the
// number of elements converted, the smaller of len(dst) and len(src).
func NarrowBFloat16[E ~uint16](dst []E, src []float32) int { return narrow(dst, src, ToBFloat16) }

// WidenBFloat16 converts bfloat16 src into dst exactly and returns the
// number of elements converted, the smaller of len(dst) and len(src).
func WidenBFloat16[E ~uint16](dst []float32, src []E) int { return widen(dst, src, BFloat16.Float32) }

// EncodeFloat16 rounds src to binary16 and stores it in dst as
// little-endian pairs of bytes. It returns the number of elements stored,
// the smaller of len(dst)/2 and len(src).
func EncodeFloat16(dst []byte, src []float32) int { return encode(dst, src, ToFloat16) }

// DecodeFloat16 widens the little-endian binary16 values of src into dst
// and returns the number of elements converted, the smaller of len(dst)
// and len(src)/2.
func DecodeFloat16(dst []float32, src []byte) int { return decode(dst, src, Float16.Float32) }

// EncodeBFloat16 rounds src to bfloat16 and stores it in dst as
// little-endian pairs of bytes. It returns the number of elements stored,
// the smaller of len(dst)/2 and len(src).
func EncodeBFloat16(dst []byte, src []float32) int { return encode(dst, src, ToBFloat16) }

// DecodeBFloat16 widens the little-endian bfloat16 values of src into dst
// and returns the number of elements converted, the smaller of len(dst)
// and len(src)/2.
func DecodeBFloat16(dst []float32, src []byte) int { return decode(dst, src, BFloat16.Float32) }

// narrow, widen, encode and decode are the loops of the slice conversions
// above, one per direction and layout, over a 16-bit format H with its
// rounding and its exact widening. Each is inlined into its caller, so the
// conversion is a direct call.

func narrow[E, H ~uint16](dst []E, src []float32, round func(float32) H) int {
	n := min(len(dst), len(src))
	for i := range n {
		dst[i] = E(round(src[i]))
	}
	return n
}

func widen[E, H ~uint16](dst []float32, src []E, exact func(H) float32) int {
	n := min(len(dst), len(src))
	for i := range n {
		dst[i] = exact(H(src[i]))
	}
	return n
}

func encode[H ~uint16](dst []byte, src []float32, round func(float32) H) int {
	n := min(len(dst)/2, len(src))
	for i := range n {
		binary.LittleEndian.PutUint16(dst[2*i:], uint16(round(src[i])))
	}
	return n
}

func decode[H ~uint16](dst []float32, src []byte, exact func(H) float32) int {
	n := min(len(dst), len(src)/2)
	for i := range n {
		dst[i] = exact(H(binary.LittleEndian.Uint16(src[2*i:])))
	}
	return n
}
