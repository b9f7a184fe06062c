package msl

import (
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"strings"
	"testing"
	"unsafe"

	"github.com/puremetal/puremetal/half"
)

// stdlibFamilies names every function of the Metal Shading Language
// Specification's standard library families (sections "Common Functions",
// "Integer Functions", "Relational Functions", "Math Functions", "Geometric
// Functions", "Atomic Functions", "SIMD-Group Functions" and "Quad-Group
// Functions"). Each family's test calls every one of them.
var stdlibFamilies = map[string][]string{
	"common": {"clamp", "mix", "saturate", "sign", "smoothstep", "step"},
	"integer": {"abs", "absdiff", "addsat", "clamp", "clz", "ctz", "extract_bits", "hadd", "insert_bits",
		"mad24", "madhi", "madsat", "max", "max3", "median3", "min", "min3", "mul24", "mulhi", "popcount",
		"reverse_bits", "rhadd", "rotate", "subsat"},
	"relational": {"all", "any", "isfinite", "isinf", "isnan", "isnormal", "isordered", "isunordered", "not",
		"select", "signbit"},
	"math": {"acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "copysign", "cos", "cosh",
		"cospi", "divide", "exp", "exp2", "exp10", "fabs", "abs", "fdim", "floor", "fma", "fmax", "max",
		"fmax3", "max3", "fmedian3", "median3", "fmin", "min", "fmin3", "min3", "fmod", "fract", "frexp",
		"ilogb", "ldexp", "log", "log2", "log10", "modf", "nextafter", "pow", "pown", "powr", "rint", "round",
		"rsqrt", "sin", "sincos", "sinh", "sinpi", "sqrt", "tan", "tanh", "tanpi", "trunc"},
	"geometric": {"cross", "distance", "distance_squared", "dot", "faceforward", "length", "length_squared",
		"normalize", "reflect", "refract"},
	"atomic": {"atomic_store_explicit", "atomic_load_explicit", "atomic_exchange_explicit",
		"atomic_compare_exchange_weak_explicit", "atomic_fetch_add_explicit", "atomic_fetch_and_explicit",
		"atomic_fetch_max_explicit", "atomic_fetch_min_explicit", "atomic_fetch_or_explicit",
		"atomic_fetch_sub_explicit", "atomic_fetch_xor_explicit", "atomic_max_explicit", "atomic_min_explicit"},
	"simd": {"simd_active_threads_mask", "simd_all", "simd_and", "simd_any", "simd_ballot", "simd_broadcast",
		"simd_broadcast_first", "simd_is_first", "simd_max", "simd_min", "simd_or", "simd_prefix_exclusive_product",
		"simd_prefix_exclusive_sum", "simd_prefix_inclusive_product", "simd_prefix_inclusive_sum", "simd_product",
		"simd_shuffle", "simd_shuffle_and_fill_down", "simd_shuffle_and_fill_up", "simd_shuffle_down",
		"simd_shuffle_rotate_down", "simd_shuffle_rotate_up", "simd_shuffle_up", "simd_shuffle_xor", "simd_sum",
		"simd_xor"},
	"quad": {"quad_active_threads_mask", "quad_all", "quad_and", "quad_any", "quad_ballot", "quad_broadcast",
		"quad_broadcast_first", "quad_is_first", "quad_max", "quad_min", "quad_or", "quad_prefix_exclusive_product",
		"quad_prefix_exclusive_sum", "quad_prefix_inclusive_product", "quad_prefix_inclusive_sum", "quad_product",
		"quad_shuffle", "quad_shuffle_and_fill_down", "quad_shuffle_and_fill_up", "quad_shuffle_down",
		"quad_shuffle_rotate_down", "quad_shuffle_rotate_up", "quad_shuffle_up", "quad_shuffle_xor", "quad_sum",
		"quad_xor"},
}

// A stdCase is one MSL expression and the value it must have. kind is the
// expression's type: 'f' float, 'h' half, 'i' int, 'u' uint (bool and
// integer results of other widths convert to it). tol is in units in the
// last place of the result type (0: exact).
type stdCase struct {
	expr string
	kind byte
	want float64
	tol  float64
}

// The kernel of a scalar family test reads its inputs from buffers, so
// that nothing is computed at compile time: floats a = 0.75, b = -2.5,
// c = 3.25, p = 2, q = 0.1, z = 0, inf, nan; ints ia = -7, ib = 13,
// ic = 0x12345678; uints ua = 0xF0000001, ub = 5, uc = 0x80000000.
var stdF = []float32{0.75, -2.5, 3.25, 2, 0.1, 0, float32(math.Inf(1)), float32(math.NaN())}
var stdI = []int32{-7, 13, 0x12345678}
var stdU = []uint32{0xF0000001, 5, 0x80000000}

const stdHead = mslPrelude + `kernel void k(device const float* fin [[buffer(0)]], device const int* iin [[buffer(1)]],
              device const uint* uin [[buffer(2)]], device uint* out [[buffer(3)]], uint tid [[thread_position_in_grid]]) {
    float a = fin[0], b = fin[1], c = fin[2], p = fin[3], q = fin[4], z = fin[5], inf = fin[6], nan = fin[7];
    int ia = iin[0], ib = iin[1], ic = iin[2];
    uint ua = uin[0], ub = uin[1], uc = uin[2];
    half ha = half(a), hb = half(b), hc = half(c);
    float2 v2 = float2(a, b); float3 v3 = float3(a, b, c); float4 v4 = float4(a, b, c, p);
    int2 i2 = int2(ia, ib); uint2 u2 = uint2(ua, ub); half2 h2 = half2(ha, hb);
    float tmpf; float2 tmp2; int tmpi; half tmph; int2 tmpi2;
    (void)tmpf; (void)tmp2; (void)tmpi; (void)tmph; (void)tmpi2; (void)z; (void)inf; (void)nan; (void)q;
    (void)ic; (void)uc; (void)v3; (void)v4; (void)i2; (void)u2; (void)h2; (void)hc;
`

