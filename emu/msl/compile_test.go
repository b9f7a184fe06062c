package msl

import (
	"errors"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/internal/clang"
)

func compileErrorT(t *testing.T, src string) *CompileError {
	t.Helper()
	needClang(t)
	_, err := Compile(src, CompileOptions{CacheDir: testCacheDir})
	return errorAs[*CompileError](t, err, "the source compiled; want a compile error")
}

func TestDoubleRejected(t *testing.T) {
	ce := compileErrorT(t, `kernel void d(device float* out [[buffer(0)]],
              uint i [[thread_position_in_grid]]) {
    double x = 1.0;
    out[i] = x;
}
`)
	if ce.Line != 3 || !strings.Contains(ce.Log, "'double' is not supported") {
		t.Fatalf("error at line %d, want 3 naming double\n%s", ce.Line, ce.Log)
	}
}

func TestUnsupportedParameterReported(t *testing.T) {
	ce := compileErrorT(t, `kernel void tex(texture2d<float> t [[texture(0)]],
                device float* out [[buffer(0)]]) {
}
`)
	if ce.Line != 1 || !strings.Contains(ce.Log, "[[texture(n)]] parameters (textures) on t is not supported by the emulated device") {
		t.Fatalf("error at line %d, want 1 naming [[texture(n)]]\n%s", ce.Line, ce.Log)
	}
}

func TestFileNameInDiagnostics(t *testing.T) {
	needClang(t)
	_, err := Compile("kernel void k(device float* o [[buffer(0)]]) {\n  o[0] = undefined_name;\n}\n",
		CompileOptions{CacheDir: testCacheDir, FileName: "mine.metal"})
	var ce *CompileError
	if !errors.As(err, &ce) || ce.File != "mine.metal" || ce.Line != 2 || !strings.Contains(ce.Log, "mine.metal:2:") {
		t.Fatalf("got %v, want a compile error at mine.metal:2", err)
	}
}

// Compile-time constants: an empty constant would make these arrays
// variable-length, which the build rejects.
func TestConstantsAreCompileTimeConstants(t *testing.T) {
	lib := compileT(t, mslPrelude+`constant uint N = 4;
constant constexpr int M = 3;
constant float table[N] = {1.0, 2.0, 4.0, 8.0};

kernel void consts(device float* out [[buffer(0)]],
                   uint i [[thread_position_in_grid]]) {
    float a[N];
    int b[M];
    #pragma clang loop unroll(full)
    for (uint k = 0; k < N; k++) {
        a[k] = table[k] * float(i);
    }
    for (int k = 0; k < M; k++) {
        b[k] = k;
    }
    out[i] = a[i % N] + float(b[i % M]) + M_PI_F * 0.0;
}
`, CompileOptions{})
	f := functionT(t, lib, "consts")
	out := newF32(t, 8)
	poison(out.f32())
	runT(t, f, ThreadsGrid([3]int{8, 1, 1}, [3]int{8, 1, 1}), out)
	table := []float32{1, 2, 4, 8}
	for i := 0; i < 8; i++ {
		if want := table[i%4]*float32(i) + float32(i%3); out.f32()[i] != want {
			t.Fatalf("out[%d] = %v, want %v", i, out.f32()[i], want)
		}
	}
	_ = compileErrorT(t, `kernel void vla(device float* out [[buffer(0)]], constant uint& n [[buffer(1)]]) {
    float a[n];
    out[0] = a[0];
}
`)
}

// Templates instantiated under host names, kernels in a namespace, and the
// same kernel name in two libraries.
const templateSrc = mslPrelude + `
template <typename T, int SCALE>
kernel void scale(device const T* in [[buffer(0)]],
                  device T* out [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
    out[i] = in[i] * T(SCALE);
}

template [[host_name("scale_f32_2")]] kernel void scale<float, 2>(device const float*, device float*, uint);
typedef decltype(scale<int, 3>) scale_i32_t;
template [[host_name("scale_i32_3")]] kernel scale_i32_t scale<int, 3>;

namespace ops {
kernel void same_name(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    out[i] = 1.0;
}
}
`

