package msl

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// refusalForm is how every refusal reads: an Apple-style diagnostic at the
// program's own file, line and column.
var refusalForm = regexp.MustCompile(`^` + regexp.QuoteMeta(DefaultFileName) + `:(\d+):(\d+): error: `)

// translationArtefacts are what the translator's output and the shim
// headers name, which a diagnostic must not show: the translator's
// rewrites (__pm_ helpers, ->* casts), the runtime's names and the shim
// headers' files.
var translationArtefacts = []string{"__pm", "pm_", "->*", "<translated>", "prelude.h", "metal_stdlib:", "metal_simdgroup_matrix:",
	"metal_matrix:", "__attribute__", "address_space", "PM_"}

// Every program using something the emulated device does not support is
// refused with a diagnostic at the line and column of the use, saying so,
// and naming nothing of the translation.
func TestRefusalWording(t *testing.T) {
	needClang(t)
	cases := []struct {
		name, src string
		line      int
	}{
		{"texture", "kernel void k(texture2d<float> t [[texture(0)]], device float* o [[buffer(0)]]) { o[0] = 1; }\n", 3},
		{"sampler", "kernel void k(device float* o [[buffer(0)]]) {\n  sampler s;\n  o[0] = 1;\n}\n", 4},
		{"vertex", "vertex float4 v(uint id [[vertex_id]]) { return 0; }\n", 3},
		{"fragment", "fragment half4 f() { return 0; }\n", 3},
		{"stage_in", "kernel void k(device float* x [[stage_in]]) {}\n", 3},
		{"texture attribute", "kernel void k(device float* x [[texture(0)]]) {}\n", 3},
		{"imageblock", "kernel void k(device float* x [[buffer(0)]]) {\n  imageblock<float> b;\n}\n", 4},
		{"visible function table", "kernel void k(device float* x [[buffer(0)]], visible_function_table<void()> f [[buffer(1)]]) {}\n", 3},
		{"ray tracing", "kernel void k(device float* x [[buffer(0)]], instance_acceleration_structure a [[buffer(1)]]) {}\n", 3},
		{"indirect command buffer", "kernel void k(device float* x [[buffer(0)]], command_buffer c [[buffer(1)]]) {}\n", 3},
		{"raster order group", "kernel void k(device float* x [[buffer(0)]]) {\n  raster_order_group r;\n}\n", 4},
		{"simdgroup_matrix 16x16", "kernel void k(device float* x [[buffer(0)]]) {\n  simdgroup_matrix<float, 16, 16> m;\n  (void)m;\n}\n", 4},
		{"threadgroup bfloat", "kernel void k(threadgroup bfloat4* x [[threadgroup(0)]]) {}\n", 3},
		{"include", "#include \"mine.h\"\nkernel void k(device float* x [[buffer(0)]]) {}\n", 3},
		{"MetalPerformancePrimitives", "#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>\nkernel void k(device float* x [[buffer(0)]]) {}\n", 3},
		{"vector cast through a template parameter", "template <typename T> float conv(half4 h) { return T(h).x; }\nkernel void k(device float* x [[buffer(0)]]) {\n  x[0] = conv<float4>(half4(1));\n}\n", 3},
		{"deduced host_name", "template <typename T> [[max_total_threads_per_threadgroup(sizeof(T) * 64)]] kernel void k(device T* x [[buffer(0)]]) {}\ntemplate [[host_name(\"kf\")]] kernel void k(device float*);\n", 4},
		{"private memory", "kernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  float big[20000];\n  for (int j = 0; j < 20000; j++) big[j] = x[j];\n  x[i] = big[int(x[0])];\n}\n", 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := mslPrelude + c.src
			_, err := Compile(src, CompileOptions{CacheDir: testCacheDir})
			if err == nil {
				t.Fatalf("compiled")
			}
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is not a *CompileError", err, err)
			}
			msg := ce.Log
			first := strings.SplitN(msg, "\n", 2)[0]
			m := refusalForm.FindStringSubmatch(first)
			if m == nil || m[1] != strconv.Itoa(c.line) {
				t.Errorf("first line %q is not an error at %s:%d:col", first, DefaultFileName, c.line)
			}
			if !strings.Contains(msg, "not supported by the emulated device") {
				t.Errorf("the diagnostic does not say what is not supported by the emulated device:\n%s", msg)
			}
			for _, a := range translationArtefacts {
				if strings.Contains(msg, a) {
					t.Errorf("the diagnostic shows %q of the translation:\n%s", a, msg)
				}
			}
			if strings.Contains(err.Error(), "__pm") || strings.Contains(err.Error(), "->*") {
				t.Errorf("the error shows the translation: %v", err)
			}
		})
	}
}

// A vector function constant is refused when a value is given for it.
func TestRefusalVectorFunctionConstant(t *testing.T) {
	lib := compileT(t, mslPrelude+"constant float2 c [[function_constant(0)]];\nkernel void k(device float2* x [[buffer(0)]]) {\n  x[0] = c;\n}\n", CompileOptions{})
	_, err := lib.Specialize("k", []ConstantValue{{Index: 0, Type: "float2", Bytes: make([]byte, 8)}})
	if err == nil || !strings.Contains(err.Error(), "float2 is not supported by the emulated device") {
		t.Fatalf("got %v, want a vector function constant not supported by the emulated device", err)
	}
	for _, a := range translationArtefacts {
		if strings.Contains(err.Error(), a) {
			t.Errorf("the error shows %q of the translation: %v", a, err)
		}
	}
}

// More threadgroup variables than the emulator keeps is a fault saying so.
func TestRefusalThreadgroupVariables(t *testing.T) {
	var b strings.Builder
	b.WriteString(mslPrelude + "kernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n")
	for v := range 65 {
		fmt.Fprintf(&b, "  threadgroup float v%d; v%d = x[%d]; x[%d] = v%d;\n", v, v, v, v, v)
	}
	b.WriteString("}\n")
	lib := compileT(t, b.String(), CompileOptions{})
	x := newF32(t, 65)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{1, 1, 1})}
	d.Buffers[0] = x.binding()
	_, err := functionT(t, lib, "k").Run(d)
	ke := kernelErrorT(t, err)
	if !strings.Contains(ke.Msg, "more than 64 threadgroup variables in a kernel is not supported by the emulated device") {
		t.Fatalf("got %v, want more than 64 threadgroup variables not supported by the emulated device", err)
	}
	for _, a := range translationArtefacts {
		if strings.Contains(err.Error(), a) {
			t.Errorf("the error shows %q of the translation: %v", a, err)
		}
	}
}
