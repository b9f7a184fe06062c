package msl

import (
	"io/fs"
	"math"
	"regexp"
	"strings"
	"testing"
)

// A program that adds overloads to namespace metal, as MLX's bf16_math.h
// adds the bfloat16_t math functions to metal, metal::fast and
// metal::precise, must still reach the float ones by qualified name:
// metal::exp(float) is float's exp, not bfloat's.
func TestMetalOverloadsAdded(t *testing.T) {
	src := mslPrelude + `
namespace metal {
inline bfloat exp(bfloat x) { return bfloat(__metal_exp(float(x), __METAL_MAYBE_FAST_MATH__)); }
inline bfloat abs(bfloat x) { return bfloat(__metal_fabs(float(x), __METAL_MAYBE_FAST_MATH__)); }
inline bfloat max(bfloat x, bfloat y) { return bfloat(__metal_fmax(float(x), float(y), __METAL_MAYBE_FAST_MATH__)); }
namespace fast {
inline bfloat exp(bfloat x) { return bfloat(__metal_exp(float(x), __METAL_FAST_MATH__)); }
}
namespace precise {
inline bfloat exp(bfloat x) { return bfloat(__metal_exp(float(x), __METAL_PRECISE_MATH__)); }
}
}

kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    float x = 1.0f + float(i) / 64;
    out[0 * 32 + i] = metal::exp(x);
    out[1 * 32 + i] = metal::fast::exp(x);
    out[2 * 32 + i] = metal::precise::exp(x);
    out[3 * 32 + i] = metal::abs(-x);
    out[4 * 32 + i] = metal::max(x, 0.5f);
    out[5 * 32 + i] = float(metal::exp(bfloat(x)));
}
`
	o := runSIMDGroup(t, src, 6*32)
	for i := range 32 {
		x := 1 + float32(i)/64
		e := float32(math.Exp(float64(x)))
		for k, w := range []float32{e, e, e, x, x} {
			if g := o[32*k+i]; math.Abs(float64(g-w)) > 2e-7*float64(w) {
				t.Errorf("result %d, thread %d: %v, want %v (float, not bfloat)", k, i, g, w)
			}
		}
		// bfloat's exp, rounded to bfloat
		xb := math.Float32frombits(math.Float32bits(x) &^ 0xffff) // x is a bfloat value
		if xb != x {
			t.Fatalf("thread %d: %v is no bfloat", i, x)
		}
		if g := o[5*32+i]; math.Abs(float64(g-e)) > float64(e)/128 || math.Float32bits(g)&0xffff != 0 {
			t.Errorf("bfloat exp, thread %d: %v, want %v rounded to bfloat", i, g, e)
		}
	}
}

// The emulator's own names, which the headers a kernel sees declare
// beside Metal's, are reserved ones (__pm_, __PM_), so a program may use
// any other name: a program's own pm_thread, pm_switch, pm_page or
// PM_PAGES compiles and is the program's.
func TestEmulatorNamesReserved(t *testing.T) {
	src := mslPrelude + `
struct pm_thread { uint v; };
struct pm_page { uint v; };
constant uint PM_PAGES = 3;
inline uint pm_switch(uint x) { return x * PM_PAGES; }
inline uint pm_access_fast(pm_thread t, pm_page p) { return t.v + p.v; }
kernel void k(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    pm_thread t = {i};
    pm_page p = {pm_switch(i)};
    out[i] = pm_access_fast(t, p);
}
`
	wantU32(t, "k", runU32(t, compileT(t, src, CompileOptions{}), "k", 64), func(i int) uint32 { return uint32(4 * i) })

	// every macro the headers define is reserved or one of Metal's
	metal := map[string]bool{}
	for _, n := range strings.Fields(`CHAR_BIT FLT_EPSILON FLT_MAX FLT_MIN HALF_EPSILON HALF_MAX HALF_MIN HUGE_VALF INFINITY
		INT_MAX INT_MIN LONG_MAX LONG_MIN MAXFLOAT MAXHALF METAL_FUNC NAN SCHAR_MAX SCHAR_MIN SHRT_MAX SHRT_MIN UCHAR_MAX UINT_MAX ULONG_MAX USHRT_MAX
		M_1_PI_F M_2_PI_F M_2_SQRTPI_F M_E_F M_LN10_F M_LN2_F M_LOG10E_F M_LOG2E_F M_PI_2_F M_PI_4_F M_PI_F M_SQRT1_2_F M_SQRT2_F
		TARGET_OS_EMBEDDED TARGET_OS_IOS TARGET_OS_IPHONE TARGET_OS_MAC TARGET_OS_MACCATALYST TARGET_OS_OSX TARGET_OS_SIMULATOR TARGET_OS_TV TARGET_OS_VISION TARGET_OS_WATCH
		assert coherent constant device kernel thread threadgroup is_function_constant_defined`) {
		metal[n] = true
	}
	define := regexp.MustCompile(`(?m)^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)`)
	vector := regexp.MustCompile(`^(bfloat|bool|char|uchar|short|ushort|int|uint|long|ulong|half|float)[234]$`)
	err := fs.WalkDir(rtFiles, "rt/include", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := rtFiles.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range define.FindAllStringSubmatch(string(b), -1) {
			n := m[1]
			if !strings.HasPrefix(n, "__") && !(n[0] == '_' && n[1] >= 'A' && n[1] <= 'Z') && !metal[n] && !vector.MatchString(n) {
				t.Errorf("%s defines %s, neither reserved nor Metal's", path, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
