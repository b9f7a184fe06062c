package msl

import (
	"testing"

	"github.com/puremetal/puremetal/half"
)

// runBufs runs the named kernel over n threads (threadgroups of 32) with
// bufs bound at indices 0, 1, ...
func runBufs(t *testing.T, lib *Library, name string, n int, bufs ...*mem) {
	t.Helper()
	d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{32, 1, 1})}
	for i, m := range bufs {
		d.Buffers[i] = m.binding()
	}
	if _, err := functionT(t, lib, name).Run(d); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// checkInstances runs each kernel of names in lib over 32 threads, each
// writing one float of a fresh output, and checks out[i] == want(i) for
// every i.
func checkInstances(t *testing.T, lib *Library, names []string, want func(i int) float32) {
	t.Helper()
	for _, name := range names {
		out := newF32(t, 32)
		runBufs(t, lib, name, 32, out)
		for i, g := range out.f32() {
			if w := want(i); g != w {
				t.Fatalf("%s: out[%d] = %v, want %v", name, i, g, w)
			}
		}
	}
}

// A kernel parameter declared as an array (MLX's constant const int64_t
// a_strides[2]) is a buffer holding the array, numbered like the other
// buffers without an index attribute.
func TestArrayParameter(t *testing.T) {
	src := mslPrelude + `
template <typename T>
[[kernel]] void gather2(device const T* a, device T* out,
                        constant const int64_t strides[2],
                        device const uint* w [[buffer(3)]],
                        uint i [[thread_position_in_grid]]) {
  out[i] = a[i * strides[0] + strides[1]] * T(w[0]);
}
template [[host_name("gather2_f")]] [[kernel]] decltype(gather2<float>) gather2<float>;
kernel void plain(device uint* out [[buffer(0)]], device const int arr[3] [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) { out[i] = arr[i % 3]; }
`
	lib := compileT(t, src, CompileOptions{})
	f := functionT(t, lib, "gather2_f")
	want := []struct {
		name     string
		index    int
		readOnly bool
	}{{"a", 0, true}, {"out", 1, false}, {"strides", 2, true}, {"w", 3, true}}
	for i, w := range want {
		p := f.Params[i]
		if p.Name != w.name || p.Kind != Buffer || p.Index != w.index || p.ReadOnly != w.readOnly {
			t.Errorf("parameter %d: %+v, want buffer %s at %d (read-only %v)", i, p, w.name, w.index, w.readOnly)
		}
	}
	a, out, st, w := newF32(t, 200), newF32(t, 32), newMem(t, 16), newMem(t, 4)
	fillRandom(a.f32(), 1)
	strides := []int64{3, 5}
	for i, s := range strides {
		for b := 0; b < 8; b++ {
			st.b[8*i+b] = byte(s >> (8 * b))
		}
	}
	w.u32()[0] = 2
	runBufs(t, lib, "gather2_f", 32, a, out, st, w)
	for i, g := range out.f32() {
		if x := a.f32()[3*i+5] * 2; g != x {
			t.Fatalf("out[%d] = %v, want %v", i, g, x)
		}
	}
	if p := functionT(t, lib, "plain").Params[1]; p.Name != "arr" || p.Index != 1 || !p.ReadOnly {
		t.Errorf("plain's arr: %+v", p)
	}
}

