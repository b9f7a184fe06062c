package msl

import (
	"math"
	"testing"

	"github.com/puremetal/puremetal/half"
)

// simdgroup_matrix<T, 8, 8>(d) is Metal's diagonal matrix: d on the
// diagonal, zero elsewhere (candle's mlx_gemm.metal initialises its
// accumulators with simdgroup_matrix<AccumType, 8, 8>(0)), also through a
// template parameter and with an argument of another type.
func TestSimdgroupMatrixDiagonal(t *testing.T) {
	src := mslPrelude + `#include <metal_simdgroup_matrix>
template <typename T>
void diag(device const float* a, device float* d, T v) {
    simdgroup_matrix<T, 8, 8> acc[2] = {simdgroup_matrix<T, 8, 8>(0)};
    acc[1] = simdgroup_matrix<T, 8, 8>(v);
    simdgroup_matrix<T, 8, 8> A;
    simdgroup_load(A, a);
    simdgroup_matrix<T, 8, 8> P;
    simdgroup_multiply(P, A, acc[1]);
    simdgroup_store(acc[1], d);
    simdgroup_store(acc[0], d + 64);
    simdgroup_store(P, d + 128);
}
kernel void diag_float(device const float* a [[buffer(0)]], device float* d [[buffer(1)]]) {
    diag<float>(a, d, 2.5f);
}
kernel void diag_half(device const float* a [[buffer(0)]], device float* d [[buffer(1)]]) {
    simdgroup_half8x8 m = simdgroup_half8x8(-3);
    simdgroup_store(m, d + 192);
    diag<float>(a, d, -3);
}
`
	lib := compileT(t, src, CompileOptions{})
	for _, tc := range []struct {
		name string
		v    float32
		n    int
	}{{"diag_float", 2.5, 192}, {"diag_half", -3, 256}} {
		a, d := newF32(t, 64), newF32(t, tc.n)
		fillRandom(a.f32(), 41)
		poison(d.f32())
		runT(t, functionT(t, lib, tc.name), ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1}), a, d)
		for r := 0; r < 8; r++ {
			for c := 0; c < 8; c++ {
				var want float32
				if r == c {
					want = tc.v
				}
				if g := d.f32()[r*8+c]; g != want {
					t.Fatalf("%s: diagonal matrix [%d][%d] = %v, want %v", tc.name, r, c, g, want)
				}
				if g := d.f32()[64+r*8+c]; g != 0 || math.Signbit(float64(g)) {
					t.Fatalf("%s: zero diagonal matrix [%d][%d] = %v, want 0", tc.name, r, c, g)
				}
				// A times the diagonal matrix: each product in float, k
				// in order, as the emulator computes
				var p float32
				for k := 0; k < 8; k++ {
					var dk float32
					if k == c {
						dk = tc.v
					}
					p = p + a.f32()[r*8+k]*dk
				}
				if g := d.f32()[128+r*8+c]; g != p {
					t.Fatalf("%s: A * diagonal [%d][%d] = %v, want %v", tc.name, r, c, g, p)
				}
				if tc.n > 192 {
					if g := d.f32()[192+r*8+c]; g != want {
						t.Fatalf("%s: half diagonal matrix [%d][%d] = %v, want %v", tc.name, r, c, g, want)
					}
				}
			}
		}
	}
}

