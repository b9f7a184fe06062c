package msl

import (
	"testing"

	"github.com/puremetal/puremetal/half"
)

// A cast between vector types of different element types in cast
// notation converts, as in MSL: (float4)h as llama.cpp writes it, in
// expressions with the operators around it, a unary minus before it, a
// cast of a cast, a splat of a scalar; sizeof(float4) and a function of a
// float4 stay what they are. Through a template parameter ((TC)x, TC(x),
// llama.cpp's q4_t and s2_t) it converts too.
func TestVectorCastNotation(t *testing.T) {
	src := mslPrelude + `inline float first(float4) { return 1; }
kernel void k(device float* out [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
    half4 h = half4(half(lane), half(-1.5h), half(0.25h), half(2));
    float4 a = 2 * (float4) h + (float4)(h) * 3;
    float4 b = -(float4) h;
    float4 c = (float4)(int4) float4(1.75f, -1.75f, 2.5f, 0);
    float4 d = (float4) 0.5f + (float4)((lane > 3 ? 1.0f : 0.0f));
    int4 e = (int4) -(float4) h;
    out[0 * 32 + lane] = a.x + a.y + a.z + a.w;
    out[1 * 32 + lane] = b.x + b.y;
    out[2 * 32 + lane] = c.x + 10 * c.y + 100 * c.z + 1000 * c.w;
    out[3 * 32 + lane] = d.w;
    out[4 * 32 + lane] = float(e.y) + first(a) + float(sizeof(float4) * 2);
}
`
	o := runSIMDGroup(t, src, 5*32)
	for l := range 32 {
		hs := []float32{float32(l), -1.5, 0.25, 2}
		sum := float32(0)
		for _, v := range hs {
			sum += 2*v + v*3
		}
		d := float32(0.5)
		if l > 3 {
			d = 1.5
		}
		for k, w := range []float32{sum, -float32(l) + 1.5, 1 - 10 + 200, d, 1 + 1 + 32} {
			if g := o[32*k+l]; g != w {
				t.Errorf("result %d, lane %d: %v, want %v", k, l, g, w)
			}
		}
	}

	// through template parameters, as llama.cpp's q4_t and s2_t
	tsrc := mslPrelude + `template <typename TC, typename T> TC widen(T x) { return (TC) x; }
template <typename TC, typename T> TC widen2(T x) { return TC(x); }
kernel void k(device float4* out [[buffer(0)]], device half4* in [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    out[i] = widen<float4>(in[i]) + widen2<float4>(in[i]);
}
`
	lib := compileT(t, tsrc, CompileOptions{})
	out, in := newMem(t, 16*32), newMem(t, 8*32)
	for i := range in.u16() {
		in.u16()[i] = uint16(half.ToFloat16(float32(i%7) - 2.5))
	}
	runBufs(t, lib, "k", 32, out, in)
	for i, g := range out.f32() {
		if w := 2 * (float32(i%7) - 2.5); g != w {
			t.Fatalf("component %d: %v, want %v", i, g, w)
		}
	}
}
