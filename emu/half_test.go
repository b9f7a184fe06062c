package emu_test

import "math"

// halfRound rounds a float32 to the nearest half (ties to even).
func halfRound(f float32) float32 { return halfToFloat(floatToHalf(f)) }

func floatToHalf(f float32) uint16 {
	x := math.Float32bits(f)
	sign := uint16(x>>16) & 0x8000
	e := int32(x>>23) & 0xff
	m := x & 0x7fffff
	if e == 0xff {
		if m != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	he := e - 127 + 15
	if he >= 31 {
		return sign | 0x7c00
	}
	if he <= 0 {
		if he < -10 {
			return sign
		}
		m |= 0x800000
		shift := uint32(14 - he)
		hm := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && hm&1 == 1 {
			hm++
		}
		return sign | uint16(hm)
	}
	r := uint32(sign) | uint32(he)<<10 | m>>13
	rem := m & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && r&1 == 1 {
		r++
	}
	return uint16(r)
}

func halfToFloat(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	e := uint32(h>>10) & 0x1f
	m := uint32(h & 0x3ff)
	switch {
	case e == 0 && m == 0:
		return math.Float32frombits(sign)
	case e == 0:
		// subnormal: m * 2^-24
		v := float32(m) * float32(1.0/16777216.0)
		if sign != 0 {
			v = -v
		}
		return v
	case e == 31:
		return math.Float32frombits(sign | 0x7f800000 | m<<13)
	}
	return math.Float32frombits(sign | (e+112)<<23 | m<<13)
}