// A conditional expression with a bfloat and a float (or half) operand is
// a float in MSL, as the usual arithmetic conversions make it (candle's
// affine.metal: (x > 0) ? x : mul * (exp(x) - 1) with x a bfloat); with a
// bfloat and an integer operand, or two bfloats, it is a bfloat.
func TestBfloatConditionalFloat(t *testing.T) {
	src := mslPrelude + `
#define MAXF(a, b) ((a) > (b) ? (a) : (b))
template <int N> float pick() { return N * 0.5f; }
template <typename T>
T elu(T x, float mul) { return static_cast<T>((x > 0) ? x : mul * (x - 1)); }
kernel void cond(device const bfloat* b [[buffer(0)]],
                 device const float* f [[buffer(1)]],
                 device float* out [[buffer(2)]],
                 uint i [[thread_position_in_grid]]) {
    const bfloat x = b[i];
    float g = f[i];
    half h = half(0.5f);
    out[6 * i] = x > 0 ? x : g;              // float: g is not rounded
    out[6 * i + 1] = float(elu(x, g));
    out[6 * i + 2] = sizeof(x < 0 ? x : 0) == sizeof(bfloat) ? 1.0f : 0.0f;
    out[6 * i + 3] = x < 0 ? 2.5f : x < 1 ? g : x;
    out[6 * i + 4] = sizeof(x > 0 ? x : h) == sizeof(float) ? (x > 0 ? x : h) : -1.h;
    out[6 * i + 5] = i % 2 ? x : b[i + 1 < 4 ? i + 1 : 0];
    // operands that are vector elements, and a template argument
    float4 l4 = float4(g, 2, float(x), 4);
    out[24 + 2 * i] = MAXF(MAXF(l4[0], l4[1]), MAXF(l4.z, l4.w)) + pick<(sizeof(float) > 2 ? 1 : 0)>();
    float k = l4.y;
    out[24 + 2 * i + 1] = (i % 2 ? l4 : float4(k)).x + (i % 2 ? l4 : float4(k)).y;
}
`
	lib := compileT(t, src, CompileOptions{})
	bvals := []float32{1.5, -2, 0.25, 3}
	fvals := []float32{1.00390625 + 1.0/1024, 3.14159, -1.2345678, 0.1}
	b, f, out := newMem(t, 2*len(bvals)), newF32(t, len(fvals)), newF32(t, 8*len(bvals))
	for i, v := range bvals {
		b.u16()[i] = bfloatRound(v)
	}
	copy(f.f32(), fvals)
	poison(out.f32())
	runT(t, functionT(t, lib, "cond"), ThreadsGrid([3]int{len(bvals), 1, 1}, [3]int{len(bvals), 1, 1}), b, f, out)
	bf := func(v float32) float32 { return math.Float32frombits(uint32(bfloatRound(v)) << 16) }
	for i, x := range bvals {
		g := fvals[i]
		w0 := g
		if x > 0 {
			w0 = x
		}
		w1 := bf(g * (x - 1))
		if x > 0 {
			w1 = x
		}
		w3 := x
		if x < 0 {
			w3 = 2.5
		} else if x < 1 {
			w3 = g
		}
		w4 := float32(0.5)
		if x > 0 {
			w4 = x
		}
		w5 := x
		if i%2 == 0 {
			w5 = bvals[(i+1)%len(bvals)]
		}
		for k, w := range []float32{w0, w1, 1, w3, w4, w5} {
			if g := out.f32()[6*i+k]; g != w {
				t.Errorf("thread %d, result %d = %v, want %v", i, k, g, w)
			}
		}
		w6 := float32(4)
		for _, v := range []float32{g, 2, x} {
			if v > w6 {
				w6 = v
			}
		}
		w7 := float32(2 + 2)
		if i%2 == 1 {
			w7 = g + 2
		}
		if got := out.f32()[24+2*i]; got != w6+0.5 {
			t.Errorf("thread %d: maximum of the vector's elements = %v, want %v", i, got, w6+0.5)
		}
		if got := out.f32()[24+2*i+1]; got != w7 {
			t.Errorf("thread %d: components of a conditional vector = %v, want %v", i, got, w7)
		}
	}
}