func stdSource(cases []stdCase) string {
	var b strings.Builder
	b.WriteString(stdHead)
	for k, c := range cases {
		switch c.kind {
		case 'f':
			fmt.Fprintf(&b, "    out[%d] = as_type<uint>((float)(%s));\n", k, c.expr)
		case 'h':
			fmt.Fprintf(&b, "    out[%d] = as_type<uint>((float)(half)(%s));\n", k, c.expr)
		case 'i':
			fmt.Fprintf(&b, "    out[%d] = (uint)(int)(%s);\n", k, c.expr)
		default:
			fmt.Fprintf(&b, "    out[%d] = (uint)(%s);\n", k, c.expr)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// ulp32 and ulp16 are the distances from |x| to the next larger float and
// half.
func ulp32(x float64) float64 {
	f := float32(math.Abs(x))
	if f < 0x1p-126 {
		return 0x1p-149
	}
	return float64(math.Nextafter32(f, float32(math.Inf(1))) - f)
}

func ulp16(x float64) float64 {
	a := math.Abs(x)
	if a < 0x1p-14 {
		return 0x1p-24
	}
	e := math.Floor(math.Log2(a))
	return math.Pow(2, e-10)
}

// h16 rounds x to half, as a half-typed input or result is.
func h16(x float64) float64 { return float64(half.Float16(half.ToFloat16(float32(x))).Float32()) }

// f32 rounds x to float.
func f32(x float64) float64 { return float64(float32(x)) }

// runStdCases compiles and runs the cases of a family and checks each, and
// checks that the cases call every function the family names.
func runStdCases(t *testing.T, family string, cases []stdCase) {
	t.Helper()
	for _, name := range stdlibFamilies[family] {
		re := regexp.MustCompile(`\b` + name + `\s*(<[^>]*>)?\(`)
		found := false
		for _, c := range cases {
			if re.MatchString(c.expr) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: no case calls %s", family, name)
		}
	}
	lib := compileT(t, stdSource(cases), CompileOptions{})
	fin, iin, uin, out := newF32(t, len(stdF)), newMem(t, 4*len(stdI)), newMem(t, 4*len(stdU)), newMem(t, 4*len(cases))
	copy(fin.f32(), stdF)
	copy(iin.i32(), stdI)
	copy(uin.u32(), stdU)
	runT(t, functionT(t, lib, "k"), ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{1, 1, 1}), fin, iin, uin, out)
	for k, c := range cases {
		g := out.u32()[k]
		switch c.kind {
		case 'f', 'h':
			got := float64(math.Float32frombits(g))
			want := c.want
			ulp := ulp32(want)
			if c.kind == 'h' {
				want = h16(want)
				ulp = ulp16(want)
			} else if !math.IsNaN(want) && !math.IsInf(want, 0) {
				want = f32(want)
			}
			ok := got == want || (math.IsNaN(got) && math.IsNaN(want)) || math.Abs(got-want) <= c.tol*ulp
			if got == 0 && want == 0 && c.tol == 0 && math.Signbit(got) != math.Signbit(want) {
				ok = false
			}
			if !ok {
				t.Errorf("%s: %s = %v, want %v (within %v ulp)", family, c.expr, got, want, c.tol)
			}
		case 'i':
			if int32(g) != int32(c.want) {
				t.Errorf("%s: %s = %d, want %d", family, c.expr, int32(g), int64(c.want))
			}
		default:
			if g != uint32(int64(c.want)) {
				t.Errorf("%s: %s = %#x, want %#x", family, c.expr, g, uint32(int64(c.want)))
			}
		}
	}
}

const (
	fa, fb, fc, fp, fq = 0.75, -2.5, 3.25, 2.0, float64(float32(0.1))
)

func TestStdlibCommon(t *testing.T) {
	sstep := func(e0, e1, x float64) float64 {
		u := math.Min(math.Max((x-e0)/(e1-e0), 0), 1)
		return u * u * (3 - 2*u)
	}
	runStdCases(t, "common", []stdCase{
		{"clamp(b, -1.0f, a)", 'f', -1, 0},
		{"clamp(v2, float2(0), float2(1)).y", 'f', 0, 0},
		{"clamp(v4, 0.0f, 1.0f).z", 'f', 1, 0},
		{"clamp(hc, ha, 3.0h)", 'h', 3, 0},
		{"precise::clamp(nan, 0.0f, 1.0f)", 'f', 0, 0},
		{"fast::clamp(c, 0.0f, 1.0f)", 'f', 1, 0},
		{"mix(a, c, 0.5f)", 'f', (fa + fc) / 2, 0},
		{"mix(v2, float2(1, 1), float2(0.5f)).y", 'f', (fb + 1) / 2, 0},
		{"mix(h2, half2(1), 0.5h).x", 'h', (fa + 1) / 2, 0},
		{"saturate(c)", 'f', 1, 0},
		{"saturate(v3).x", 'f', fa, 0},
		{"precise::saturate(b)", 'f', 0, 0},
		{"fast::saturate(a)", 'f', fa, 0},
		{"saturate(hb)", 'h', 0, 0},
		{"sign(b)", 'f', -1, 0},
		{"sign(-z)", 'f', math.Copysign(0, -1), 0},
		{"sign(nan)", 'f', 0, 0},
		{"sign(v2).x", 'f', 1, 0},
		{"sign(hb)", 'h', -1, 0},
		{"smoothstep(0.0f, 1.0f, a)", 'f', sstep(0, 1, fa), 2},
		{"smoothstep(float2(0), float2(4), float2(c)).y", 'f', sstep(0, 4, fc), 2},
		{"smoothstep(0.0h, 1.0h, ha)", 'h', sstep(0, 1, fa), 1},
		{"step(a, c)", 'f', 1, 0},
		{"step(c, a)", 'f', 0, 0},
		{"step(float2(1), v2).x", 'f', 0, 0},
		{"step(ha, hc)", 'h', 1, 0},
	})
}

func TestStdlibInteger(t *testing.T) {
	const ia, ib, ic = -7, 13, 0x12345678
	const ua, ub, uc = 0xF0000001, 5, 0x80000000
	rotl := func(x uint32, k int) float64 { return float64(bits.RotateLeft32(x, k)) }
	runStdCases(t, "integer", []stdCase{
		{"abs(ia)", 'i', 7, 0},
		{"abs(i2).x", 'i', 7, 0},
		{"abs(short(ia))", 'i', 7, 0},
		{"absdiff(ia, ib)", 'u', 20, 0},
		{"absdiff(ua, ub)", 'u', ua - ub, 0},
		{"absdiff(i2, int2(ib)).x", 'u', 20, 0},
		{"absdiff(char(-100), char(100))", 'u', 200, 0},
		{"addsat(ua, ua)", 'u', 0xFFFFFFFF, 0},
		{"addsat(ib, ib)", 'i', 26, 0},
		{"addsat(INT_MAX, ib)", 'i', math.MaxInt32, 0},
		{"addsat(INT_MIN, ia)", 'i', math.MinInt32, 0},
		{"addsat(uchar(200), uchar(100))", 'u', 255, 0},
		{"addsat(short(30000), short(30000))", 'i', 32767, 0},
		{"addsat(u2, uint2(ua)).y", 'u', ua + ub, 0},
		{"subsat(ub, ua)", 'u', 0, 0},
		{"subsat(INT_MIN, ib)", 'i', math.MinInt32, 0},
		{"subsat(ia, ib)", 'i', -20, 0},
		{"subsat(char(-100), char(100))", 'i', -128, 0},
		{"clamp(ia, -3, 3)", 'i', -3, 0},
		{"clamp(ua, 0u, 100u)", 'u', 100, 0},
		{"clamp(i2, int2(0), int2(10)).y", 'i', 10, 0},
		{"clz(ub)", 'u', 29, 0},
		{"clz(0u)", 'u', 32, 0},
		{"clz(ia)", 'i', 0, 0},
		{"clz(ushort(ub))", 'u', 13, 0},
		{"clz(uchar(ub))", 'u', 5, 0},
		{"clz(ulong(ub))", 'u', 61, 0},
		{"clz(u2).y", 'u', 29, 0},
		{"ctz(uc)", 'u', 31, 0},
		{"ctz(0u)", 'u', 32, 0},
		{"ctz(ushort(0))", 'u', 16, 0},
		{"ctz(ib)", 'i', 0, 0},
		{"ctz(u2).x", 'u', 0, 0},
		{"extract_bits(ic, 4u, 8u)", 'i', 0x67, 0},
		{"extract_bits(ia, 1u, 3u)", 'i', -4, 0}, // -7 = ...11001: bits 1..3 = 100, sign-extended
		{"extract_bits(ua, 28u, 4u)", 'u', 0xF, 0},
		{"extract_bits(ua, 0u, 32u)", 'u', ua, 0},
		{"extract_bits(u2, 0u, 3u).y", 'u', 5, 0},
		{"insert_bits(ub, 0xFu, 8u, 4u)", 'u', 0xF05, 0},
		{"insert_bits(ia, 0, 0u, 4u)", 'i', -16, 0},
		{"insert_bits(u2, uint2(1), 31u, 1u).y", 'u', 0x80000005, 0},
		{"hadd(ua, ua)", 'u', ua, 0},
		{"hadd(ia, ib)", 'i', 3, 0},
		{"hadd(INT_MAX, INT_MAX)", 'i', math.MaxInt32, 0},
		{"rhadd(ia, ib + 1)", 'i', 4, 0},
		{"rhadd(ua, ua + 1u)", 'u', ua + 1, 0},
		{"rhadd(u2, uint2(0)).y", 'u', 3, 0},
		{"mad24(ib, ib, ia)", 'i', 13*13 - 7, 0},
		{"mad24(ub, 1000u, ub)", 'u', 5005, 0},
		{"mul24(ib, ia)", 'i', -91, 0},
		{"mul24(ub, ub)", 'u', 25, 0},
		{"madhi(ua, ua, ub)", 'u', float64((uint64(ua)*ua)>>32 + ub), 0},
		{"madhi(ia, INT_MAX, ib)", 'i', float64((int64(ia)*math.MaxInt32)>>32 + ib), 0},
		{"madsat(ua, 2u, ub)", 'u', 0xFFFFFFFF, 0},
		{"madsat(ib, ib, ia)", 'i', 162, 0},
		{"madsat(INT_MIN, 2, ib)", 'i', math.MinInt32, 0},
		{"max(ia, ib)", 'i', 13, 0},
		{"max(ua, ub)", 'u', ua, 0},
		{"max(i2, int2(0)).x", 'i', 0, 0},
		{"max(i2, 0).x", 'i', 0, 0},
		{"min(ia, ib)", 'i', -7, 0},
		{"min(u2, uint2(6)).x", 'u', 6, 0},
		{"max3(ia, ib, ic)", 'i', ic, 0},
		{"max3(ua, ub, uc)", 'u', ua, 0},
		{"max3(i2, int2(0), int2(1)).x", 'i', 1, 0},
		{"min3(ia, ib, ic)", 'i', -7, 0},
		{"min3(ua, ub, uc)", 'u', 5, 0},
		{"median3(ia, ib, ic)", 'i', 13, 0},
		{"median3(ua, ub, uc)", 'u', uc, 0},
		{"median3(u2, uint2(7), uint2(6)).y", 'u', 6, 0},
		{"mulhi(ua, ua)", 'u', float64((uint64(ua) * ua) >> 32), 0},
		{"mulhi(ia, INT_MIN)", 'i', float64((int64(ia) * math.MinInt32) >> 32), 0},
		{"mulhi(ushort(ub), ushort(60000))", 'u', float64((5 * 60000) >> 16), 0},
		{"mulhi(ulong(ua), ulong(ua)) >> 32", 'u', float64(func() uint64 { h, _ := bits.Mul64(ua, ua); return h >> 32 }()), 0},
		{"mulhi(u2, uint2(ua)).x", 'u', float64((uint64(ua) * ua) >> 32), 0},
		{"popcount(ua)", 'u', 5, 0},
		{"popcount(ia)", 'i', 30, 0},
		{"popcount(uchar(255))", 'u', 8, 0},
		{"popcount(ulong(ULONG_MAX))", 'u', 64, 0},
		{"popcount(u2).y", 'u', 2, 0},
		{"reverse_bits(ub)", 'u', 0xA0000000, 0},
		{"reverse_bits(ushort(1))", 'u', 0x8000, 0},
		{"reverse_bits(ia)", 'i', float64(int32(bits.Reverse32(uint32(0xFFFFFFF9)))), 0},
		{"reverse_bits(u2).y", 'u', 0xA0000000, 0},
		{"rotate(ua, 4u)", 'u', rotl(ua, 4), 0},
		{"rotate(ua, 36u)", 'u', rotl(ua, 4), 0},
		{"rotate(ia, 1)", 'i', float64(int32(bits.RotateLeft32(0xFFFFFFF9, 1))), 0},
		{"rotate(uchar(0x81), uchar(1))", 'u', 3, 0},
		{"rotate(u2, uint2(1, 31)).y", 'u', rotl(ub, 31), 0},
		{"rotate(uint(ushort(0x8001)), 0u)", 'u', 0x8001, 0},
	})
}

func TestStdlibRelational(t *testing.T) {
	runStdCases(t, "relational", []stdCase{
		{"all(v2 > float2(0))", 'u', 0, 0},
		{"all(v4 != float4(9))", 'u', 1, 0},
		{"all(bool2(true, true))", 'u', 1, 0},
		{"any(v2 > float2(0))", 'u', 1, 0},
		{"any(i2 > int2(100))", 'u', 0, 0},
		{"any(false)", 'u', 0, 0},
		{"isfinite(inf)", 'u', 0, 0},
		{"isfinite(a)", 'u', 1, 0},
		{"isfinite(ha)", 'u', 1, 0},
		{"all(isfinite(v2))", 'u', 1, 0},
		{"isinf(-inf)", 'u', 1, 0},
		{"isinf(half(inf))", 'u', 1, 0},
		{"any(isinf(float2(a, inf)))", 'u', 1, 0},
		{"isnan(nan)", 'u', 1, 0},
		{"isnan(a)", 'u', 0, 0},
		{"isnan(half(nan))", 'u', 1, 0},
		{"isnan(float2(nan, a)).y", 'u', 0, 0},
		{"isnormal(a)", 'u', 1, 0},
		{"isnormal(z)", 'u', 0, 0},
		{"isnormal(FLT_MIN / 2)", 'u', 0, 0},
		{"isnormal(inf)", 'u', 0, 0},
		{"isnormal(ha)", 'u', 1, 0},
		{"all(isnormal(v2))", 'u', 1, 0},
		{"isordered(a, b)", 'u', 1, 0},
		{"isordered(a, nan)", 'u', 0, 0},
		{"isordered(float2(nan, a), v2).y", 'u', 1, 0},
		{"isunordered(a, nan)", 'u', 1, 0},
		{"isunordered(ha, hb)", 'u', 0, 0},
		{"isunordered(float2(nan, a), v2).x", 'u', 1, 0},
		{"not(a > b)", 'u', 0, 0},
		{"not(false)", 'u', 1, 0},
		{"all(not(v2 < float2(-10)))", 'u', 1, 0},
		{"select(a, b, true)", 'f', fb, 0},
		{"select(a, b, c < 0)", 'f', fa, 0},
		{"select(v2, float2(9), v2 < float2(0)).y", 'f', 9, 0},
		{"select(v2, float2(9), v2 < float2(0)).x", 'f', fa, 0},
		{"select(i2, int2(0), bool2(true, false)).y", 'i', 13, 0},
		{"select(ha, hb, true)", 'h', fb, 0},
		// a scalar where the vector overload takes the vector: Apple's
		// compiler makes it that vector
		{"select(v2, 9.0, v2 < float2(0)).y", 'f', 9, 0},
		{"select(9.0, v2, v2 < float2(0)).x", 'f', 9, 0},
		{"signbit(b)", 'u', 1, 0},
		{"signbit(-z)", 'u', 1, 0},
		{"signbit(a)", 'u', 0, 0},
		{"signbit(hb)", 'u', 1, 0},
		{"signbit(v2).y", 'u', 1, 0},
	})
}

func TestStdlibMath(t *testing.T) {
	pi := math.Pi
	ha, hb, hc := h16(fa), h16(fb), h16(fc)
	_ = hb
	c := []stdCase{
		{"acos(a)", 'f', math.Acos(fa), 4},
		{"acosh(c)", 'f', math.Acosh(fc), 4},
		{"asin(a)", 'f', math.Asin(fa), 4},
		{"asinh(b)", 'f', math.Asinh(fb), 4},
		{"atan(b)", 'f', math.Atan(fb), 5},
		{"atan2(b, c)", 'f', math.Atan2(fb, fc), 6},
		{"atan2(v2, float2(c)).y", 'f', math.Atan2(fb, fc), 6},
		{"atanh(a)", 'f', math.Atanh(fa), 5},
		{"ceil(b)", 'f', -2, 0},
		{"ceil(h2).x", 'h', 1, 0},
		{"copysign(a, b)", 'f', -fa, 0},
		{"copysign(v2, float2(-1)).x", 'f', -fa, 0},
		{"cos(c)", 'f', math.Cos(fc), 4},
		{"cos(ha)", 'h', math.Cos(ha), 1},
		{"cosh(b)", 'f', math.Cosh(fb), 4},
		{"cospi(a)", 'f', math.Cos(pi * fa), 4},
		{"cospi(p + a)", 'f', math.Cos(pi * (fp + fa)), 4},
		{"divide(a, b)", 'f', fa / fb, 0},
		{"precise::divide(c, q)", 'f', fc / fq, 0},
		{"fast::divide(c, p)", 'f', fc / fp, 0},
		{"exp(b)", 'f', math.Exp(fb), 4},
		{"exp(v4).w", 'f', math.Exp(fp), 4},
		{"exp(hb)", 'h', math.Exp(hb), 1},
		{"fast::exp(a)", 'f', math.Exp(fa), 4},
		{"precise::exp(a)", 'f', math.Exp(fa), 4},
		{"exp2(c)", 'f', math.Exp2(fc), 4},
		{"exp10(b)", 'f', math.Pow(10, fb), 4},
		{"fabs(b)", 'f', 2.5, 0},
		{"abs(v2).y", 'f', 2.5, 0},
		{"abs(hb)", 'h', 2.5, 0},
		{"fdim(c, a)", 'f', fc - fa, 0},
		{"fdim(a, c)", 'f', 0, 0},
		{"floor(b)", 'f', -3, 0},
		{"floor(v2).x", 'f', 0, 0},
		{"fma(a, b, c)", 'f', fa*fb + fc, 0},
		{"fma(q, q, -q * q)", 'f', math.FMA(fq, fq, -f32(fq*fq)), 0},
		{"fma(v2, v2, float2(1)).y", 'f', fb*fb + 1, 0},
		{"fma(v2, b, float2(1)).y", 'f', fb*fb + 1, 0},
		{"fma(v2, v2, 1.0).y", 'f', fb*fb + 1, 0},
		{"fma(a, v2, c).x", 'f', fa*fa + fc, 0},
		{"fma(h2, hb, 1.0).y", 'h', hb*hb + 1, 0},
		{"fma(ha, hb, hc)", 'h', ha*hb + hc, 0},
		{"fmax(a, nan)", 'f', fa, 0},
		{"fmax(v2, float2(0)).y", 'f', 0, 0},
		{"max(a, c)", 'f', fc, 0},
		{"max(ha, hc)", 'h', hc, 0},
		{"fmax3(a, b, c)", 'f', fc, 0},
		{"fmax3(v2, float2(0), float2(1)).x", 'f', 1, 0},
		{"max3(a, b, c)", 'f', fc, 0},
		{"max3(ha, hb, hc)", 'h', hc, 0},
		{"fmedian3(a, b, c)", 'f', fa, 0},
		{"median3(c, b, a)", 'f', fa, 0},
		{"median3(v2, float2(0), float2(1)).y", 'f', 0, 0},
		{"fmin(a, nan)", 'f', fa, 0},
		{"min(b, c)", 'f', fb, 0},
		{"min(v2, 0.0f).x", 'f', 0, 0},
		{"fmin3(a, b, c)", 'f', fb, 0},
		{"min3(a, b, c)", 'f', fb, 0},
		{"min3(ha, hb, hc)", 'h', hb, 0},
		{"fmod(c, a)", 'f', math.Mod(fc, fa), 0},
		{"fmod(b, p)", 'f', math.Mod(fb, fp), 0},
		{"fract(b)", 'f', 0.5, 0},
		{"fract(v2).x", 'f', fa, 0},
		{"frexp(c, tmpi)", 'f', 0.8125, 0},
		{"(frexp(c, tmpi), tmpi)", 'i', 2, 0},
		{"frexp(v2, tmpi2).y", 'f', -0.625, 0},
		{"(frexp(v2, tmpi2), tmpi2.y)", 'i', 2, 0},
		{"frexp(hc, tmpi)", 'h', 0.8125, 0},
		{"ilogb(c)", 'i', 1, 0},
		{"ilogb(q)", 'i', -4, 0},
		{"ilogb(v2).x", 'i', -1, 0},
		{"ilogb(hc)", 'i', 1, 0},
		{"ldexp(a, 3)", 'f', 6, 0},
		{"ldexp(v2, int2(1, -1)).y", 'f', -1.25, 0},
		{"ldexp(hc, 2)", 'h', 13, 0},
		{"log(c)", 'f', math.Log(fc), 4},
		{"log(hc)", 'h', math.Log(hc), 1},
		{"log2(q)", 'f', math.Log2(fq), 4},
		{"log10(c)", 'f', math.Log10(fc), 4},
		{"modf(c, tmpf)", 'f', 0.25, 0},
		{"(modf(b, tmpf), tmpf)", 'f', -2, 0},
		{"modf(b, tmpf)", 'f', -0.5, 0},
		{"modf(v2, tmp2).y", 'f', -0.5, 0},
		{"modf(hc, tmph)", 'h', 0.25, 0},
		{"nextafter(a, c)", 'f', float64(math.Nextafter32(fa, fc)), 0},
		{"nextafter(a, b)", 'f', float64(math.Nextafter32(fa, fb)), 0},
		{"nextafter(v2, float2(0)).y", 'f', float64(math.Nextafter32(fb, 0)), 0},
		{"pow(c, b)", 'f', math.Pow(fc, fb), 16},
		{"pow(b, p)", 'f', 6.25, 16},
		{"pow(v2, float2(p)).x", 'f', fa * fa, 16},
		{"pow(hc, ha)", 'h', math.Pow(hc, ha), 2},
		{"pown(b, 3)", 'f', fb * fb * fb, 16},
		{"pown(v2, int2(2, -1)).y", 'f', 1 / fb, 16},
		{"powr(c, a)", 'f', math.Pow(fc, fa), 16},
		{"rint(b)", 'f', -2, 0},
		{"rint(c + a)", 'f', 4, 0},
		{"round(b)", 'f', -3, 0},
		{"round(v2).x", 'f', 1, 0},
		{"rsqrt(c)", 'f', 1 / math.Sqrt(fc), 2},
		{"rsqrt(hc)", 'h', 1 / math.Sqrt(hc), 1},
		{"sin(b)", 'f', math.Sin(fb), 4},
		{"sin(v3).z", 'f', math.Sin(fc), 4},
		{"sincos(c, tmpf)", 'f', math.Sin(fc), 4},
		{"(sincos(c, tmpf), tmpf)", 'f', math.Cos(fc), 4},
		{"(sincos(v2, tmp2), tmp2.y)", 'f', math.Cos(fb), 4},
		{"(sincos(hc, tmph), tmph)", 'h', math.Cos(hc), 1},
		{"sinh(a)", 'f', math.Sinh(fa), 4},
		{"sinpi(a)", 'f', math.Sin(pi * fa), 4},
		{"sinpi(p)", 'f', 0, 0},
		{"sqrt(c)", 'f', math.Sqrt(fc), 0},
		{"sqrt(v4).w", 'f', math.Sqrt(2), 0},
		{"sqrt(hc)", 'h', math.Sqrt(hc), 0},
		{"precise::sqrt(q)", 'f', math.Sqrt(fq), 0},
		{"tan(a)", 'f', math.Tan(fa), 6},
		{"tanh(b)", 'f', math.Tanh(fb), 5},
		{"tanh(ha)", 'h', math.Tanh(ha), 1},
		{"tanpi(a)", 'f', -1, 6},
		{"trunc(b)", 'f', -2, 0},
		{"trunc(h2).y", 'h', -2, 0},
	}
	runStdCases(t, "math", c)
}

func TestStdlibGeometric(t *testing.T) {
	v3 := [3]float64{fa, fb, fc}
	dot3 := fa*fa + fb*fb + fc*fc
	len3 := math.Sqrt(dot3)
	// refract(I, N, eta) for I = (0.6, -0.8), N = (0, 1), eta = 0.5
	ix, iy, eta := 0.6, -0.8, 0.5
	dn := iy
	k := 1 - eta*eta*(1-dn*dn)
	rx := eta * ix
	ry := eta*iy - (eta*dn+math.Sqrt(k))*1
	runStdCases(t, "geometric", []stdCase{
		{"cross(v3, float3(1, 0, 0)).y", 'f', v3[2], 0},
		{"cross(v3, float3(1, 0, 0)).z", 'f', -v3[1], 0},
		{"cross(half3(1, 0, 0), half3(0, 1, 0)).z", 'h', 1, 0},
		{"distance(v2, float2(0))", 'f', math.Sqrt(fa*fa + fb*fb), 3},
		{"distance_squared(v3, float3(0))", 'f', dot3, 2},
		{"dot(v3, v3)", 'f', dot3, 2},
		{"dot(v4, float4(1))", 'f', fa + fb + fc + fp, 1},
		{"dot(h2, h2)", 'h', fa*fa + fb*fb, 1},
		{"faceforward(v2, float2(1, 0), float2(1, 0)).x", 'f', -fa, 0},
		{"faceforward(v2, float2(-1, 0), float2(1, 0)).y", 'f', fb, 0},
		{"length(v3)", 'f', len3, 3},
		{"length(h2)", 'h', math.Sqrt(fa*fa + fb*fb), 2},
		{"length_squared(v2)", 'f', fa*fa + fb*fb, 1},
		{"normalize(v3).z", 'f', fc / len3, 4},
		{"fast::normalize(v2).x", 'f', fa / math.Sqrt(fa*fa+fb*fb), 4},
		{"precise::normalize(v2).y", 'f', fb / math.Sqrt(fa*fa+fb*fb), 4},
		{"reflect(float2(1, -1), float2(0, 1)).y", 'f', 1, 0},
		{"reflect(v3, float3(1, 0, 0)).x", 'f', -fa, 0},
		{"refract(float2(0.6f, -0.8f), float2(0, 1), 0.5f).x", 'f', rx, 4},
		{"refract(float2(0.6f, -0.8f), float2(0, 1), 0.5f).y", 'f', ry, 4},
		{"refract(float2(0.6f, -0.8f), float2(0, 1), 2.0f).y", 'f', 0, 0}, // total internal reflection
		{"refract(half2(0.6h, -0.8h), half2(0, 1), 0.5h).x", 'h', rx, 2},
	})
}

// namesIn fails the test for each function of family that src does not
// call.
func namesIn(t *testing.T, family, src string) {
	t.Helper()
	for _, name := range stdlibFamilies[family] {
		if !regexp.MustCompile(`\b` + name + `\s*(<[^>]*>)?\(`).MatchString(src) {
			t.Errorf("%s: the kernel does not call %s", family, name)
		}
	}
}

const stdAtomicSrc = mslPrelude + `kernel void k(device atomic_uint* u [[buffer(0)]], device atomic_int* s [[buffer(1)]],
              device atomic_float* f [[buffer(2)]], device atomic_ulong* l [[buffer(3)]],
              device uint* out [[buffer(4)]], uint tid [[thread_position_in_grid]],
              uint lid [[thread_position_in_threadgroup]]) {
    threadgroup atomic_uint tg;
    if (lid == 0) atomic_store_explicit(&tg, 0u, memory_order_relaxed);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    atomic_fetch_add_explicit(&u[0], 1u, memory_order_relaxed);
    atomic_fetch_sub_explicit(&u[1], tid, memory_order_relaxed);
    atomic_fetch_or_explicit(&u[2], 1u << (tid % 32), memory_order_relaxed);
    atomic_fetch_and_explicit(&u[3], ~(1u << (tid % 32)), memory_order_relaxed);
    atomic_fetch_xor_explicit(&u[4], tid, memory_order_relaxed);
    atomic_fetch_max_explicit(&s[0], int(tid) - 20, memory_order_relaxed);
    atomic_fetch_min_explicit(&s[1], int(tid) - 20, memory_order_relaxed);
    atomic_fetch_max_explicit(&u[5], tid * 3u, memory_order_relaxed);
    atomic_fetch_min_explicit(&u[6], tid + 7u, memory_order_relaxed);
    atomic_fetch_add_explicit(&f[0], 0.5f, memory_order_relaxed);
    atomic_fetch_sub_explicit(&f[1], 0.25f, memory_order_relaxed);
    atomic_max_explicit(&l[0], ulong(tid) << 40, memory_order_relaxed);
    atomic_min_explicit(&l[1], (ulong(tid) << 40) + 5, memory_order_relaxed);
    atomic_fetch_add_explicit(&tg, 2u, memory_order_relaxed);
    // compare-exchange loops: a float maximum and an integer sum
    float old = atomic_load_explicit(&f[2], memory_order_relaxed);
    while (old < float(tid) && !atomic_compare_exchange_weak_explicit(&f[2], &old, float(tid), memory_order_relaxed, memory_order_relaxed)) {}
    uint o = atomic_load_explicit(&u[7], memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&u[7], &o, o + tid, memory_order_relaxed, memory_order_relaxed)) {}
    uint prev = atomic_exchange_explicit(&u[8], tid, memory_order_relaxed);
    out[64 + tid] = prev;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lid == 0) atomic_fetch_add_explicit(&u[9], atomic_load_explicit(&tg, memory_order_relaxed), memory_order_relaxed);
    atomic_store_explicit(&u[10], 77u, memory_order_relaxed);
    out[tid] = 1;
}
`

func TestStdlibAtomic(t *testing.T) {
	namesIn(t, "atomic", stdAtomicSrc)
	const n = 64
	lib := compileT(t, stdAtomicSrc, CompileOptions{})
	u, s, f, l, out := newMem(t, 4*11), newMem(t, 8), newMem(t, 12), newMem(t, 16), newMem(t, 4*2*n)
	copy(u.u32(), []uint32{0, 1000, 0, 0xFFFFFFFF, 0, 0, 0xFFFFFFFF, 0, 0xABCD, 0, 0})
	copy(s.i32(), []int32{-100, 100})
	copy(f.f32(), []float32{1, 0, -1})
	lu := unsafe.Slice((*uint64)(unsafe.Pointer(&l.b[0])), 2)
	lu[0], lu[1] = 1, math.MaxUint64
	runT(t, functionT(t, lib, "k"), ThreadgroupsGrid([3]int{2, 1, 1}, [3]int{n / 2, 1, 1}), u, s, f, l, out)
	sub, xor := uint32(1000), uint32(0)
	sum := uint32(0)
	for i := range uint32(n) {
		sub -= i
		xor ^= i
		sum += i
	}
	want := []uint32{n, sub, 0xFFFFFFFF, 0, xor, 3 * (n - 1), 7, sum, 0, 2 * n, 77}
	for i, w := range want {
		if i == 8 {
			continue // the last exchange's thread, checked below
		}
		if g := u.u32()[i]; g != w {
			t.Errorf("uint atomic %d = %#x, want %#x", i, g, w)
		}
	}
	if g := s.i32(); g[0] != n-1-20 || g[1] != -20 {
		t.Errorf("int max, min = %d, %d, want %d, %d", g[0], g[1], n-21, -20)
	}
	if g := f.f32(); g[0] != 1+0.5*n || g[1] != -0.25*n || g[2] != n-1 {
		t.Errorf("float add, sub, compare-exchange max = %v, want %v, %v, %v", g, 1+0.5*n, -0.25*n, n-1)
	}
	if lu[0] != uint64(n-1)<<40 || lu[1] != 5 {
		t.Errorf("ulong max, min = %#x, %#x, want %#x, 5", lu[0], lu[1], uint64(n-1)<<40)
	}
	// the exchanges form a chain: every value but the last appears once
	// among the previous values, starting from 0xABCD
	seen := map[uint32]int{}
	for i := range n {
		seen[out.u32()[n+i]]++
	}
	last := u.u32()[8]
	if seen[0xABCD] != 1 || last >= n || seen[last] != 0 {
		t.Errorf("exchange chain broken: last %d, previous values %v", last, seen)
	}
	for i := range uint32(n) {
		if i != last && seen[i] != 1 {
			t.Errorf("exchange chain: %d seen %d times", i, seen[i])
		}
	}
}

// The SIMD-group functions over one full SIMD-group, each lane's operand
// derived from its index: out[32k + lane] is function k's result.
const stdSIMDSrc = mslPrelude + `kernel void k(device uint* out [[buffer(0)]], device float* fo [[buffer(1)]],
              uint l [[thread_index_in_simdgroup]]) {
    uint x = l * 7u + 3u;
    float y = float(l) * 0.5f + 1.0f;
    int k = 0;
    out[32 * k++ + l] = simd_sum(x);
    out[32 * k++ + l] = simd_product(l % 3u + 1u);
    out[32 * k++ + l] = simd_min(x ^ 0x55u);
    out[32 * k++ + l] = simd_max(x ^ 0x55u);
    out[32 * k++ + l] = simd_and(x | 0x100u);
    out[32 * k++ + l] = simd_or(1u << l);
    out[32 * k++ + l] = simd_xor(x);
    out[32 * k++ + l] = simd_prefix_inclusive_sum(x);
    out[32 * k++ + l] = simd_prefix_exclusive_sum(x);
    out[32 * k++ + l] = simd_prefix_inclusive_product(l % 2u + 1u);
    out[32 * k++ + l] = simd_prefix_exclusive_product(l % 2u + 1u);
    out[32 * k++ + l] = simd_shuffle(x, ushort((l * 5u) % 32u));
    out[32 * k++ + l] = simd_shuffle_xor(x, ushort(5));
    out[32 * k++ + l] = simd_shuffle_up(x, ushort(3));
    out[32 * k++ + l] = simd_shuffle_down(x, ushort(3));
    out[32 * k++ + l] = simd_shuffle_rotate_up(x, ushort(3));
    out[32 * k++ + l] = simd_shuffle_rotate_down(x, ushort(3));
    out[32 * k++ + l] = simd_shuffle_and_fill_up(x, x + 1000u, ushort(2));
    out[32 * k++ + l] = simd_shuffle_and_fill_down(x, x + 1000u, ushort(2), ushort(8));
    out[32 * k++ + l] = simd_broadcast(x, ushort(9));
    out[32 * k++ + l] = simd_broadcast_first(x);
    out[32 * k++ + l] = simd_all(x > 2u);
    out[32 * k++ + l] = simd_any(x == 10u);
    out[32 * k++ + l] = simd_is_first();
    out[32 * k++ + l] = uint(ulong(simd_ballot(l % 3u == 0u)));
    out[32 * k++ + l] = uint(ulong(simd_active_threads_mask()));
    out[32 * k++ + l] = uint(simd_sum(int(l) - 16));
    out[32 * k++ + l] = uint(simd_max(short(l) - short(8)));
    fo[l] = simd_sum(y);
    fo[32 + l] = float(simd_max(half(y)));
    fo[64 + l] = simd_prefix_inclusive_sum(float2(y, 1.0f)).x;
    fo[96 + l] = simd_shuffle_down(float4(y), ushort(1)).w;
}
`

func TestStdlibSIMD(t *testing.T) {
	namesIn(t, "simd", stdSIMDSrc)
	const nk = 28
	lib := compileT(t, stdSIMDSrc, CompileOptions{})
	out, fo := newMem(t, 4*32*nk), newF32(t, 128)
	runT(t, functionT(t, lib, "k"), ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1}), out, fo)
	x := func(l int) uint32 { return uint32(l)*7 + 3 }
	xm := func(l int) uint32 { return x(l) ^ 0x55 }
	var sumY float32
	for l := range 32 {
		sumY += float32(l)*0.5 + 1
	}
	for l := range 32 {
		g := groupOf(l, 32)
		red, prefix := g.reduce, g.prefix
		fill := func(up bool, delta, mod int) uint32 { return g.shuffleAndFill(x, up, delta, mod) }
		src := func(s int) uint32 {
			if s < 0 || s >= 32 {
				return x(l)
			}
			return x(s)
		}
		var ballot uint32
		for j := 0; j < 32; j += 3 {
			ballot |= 1 << j
		}
		want := []uint32{
			red(x, add), red(func(l int) uint32 { return uint32(l%3 + 1) }, mul), red(xm, func(a, b uint32) uint32 { return min(a, b) }),
			red(xm, func(a, b uint32) uint32 { return max(a, b) }), red(func(l int) uint32 { return x(l) | 0x100 }, func(a, b uint32) uint32 { return a & b }),
			0xFFFFFFFF, red(x, func(a, b uint32) uint32 { return a ^ b }),
			prefix(x, add, 0, true), prefix(x, add, 0, false),
			prefix(func(l int) uint32 { return uint32(l%2 + 1) }, mul, 1, true), prefix(func(l int) uint32 { return uint32(l%2 + 1) }, mul, 1, false),
			x((l * 5) % 32), x(l ^ 5), src(l - 3), src(l + 3), x((l + 29) % 32), x((l + 3) % 32),
			fill(true, 2, 32), fill(false, 2, 8), x(9), x(0), 1, 1, b2u(l == 0), ballot, 0xFFFFFFFF,
			uint32(0xFFFFFFF0), 23,
		}
		checkLane(t, out.u32(), l, want, nk)
		y := float32(l)*0.5 + 1
		var pre float32
		for j := 0; j <= l; j++ {
			pre += float32(j)*0.5 + 1
		}
		down := y
		if l < 31 {
			down = float32(l+1)*0.5 + 1
		}
		for k, w := range []float32{sumY, 16.5, pre, down} {
			if g := fo.f32()[32*k+l]; g != w {
				t.Errorf("float function %d, lane %d: %v, want %v", k, l, g, w)
			}
		}
	}
}