func TestTemplatesAndNames(t *testing.T) {
	lib := compileT(t, templateSrc, CompileOptions{})
	if got := strings.Join(lib.FunctionNames(), ","); got != "same_name,scale_f32_2,scale_i32_3" {
		t.Fatalf("FunctionNames = %s", got)
	}
	if _, err := lib.Function("scale"); err == nil || !strings.Contains(err.Error(), "scale_f32_2") {
		t.Fatalf("Function(unknown) = %v, want an error listing the names", err)
	}
	in, out := newF32(t, 64), newF32(t, 64)
	fillRandom(in.f32(), 4)
	fs := functionT(t, lib, "scale_f32_2")
	if len(fs.Params) != 3 || fs.Params[0].Name != "in" || !fs.Params[0].ReadOnly || fs.Params[1].ReadOnly || fs.Params[2].Kind != BuiltIn || fs.Params[2].BuiltIn != "thread_position_in_grid" {
		t.Fatalf("params %+v", fs.Params)
	}
	d := &Dispatch{Grid: ThreadsGrid([3]int{64, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0], d.Buffers[1] = in.binding(), out.binding()
	poison(out.f32())
	if _, err := fs.Run(d); err != nil {
		t.Fatal(err)
	}
	for i := range out.f32() {
		if out.f32()[i] != in.f32()[i]*2 {
			t.Fatalf("scale_f32_2: out[%d] = %v, want %v", i, out.f32()[i], in.f32()[i]*2)
		}
	}
	for i := range in.i32() {
		in.i32()[i] = int32(i*7 - 100)
	}
	if _, err := functionT(t, lib, "scale_i32_3").Run(d); err != nil {
		t.Fatal(err)
	}
	for i := range out.i32() {
		if out.i32()[i] != int32(i*7-100)*3 {
			t.Fatalf("scale_i32_3: out[%d] = %v", i, out.i32()[i])
		}
	}
	// another library with a kernel of the same name
	other := compileT(t, `kernel void same_name(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    out[i] = 2.0;
}
`, CompileOptions{})
	d = &Dispatch{Grid: ThreadsGrid([3]int{64, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0] = out.binding()
	for _, c := range []struct {
		lib  *Library
		want float32
	}{{lib, 1}, {other, 2}, {lib, 1}} {
		poison(out.f32())
		if _, err := functionT(t, c.lib, "same_name").Run(d); err != nil {
			t.Fatal(err)
		}
		for i := range out.f32() {
			if out.f32()[i] != c.want {
				t.Fatalf("same_name of library %s: out[%d] = %v, want %v", c.lib.Path(), i, out.f32()[i], c.want)
			}
		}
	}
}

func TestCompileCache(t *testing.T) {
	src := strings.Replace(vecAddSrc, "vec_add", "vec_add_cached", 1)
	opts := CompileOptions{CacheDir: t.TempDir()}
	first := compileT(t, src, opts)
	second := compileT(t, src, opts)
	if first.Cached() || !second.Cached() || first.Path() != second.Path() {
		t.Fatalf("cached: first %v second %v, paths %s %s", first.Cached(), second.Cached(), first.Path(), second.Path())
	}
	fast := compileT(t, src, CompileOptions{CacheDir: opts.CacheDir, FastMath: true})
	if fast.Cached() || fast.Path() == first.Path() {
		t.Fatalf("FastMath compiled into the same cache entry")
	}
}

// Processes of several architectures may share a cache directory (an arm64
// process under qemu-user beside the host's): the runtime is built once
// per compiler and target.
func TestRuntimeFilePerTarget(t *testing.T) {
	a := clang.Compiler{Path: "/usr/bin/clang++", Version: "clang version 14\n", Target: "x86_64-linux-gnu"}
	b := a
	b.Target, b.Cross = "aarch64-linux-gnu", true
	if rtLibName(a) == rtLibName(b) {
		t.Fatalf("runtimes for %s and %s share the file %s", a.Target, b.Target, rtLibName(a))
	}
}