// In a program using bfloat, a conditional expression whose operands are
// not a bfloat and a float stays what C++ makes it: an lvalue where both
// are lvalues of one type, void where both are void.
func TestBfloatConditionalLvalueAndVoid(t *testing.T) {
	src := mslPrelude + `
void put(device float *o, float v) { *o = v; }
kernel void k(device const bfloat *b [[buffer(0)]],
              device float *out [[buffer(1)]],
              uint i [[thread_position_in_grid]]) {
    float a = 1, c = 2;
    (i % 2 ? a : c) = 5;
    float &r = i % 2 ? a : c;
    r += 1;
    i % 2 ? put(out + 3 * i, float(b[i])) : put(out + 3 * i, -1.0f);
    out[3 * i + 1] = a;
    out[3 * i + 2] = c;
}
`
	lib := compileT(t, src, CompileOptions{})
	bvals := []float32{1.5, -2, 0.25, 3}
	b, out := newMem(t, 2*len(bvals)), newF32(t, 3*len(bvals))
	for i, v := range bvals {
		b.u16()[i] = bfloatRound(v)
	}
	poison(out.f32())
	runT(t, functionT(t, lib, "k"), ThreadsGrid([3]int{len(bvals), 1, 1}, [3]int{len(bvals), 1, 1}), b, out)
	for i, x := range bvals {
		want := []float32{-1, 1, 6}
		if i%2 == 1 {
			want = []float32{x, 6, 2}
		}
		for k, w := range want {
			if g := out.f32()[3*i+k]; g != w {
				t.Errorf("thread %d, result %d = %v, want %v", i, k, g, w)
			}
		}
	}
}

// static_cast<T>(v) with T a template parameter naming a vector type
// converts the components, as static_cast<float4>(v) does (clang refuses
// it between vector types); through a scalar T it is static_cast's own.
func TestStaticCastTemplateVector(t *testing.T) {
	src := mslPrelude + `
template <typename T, typename U> T conv(U v) { return static_cast<T>(v); }
template <typename T> T mask(float4 a, float4 b) { return static_cast<T>(a > b); }
template <typename T> T elem(float4 v) { return static_cast<T>(v.z) + static_cast<T>(v[3]); }
typedef int4 I4;
kernel void casts(device const float4* in [[buffer(0)]],
                  device float4* out [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
    float4 v = in[i];
    half4 h = conv<half4>(v);
    out[5 * i] = conv<float4>(h);
    out[5 * i + 1] = float4(conv<int4>(v));
    out[5 * i + 2] = float4(conv<I4>(v * 2.0f));
    out[5 * i + 3] = float4(conv<int>(v.x), conv<float>(int(v.y)), elem<float>(v), 0);
    out[5 * i + 4] = mask<float4>(v, float4(0));
}
`
	lib := compileT(t, src, CompileOptions{})
	in := []float32{2.7, -2.7, 0.5, -0.25, 100.3, -3.5, 7, 0}
	a, out := newF32(t, len(in)), newF32(t, 5*len(in))
	copy(a.f32(), in)
	poison(out.f32())
	runT(t, functionT(t, lib, "casts"), ThreadsGrid([3]int{2, 1, 1}, [3]int{2, 1, 1}), a, out)
	trunc := func(x float32) float32 { return float32(int32(x)) }
	for i := 0; i < 2; i++ {
		v := in[4*i : 4*i+4]
		for c := 0; c < 4; c++ {
			var w3, w4 float32
			switch c {
			case 0:
				w3 = trunc(v[0])
			case 1:
				w3 = trunc(v[1])
			case 2:
				w3 = v[2] + v[3]
			}
			if v[c] > 0 {
				w4 = 1
			}
			h := half.ToFloat16(v[c]).Float32()
			for k, w := range []float32{h, trunc(v[c]), trunc(v[c] * 2), w3, w4} {
				if g := out.f32()[4*(5*i+k)+c]; g != w {
					t.Errorf("thread %d, result %d, component %d = %v, want %v", i, k, c, g, w)
				}
			}
		}
	}
}