// An explicit instantiation whose template arguments are deduced from the
// declared parameters (MLX's conv: ... const constant Params<N>* params).
func TestDeducedInstantiation(t *testing.T) {
	src := mslPrelude + `
template <int N> struct Params { int add[N]; };
template <typename T, int N>
[[kernel]] void addp(device T* out [[buffer(0)]], const constant Params<N>* p [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
  T s = T(i);
  for (int k = 0; k < N; k++) s += T(p->add[k]);
  out[i] = s;
}
template [[host_name("addp_u3")]] [[kernel]] void addp(device uint* out [[buffer(0)]],
    const constant Params<3>* p [[buffer(1)]], uint i [[thread_position_in_grid]]);
template [[host_name("addp_u1")]] [[kernel]] void addp(device uint* out [[buffer(0)]],
    const constant Params<1>* p [[buffer(1)]], uint i [[thread_position_in_grid]]);
`
	lib := compileT(t, src, CompileOptions{})
	for _, c := range []struct {
		name string
		sum  uint32
	}{{"addp_u3", 1 + 10 + 100}, {"addp_u1", 1}} {
		out, p := newMem(t, 4*40), newMem(t, 12)
		copy(p.u32(), []uint32{1, 10, 100})
		runBufs(t, lib, c.name, 40, out, p)
		wantU32(t, c.name, out.u32(), func(i int) uint32 { return uint32(i) + c.sum })
	}
}

// max_total_threads_per_threadgroup computed from the template parameters
// (MLX's gemv, sort and steel kernels: BM * BN * 32), from a constant, and
// out of range.
func TestMaxTotalThreadsExpression(t *testing.T) {
	src := mslPrelude + `
constant constexpr int kWidth = 2;
template <typename T, int BM, int BN = 2, typename U = vec<T, 2>>
[[kernel, max_total_threads_per_threadgroup(BM * BN * 32)]] void k(device T* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[i] = T(BM * BN);
}
template [[host_name("k_4")]] [[kernel]] decltype(k<float, 4>) k<float, 4>;
template [[host_name("k_2_8")]] [[kernel]] decltype(k<float, 2, 8>) k<float, 2, 8>;
[[kernel, max_total_threads_per_threadgroup(kWidth * 64)]] void c(device float* out [[buffer(0)]]) {}
`
	lib := compileT(t, src, CompileOptions{})
	for name, want := range map[string]int{"k_4": 256, "k_2_8": 512, "c": 128} {
		if got := functionT(t, lib, name).MaxTotalThreadsPerThreadgroup; got != want {
			t.Errorf("%s: MaxTotalThreadsPerThreadgroup %d, want %d", name, got, want)
		}
	}
	out := newF32(t, 64)
	runBufs(t, lib, "k_2_8", 64, out)
	if out.f32()[63] != 16 {
		t.Errorf("k_2_8 wrote %v, want 16", out.f32()[63])
	}
	needClang(t)
	_, err := Compile(mslPrelude+`
template <int N> [[kernel, max_total_threads_per_threadgroup(N * 32)]] void big(device float* o [[buffer(0)]]) {}
template [[host_name("big_64")]] [[kernel]] decltype(big<64>) big<64>;
`, CompileOptions{CacheDir: testCacheDir})
	if err == nil || !contains(err.Error(), "max_total_threads_per_threadgroup(N*32) of big_64 is 2048, not between 1 and 1024") {
		t.Errorf("max_total_threads_per_threadgroup of 2048: got %v", err)
	}
}

// Quad-group functions combine the four lanes of each quad, lanes that
// have returned left out (MLX's quantized kernels call quad_sum).
func TestQuadFunctions(t *testing.T) {
	src := mslPrelude + `
kernel void q(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
              uint i [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {
  if (lane == 6) return;
  float x = in[i];
  out[4 * i + 0] = quad_sum(x);
  out[4 * i + 1] = quad_max(x);
  out[4 * i + 2] = quad_shuffle_xor(x, 1);
  out[4 * i + 3] = quad_prefix_exclusive_sum(x);
}
`
	lib := compileT(t, src, CompileOptions{})
	in, out := newF32(t, 64), newF32(t, 4*64)
	for i := range in.f32() {
		in.f32()[i] = float32(i*i%7) + 0.5
	}
	runBufs(t, lib, "q", 64, out, in)
	x := in.f32()
	live := func(i int) bool { return i%32 != 6 }
	for i := 0; i < 64; i++ {
		if !live(i) {
			continue
		}
		base := i &^ 3
		var sum, pre float32
		max := float32(-1)
		for l := base; l < base+4; l++ {
			if !live(l) {
				continue
			}
			if l < i {
				pre += x[l]
			}
			sum += x[l]
			if x[l] > max {
				max = x[l]
			}
		}
		xor := x[i^1]
		if !live(i ^ 1) {
			xor = x[i] // a source lane that is not running gives the caller's value
		}
		got := out.f32()[4*i : 4*i+4]
		if got[0] != sum || got[1] != max || got[2] != xor || got[3] != pre {
			t.Fatalf("lane %d: quad_sum, max, shuffle_xor, prefix_exclusive_sum = %v, want [%v %v %v %v]", i, got, sum, max, xor, pre)
		}
	}
}

