package msl

import (
	"strings"
	"testing"
)

// As in Metal, a buffer the function does not use needs no binding: MLX's
// gemv declares bias [[buffer(2)]] and reads it only when its kDoAxpby
// template argument is true, and its host binds nothing there otherwise.
// An access through an unbound buffer is an out-of-bounds fault that names
// it.
func TestUnboundBufferUnusedRuns(t *testing.T) {
	const src = mslPrelude + `template <bool Bias>
[[kernel]] void scale(device const float* x [[buffer(0)]],
                      device const float* bias [[buffer(1)]],
                      device float* out [[buffer(2)]],
                      constant float& alpha [[buffer(3)]],
                      uint i [[thread_position_in_grid]]) {
    float v = 2 * x[i];
    if (Bias) {
        v = alpha * v + bias[i];
    }
    out[i] = v;
}
template [[host_name("scale")]] [[kernel]] void scale<false>(device const float*, device const float*, device float*, constant float&, uint);
template [[host_name("scale_bias")]] [[kernel]] void scale<true>(device const float*, device const float*, device float*, constant float&, uint);
`
	lib := compileT(t, src, CompileOptions{})
	const n = 64
	x, out := newF32(t, n), newF32(t, n)
	fillRandom(x.f32(), 1)
	d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0], d.Buffers[2] = x.binding(), out.binding()
	if _, err := functionT(t, lib, "scale").Run(d); err != nil {
		t.Fatalf("buffers 1 and 3 unbound and unused: %v", err)
	}
	for i, g := range out.f32() {
		if w := 2 * x.f32()[i]; g != w {
			t.Fatalf("out[%d] = %v, want %v", i, g, w)
		}
	}
	_, err := functionT(t, lib, "scale_bias").Run(d)
	ke := kernelErrorT(t, err)
	if !ke.OutOfBounds() || ke.Line != 11 || !strings.HasPrefix(ke.Msg, "buffer(1) (parameter bias) is not bound; buffer(3) (parameter alpha) is not bound; the access: ") {
		t.Fatalf("buffers 1 and 3 unbound and used: %v (line %d), want an out-of-bounds fault at line 11 naming them first", err, ke.Line)
	}
}
