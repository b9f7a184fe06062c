package msl

import (
	"math"
	"testing"
)

// MLX's utility headers: bfloat behind __HAVE_BFLOAT__, METAL_FUNC,
// Metal's type traits (is_same_v, enable_if, is_convertible_v,
// is_floating_point_v, ...), static constant constexpr members, and member
// functions overloaded by address space (complex64_t's constructors and
// conversion operators).
const mlxStyleSrc = mslPrelude + `
#if defined(__HAVE_BFLOAT__)
typedef bfloat bfloat16_t;
#else
#error no bfloat
#endif
#define STEEL_CONST static constant constexpr const

struct complex64_t {
  float real;
  float imag;
  constexpr complex64_t(float real, float imag) : real(real), imag(imag) {};
  constexpr complex64_t() thread : real(0), imag(0) {};
  constexpr complex64_t() threadgroup : real(0), imag(0) {};
  constexpr complex64_t() device : real(0), imag(0) {};
  constexpr complex64_t() constant : real(0), imag(0) {};

  template <typename T, typename = typename enable_if<is_convertible_v<T, float>>::type>
  constexpr complex64_t(T x) thread : real(x), imag(0) {}
  template <typename T, typename = typename enable_if<is_convertible_v<T, float>>::type>
  constexpr complex64_t(T x) device : real(x), imag(0) {}
  template <typename T, typename = typename enable_if<is_convertible_v<T, float>>::type>
  constexpr complex64_t(T x) constant : real(x), imag(0) {}

  constexpr operator float() const thread { return real; }
  constexpr operator float() const device { return real; }
};

constexpr complex64_t operator*(complex64_t a, complex64_t b) {
  return {a.real * b.real - a.imag * b.imag, a.real * b.imag + a.imag * b.real};
}

template <typename T>
METAL_FUNC T twice(T x) {
  static_assert(is_floating_point_v<T> || is_integral_v<T>, "numbers only");
  return x + x;
}

template <typename T, typename U>
struct pick {
  STEEL_CONST int value = is_same_v<T, U> ? 1 : 2;
};

template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>
METAL_FUNC int kind(T) { return 1; }
template <typename T, enable_if_t<is_integral_v<T>, bool> = true>
METAL_FUNC int kind(T) { return 2; }

kernel void traits(device complex64_t* z [[buffer(0)]],
                   device int* out [[buffer(1)]],
                   device float* f [[buffer(2)]],
                   uint i [[thread_position_in_grid]]) {
  complex64_t a = z[i];
  z[i] = a * complex64_t(0.0f, 1.0f);
  device int* o = out + 10 * i;
  o[0] = is_same_v<bfloat16_t, bfloat>;
  o[1] = is_floating_point_v<half> + 2 * is_floating_point_v<int> + 4 * is_floating_point_v<const bfloat>;
  o[2] = is_integral_v<ushort> && is_unsigned_v<uint> && is_signed_v<int> && !is_signed_v<uint> && is_signed_v<float>;
  o[3] = is_convertible_v<bfloat, float> + 2 * is_convertible_v<device float*, int>;
  o[4] = numeric_limits<int>::max() == INT_MAX && numeric_limits<bfloat>::max() > 3e38f;
  o[5] = pick<float, float>::value * 10 + pick<float, half>::value;
  o[6] = sizeof(enable_if_t<true, short>) + 10 * sizeof(conditional_t<false, char, float>);
  o[7] = twice(int(i));
  o[8] = kind(1.5h) * 10 + kind(3u);
  o[9] = is_same_v<remove_cv_t<const volatile uint>, uint> + 2 * is_same_v<decay_t<const int&>, int> + 4 * is_vector_v<float4>;
  f[i] = twice(float(a));
}
`

func TestMLXStyleHeaders(t *testing.T) {
	lib := compileT(t, mlxStyleSrc, CompileOptions{})
	const n = 33
	z, out, f := newF32(t, 2*n), newMem(t, 4*10*n), newF32(t, n)
	fillRandom(z.f32(), 41)
	orig := append([]float32(nil), z.f32()...)
	for i := range out.i32() {
		out.i32()[i] = -99
	}
	poison(f.f32())
	runT(t, functionT(t, lib, "traits"), ThreadsGrid([3]int{n, 1, 1}, [3]int{32, 1, 1}), z, out, f)
	for i := 0; i < n; i++ {
		re, im := orig[2*i], orig[2*i+1]
		// (re + i im) * i = -im + i re
		if got, want := z.f32()[2*i:2*i+2], []float32{re*0 - im*1, re*1 + im*0}; math.Float32bits(got[0]) != math.Float32bits(want[0]) || got[1] != want[1] {
			t.Fatalf("z[%d] = %v, want %v", i, got, want)
		}
		want := []int32{1, 5, 1, 1, 1, 12, 42, int32(2 * i), 12, 7}
		for k, w := range want {
			if g := out.i32()[10*i+k]; g != w {
				t.Fatalf("thread %d: trait result %d = %d, want %d", i, k, g, w)
			}
		}
		if got := f.f32()[i]; got != re+re {
			t.Fatalf("f[%d] = %v, want %v", i, got, re+re)
		}
	}
}