// group is the reference of the SIMD-group and quad-group functions for
// lane l of a group of width lanes from lane first.
type group struct{ first, width, l int }

func groupOf(l, width int) group { return group{l - l%width, width, l} }

// reduce is op over f of the group's lanes, in lane order.
func (g group) reduce(f func(int) uint32, op func(a, b uint32) uint32) uint32 {
	r := f(g.first)
	for j := g.first + 1; j < g.first+g.width; j++ {
		r = op(r, f(j))
	}
	return r
}

// prefix is op over f of the group's lanes before l, and l itself where
// inclusive, starting from init.
func (g group) prefix(f func(int) uint32, op func(a, b uint32) uint32, init uint32, inclusive bool) uint32 {
	r := init
	for j := g.first; j < g.l; j++ {
		r = op(r, f(j))
	}
	if inclusive {
		r = op(r, f(g.l))
	}
	return r
}

// shuffleAndFill is the shuffle_and_fill_up (up) or _down of x by delta
// within segments of mod lanes, the kernels' fill value being x + 1000: a
// lane reading past its segment's edge reads the fill of the lane mod
// lanes round.
func (g group) shuffleAndFill(x func(int) uint32, up bool, delta, mod int) uint32 {
	i := (g.l - g.first) % mod
	base := g.l - i
	j := i - delta
	if !up {
		j = i + delta
	}
	if j < 0 {
		return x(base+j+mod) + 1000
	}
	if j >= mod {
		return x(base+j-mod) + 1000
	}
	return x(base + j)
}

