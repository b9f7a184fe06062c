package msl

import (
	"math"
	"testing"
	"unsafe"
)

// Constructs of real-world Metal kernels (candle's, mistral.rs's) that
// MLX's and ggml's do not use, each checked against its MSL meaning.

// TestRealWorldMathOutParams: ldexp (scalar and vector exponent), frexp,
// ilogb, modf, sincos and fmax3/fmin3/fmedian3, as fp8 decoders and
// rotary kernels call them, and <metal_limits>.
func TestRealWorldMathOutParams(t *testing.T) {
	src := mslPrelude + `#include <metal_limits>
kernel void k(device const float *x [[buffer(0)]], device float *out [[buffer(1)]],
              uint i [[thread_position_in_grid]]) {
    float v = x[i];
    int e;
    float m = frexp(v, e);
    float ip;
    float fr = modf(v, ip);
    float c;
    float s = sincos(v, c);
    half hc;
    half hs = sincos(half(v), hc);
    float2 lv = ldexp(float2(v, 1.5f), int2(3, -2));
    int2 e2;
    float2 m2 = frexp(float2(v, 8.0f), e2);
    out[16*i+0] = ldexp(v, -3);
    out[16*i+1] = m;
    out[16*i+2] = float(e);
    out[16*i+3] = fr;
    out[16*i+4] = ip;
    out[16*i+5] = s;
    out[16*i+6] = c;
    out[16*i+7] = float(hs) + float(hc);
    out[16*i+8] = lv.x;
    out[16*i+9] = lv.y;
    out[16*i+10] = m2.y + float(e2.y);
    out[16*i+11] = float(ilogb(v));
    out[16*i+12] = fmax3(v, 2.0f, -1.0f);
    out[16*i+13] = fmin3(v, 2.0f, -1.0f);
    out[16*i+14] = fmedian3(v, 2.0f, -1.0f);
    out[16*i+15] = float(half(ldexp(half(1.0h), 4))) + numeric_limits<float>::max() * 0.0f;
}
`
	lib := compileT(t, src, CompileOptions{})
	xs := []float32{5.75, -0.3, 1, 100.25}
	x := newF32(t, len(xs))
	copy(x.f32(), xs)
	out := newF32(t, 16*len(xs))
	runT(t, functionT(t, lib, "k"), ThreadsGrid([3]int{len(xs), 1, 1}, [3]int{len(xs), 1, 1}), x, out)
	for i, v := range xs {
		fv := float64(v)
		m, e := math.Frexp(fv)
		ip, fr := math.Modf(fv)
		med := math.Max(math.Min(fv, 2), math.Min(math.Max(fv, 2), -1))
		want := []float64{
			math.Ldexp(fv, -3), m, float64(e), fr, ip,
			math.Sin(fv), math.Cos(fv), math.Sin(fv) + math.Cos(fv),
			math.Ldexp(fv, 3), math.Ldexp(1.5, -2), 0.5 + 4, float64(math.Ilogb(fv)),
			math.Max(fv, 2), math.Min(fv, -1), med, 16,
		}
		for j, w := range want {
			tol := 1e-6 * math.Max(1, math.Abs(w))
			if j == 7 {
				tol = 4e-3 // half
			}
			if got := float64(out.f32()[16*i+j]); math.Abs(got-w) > tol {
				t.Errorf("x=%v: result %d = %v, want %v", v, j, got, w)
			}
		}
	}
}

// TestRealWorldVecElements: metal::vec_elements counts a vector's
// components and is 0 for a scalar (candle sizes its loads by it).
func TestRealWorldVecElements(t *testing.T) {
	src := mslPrelude + `
static_assert(vec_elements<float4>::value == 4, "float4");
static_assert(vec_elements<half2>::value == 2, "half2");
static_assert(vec_elements<const uint3>::value == 3, "uint3");
static_assert(vec_elements<float>::value == 0, "float");
kernel void k(device uint *out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    out[i] = vec_elements<int4>::value + 10 * vec_elements<bfloat4>::value + 100 * vec_elements<ushort>::value;
}
`
	lib := compileT(t, src, CompileOptions{})
	out := newMem(t, 4)
	runT(t, functionT(t, lib, "k"), ThreadsGrid([3]int{1, 1, 1}, [3]int{1, 1, 1}), out)
	if got := out.u32()[0]; got != 44 {
		t.Errorf("vec_elements<int4> + 10*vec_elements<bfloat4> + 100*vec_elements<ushort> = %d, want 44", got)
	}
}

