package msl

import (
	"math"
	"testing"
)

// simdgroup_matrix<T, 8, 8>(d) is Metal's diagonal matrix: d on the
// diagonal, zero elsewhere (candle's mlx_gemm.metal initialises its
// accumulators with simdgroup_matrix<AccumType, 8, 8>(0)), also through a
// template parameter and with an argument of another type.
func TestSimdgroupMatrixDiagonal(t *testing.T) {
	src := mslPrelude + `#include <metal_simdgroup_matrix>
template <typename T>
void diag(device const float* a, device float* d, T v) {
    simdgroup_matrix<T, 8, 8> acc[2] = {simdgroup_matrix<T, 8, 8>(0)};
    acc[1] = simdgroup_matrix<T, 8, 8>(v);
    simdgroup_matrix<T, 8, 8> A;
    simdgroup_load(A, a);
    simdgroup_matrix<T, 8, 8> P;
    simdgroup_multiply(P, A, acc[1]);
    simdgroup_store(acc[1], d);
    simdgroup_store(acc[0], d + 64);
    simdgroup_store(P, d + 128);
}
kernel void diag_float(device const float* a [[buffer(0)]], device float* d [[buffer(1)]]) {
    diag<float>(a, d, 2.5f);
}
kernel void diag_half(device const float* a [[buffer(0)]], device float* d [[buffer(1)]]) {
    simdgroup_half8x8 m = simdgroup_half8x8(-3);
    simdgroup_store(m, d + 192);
    diag<float>(a, d, -3);
}
`
	lib := compileT(t, src, CompileOptions{})
	for _, tc := range []struct {
		name string
		v    float32
		n    int
	}{{"diag_float", 2.5, 192}, {"diag_half", -3, 256}} {
		a, d := newF32(t, 64), newF32(t, tc.n)
		fillRandom(a.f32(), 41)
		poison(d.f32())
		runT(t, functionT(t, lib, tc.name), ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1}), a, d)
		for r := 0; r < 8; r++ {
			for c := 0; c < 8; c++ {
				var want float32
				if r == c {
					want = tc.v
				}
				if g := d.f32()[r*8+c]; g != want {
					t.Fatalf("%s: diagonal matrix [%d][%d] = %v, want %v", tc.name, r, c, g, want)
				}
				if g := d.f32()[64+r*8+c]; g != 0 || math.Signbit(float64(g)) {
					t.Fatalf("%s: zero diagonal matrix [%d][%d] = %v, want 0", tc.name, r, c, g)
				}
				// A times the diagonal matrix: each product in float, k
				// in order, as the emulator computes
				var p float32
				for k := 0; k < 8; k++ {
					var dk float32
					if k == c {
						dk = tc.v
					}
					p = p + a.f32()[r*8+k]*dk
				}
				if g := d.f32()[128+r*8+c]; g != p {
					t.Fatalf("%s: A * diagonal [%d][%d] = %v, want %v", tc.name, r, c, g, p)
				}
				if tc.n > 192 {
					if g := d.f32()[192+r*8+c]; g != want {
						t.Fatalf("%s: half diagonal matrix [%d][%d] = %v, want %v", tc.name, r, c, g, want)
					}
				}
			}
		}
	}
}
