// Package floats fills, encodes and compares float32 slices the way
// puremetal's tests check what a kernel wrote: a poison NaN written first,
// so that an element left unwritten shows; the little-endian bytes a Metal
// buffer holds; and comparison of bit patterns, not of values, where the
// contract says bit-identical.
package floats

import (
	"encoding/binary"
	"math"
)

// NaN is the poison: a quiet NaN with a payload (0xdead) no arithmetic
// produces, so an element that still holds it was not written.
var NaN = math.Float32frombits(nanBits)

const nanBits = 0x7fc0dead

// Poison fills x with [NaN].
func Poison(x []float32) { Fill(x, NaN) }

// Fill sets every element of x to v.
func Fill(x []float32, v float32) {
	for i := range x {
		x[i] = v
	}
}

// Unwritten counts the elements of x that still hold [NaN], bit for bit.
func Unwritten(x []float32) int {
	n := 0
	for _, v := range x {
		if math.Float32bits(v) == nanBits {
			n++
		}
	}
	return n
}

// Bytes returns the little-endian bytes of x, as a Metal buffer or
// setBytes holds them (every Metal system is little-endian).
func Bytes(x ...float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// FromBytes returns the float32 values of little-endian bytes; a trailing
// partial element is ignored.
func FromBytes(b []byte) []float32 {
	x := make([]float32, len(b)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return x
}

// Equal reports whether a and b have the same length and hold the same bit
// patterns (so +0 and -0 differ, and a NaN equals the same NaN).
func Equal(a, b []float32) bool { return FirstDiff(a, b) < 0 }

// FirstDiff returns the index of the first element where a and b hold
// different bit patterns, the shorter length when one is a prefix of the
// other, and -1 when they are equal.
func FirstDiff(a, b []float32) int {
	for i := range min(len(a), len(b)) {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// Equal64 is [Equal] for float64.
func Equal64(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}