// TestRealWorldThreadgroupArrayParam: a function or constructor parameter
// threadgroup T a[N] is a pointer to threadgroup memory (candle's
// block_reducer), and numeric_limits derives from _numeric_limits_impl,
// which programs specialize for their own types, with
// __is_valid_simdgroup_type telling the types SIMD-group functions take.
func TestRealWorldThreadgroupArrayParam(t *testing.T) {
	src := mslPrelude + `template <typename T> struct indexed { uint i; T val; };
template <typename T> struct _numeric_limits_impl<indexed<T>> {
    static constexpr indexed<T> lowest() { return indexed<T>{7, numeric_limits<T>::lowest()}; }
};
static_assert(__is_valid_simdgroup_type<float4>::value && __is_valid_simdgroup_type<const ushort>::value, "float4, ushort");
static_assert(!__is_valid_simdgroup_type<bfloat>::value && !__is_valid_simdgroup_type<indexed<float>>::value, "bfloat, struct");
template <typename T, uint N> struct reducer {
    threadgroup T *shared;
    reducer(threadgroup T sh[N]) { shared = sh; }
    T sum(uint lane) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
        T s = 0;
        for (uint j = 0; j < N; j++) s += shared[j];
        return s + T(lane) * 0;
    }
};
void put(const threadgroup float grid[4][8], device float *out, uint i) { out[i] += grid[i / 8][i % 8]; }
void fill(threadgroup float grid[4][8], uint i) { grid[i / 8][i % 8] = float(i); }
kernel void k(device float *out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    threadgroup float tg[32];
    threadgroup float g2[4][8];
    tg[i] = float(i) + 1;
    fill(g2, i);
    reducer<float, 32> r(tg);
    out[i] = r.sum(i) + float(numeric_limits<indexed<float>>::lowest().i);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    put(g2, out, i);
}
`
	lib := compileT(t, src, CompileOptions{})
	out := newF32(t, 32)
	runT(t, functionT(t, lib, "k"), ThreadsGrid([3]int{32, 1, 1}, [3]int{32, 1, 1}), out)
	for i, v := range out.f32() {
		if want := float32(32*33/2 + 7 + i); v != want {
			t.Errorf("out[%d] = %v, want %v", i, v, want)
		}
	}
}

// TestRealWorldOwnDotTemplate: a program's own dot template (mistral.rs's
// paged attention declares template <typename T> float dot(T a, T b) for
// its vector structs) is not ambiguous with Metal's dot, whose overloads
// are plain functions: dot of two float4 is Metal's, dot of two structs
// the program's.
func TestRealWorldOwnDotTemplate(t *testing.T) {
	src := mslPrelude + `struct Float8_ { float4 x, y; };
template <typename T> inline float dot(T a, T b) { return dot(a.x, b.x) + dot(a.y, b.y) + 1000.0f; }
kernel void k(device float *out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    float4 a = float4(1, 2, 3, 4), b = float4(i, 1, 1, 1);
    Float8_ s = {a, b};
    out[2 * i] = dot(a, b);
    out[2 * i + 1] = dot(s, s);
    half2 h = half2(1.5h, 2.0h);
    out[2 * i] += float(dot(h, h)) * 0.0f;
}
`
	lib := compileT(t, src, CompileOptions{})
	out := newF32(t, 8)
	runT(t, functionT(t, lib, "k"), ThreadsGrid([3]int{4, 1, 1}, [3]int{4, 1, 1}), out)
	for i := range 4 {
		x := float32(i)
		if got, want := out.f32()[2*i], x+9; got != want {
			t.Errorf("dot(float4) for i = %d: %v, want %v (Metal's)", i, got, want)
		}
		if got, want := out.f32()[2*i+1], 30+x*x+3+1000; got != want {
			t.Errorf("dot(Float8_) for i = %d: %v, want %v (the program's)", i, got, want)
		}
	}
}

