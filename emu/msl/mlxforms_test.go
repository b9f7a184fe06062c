package msl

import (
	"testing"

	"github.com/puremetal/puremetal/half"
)

// The forms below are MLX's kernels' (gemv, fft, steel, sort, quantized),
// each reduced to a small program that runs.

// vec<T, N>(x) and metal::vec<T, N>(x) convert the components of a vector
// of another element type, as in MSL (MLX's gemv: vec<AccT, 4>(w4[i]) of a
// half4), where a reinterpretation would be of a different size.
func TestVecTemplateCast(t *testing.T) {
	src := mslPrelude + `
template <typename T, typename AccT>
[[kernel]] void k(device const vec<T, 4>* in [[buffer(0)]], device float* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  const vec<AccT, 4> a = vec<AccT, 4>(in[i]);
  metal::vec<int, 4> n = metal::vec<int, 4>(a * 2);
  vec<AccT, 2> two = vec<AccT, 2>(1, 2);
  vec<AccT, 2> three = i < 100 ? vec<AccT, 2>(two.y) : two;
  out[i] = a.x + a.y + a.z + a.w + float(n.w) + two.y + three.x;
}
template [[host_name("k_h")]] [[kernel]] decltype(k<half, float>) k<half, float>;
`
	lib := compileT(t, src, CompileOptions{})
	in, out := newMem(t, 8*32), newF32(t, 32)
	for i := range in.u16() {
		in.u16()[i] = uint16(half.ToFloat16(float32(i%7) + 0.25))
	}
	runBufs(t, lib, "k_h", 32, in, out)
	for i, g := range out.f32() {
		var w float32
		for c := 0; c < 4; c++ {
			w += float32((4*i+c)%7) + 0.25
		}
		w += float32(int32(2*(float32((4*i+3)%7)+0.25))) + 2 + 2
		if g != w {
			t.Fatalf("out[%d] = %v, want %v", i, g, w)
		}
	}
}
