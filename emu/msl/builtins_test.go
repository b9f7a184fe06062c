package msl

import (
	"math"
	"testing"
)

// Apple's compiler builtins that MLX's bf16_math.h calls to give bfloat its
// math and SIMD-group functions (__metal_exp(x, __METAL_MAYBE_FAST_MATH__),
// __metal_simd_sum(x), __metal_get_simdgroup_size), and numeric_limits of
// int8_t, which MLX's utils.h reads.
func TestAppleBuiltins(t *testing.T) {
	src := mslPrelude + `
namespace lib {
inline float exp_of(float x) { return __metal_exp(x, __METAL_MAYBE_FAST_MATH__); }
inline float fast_exp_of(float x) { return __metal_exp(x, __METAL_FAST_MATH__); }
inline float precise_pow(float x, float y) { return __metal_pow(x, y, __METAL_PRECISE_MATH__); }
}

kernel void k(device float* out [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
    float x = float(lane) / 8;
    out[0 * 32 + lane] = lib::exp_of(x);
    out[1 * 32 + lane] = lib::fast_exp_of(x);
    out[2 * 32 + lane] = lib::precise_pow(x, 1.5f);
    out[3 * 32 + lane] = __metal_fmax3(x, 1.0f, 2.0f - x, __METAL_MAYBE_FAST_MATH__);
    out[4 * 32 + lane] = __metal_fmedian3(x, 1.0f, 2.0f - x, __METAL_MAYBE_FAST_MATH__);
    out[5 * 32 + lane] = __metal_simd_sum(x);
    out[6 * 32 + lane] = __metal_simd_shuffle_down(x, ushort(1));
    out[7 * 32 + lane] = float(__metal_get_simdgroup_size(ushort()));
    out[8 * 32 + lane] = float(numeric_limits<int8_t>::max()) + float(numeric_limits<int8_t>::min());
    out[9 * 32 + lane] = __metal_simd_xor(lane == 3 ? 1.5f : 0.0f); // the bits of 1.5
}
`
	o := runSIMDGroup(t, src, 10*32)
	for l := range 32 {
		x := float32(l) / 8
		sum := float32(0)
		for j := range 32 {
			sum += float32(j) / 8
		}
		down := x
		if l < 31 {
			down = float32(l+1) / 8
		}
		fmax3 := max(x, 1, 2-x)
		median := max(min(x, 1), min(max(x, 1), 2-x))
		for k, w := range []float32{float32(math.Exp(float64(x))), float32(math.Exp(float64(x))), float32(math.Pow(float64(x), 1.5)),
			fmax3, median, sum, down, 32, -1, 1.5} {
			g := o[32*k+l]
			if math.Abs(float64(g-w)) > 2e-7*math.Max(1, math.Abs(float64(w))) {
				t.Errorf("result %d, lane %d: %v, want %v", k, l, g, w)
			}
		}
	}
}

// runSIMDGroup compiles src and runs its kernel k over one SIMD-group (a
// threadgroup of 32 threads) with n floats at buffer index 0, poisoned
// first, and returns them.
func runSIMDGroup(t *testing.T, src string, n int) []float32 {
	t.Helper()
	lib := compileT(t, src, CompileOptions{})
	out := newF32(t, n)
	poison(out.f32())
	runT(t, functionT(t, lib, "k"), ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1}), out)
	return out.f32()
}
