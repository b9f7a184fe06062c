package msl

import (
	"math"
	"testing"
)

// Forms llama.cpp's ggml-metal.metal writes: #pragma unroll with a count
// computed by a macro, MAXHALF, fmin and fmax with a scalar first argument
// and a vector second, and make_filled_simdgroup_matrix<float, 8> (rows
// default to columns).
func TestLlamaForms(t *testing.T) {
	src := mslPrelude + `#define MIN(x, y) ((x) < (y) ? (x) : (y))
#define NSG 2

kernel void k(device float* out [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
    float s = 0;
#pragma unroll (MIN(8/2, 4*NSG))
    for (short i = 0; i < 4; i++) {
        s += float(i + lane);
    }
    out[0 * 32 + lane] = s;
    out[1 * 32 + lane] = float(-MAXHALF);
    float4 x = float4(float(lane) / 4 - 2);
    float4 h = x * fmax(0, fmin(1, x / 6 + 0.5f));
    out[2 * 32 + lane] = h.w;
    simdgroup_float8x8 m = make_filled_simdgroup_matrix<float, 8>(float(lane == 0 ? 3 : 3));
    threadgroup float tile[64];
    simdgroup_store(m, tile, 8);
    simdgroup_barrier(mem_flags::mem_threadgroup);
    out[3 * 32 + lane] = tile[lane] + tile[lane + 32];
}
`
	o := runSIMDGroup(t, src, 4*32)
	for l := range 32 {
		x := float32(l)/4 - 2
		hs := x * float32(math.Max(0, math.Min(1, float64(x/6+0.5))))
		for k, w := range []float32{float32(6 + 4*l), -65504, hs, 6} {
			if g := o[32*k+l]; g != w {
				t.Errorf("result %d, lane %d: %v, want %v", k, l, g, w)
			}
		}
	}
}
