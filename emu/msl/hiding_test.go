package msl

import (
	"math"
	"testing"
)

// A program that adds overloads to namespace metal, as MLX's bf16_math.h
// adds the bfloat16_t math functions to metal, metal::fast and
// metal::precise, must still reach the float ones by qualified name:
// metal::exp(float) is float's exp, not bfloat's.
func TestMetalOverloadsAdded(t *testing.T) {
	src := mslPrelude + `
namespace metal {
inline bfloat exp(bfloat x) { return bfloat(__metal_exp(float(x), __METAL_MAYBE_FAST_MATH__)); }
inline bfloat abs(bfloat x) { return bfloat(__metal_fabs(float(x), __METAL_MAYBE_FAST_MATH__)); }
inline bfloat max(bfloat x, bfloat y) { return bfloat(__metal_fmax(float(x), float(y), __METAL_MAYBE_FAST_MATH__)); }
namespace fast {
inline bfloat exp(bfloat x) { return bfloat(__metal_exp(float(x), __METAL_FAST_MATH__)); }
}
namespace precise {
inline bfloat exp(bfloat x) { return bfloat(__metal_exp(float(x), __METAL_PRECISE_MATH__)); }
}
}

kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    float x = 1.0f + float(i) / 64;
    out[0 * 32 + i] = metal::exp(x);
    out[1 * 32 + i] = metal::fast::exp(x);
    out[2 * 32 + i] = metal::precise::exp(x);
    out[3 * 32 + i] = metal::abs(-x);
    out[4 * 32 + i] = metal::max(x, 0.5f);
    out[5 * 32 + i] = float(metal::exp(bfloat(x)));
}
`
	o := runSIMDGroup(t, src, 6*32)
	for i := range 32 {
		x := 1 + float32(i)/64
		e := float32(math.Exp(float64(x)))
		for k, w := range []float32{e, e, e, x, x} {
			if g := o[32*k+i]; math.Abs(float64(g-w)) > 2e-7*float64(w) {
				t.Errorf("result %d, thread %d: %v, want %v (float, not bfloat)", k, i, g, w)
			}
		}
		// bfloat's exp, rounded to bfloat
		xb := math.Float32frombits(math.Float32bits(x) &^ 0xffff) // x is a bfloat value
		if xb != x {
			t.Fatalf("thread %d: %v is no bfloat", i, x)
		}
		if g := o[5*32+i]; math.Abs(float64(g-e)) > float64(e)/128 || math.Float32bits(g)&0xffff != 0 {
			t.Errorf("bfloat exp, thread %d: %v, want %v rounded to bfloat", i, g, e)
		}
	}
}