func add(a, b uint32) uint32 { return a + b }

func mul(a, b uint32) uint32 { return a * b }

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// checkLane compares lane l of the nk functions' results in got (function
// k's lanes at 32*k) with want.
func checkLane(t *testing.T, got []uint32, l int, want []uint32, nk int) {
	t.Helper()
	if len(want) != nk {
		t.Fatalf("%d expected results for %d functions", len(want), nk)
	}
	for k, w := range want {
		if g := got[32*k+l]; g != w {
			t.Errorf("function %d, lane %d: %#x, want %#x", k, l, g, w)
		}
	}
}

// The quad-group functions over one SIMD-group of 8 quads.
const stdQuadSrc = mslPrelude + `kernel void k(device uint* out [[buffer(0)]], uint l [[thread_index_in_simdgroup]]) {
    uint x = l * 7u + 3u;
    int k = 0;
    out[32 * k++ + l] = quad_sum(x);
    out[32 * k++ + l] = quad_product(l % 3u + 1u);
    out[32 * k++ + l] = quad_min(x ^ 0x55u);
    out[32 * k++ + l] = quad_max(x ^ 0x55u);
    out[32 * k++ + l] = quad_and(x | 0x100u);
    out[32 * k++ + l] = quad_or(1u << l);
    out[32 * k++ + l] = quad_xor(x);
    out[32 * k++ + l] = quad_prefix_inclusive_sum(x);
    out[32 * k++ + l] = quad_prefix_exclusive_sum(x);
    out[32 * k++ + l] = quad_prefix_inclusive_product(l % 3u + 1u);
    out[32 * k++ + l] = quad_prefix_exclusive_product(l % 3u + 1u);
    out[32 * k++ + l] = quad_shuffle(x, ushort(3u - l % 4u));
    out[32 * k++ + l] = quad_shuffle_xor(x, ushort(1));
    out[32 * k++ + l] = quad_shuffle_up(x, ushort(1));
    out[32 * k++ + l] = quad_shuffle_down(x, ushort(1));
    out[32 * k++ + l] = quad_shuffle_rotate_up(x, ushort(1));
    out[32 * k++ + l] = quad_shuffle_rotate_down(x, ushort(1));
    out[32 * k++ + l] = quad_shuffle_and_fill_up(x, x + 1000u, ushort(1));
    out[32 * k++ + l] = quad_shuffle_and_fill_down(x, x + 1000u, ushort(1), ushort(2));
    out[32 * k++ + l] = quad_broadcast(x, ushort(2));
    out[32 * k++ + l] = quad_broadcast_first(x);
    out[32 * k++ + l] = quad_all(l % 8u < 4u);
    out[32 * k++ + l] = quad_any(l == 9u);
    out[32 * k++ + l] = quad_is_first();
    out[32 * k++ + l] = uint(quad_vote::vote_t(quad_ballot(l % 2u == 1u)));
    out[32 * k++ + l] = uint(quad_vote::vote_t(quad_active_threads_mask()));
}
`

