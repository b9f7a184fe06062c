package msl

import (
	"strconv"
	"testing"
)

const simdDivergenceSrc = `#include <metal_stdlib>
#include <metal_simdgroup_matrix>
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
kernel void diverge_load(device float* out [[buffer(0)]],
                         uint lane [[thread_index_in_simdgroup]]) {
    simdgroup_float8x8 a = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
    if (lane < 16) {
        simdgroup_load(a, out);
    } else {
        simdgroup_multiply(a, a, a);
    }
}
kernel void diverge_store(device float* out [[buffer(0)]],
                          uint lane [[thread_index_in_simdgroup]]) {
    simdgroup_float8x8 a = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
    if (lane < 16) {
        simdgroup_store(a, out);
    } else {
        simdgroup_multiply_accumulate(a, a, a, a);
    }
}
`

// Lanes of a SIMD-group calling different SIMD-group functions is a fault
// naming both functions and their lines.
func TestSIMDDivergenceReported(t *testing.T) {
	lib := compileT(t, simdDivergenceSrc, CompileOptions{})
	for _, c := range []struct {
		kernel     string
		line1, op1 string
		line2, op2 string
	}{
		{"diverge", "8", "simd_sum", "10", "simd_max"},
		{"diverge_load", "18", "simdgroup_load", "20", "simdgroup_multiply"},
		{"diverge_store", "27", "simdgroup_store", "29", "simdgroup_multiply_accumulate"},
	} {
		out := newF32(t, 64)
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1})}
		d.Buffers[0] = out.binding()
		_, err := functionT(t, lib, c.kernel).Run(d)
		ke := kernelErrorT(t, err)
		if l := strconv.Itoa(ke.Line); l != c.line1 && l != c.line2 {
			t.Fatalf("%s: error at line %d, want %s or %s: %v", c.kernel, ke.Line, c.line1, c.line2, err)
		}
		if !contains(ke.Msg, c.op1+" at line "+c.line1) || !contains(ke.Msg, c.op2+" at line "+c.line2) {
			t.Fatalf("%s: message %q does not name both call sites (%s at line %s, %s at line %s)", c.kernel, ke.Msg, c.op1, c.line1, c.op2, c.line2)
		}
	}
}