// TestRealWorldThreadgroupAuto: threadgroup auto &r = x and threadgroup
// auto *p = &x deduce the initializer's type (candle's quantized matmul
// binds threadgroup const auto &id = rowids[...]).
func TestRealWorldThreadgroupAuto(t *testing.T) {
	src := mslPrelude + `struct P { uint a; float b; };
kernel void k(device float *out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    threadgroup P rows[32];
    threadgroup float vals[32];
    rows[i].a = i;
    rows[i].b = float(i) * 2;
    vals[i] = float(i) + 0.5f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    threadgroup const auto &id = rows[31 - i];
    threadgroup auto *v = &vals[31 - i];
    out[i] = float(id.a) + id.b + *v;
}
`
	lib := compileT(t, src, CompileOptions{})
	out := newF32(t, 32)
	runT(t, functionT(t, lib, "k"), ThreadsGrid([3]int{32, 1, 1}, [3]int{32, 1, 1}), out)
	for i, v := range out.f32() {
		j := float32(31 - i)
		if want := 4*j + 0.5; v != want {
			t.Errorf("out[%d] = %v, want %v", i, v, want)
		}
	}
}

// TestRealWorldPackedMembers: a packed vector's components are read and
// written by name (x, y, z, w and r, g, b, a) as well as by index, and it
// keeps its packed size (candle's GEMM reads a packed_int3's .x).
func TestRealWorldPackedMembers(t *testing.T) {
	src := mslPrelude + `struct Params { packed_int3 shape; packed_float4 scale; packed_half2 hh; };
static_assert(sizeof(packed_float3) == 12 && alignof(packed_float3) == 4, "packed_float3");
static_assert(sizeof(Params) == 32, "Params");
kernel void k(constant Params &p [[buffer(0)]], device packed_float3 *io [[buffer(1)]],
              device float *out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
    io[i].y += float(p.shape.x * 100 + p.shape.y * 10 + p.shape.z);
    out[i] = p.scale.w + p.scale.r + float(p.hh.g) + io[i].x;
    io[i].z = p.scale[2];
}
`
	lib := compileT(t, src, CompileOptions{})
	p := newMem(t, 32)
	copy(p.i32(), []int32{1, 2, 3})
	copy(p.f32()[3:], []float32{0.5, 0, 7, 40})
	p.u16()[15] = 0x4400 // half 4
	const n = 4
	io := newF32(t, 3*n)
	for i := range io.f32() {
		io.f32()[i] = float32(i)
	}
	out := newF32(t, n)
	runT(t, functionT(t, lib, "k"), ThreadsGrid([3]int{n, 1, 1}, [3]int{n, 1, 1}), p, io, out)
	for i := 0; i < n; i++ {
		got := io.f32()[3*i : 3*i+3]
		want := []float32{float32(3 * i), float32(3*i+1) + 123, 7}
		for j := range want {
			if got[j] != want[j] {
				t.Errorf("io[%d] = %v, want %v", i, got, want)
				break
			}
		}
		if w := float32(40+0.5+4) + float32(3*i); out.f32()[i] != w {
			t.Errorf("out[%d] = %v, want %v", i, out.f32()[i], w)
		}
	}
}

