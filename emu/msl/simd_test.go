package msl

import (
	"strconv"
	"testing"
)

const simdDivergenceSrc = `#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;
kernel void diverge(device float* out [[buffer(0)]],
                    constant uint& mode [[buffer(1)]],
                    uint lane [[thread_index_in_simdgroup]]) {
    float v = float(lane);
    simdgroup_float8x8 a = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
    if (mode == 0 && lane < 16) {
        v = simd_sum(v);
    } else if (mode == 0) {
        v = simd_max(v);
    } else if (mode == 1 && lane < 16) {
        simdgroup_load(a, out);
    } else if (mode == 1) {
        simdgroup_multiply(a, a, a);
    } else if (lane < 16) {
        simdgroup_store(a, out);
    } else {
        simdgroup_multiply_accumulate(a, a, a, a);
    }
    out[lane] = v;
}
`

// Lanes of a SIMD-group calling different simdgroup_matrix functions is a
// fault naming both functions and their lines; SIMD-group functions in the
// branches of an if (mode 0) each run with the lanes of their branch.
func TestSIMDDivergenceReported(t *testing.T) {
	lib := compileT(t, simdDivergenceSrc, CompileOptions{})
	f := functionT(t, lib, "diverge")
	{
		out, m := newF32(t, 64), newMem(t, 4)
		runT(t, f, ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1}), out, m)
		for l, g := range out.f32()[:32] {
			want := float32(120) // 0 + ... + 15
			if l >= 16 {
				want = 31
			}
			if g != want {
				t.Errorf("mode 0, lane %d: %v, want %v", l, g, want)
			}
		}
	}
	for mode, c := range []struct {
		line1, op1 string
		line2, op2 string
	}{
		{},
		{"14", "simdgroup_load", "16", "simdgroup_multiply"},
		{"18", "simdgroup_store", "20", "simdgroup_multiply_accumulate"},
	} {
		if mode == 0 {
			continue
		}
		out, m := newF32(t, 64), newMem(t, 4)
		m.u32()[0] = uint32(mode)
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1})}
		d.Buffers[0], d.Buffers[1] = out.binding(), m.binding()
		_, err := f.Run(d)
		ke := kernelErrorT(t, err)
		if l := strconv.Itoa(ke.Line); l != c.line1 && l != c.line2 {
			t.Fatalf("mode %d: error at line %d, want %s or %s: %v", mode, ke.Line, c.line1, c.line2, err)
		}
		if !contains(ke.Msg, c.op1+" at line "+c.line1) || !contains(ke.Msg, c.op2+" at line "+c.line2) {
			t.Fatalf("mode %d: message %q does not name both call sites (%s at line %s, %s at line %s)", mode, ke.Msg, c.op1, c.line1, c.op2, c.line2)
		}
	}
}