func TestStdlibQuad(t *testing.T) {
	namesIn(t, "quad", stdQuadSrc)
	const nk = 26
	lib := compileT(t, stdQuadSrc, CompileOptions{})
	out := newMem(t, 4*32*nk)
	runT(t, functionT(t, lib, "k"), ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1}), out)
	x := func(l int) uint32 { return uint32(l)*7 + 3 }
	p3 := func(l int) uint32 { return uint32(l%3 + 1) }
	xm := func(l int) uint32 { return x(l) ^ 0x55 }
	for l := range 32 {
		q, i := l&^3, l&3
		g := groupOf(l, 4)
		red, prefix := g.reduce, g.prefix
		fill := func(up bool, delta, mod int) uint32 { return g.shuffleAndFill(x, up, delta, mod) }
		in := func(j int) uint32 {
			if j < 0 || j > 3 {
				return x(l)
			}
			return x(q + j)
		}
		want := []uint32{
			red(x, add), red(p3, mul), red(xm, func(a, b uint32) uint32 { return min(a, b) }), red(xm, func(a, b uint32) uint32 { return max(a, b) }),
			red(func(l int) uint32 { return x(l) | 0x100 }, func(a, b uint32) uint32 { return a & b }), 0xF << q,
			red(x, func(a, b uint32) uint32 { return a ^ b }), prefix(x, add, 0, true), prefix(x, add, 0, false),
			prefix(p3, mul, 1, true), prefix(p3, mul, 1, false),
			x(q + 3 - i), x(q + i ^ 1), in(i - 1), in(i + 1), x(q + (i+3)%4), x(q + (i+1)%4),
			fill(true, 1, 4), fill(false, 1, 2), x(q + 2), x(q), b2u(l%8 < 4), b2u(q == 8), b2u(i == 0), 0xA, 0xF,
		}
		checkLane(t, out.u32(), l, want, nk)
	}
}