// TestRealWorldHostSharedHeaders: headers shared with the host include
// <simd/simd.h> (the vector types' simd_ and vector_ names) and
// <TargetConditionals.h> (whose TARGET_OS_ macros the preprocessor sees),
// as Apple's compiler finds them (MetalPetal's MTIShaderLib.h).
func TestRealWorldHostSharedHeaders(t *testing.T) {
	src := mslPrelude + `#include <simd/simd.h>
#include <TargetConditionals.h>
#if !defined(TARGET_OS_SIMULATOR) || TARGET_OS_SIMULATOR || !TARGET_OS_OSX || TARGET_OS_IPHONE
#error TargetConditionals.h: want a Mac, not a simulator
#endif
static_assert(__is_same(simd_float4, float4) && __is_same(vector_uint2, uint2), "simd names");
struct Uniforms { vector_float2 scale; simd_int2 offset; matrix_float2x2 m; };
kernel void k(constant Uniforms &u [[buffer(0)]], device float2 *out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    out[i] = u.m * (u.scale * float(i)) + float2(u.offset);
}
`
	lib := compileT(t, src, CompileOptions{})
	u := newMem(t, 32)
	copy(u.f32(), []float32{2, 3})
	copy(u.i32()[2:], []int32{10, -10})
	copy(u.f32()[4:], []float32{1, 0, 0, 2}) // columns (1,0) and (0,2)
	out := newF32(t, 8)
	runT(t, functionT(t, lib, "k"), ThreadsGrid([3]int{4, 1, 1}, [3]int{4, 1, 1}), u, out)
	for i := 0; i < 4; i++ {
		want := [2]float32{2*float32(i) + 10, 6*float32(i) - 10}
		if got := [2]float32(out.f32()[2*i : 2*i+2]); got != want {
			t.Errorf("out[%d] = %v, want %v", i, got, want)
		}
	}
}

// TestRealWorldBoolVec: vec<bool, N> is boolN (candle's attention masks
// are vec<bool, N> of a template's N).
func TestRealWorldBoolVec(t *testing.T) {
	src := mslPrelude + `template <int N> uint count(vec<float, N> a, vec<float, N> b) {
    vec<bool, N> m = a > b;
    uint c = 0;
    for (int j = 0; j < N; j++) c += m[j] ? 1 : 0;
    return c + (all(m) ? 100 : 0);
}
kernel void k(device const float4 *x [[buffer(0)]], device uint *out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    static_assert(__is_same(vec<bool, 3>, bool3), "vec<bool, 3>");
    out[i] = count<4>(x[i], float4(0.5f)) + 10 * count<2>(x[i].xy, float2(0.5f));
}
`
	lib := compileT(t, src, CompileOptions{})
	x := newF32(t, 8)
	copy(x.f32(), []float32{1, 0, 1, 0, 1, 1, 1, 1})
	out := newMem(t, 8)
	runT(t, functionT(t, lib, "k"), ThreadsGrid([3]int{2, 1, 1}, [3]int{2, 1, 1}), x, out)
	if got, want := out.u32(), []uint32{2 + 10*1, 4 + 100 + 10*(2+100)}; !equalU32(got, want) {
		t.Errorf("out = %v, want %v", got, want)
	}
}

// TestRealWorldConstThreadgroupLocal: const threadgroup T *p = ... in a
// body takes the address space the body's threadgroup T arrays have, for
// a struct or bfloat T as for a scalar (MLX-derived merge sorts in candle
// and mistral.rs: const threadgroup ValT *As = tgp_vals + A_st).
func TestRealWorldConstThreadgroupLocal(t *testing.T) {
	src := mslPrelude + `struct KV { float k; uint v; };
template <typename ValT> struct Merge {
    static float first(const threadgroup ValT *p) { return float(p[0]); }
};
kernel void k(device float *out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    threadgroup KV kv[32];
    threadgroup bfloat bv[32];
    kv[i].k = float(i) * 2;
    kv[i].v = i;
    bv[i] = bfloat(float(i) + 1);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const threadgroup KV *a = kv + (31 - i);
    const threadgroup bfloat *b = bv + (31 - i);
    volatile const threadgroup float *c = (volatile const threadgroup float *)&kv[1].k;
    out[i] = a->k + float(a->v) + float(b[0]) + Merge<bfloat>::first(b) + c[0];
}
`
	lib := compileT(t, src, CompileOptions{})
	out := newF32(t, 32)
	runT(t, functionT(t, lib, "k"), ThreadsGrid([3]int{32, 1, 1}, [3]int{32, 1, 1}), out)
	for i, v := range out.f32() {
		j := float32(31 - i)
		if want := 3*j + 2*(j+1) + 2; v != want {
			t.Errorf("out[%d] = %v, want %v", i, v, want)
		}
	}
}

