package msl

import "testing"

const simdDivergenceSrc = `#include <metal_stdlib>
using namespace metal;

kernel void diverge(device float* out [[buffer(0)]],
                    uint lane [[thread_index_in_simdgroup]]) {
    float v = float(lane);
    if (lane < 16) {
        v = simd_sum(v);
    } else {
        v = simd_max(v);
    }
    out[lane] = v;
}
`

func TestSIMDDivergenceReported(t *testing.T) {
	lib := compileT(t, simdDivergenceSrc, CompileOptions{})
	f := functionT(t, lib, "diverge")
	out := newF32(t, 32)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0] = out.binding()
	_, err := f.Run(d)
	ke := kernelErrorT(t, err)
	if ke.Line != 8 && ke.Line != 10 {
		t.Fatalf("error at line %d, want 8 or 10: %v", ke.Line, err)
	}
	if !contains(ke.Msg, "simd_sum at line 8") || !contains(ke.Msg, "simd_max at line 10") {
		t.Fatalf("message %q does not name both call sites", ke.Msg)
	}
}