// numeric_limits' members, as <metal_limits> declares them (C++'s
// std::numeric_limits), for the integer and floating-point types.
const stdLimitsSrc = mslPrelude + `kernel void k(device uint* out [[buffer(0)]]) {
    int k = 0;
    out[k++] = numeric_limits<float>::is_specialized && numeric_limits<int>::is_specialized && !numeric_limits<float2>::is_specialized;
    out[k++] = as_type<uint>(numeric_limits<float>::min());
    out[k++] = as_type<uint>(numeric_limits<float>::max());
    out[k++] = as_type<uint>(numeric_limits<float>::lowest());
    out[k++] = as_type<uint>(numeric_limits<float>::epsilon());
    out[k++] = as_type<uint>(numeric_limits<float>::round_error());
    out[k++] = as_type<uint>(numeric_limits<float>::infinity());
    out[k++] = isnan(numeric_limits<float>::quiet_NaN()) && isnan(numeric_limits<float>::signaling_NaN());
    out[k++] = as_type<uint>(numeric_limits<float>::denorm_min());
    out[k++] = numeric_limits<float>::digits * 1000 + numeric_limits<float>::digits10 * 10 + numeric_limits<float>::max_digits10;
    out[k++] = uint(numeric_limits<float>::min_exponent + 1000) * 10000 + uint(numeric_limits<float>::max_exponent);
    out[k++] = uint(numeric_limits<float>::min_exponent10 + 1000) * 10000 + uint(numeric_limits<float>::max_exponent10);
    out[k++] = numeric_limits<float>::radix + 10 * numeric_limits<float>::is_signed + 100 * numeric_limits<float>::is_integer
             + 1000 * numeric_limits<float>::is_exact + 10000 * numeric_limits<float>::has_infinity
             + 100000 * numeric_limits<float>::has_quiet_NaN + 1000000 * numeric_limits<float>::has_signaling_NaN;
    out[k++] = numeric_limits<float>::is_iec559 + 10 * numeric_limits<float>::is_bounded + 100 * numeric_limits<float>::is_modulo
             + 1000 * numeric_limits<float>::traps + 10000 * numeric_limits<float>::tinyness_before
             + 100000 * numeric_limits<float>::has_denorm_loss;
    out[k++] = (numeric_limits<float>::round_style == round_to_nearest) + 10 * (numeric_limits<float>::has_denorm == denorm_present);
    out[k++] = as_type<ushort>(numeric_limits<half>::max());
    out[k++] = as_type<ushort>(numeric_limits<half>::min());
    out[k++] = as_type<ushort>(numeric_limits<half>::lowest());
    out[k++] = as_type<ushort>(numeric_limits<half>::epsilon());
    out[k++] = as_type<ushort>(numeric_limits<half>::denorm_min());
    out[k++] = numeric_limits<half>::digits * 1000 + numeric_limits<half>::digits10 * 10 + numeric_limits<half>::max_digits10;
    out[k++] = uint(numeric_limits<half>::min_exponent + 1000) * 10000 + uint(numeric_limits<half>::max_exponent);
    out[k++] = uint(numeric_limits<int>::min());
    out[k++] = uint(numeric_limits<int>::max());
    out[k++] = uint(numeric_limits<int>::lowest());
    out[k++] = numeric_limits<int>::digits * 1000 + numeric_limits<int>::digits10 * 10 + numeric_limits<int>::is_signed;
    out[k++] = numeric_limits<uint>::max();
    out[k++] = numeric_limits<uint>::digits * 1000 + numeric_limits<uint>::digits10 * 10 + numeric_limits<uint>::is_signed;
    out[k++] = numeric_limits<uint>::is_modulo + 10 * numeric_limits<int>::is_modulo + 100 * numeric_limits<int>::is_integer
             + 1000 * numeric_limits<int>::is_exact + 10000 * numeric_limits<int>::has_infinity
             + 100000 * (numeric_limits<int>::round_style == round_toward_zero);
    out[k++] = uint(numeric_limits<short>::min()) & 0xffffu;
    out[k++] = numeric_limits<ushort>::max() + numeric_limits<uchar>::max() + uint(numeric_limits<char>::max());
    out[k++] = uint(numeric_limits<long>::max() >> 32) + uint(numeric_limits<ulong>::digits);
    out[k++] = as_type<ushort>(numeric_limits<bfloat>::max());
    out[k++] = as_type<ushort>(numeric_limits<bfloat>::epsilon());
}
`

