package msl

import (
	"errors"
	"strings"
	"testing"
)

// runU32 runs the named kernel over n threads (threadgroups of 32) with
// one uint output buffer at index 0, poisoned first, and returns it.
func runU32(t *testing.T, lib *Library, name string, n int) []uint32 {
	t.Helper()
	out := newMem(t, 4*n)
	for i := range out.u32() {
		out.u32()[i] = 0xDEADBEEF
	}
	d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0] = out.binding()
	if _, err := functionT(t, lib, name).Run(d); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out.u32()
}

func wantU32(t *testing.T, what string, got []uint32, want func(i int) uint32) {
	t.Helper()
	for i, g := range got {
		if w := want(i); g != w {
			t.Fatalf("%s: element %d = %#x, want %#x", what, i, g, w)
		}
	}
}

// The same kernel defined in both branches of #if: only the branch taken
// exists, as with Apple's compiler (the source is preprocessed before the
// translator reads it).
func TestPreprocessConditionalKernel(t *testing.T) {
	src := mslPrelude + `#if 1
kernel void k(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = i * 3; }
#else
kernel void k(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = 7; }
#endif
`
	lib := compileT(t, src, CompileOptions{})
	if names := lib.FunctionNames(); len(names) != 1 || names[0] != "k" {
		t.Fatalf("functions %v, want [k]", names)
	}
	wantU32(t, "#if 1 branch", runU32(t, lib, "k", 40), func(i int) uint32 { return uint32(3 * i) })
}

// Kernels and instantiations declared through macros, one macro per idea
// and one line per variant, as MLX's instantiate_kernel and llama.cpp's
// kernel families are.
func TestPreprocessMacroDeclaredKernels(t *testing.T) {
	src := mslPrelude + `
#define instantiate_kernel(name, func, ...) \
  template [[host_name(name)]] [[kernel]] decltype(func<__VA_ARGS__>) func<__VA_ARGS__>;

template <typename T, int N>
[[kernel]] void scale(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    out[i] = uint(T(i) * T(N));
}

#define instantiate_scale(tname, type, n) \
  instantiate_kernel("scale_" #tname "_" #n, scale, type, n)

instantiate_scale(float, float, 2)
instantiate_scale(uint, uint, 5)

#define DEFINE_FILL(name, value) \
kernel void fill_##name(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = value + i; }
DEFINE_FILL(a, 100)
DEFINE_FILL(b, PM_TEST_BASE)
`
	lib := compileT(t, src, CompileOptions{PreprocessorMacros: map[string]string{"PM_TEST_BASE": "(1 << 20)"}})
	if got, want := strings.Join(lib.FunctionNames(), ","), "fill_a,fill_b,scale_float_2,scale_uint_5"; got != want {
		t.Fatalf("functions %s, want %s", got, want)
	}
	wantU32(t, "scale_float_2", runU32(t, lib, "scale_float_2", 33), func(i int) uint32 { return uint32(2 * i) })
	wantU32(t, "scale_uint_5", runU32(t, lib, "scale_uint_5", 33), func(i int) uint32 { return uint32(5 * i) })
	wantU32(t, "fill_a", runU32(t, lib, "fill_a", 33), func(i int) uint32 { return uint32(100 + i) })
	wantU32(t, "fill_b", runU32(t, lib, "fill_b", 33), func(i int) uint32 { return uint32(1<<20 + i) })
}

// Apple's predefined macros: __METAL_VERSION__ follows the language
// version, __METAL_MACOS__ and __METAL__ are defined.
func TestPreprocessPredefinedMacros(t *testing.T) {
	src := mslPrelude + `kernel void v(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
#if defined(__METAL_MACOS__) && defined(__METAL__)
    out[i] = __METAL_VERSION__;
#else
    out[i] = 0;
#endif
}
`
	for _, c := range []struct {
		version uint32
		want    uint32
	}{{0, 310}, {0x30000, 300}, {0x30002, 320}, {0x40000, 400}} {
		lib := compileT(t, src, CompileOptions{LanguageVersion: c.version})
		wantU32(t, "__METAL_VERSION__", runU32(t, lib, "v", 1), func(int) uint32 { return c.want })
	}
}

// Diagnostics and kernel faults still name the .metal line after macros
// and conditionals have been expanded.
func TestPreprocessKeepsSourceLines(t *testing.T) {
	src := mslPrelude + `#define LONG_MACRO(x) \
    ((x) + \
     1)
#if 0
this line is never compiled
#endif
kernel void oob(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    out[LONG_MACRO(i) * 1000] = 1;
}
`
	lib := compileT(t, src, CompileOptions{FileName: "lines.metal"})
	out := newMem(t, 64)
	d := &Dispatch{Grid: ThreadsGrid([3]int{1, 1, 1}, [3]int{1, 1, 1})}
	d.Buffers[0] = out.binding()
	_, err := functionT(t, lib, "oob").Run(d)
	ke := kernelErrorT(t, err)
	if ke.File != "lines.metal" || ke.Line != 10 || !ke.OutOfBounds() {
		t.Fatalf("fault %v at %s:%d, want an out-of-bounds access at lines.metal:10", ke, ke.File, ke.Line)
	}

	bad := strings.Replace(src, "out[LONG_MACRO(i) * 1000] = 1;", "out[i] = undeclared_value;", 1)
	_, err = Compile(bad, CompileOptions{FileName: "lines.metal", CacheDir: testCacheDir})
	var ce *CompileError
	if !errors.As(err, &ce) || ce.File != "lines.metal" || ce.Line != 10 || !strings.Contains(ce.Log, "undeclared_value") {
		t.Fatalf("compile error %v, want one at lines.metal:10 naming undeclared_value", err)
	}
	// the translator's own errors too
	bad = strings.Replace(src, "device uint* out [[buffer(0)]]", "device uint* out [[buffer(99)]]", 1)
	_, err = Compile(bad, CompileOptions{FileName: "lines.metal", CacheDir: testCacheDir})
	if !errors.As(err, &ce) || ce.Line != 9 || !strings.Contains(ce.Log, "buffer index") {
		t.Fatalf("compile error %v, want a buffer index error at lines.metal:9", err)
	}
}

func TestPreprocessErrors(t *testing.T) {
	needClang(t)
	for _, c := range []struct {
		src    string
		macros map[string]string
		want   string
	}{
		{src: "#include \"utils.h\"\n", want: "#include of utils.h is not supported by the emulated device"},
		{src: "#error custom failure\n", want: "custom failure"},
		{src: "kernel void f() {}\n", macros: map[string]string{"1BAD": "1"}, want: `preprocessor macro name "1BAD" is not an identifier`},
		{src: "kernel void f() {}\n", macros: map[string]string{"A": "1\n#define B"}, want: "macro A contains a line break"},
	} {
		_, err := Compile(c.src, CompileOptions{CacheDir: testCacheDir, PreprocessorMacros: c.macros})
		if err == nil || !strings.Contains(err.Error()+logOf(err), c.want) {
			t.Errorf("Compile(%q) = %v, want an error containing %q", c.src, err, c.want)
		}
	}
}

func logOf(err error) string {
	var ce *CompileError
	if errors.As(err, &ce) {
		return ce.Log
	}
	return ""
}