// A program's own erf does not collide with the standard library's, which
// has none (MLX's unary ops define erf), and metal::array, _disjunction,
// thread_scope and atomic_thread_fence are there.
func TestStandardLibraryNames(t *testing.T) {
	src := mslPrelude + `
float erf(float x) { return x * 2.0; }
#pragma METAL internals : enable
template <typename T>
constexpr constant bool small_int = _disjunction<is_same<T, short>, is_same<T, char>>::value;
#pragma METAL internals : disable
constexpr constant metal::thread_scope scope = static_cast<thread_scope>(__METAL_MEMORY_SCOPE_SYSTEM__);
metal::array<float, 2> pair(float x) { return {x, x + 1}; }
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  metal::array<float, 2> p = pair(float(i));
  metal::atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, scope);
  out[i] = erf(p[1]) + (small_int<short> ? 100.0 : 0.0) + (small_int<int> ? 1000.0 : 0.0) + float(p.size());
}
`
	lib := compileT(t, src, CompileOptions{LanguageVersion: 3<<16 | 2})
	out := newF32(t, 32)
	runBufs(t, lib, "k", 32, out)
	for i, g := range out.f32() {
		if w := float32(2*(i+1) + 100 + 2); g != w {
			t.Fatalf("out[%d] = %v, want %v", i, g, w)
		}
	}
}

// A brace list passed as a vector or struct argument (MLX's copy kernels:
// elem_to_loc_2_nd<IdxT>({N * index.x, index.y, index.z}, ...)).
func TestBraceListArgument(t *testing.T) {
	src := mslPrelude + `
struct P { int a; float b; };
template <typename I> I loc(uint3 e, constant const int* s) { return I(e.x) * s[0] + I(e.y) * s[1] + I(e.z); }
float g(P p) { return float(p.a) + p.b; }
template <int N>
[[kernel]] void k(device float* out [[buffer(0)]], constant const int* s [[buffer(1)]], uint3 index [[thread_position_in_grid]]) {
  out[index.x] = float(loc<long>({N * index.x, index.y, index.z + 1}, s)) + g({2, 0.5});
}
template [[host_name("k2")]] [[kernel]] decltype(k<2>) k<2>;
`
	lib := compileT(t, src, CompileOptions{})
	out, s := newF32(t, 32), newMem(t, 8)
	copy(s.i32(), []int32{10, 100})
	runBufs(t, lib, "k2", 32, out, s)
	for i, g := range out.f32() {
		if w := float32(2*i*10+1) + 2.5; g != w {
			t.Fatalf("out[%d] = %v, want %v", i, g, w)
		}
	}
}

// Threadgroup variables with initializers (MLX's layer_norm:
// threadgroup float local_buffer[32] = {0};) compile; the initializer is
// not applied, so the memory holds the emulator's NaN fill until stored.
func TestThreadgroupInitializer(t *testing.T) {
	src := mslPrelude + `
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]], uint l [[thread_index_in_threadgroup]]) {
  threadgroup float buf[32] = {0}, other[4] = {1, 2, 3, 4};
  threadgroup int count = 0;
  buf[l] = float(l);
  if (l == 0) count = 7;
  if (l < 4) other[l] = 1.0;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[i] = buf[31 - l] + float(count) + other[l % 4];
}
`
	lib := compileT(t, src, CompileOptions{})
	out := newF32(t, 64)
	runBufs(t, lib, "k", 64, out)
	for i, g := range out.f32() {
		if w := float32(31-i%32) + 8; g != w {
			t.Fatalf("out[%d] = %v, want %v", i, g, w)
		}
	}
}