func TestStdlibLimits(t *testing.T) {
	lib := compileT(t, stdLimitsSrc, CompileOptions{})
	want := []uint32{
		1, math.Float32bits(0x1p-126), math.Float32bits(math.MaxFloat32), math.Float32bits(-math.MaxFloat32),
		math.Float32bits(0x1p-23), math.Float32bits(0.5), math.Float32bits(float32(math.Inf(1))), 1, 1,
		24069, (1000-125)*10000 + 128, (1000-37)*10000 + 38, 1110012, 11, 11,
		0x7bff, 0x0400, 0xfbff, 0x1400, 0x0001, 11035, (1000-13)*10000 + 16,
		0x80000000, 0x7fffffff, 0x80000000, 31091, 0xFFFFFFFF, 32090, 101101,
		0x8000, 65535 + 255 + 127, 0x7fffffff + 64, 0x7f7f, 0x3c00,
	}
	out := newMem(t, 4*len(want))
	runT(t, functionT(t, lib, "k"), ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{1, 1, 1}), out)
	for k, w := range want {
		if g := out.u32()[k]; g != w {
			t.Errorf("numeric_limits result %d = %#x, want %#x", k, g, w)
		}
	}
}

// Constructs of the language around the library: metal::-qualified vector
// types, several-value constructors through an alias template, static_cast
// between vector types, metal::array, as_type (an operator of the
// language, there without using namespace metal) and metal::as_type, threadgroup scalars with an initializer, and assert
// (which Metal's library defines to nothing: its condition is not
// evaluated).
const stdConstructsSrc = `#include <metal_stdlib>
template <typename T> using vec4 = metal::vec<T, 4>;
typedef metal::float2 F2;
template <typename T> vec4<T> make4(T a, T b, T c, T d) { return vec4<T>(a, b, c, d); }
kernel void k(device float* out [[buffer(0)]], device uint* side [[buffer(1)]],
              uint tid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]]) {
    threadgroup float shared_v = 0.0f;
    threadgroup int counter = 5;
    metal::float2 a(1.0f, 2.0f);
    vec4<float> v = make4(1.0f, 2.0f, 3.0f, 4.5f);
    metal::int4 iv = static_cast<metal::int4>(v * 1.5f);
    metal::half4 hv = static_cast<metal::half4>(v);
    metal::uint2 uv = static_cast<metal::uint2>(F2(3.75f, 7.25f));
    F2 f2 = F2(a.y, a.x);
    metal::half4 hw = metal::half4(1.5h, 2.5h, 3.5h, 4.5h);
    vec<float, 4> cv = vec<float, 4>(hw) + vec4<float>(hw) + metal::vec<float, 4>(2);
    uint bits = metal::as_type<uint>(a.x) + as_type<uint>(a.y) - 0x40000000u;
    metal::array<float, 3> arr = {1.0f, 2.0f, 3.0f};
    float s = 0;
    for (auto x : arr) s += x;
    if (lid == 0) { shared_v = 1.0f; counter = 2; }
    metal::threadgroup_barrier(metal::mem_flags::mem_threadgroup);
    assert(side[tid]++ == 12345);
    out[8 * tid + 0] = a.y;
    out[8 * tid + 1] = v.w;
    out[8 * tid + 2] = float(iv.w) + float(iv.z) * 10.0f;
    out[8 * tid + 3] = float(hv.w);
    out[8 * tid + 4] = float(uv.x * 10 + uv.y) + f2.x * 100.0f;
    out[8 * tid + 5] = float(bits == 0x3f800000u) + s * 10.0f + float(arr.size()) * 100.0f;
    out[8 * tid + 6] = shared_v + float(counter) * 10.0f;
    out[8 * tid + 7] = cv.w;
}
`

func TestStdlibConstructs(t *testing.T) {
	lib := compileT(t, stdConstructsSrc, CompileOptions{})
	out, side := newF32(t, 8*4), newMem(t, 16)
	runT(t, functionT(t, lib, "k"), ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{4, 1, 1}), out, side)
	want := []float32{2, 4.5, 6 + 40, 4.5, 37 + 200, 1 + 60 + 300, 1 + 20, 4.5 + 4.5 + 2}
	for tid := range 4 {
		for k, w := range want {
			if g := out.f32()[8*tid+k]; g != w {
				t.Errorf("thread %d, result %d = %v, want %v", tid, k, g, w)
			}
		}
		if side.u32()[tid] != 0 {
			t.Errorf("assert evaluated its condition (thread %d's counter %d)", tid, side.u32()[tid])
		}
	}
}