// TestRealWorldConstantConstOverloads: overloads for device const and
// constant const pointers (the same function here, constant being const)
// are kept once, as a device const one and a constant one without const
// are; a thread reference and a constant reference stay distinct.
func TestRealWorldConstantConstOverloads(t *testing.T) {
	src := mslPrelude + `template <typename stride_t>
stride_t elem_to_loc(uint elem, device const int *shape, device const stride_t *strides, int ndim) {
    stride_t loc = 0;
    for (int i = ndim - 1; i >= 0 && elem > 0; --i) { loc += (elem % shape[i]) * strides[i]; elem /= shape[i]; }
    return loc;
}
template <typename stride_t>
stride_t elem_to_loc(uint elem, constant const int *shape, constant const stride_t *strides, int ndim) {
    stride_t loc = 0;
    for (int i = ndim - 1; i >= 0 && elem > 0; --i) { loc += (elem % shape[i]) * strides[i]; elem /= shape[i]; }
    return loc;
}
uint twice(device const uint *p) { return 2 * p[0]; }
uint twice(constant uint *p) { return 2 * p[0]; }
uint pick(thread const uint &x) { return x + 1000; }
uint pick(constant uint &x) { return x + 2000; }
kernel void k(constant int *shape [[buffer(0)]], constant size_t *strides [[buffer(1)]],
              device uint *out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
    uint local = i;
    out[i] = uint(elem_to_loc(i, shape, strides, 2)) + twice((constant uint *)shape) + pick(local);
}
`
	lib := compileT(t, src, CompileOptions{})
	shape := newMem(t, 8)
	copy(shape.i32(), []int32{3, 4})
	strides := newMem(t, 16)
	st := unsafe.Slice((*uint64)(unsafe.Pointer(&strides.b[0])), 2)
	st[0], st[1] = 1, 3 // the transpose of a 3x4 row-major array
	out := newMem(t, 4*12)
	runT(t, functionT(t, lib, "k"), ThreadsGrid([3]int{12, 1, 1}, [3]int{12, 1, 1}), shape, strides, out)
	for i, v := range out.u32() {
		if want := uint32((i%4)*3+i/4) + 6 + uint32(i) + 1000; v != want {
			t.Errorf("out[%d] = %d, want %d", i, v, want)
		}
	}
}

// TestRealWorldAddressSpaceArray: an array wrapper whose operator[] is
// overloaded by address space in its result too (thread T& ... thread,
// device T& ... device, threadgroup T& ... threadgroup, each with a const
// form), as SPIRV-Cross writes spvUnsafeArray, used in thread, device and
// threadgroup memory.
func TestRealWorldAddressSpaceArray(t *testing.T) {
	src := mslPrelude + `template <typename T, size_t Num>
struct wrapped {
    T elements[Num ? Num : 1];
    thread T& operator [] (size_t pos) thread { return elements[pos]; }
    constexpr const thread T& operator [] (size_t pos) const thread { return elements[pos]; }
    device T& operator [] (size_t pos) device { return elements[pos]; }
    constexpr const device T& operator [] (size_t pos) const device { return elements[pos]; }
    constexpr const constant T& operator [] (size_t pos) const constant { return elements[pos]; }
    threadgroup T& operator [] (size_t pos) threadgroup { return elements[pos]; }
    constexpr const threadgroup T& operator [] (size_t pos) const threadgroup { return elements[pos]; }
};
struct block { wrapped<float, 4> v[1]; };
kernel void k(device block& io [[buffer(0)]], constant wrapped<float, 4>& bias [[buffer(1)]],
              uint i [[thread_position_in_grid]], uint lid [[thread_index_in_threadgroup]]) {
    threadgroup wrapped<float, 4> shared;
    wrapped<float, 4> local;
    local[lid] = io.v[0][lid] * 2.0f;
    shared[lid] = local[lid] + bias[lid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    io.v[0][lid] = shared[3 - lid];
}
`
	lib := compileT(t, src, CompileOptions{})
	io, bias := newF32(t, 4), newF32(t, 4)
	copy(io.f32(), []float32{1, 2, 3, 4})
	copy(bias.f32(), []float32{0.5, 0.25, 0.125, 0.0625})
	runT(t, functionT(t, lib, "k"), ThreadsGrid([3]int{4, 1, 1}, [3]int{4, 1, 1}), io, bias)
	for i, v := range io.f32() {
		j := 3 - i
		if want := float32(j+1)*2 + bias.f32()[j]; v != want {
			t.Errorf("io[%d] = %v, want %v", i, v, want)
		}
	}
}

