package msl

import (
	"strings"
	"testing"
)

// Metal's matrix types (float4x4, half2x4, matrix<bfloat, 4, 4>), which
// llama.cpp's dequantization helpers use, fail with an error that says so;
// a variable named matrix does not.
func TestMatrixTypesUnsupported(t *testing.T) {
	for _, c := range []struct {
		src, want string
		line      int
	}{
		{"kernel void k(device float4x4* m [[buffer(0)]]) {}\n", "matrix types (float4x4) is not supported by the emulated device", 1},
		{"kernel void k(device float* x [[buffer(0)]]) {\n half2x4 r;\n}\n", "matrix types (half2x4) is not supported by the emulated device", 2},
		{"\ntypedef matrix<bfloat, 4, 4> bfloat4x4;\n", "matrix types (matrix<T, C, R>) are not supported by the emulated device", 2},
	} {
		_, err := translate(c.src, "e.metal", nil, "")
		ce, ok := err.(*CompileError)
		if !ok || !strings.Contains(ce.Log, c.want) || ce.Line != c.line {
			t.Errorf("translate(%q) = %v, want a compile error at line %d containing %q", c.src, err, c.line, c.want)
		}
	}
	src := "kernel void k(device float* matrix [[buffer(0)]], constant int& n [[buffer(1)]]) {\n int matrix_n = n; if (matrix_n < n) matrix[0] = matrix[1] < 1 ? 1 : 0;\n}\n"
	if _, err := translate(src, "e.metal", nil, ""); err != nil {
		t.Errorf("a buffer named matrix: %v", err)
	}
}

// A cast between vector types of different element types in cast
// notation, as llama.cpp's kernels write (TC) x and s2_t(x) with template
// parameters and (float4) x: in MSL a conversion, here an error that says
// so and how to write it.
func TestVectorCastNotation(t *testing.T) {
	needClang(t)
	src := `#include <metal_stdlib>
using namespace metal;
template <typename TC, typename T> TC widen(T x) { return (TC) x; }
template <typename TC, typename T> TC widen2(T x) { return TC(x); }
kernel void k(device float4* out [[buffer(0)]], device half4* in [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    out[i] = widen<float4>(in[i]) + widen2<float4>(in[i]) + (float4) in[i];
}
`
	_, err := Compile(src, CompileOptions{CacheDir: testCacheDir})
	want := "a cast from half4 to float4 (a conversion in MSL) in cast notation, (float4)x or T(x) with T a template parameter or a typedef, is not supported by the emulated device: write float4(x)"
	log := logOf(err)
	for _, at := range []string{"program_source:3:59: error: " + want, "program_source:4:60: error: " + want, "program_source:6:61: error: " + want} {
		if !strings.Contains(log, at) {
			t.Errorf("Compile = %v, want an error %q", err, at)
		}
	}
}