// bfloat in threadgroup memory, through typedefs and template parameters,
// is assigned as a whole (MLX's softmax: threadgroup AccT local_max[]).
func TestThreadgroupBfloat(t *testing.T) {
	src := mslPrelude + `
template <typename T, typename AccT>
[[kernel]] void k(device float* out [[buffer(0)]], uint l [[thread_index_in_threadgroup]], uint i [[thread_position_in_grid]]) {
  typedef T V;
  threadgroup V vals[32];
  threadgroup AccT acc[32];
  vals[l] = T(l) * T(0.5);
  acc[l] = AccT(float(l) + 1.0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  V other = vals[31 - l];
  out[i] = float(other) + float(acc[(l + 1) % 32]);
}
template [[host_name("k_bf")]] [[kernel]] decltype(k<bfloat, bfloat>) k<bfloat, bfloat>;
template [[host_name("k_f")]] [[kernel]] decltype(k<float, bfloat>) k<float, bfloat>;
`
	lib := compileT(t, src, CompileOptions{})
	checkInstances(t, lib, []string{"k_bf", "k_f"}, func(i int) float32 {
		o := float32(31 - i)
		return o*0.5 + float32((i+1)%32) + 1
	})
}

// Vectors declared by direct initialisation with several values (MLX's
// short2 offset(a, b)), next to a function returning a vector; uniform<T>
// and make_uniform; and a partial specialization that only the address
// space tells from another (MLX's pointer_element<thread T*> and
// <device T*>).
func TestVectorDirectInitAndTraits(t *testing.T) {
	src := mslPrelude + `
template <typename T> struct elem {};
template <typename T> struct elem<thread T*> { using type = T; };
template <typename T> struct elem<device T*> { using type = T; };
template <typename T> struct elem<constant T*> { using type = T; };
float2 twice(float2 v, float s);
float2 twice(float2 v, float s) { return v * s; }
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  short2 offset(short(i % 4), 3);
  const float2 a(float(offset.x), 0.5), b(1, 2);
  const uniform<int> n = make_uniform(int(i));
  typename elem<device float*>::type x = twice(a, 2.0).x + b.y + float(n) + float(offset.y);
  out[i] = x;
}
`
	lib := compileT(t, src, CompileOptions{})
	out := newF32(t, 32)
	runBufs(t, lib, "k", 32, out)
	for i, g := range out.f32() {
		if w := float32(2*(i%4)) + 2 + float32(i) + 3; g != w {
			t.Fatalf("out[%d] = %v, want %v", i, g, w)
		}
	}
}

