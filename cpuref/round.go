package cpuref

import (
	"math"

	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/half"
)

// Round rounds every element of x in place to the nearest value of type t,
// ties to even, as a kernel's write-back or a conversion of an input
// buffer does; for [spec.F32] it leaves x unchanged. The values stay
// float32, widened exactly from t.
func Round(t spec.ElemType, x []float32) {
	if t == spec.F32 {
		return
	}
	for i, v := range x {
		x[i] = round(t, v)
	}
}

// round returns x rounded to type t and widened back to float32.
func round(t spec.ElemType, x float32) float32 {
	switch t {
	case spec.F16:
		return half.ToFloat16(x).Float32()
	case spec.BF16:
		return half.ToBFloat16(x).Float32()
	}
	return x
}

// unrepresentable returns the index of the first element of x that is not
// a value of type t, or -1. NaNs count as values of every type.
func unrepresentable(t spec.ElemType, x []float32) int {
	if t == spec.F32 {
		return -1
	}
	for i, v := range x {
		if r := round(t, v); math.Float32bits(r) != math.Float32bits(v) && !math.IsNaN(float64(v)) {
			return i
		}
	}
	return -1
}