// TestRealWorldThreadgroupReferenceParams: kernel parameters threadgroup
// S& and threadgroup atomic_uint& without an attribute, as naga declares
// workgroup variables: each takes the lowest threadgroup index no other
// parameter uses, and the struct is assigned as a whole.
func TestRealWorldThreadgroupReferenceParams(t *testing.T) {
	src := mslPrelude + `struct inner_t { uint v[4]; };
struct W { inner_t arr; atomic_uint count; };
kernel void k(uint lid [[thread_position_in_threadgroup]], threadgroup W& w, threadgroup float* spare [[threadgroup(0)]],
              threadgroup atomic_uint& total, device uint* out [[buffer(0)]]) {
    if (lid == 0) {
        w.arr = {};
        atomic_store_explicit(&w.count, 0u, memory_order_relaxed);
        atomic_store_explicit(&total, 0u, memory_order_relaxed);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    atomic_fetch_add_explicit(&w.count, lid, memory_order_relaxed);
    atomic_fetch_add_explicit(&total, 1u, memory_order_relaxed);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lid == 1) w.arr.v[2] = 7;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[lid] = w.arr.v[lid] + atomic_load_explicit(&w.count, memory_order_relaxed) * 100 +
               atomic_load_explicit(&total, memory_order_relaxed) * 10000;
}
`
	lib := compileT(t, src, CompileOptions{})
	f := functionT(t, lib, "k")
	var tg []int
	for _, p := range f.Params {
		if p.Kind == ThreadgroupMemory {
			tg = append(tg, p.Index)
		}
	}
	if len(tg) != 3 || tg[0] != 1 || tg[1] != 0 || tg[2] != 2 {
		t.Fatalf("threadgroup indices %v, want [1 0 2] (w, spare, total)", tg)
	}
	out := newMem(t, 16)
	d := &Dispatch{Grid: ThreadsGrid([3]int{4, 1, 1}, [3]int{4, 1, 1})}
	d.Buffers[0] = out.binding()
	d.ThreadgroupMemoryLength[0], d.ThreadgroupMemoryLength[1], d.ThreadgroupMemoryLength[2] = 16, 32, 16
	if _, err := f.Run(d); err != nil {
		t.Fatal(err)
	}
	for i, v := range out.u32() {
		want := uint32(6*100 + 4*10000)
		if i == 2 {
			want += 7
		}
		if v != want {
			t.Errorf("out[%d] = %d, want %d", i, v, want)
		}
	}
}

// TestRealWorldVecSpecializationOnSize: a partial specialization on
// vec<float, N> deduces N (SPIRV-Cross's SpvHalfTypeSelector), for float2,
// float3 and float4, and the primary template stays for other types.
func TestRealWorldVecSpecializationOnSize(t *testing.T) {
	src := mslPrelude + `template <typename F> struct half_of { using H = F; static constant constexpr uint n = 0; };
template <> struct half_of<float> { using H = half; static constant constexpr uint n = 1; };
template <uint N> struct half_of<vec<float, N>> { using H = vec<half, N>; static constant constexpr uint n = N; };
template <typename F> uint code() { return half_of<F>::n * 100 + uint(sizeof(typename half_of<F>::H)); }
kernel void k(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    uint c[] = {code<float>(), code<float2>(), code<float3>(), code<float4>(), code<int4>()};
    out[i] = c[i];
}
`
	lib := compileT(t, src, CompileOptions{})
	out := newMem(t, 20)
	runT(t, functionT(t, lib, "k"), ThreadsGrid([3]int{5, 1, 1}, [3]int{5, 1, 1}), out)
	for i, want := range []uint32{102, 204, 308, 408, 16} {
		if got := out.u32()[i]; got != want {
			t.Errorf("code %d = %d, want %d", i, got, want)
		}
	}
}