// Casts through a template parameter or a typedef between vector types of
// different element types convert, as in MSL (ggml's (TC) src0_ptr[i0],
// (T) (x * x) and TC(y)), and keep working for scalars and structs.
func TestTemplateParameterVectorCasts(t *testing.T) {
	src := mslPrelude + `
typedef half4 H4;
using F4 = float4;
struct S { float v; S(float x) : v(x + 1) {} };
template <typename T, typename TC, typename U>
[[kernel]] void k(device const T* in [[buffer(0)]], device T* out [[buffer(1)]], device float* s [[buffer(2)]],
                  uint i [[thread_position_in_grid]]) {
  const TC x = (TC) in[i];
  const TC y = TC(x * 2) + (TC) -x;
  out[i] = (T) (y * x);
  H4 h = (H4) (F4) in[i];
  F4 back = F4(h);
  U u = U(back.x);
  s[i] = (float) back.y + u.v + float(int(1.5));
}
template [[host_name("k_h")]] [[kernel]] decltype(k<half4, float4, S>) k<half4, float4, S>;
`
	lib := compileT(t, src, CompileOptions{})
	in, out, s := newMem(t, 8*32), newMem(t, 8*32), newF32(t, 32)
	vals := make([]float32, 4*32)
	for i := range vals {
		vals[i] = float32(i%9) * 0.25
		in.u16()[i] = uint16(half.ToFloat16(vals[i]))
	}
	runBufs(t, lib, "k_h", 32, in, out, s)
	for i := range vals {
		x := vals[i]
		if g := half.Float16(out.u16()[i]).Float32(); g != half.ToFloat16(x*x).Float32() {
			t.Fatalf("out component %d = %v, want %v", i, g, x*x)
		}
	}
	for i, g := range s.f32() {
		if w := vals[4*i+1] + vals[4*i] + 1 + 1; g != w {
			t.Fatalf("s[%d] = %v, want %v", i, g, w)
		}
	}
}

// A cast through a typedef in a constant expression (MLX's complex.h:
// static_assert(... bfloat16_t(-5.0f))).
func TestConstexprTypedefCast(t *testing.T) {
	src := mslPrelude + `
typedef bfloat bf16;
static_assert(float(bf16(2.0f) * bf16(3.0f)) == 6.0f);
constant constexpr float four = float(bf16(4.0f));
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = four; }
`
	lib := compileT(t, src, CompileOptions{})
	out := newF32(t, 32)
	runBufs(t, lib, "k", 32, out)
	if out.f32()[5] != 4 {
		t.Fatalf("out[5] = %v, want 4", out.f32()[5])
	}
}

// cond ? b : 0 with a bfloat b is a bfloat, as in MSL (ggml's
// mul_mm: ... ? *((device T0 *) x + i) : 0), and bfloat still converts
// to float implicitly and to integers by a cast.
func TestBfloatConditional(t *testing.T) {
	src := mslPrelude + `
kernel void k(device const bfloat* in [[buffer(0)]], device float* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  bfloat b = i % 2 ? in[i] : 0;
  float f = b;
  int n = int(in[i]);
  out[i] = f + float(n) * 100.0;
}
`
	lib := compileT(t, src, CompileOptions{})
	in, out := newMem(t, 2*32), newF32(t, 32)
	for i := range in.u16() {
		in.u16()[i] = uint16(half.ToBFloat16(float32(i) + 0.5))
	}
	runBufs(t, lib, "k", 32, in, out)
	for i, g := range out.f32() {
		w := float32(i*100) + 0
		if i%2 == 1 {
			w += half.BFloat16(in.u16()[i]).Float32()
		}
		if g != w {
			t.Fatalf("out[%d] = %v, want %v", i, g, w)
		}
	}
}

// A struct in threadgroup memory is copied as a whole (MLX's arg_reduce:
// local_data[simd_group_id] = best) in a program without threadgroup
// pointers to structs; TestAddressSpaceOverloadedFunctions covers those.
func TestThreadgroupStructCopy(t *testing.T) {
	src := mslPrelude + `
template <typename U> struct Pair { uint index; U val; };
template <typename T>
[[kernel]] void k(device float* out [[buffer(0)]], uint l [[thread_index_in_threadgroup]], uint i [[thread_position_in_grid]]) {
  typedef Pair<T> P;
  threadgroup P pairs[32];
  P mine = {l, T(l) * T(0.5)};
  pairs[l] = mine;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  P other = pairs[31 - l];
  out[i] = float(other.val) + float(other.index);
}
template [[host_name("k_f")]] [[kernel]] decltype(k<float>) k<float>;
template [[host_name("k_h")]] [[kernel]] decltype(k<half>) k<half>;
`
	lib := compileT(t, src, CompileOptions{})
	checkInstances(t, lib, []string{"k_f", "k_h"}, func(i int) float32 { return float32(31-i) * 1.5 })
}