// A struct declared in threadgroup memory in a kernel passes to a
// function parameter threadgroup S<T> a[N] (candle's reduce.metal: its
// argmin, argmax, softmax, rmsnorm and layernorm kernels pass their
// threadgroup indexed<T> and RMS<float> arrays so).
func TestThreadgroupStructTemplateParam(t *testing.T) {
	src := mslPrelude + `
template <typename T> struct indexed {
    uint i;
    T val;
    constexpr indexed<T>() threadgroup = default;
};
template <typename T, ushort N>
void argmax(device const T* src, device uint* dst, threadgroup indexed<T> shared[N], uint tid) {
    shared[tid].i = tid;
    shared[tid].val = src[tid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (ushort s = N / 2; s > 0; s /= 2) {
        if (tid < s && shared[tid + s].val > shared[tid].val) {
            shared[tid] = shared[tid + s];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (tid == 0) dst[0] = shared[0].i;
}
template <ushort N>
void total(device const float* src, device uint* dst, threadgroup indexed<float> shared[N], uint tid) {
    shared[tid].val = src[tid] * 2;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0) {
        float s = 0;
        for (ushort k = 0; k < N; k++) s += shared[k].val;
        dst[1] = uint(s);
    }
}
kernel void k(device const float* src [[buffer(0)]], device uint* dst [[buffer(1)]],
              uint tid [[thread_index_in_threadgroup]]) {
    threadgroup indexed<float> shared[32];
    argmax<float, 32>(src, dst, shared, tid);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    total<32>(src, dst, shared, tid);
}
`
	lib := compileT(t, src, CompileOptions{})
	in, out := newF32(t, 32), newMem(t, 8)
	best := 0
	for i := range in.f32() {
		in.f32()[i] = float32((i*37)%32 + 1)
		if in.f32()[i] > in.f32()[best] {
			best = i
		}
	}
	runT(t, functionT(t, lib, "k"), ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1}), in, out)
	var sum float32
	for _, v := range in.f32() {
		sum += 2 * v
	}
	if got := out.u32()[0]; got != uint32(best) {
		t.Errorf("argmax = %d, want %d", got, best)
	}
	if got := out.u32()[1]; got != uint32(sum) {
		t.Errorf("total = %d, want %d", got, uint32(sum))
	}
}

// A threadgroup array of structs declared in a kernel binds to a
// parameter const threadgroup Vec (&q)[N] whose Vec and N another
// parameter gives (mistral.rs's paged attention: Qk_dot::dot), and a
// struct is read through reinterpret_cast<threadgroup S *>(p) of a
// threadgroup float pointer (its logits).
func TestThreadgroupArrayReferenceParam(t *testing.T) {
	src := mslPrelude + `
struct F8 { float4 a, b; };
inline float dot8(F8 x, F8 y) { return dot(x.a, y.a) + dot(x.b, y.b); }
template <typename T, int G> struct Qk_dot {
    template <typename Vec, int N>
    static inline float dot(const threadgroup Vec (&q)[N], const thread Vec (&k)[N]) {
        float s = 0;
        for (int i = 0; i < N; i++) s += dot8(q[i], k[i]);
        return s * G;
    }
};
kernel void k(device const float* src [[buffer(0)]], device float* dst [[buffer(1)]],
              uint tid [[thread_index_in_threadgroup]]) {
    threadgroup F8 q[2][3];
    if (tid < 6) {
        q[tid / 3][tid % 3].a = float4(src[tid]);
        q[tid / 3][tid % 3].b = float4(1);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // a struct read through a cast of a threadgroup float pointer
    threadgroup float logits[16];
    logits[tid] = float(tid);
    logits[tid + 8] = float(tid + 8);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    typedef F8 F8_t;
    F8_t l = *reinterpret_cast<threadgroup F8_t *>(logits + (tid % 2) * 8);
    dst[8 + tid] = l.a.x + l.b.w;
    F8 kv[3];
    for (int i = 0; i < 3; i++) { kv[i].a = float4(i + 1); kv[i].b = float4(tid); }
    dst[tid] = Qk_dot<float, 2>::dot(q[tid % 2], kv);
}
`
	lib := compileT(t, src, CompileOptions{})
	in, out := newF32(t, 6), newF32(t, 16)
	for i := range in.f32() {
		in.f32()[i] = float32(i) * 0.5
	}
	poison(out.f32())
	runT(t, functionT(t, lib, "k"), ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{8, 1, 1}), in, out)
	for tid := 0; tid < 8; tid++ {
		var s float32
		for i := 0; i < 3; i++ {
			qa := in.f32()[(tid%2)*3+i]
			s += 4*qa*float32(i+1) + 4*float32(tid)
		}
		if g := out.f32()[tid]; g != 2*s {
			t.Errorf("thread %d: %v, want %v", tid, g, 2*s)
		}
		base := float32((tid % 2) * 8)
		if g, w := out.f32()[8+tid], base+base+7; g != w {
			t.Errorf("thread %d: struct read through the threadgroup cast: %v, want %v", tid, g, w)
		}
	}
}