// A kernel template that names no function constant requires none, even
// when its instantiation shares a line (one macro) with another kernel's
// that does (MLX's instantiate_rms: rmsfloat32 and vjp_rmsfloat32).
func TestConstantsOfInstantiationsOnOneLine(t *testing.T) {
	src := mslPrelude + `
constant bool has_w [[function_constant(20)]];
template <typename T> [[kernel]] void plain(device T* o [[buffer(0)]], uint i [[thread_position_in_grid]]) { o[i] = T(i); }
template <typename T> [[kernel]] void weighted(device T* o [[buffer(0)]], uint i [[thread_position_in_grid]]) { o[i] = has_w ? T(1) : T(2); }
#define inst(n, t) template [[host_name("plain" #n)]] [[kernel]] decltype(plain<t>) plain<t>; template [[host_name("weighted" #n)]] [[kernel]] decltype(weighted<t>) weighted<t>;
inst(f, float)
`
	lib := compileT(t, src, CompileOptions{})
	if c := functionT(t, lib, "plainf").Constants; len(c) != 0 {
		t.Errorf("plainf uses constants %+v, want none", c)
	}
	if c := functionT(t, lib, "weightedf").Constants; len(c) != 1 || c[0].Name != "has_w" || !c[0].Required {
		t.Errorf("weightedf uses constants %+v, want has_w", c)
	}
}

// A declaration with template arguments after its name (template void
// f<float>(...);) declares f, not float: a kernel using float does not
// reach the constants of f (ggml's kernel_get_rows_f32 and mul_mv's).
func TestConstantsThroughTemplateArguments(t *testing.T) {
	src := mslPrelude + `
constant short nsg [[function_constant(600)]];
template <typename T> void helper(device T* o, uint i) { o[i] = T(nsg); }
template void helper<float>(device float* o, uint i);
template <typename T> [[kernel]] void copy1(device T* o [[buffer(0)]], uint i [[thread_position_in_grid]]) { o[i] = float(i); }
template [[host_name("copy_f32")]] [[kernel]] decltype(copy1<float>) copy1<float>;
`
	lib := compileT(t, src, CompileOptions{})
	if c := functionT(t, lib, "copy_f32").Constants; len(c) != 0 {
		t.Errorf("copy_f32 uses constants %+v, want none", c)
	}
}

// Threadgroup bfloat arrays, declared through typename A::B or a class
// template's parameter, passed to a constructor and a member function
// taking threadgroup T* (MLX's steel BlockLoader and gemv's tgp_memory).
func TestThreadgroupBfloatParameters(t *testing.T) {
	src := mslPrelude + `
template <typename T> struct Traits { typedef T acc_type; };
template <typename T> struct Loader {
  threadgroup T* dst;
  Loader(threadgroup T* d, ushort lane [[thread_index_in_simdgroup]]) thread : dst(d) { dst[lane] = T(lane); }
  T get(const threadgroup T* other, int i) const thread { return other[i]; }
};
template <typename T>
[[kernel]] void k(device float* out [[buffer(0)]], uint l [[thread_index_in_simdgroup]]) {
  using tr = Traits<T>;
  threadgroup typename tr::acc_type mem[32];
  threadgroup T tile[32];
  Loader<T> loader(tile, l);
  mem[l] = T(2 * l);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[l] = float(loader.get(tile, 31 - l)) + float(mem[31 - l]);
}
template [[host_name("k_bf")]] [[kernel]] decltype(k<bfloat>) k<bfloat>;
template [[host_name("k_f")]] [[kernel]] decltype(k<float>) k<float>;
`
	lib := compileT(t, src, CompileOptions{})
	checkInstances(t, lib, []string{"k_bf", "k_f"}, func(i int) float32 { return float32(3 * (31 - i)) })
}
