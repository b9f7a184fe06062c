package msl

import (
	"math"
	"testing"

	"github.com/puremetal/puremetal/half"
)

// The forms below are MLX's kernels' (gemv, fft, steel, sort, quantized),
// each reduced to a small program that runs.

// vec<T, N>(x) and metal::vec<T, N>(x) convert the components of a vector
// of another element type, as in MSL (MLX's gemv: vec<AccT, 4>(w4[i]) of a
// half4), where a reinterpretation would be of a different size.
func TestVecTemplateCast(t *testing.T) {
	src := mslPrelude + `
template <typename T, typename AccT>
[[kernel]] void k(device const vec<T, 4>* in [[buffer(0)]], device float* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  const vec<AccT, 4> a = vec<AccT, 4>(in[i]);
  metal::vec<int, 4> n = metal::vec<int, 4>(a * 2);
  vec<AccT, 2> two = vec<AccT, 2>(1, 2);
  vec<AccT, 2> three = i < 100 ? vec<AccT, 2>(two.y) : two;
  out[i] = a.x + a.y + a.z + a.w + float(n.w) + two.y + three.x;
}
template [[host_name("k_h")]] [[kernel]] decltype(k<half, float>) k<half, float>;
`
	lib := compileT(t, src, CompileOptions{})
	in, out := newMem(t, 8*32), newF32(t, 32)
	for i := range in.u16() {
		in.u16()[i] = uint16(half.ToFloat16(float32(i%7) + 0.25))
	}
	runBufs(t, lib, "k_h", 32, in, out)
	for i, g := range out.f32() {
		var w float32
		for c := 0; c < 4; c++ {
			w += float32((4*i+c)%7) + 0.25
		}
		w += float32(int32(2*(float32((4*i+3)%7)+0.25))) + 2 + 2
		if g != w {
			t.Fatalf("out[%d] = %v, want %v", i, g, w)
		}
	}
}

// A partial specialization on vec<T, N> with a template parameter T is
// chosen for vectors of every element type, bfloat's too (MLX's fft:
// FFTStorageTraits<vec<T, 2>>).
func TestVecPartialSpecialization(t *testing.T) {
	src := mslPrelude + `
template <typename S> struct Traits { using scalar = S; static constant constexpr int n = 1; };
template <typename T> struct Traits<vec<T, 2>> { using scalar = T; static constant constexpr int n = 2 + sizeof(T); };
template <typename T, int N> struct Width { static constant constexpr int n = 0; };
template <int N, typename T> struct Width<vec<T, N>, N> { static constant constexpr int n = N; };
template <typename V>
[[kernel]] void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  typename Traits<V>::scalar s = 1.5;
  out[i] = float(s) + Traits<V>::n * 10 + Width<V, 2>::n * 100;
}
template [[host_name("k_f2")]] [[kernel]] decltype(k<float2>) k<float2>;
template [[host_name("k_h2")]] [[kernel]] decltype(k<half2>) k<half2>;
template [[host_name("k_b2")]] [[kernel]] decltype(k<bfloat2>) k<bfloat2>;
template [[host_name("k_f")]] [[kernel]] decltype(k<float>) k<float>;
`
	lib := compileT(t, src, CompileOptions{})
	for name, want := range map[string]float32{"k_f2": 1.5 + 60 + 200, "k_h2": 1.5 + 40 + 200, "k_b2": 1.5 + 40 + 200, "k_f": 1.5 + 10} {
		out := newF32(t, 32)
		runBufs(t, lib, name, 32, out)
		if g := out.f32()[3]; g != want {
			t.Errorf("%s: out[3] = %v, want %v", name, g, want)
		}
	}
}

// T(a, b) of a typedef or template parameter naming a vector type
// concatenates, as the vector type's constructor does (MLX's fft:
// complex_T(elem.x, -elem.y) with using complex_T = vec<float, 2>), and
// stays a constructor call for a class.
func TestTypedefVectorConstructor(t *testing.T) {
	src := mslPrelude + `
struct P { float a, b; P(float x, float y) : a(x), b(2 * y) {} };
template <typename S, typename Q>
[[kernel]] void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  using C = vec<S, 2>;
  typedef vec<S, 4> C4;
  C c = i % 2 ? C(float(i), -1.0) : C(2, 3);
  C4 d = C4(c, C(5, S(6)));
  Q q = Q(c.x, d.w);
  out[i] = float(c.x) + float(c.y) + float(d.z + d.w) + q.a + q.b;
}
template [[host_name("k_f")]] [[kernel]] decltype(k<float, P>) k<float, P>;
template [[host_name("k_h")]] [[kernel]] decltype(k<half, P>) k<half, P>;
template [[host_name("k_b")]] [[kernel]] decltype(k<bfloat, P>) k<bfloat, P>;
`
	lib := compileT(t, src, CompileOptions{})
	checkInstances(t, lib, []string{"k_f", "k_h", "k_b"}, func(i int) float32 {
		cx, cy := float32(2), float32(3)
		if i%2 == 1 {
			cx, cy = float32(i), -1
		}
		return cx + cy + 11 + cx + 12
	})
}

// Threadgroup tiles of bfloat and of a struct passed on to a member
// template whose template arguments every call must give (MLX's steel
// MMATile::load<U, w_x, ...>(const threadgroup U* src)), and
// reinterpret_cast of a threadgroup struct pointer to threadgroup floats
// (steel's complex64_t mma).
func TestThreadgroupTileForms(t *testing.T) {
	src := mslPrelude + `
template <typename T> struct complex_s { T re, im; };
typedef complex_s<float> cplx;
struct Tile {
  float v;
  template <typename U, int W>
  void load(const threadgroup U* src, int i) thread { v = float(src[i]) * W; }
};
template <typename T>
struct Block {
  Tile tile;
  void run(const threadgroup T* s, int i) thread { tile.template load<T, 2>(s, i); }
  void run(const threadgroup cplx* s, int i) thread {
    threadgroup const float* f = reinterpret_cast<threadgroup const float*>(s);
    tile.template load<float, 3>(f, 2 * i + 1);
  }
};
template <typename T>
[[kernel]] void k(device float* out [[buffer(0)]], uint l [[thread_index_in_simdgroup]]) {
  threadgroup T tiles[32];
  threadgroup cplx cs[32];
  tiles[l] = T(l);
  cs[l].re = l;
  cs[l].im = 100 + l;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  Block<T> b;
  b.run(tiles, 31 - l);
  float x = b.tile.v;
  b.run(cs, 31 - l);
  out[l] = x + b.tile.v;
}
template [[host_name("k_bf")]] [[kernel]] decltype(k<bfloat>) k<bfloat>;
template [[host_name("k_f")]] [[kernel]] decltype(k<float>) k<float>;
`
	lib := compileT(t, src, CompileOptions{})
	checkInstances(t, lib, []string{"k_bf", "k_f"}, func(i int) float32 { return float32(2*(31-i) + 3*(100+31-i)) })
}

// A function template whose T only threadgroup pointer parameters name
// deduces T from them (MLX's quantized_utils gemm_loop_aligned(threadgroup
// T* As, threadgroup T* Bs, ...)), and a local const threadgroup T*
// points into a threadgroup array of bfloat (MLX's sort: const
// threadgroup ValT* As = tgp_vals + A_st).
func TestThreadgroupDeducedAndConstLocals(t *testing.T) {
	src := mslPrelude + `
template <typename T, typename U>
float sum2(threadgroup T* a, threadgroup T* b, thread U& scale, int i) { return (float(a[i]) + float(b[i])) * scale; }
template <typename T>
struct Sorter {
  static float first(const threadgroup T* p) { return float(p[0]); }
  static float run(threadgroup T* vals, int off) {
    const threadgroup T* as = vals + off;
    return first(as);
  }
};
template <typename T>
[[kernel]] void k(device float* out [[buffer(0)]], uint l [[thread_index_in_simdgroup]]) {
  threadgroup float xs[32];
  threadgroup float ys[32];
  threadgroup T vals[32];
  xs[l] = l;
  ys[l] = 2 * l;
  vals[l] = T(3 * l);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float s = 0.5;
  out[l] = sum2(xs, ys, s, 31 - l) + Sorter<T>::run(vals, 31 - l);
}
template [[host_name("k_f")]] [[kernel]] decltype(k<float>) k<float>;
template [[host_name("k_bf")]] [[kernel]] decltype(k<bfloat>) k<bfloat>;
`
	lib := compileT(t, src, CompileOptions{})
	checkInstances(t, lib, []string{"k_f", "k_bf"}, func(i int) float32 { return float32(3*(31-i))*0.5 + float32(3*(31-i)) })
}

// A struct converting to bool is assigned to a bfloat as to a half
// (MLX's steel_gemm_masked: mask_op.scale = lhs_mask[i] of _NoMask).
func TestBfloatAssignFromBoolClass(t *testing.T) {
	src := mslPrelude + `
struct NoMask {
  char x;
  constexpr operator bool() thread { return true; }
  constexpr operator bool() const device { return true; }
};
struct Op { bfloat scale; half hs; };
kernel void k(device const NoMask* m [[buffer(0)]], device float* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  Op op;
  op.scale = m[i];
  op.hs = m[i];
  NoMask local{1};
  bfloat b = 2.0;
  b = local;
  out[i] = float(op.scale) + float(op.hs) * 10 + float(b) * 100;
}
`
	lib := compileT(t, src, CompileOptions{})
	m, out := newMem(t, 32), newF32(t, 32)
	runBufs(t, lib, "k", 32, m, out)
	for i, g := range out.f32() {
		if g != 111 {
			t.Fatalf("out[%d] = %v, want 111", i, g)
		}
	}
}

// A function constant declared static constant constexpr const bool (MLX's
// fft: STEEL_CONST bool inv_ [[function_constant(0)]]) has type bool and
// takes a value.
func TestConstexprFunctionConstant(t *testing.T) {
	src := mslPrelude + `
#define STEEL_CONST static constant constexpr const
STEEL_CONST bool inv_ [[function_constant(0)]];
STEEL_CONST int n_ [[function_constant(1)]];
kernel void k(device int* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = inv_ ? -n_ : n_; }
`
	lib := compileT(t, src, CompileOptions{})
	c := functionT(t, lib, "k").Constants
	if len(c) != 2 || c[0].Type != "bool" || c[1].Type != "int" {
		t.Fatalf("constants %+v, want bool inv_ and int n_", c)
	}
	f, err := lib.Specialize("k", []ConstantValue{{Index: 0, Type: "bool", Bytes: []byte{1}}, {Index: 1, Type: "int", Bytes: u32b(5)}})
	if err != nil {
		t.Fatal(err)
	}
	out := newMem(t, 4*32)
	d := &Dispatch{Grid: ThreadsGrid([3]int{32, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0] = out.binding()
	if _, err := f.Run(d); err != nil {
		t.Fatal(err)
	}
	if g := out.i32()[7]; g != -5 {
		t.Fatalf("out[7] = %d, want -5", g)
	}
}

// Two kernel templates of one name with different template parameters
// (MLX's block_masked_gemm<T, out_mask_t, op_mask_t, ...> and
// block_masked_gemm<T, ..., bool has_operand_mask = false>): each
// instantiation is of the template that takes its arguments, with that
// template's parameters and max_total_threads_per_threadgroup.
func TestOverloadedKernelTemplates(t *testing.T) {
	src := mslPrelude + `
template <typename T, typename M, int W>
[[kernel, max_total_threads_per_threadgroup(W * 32)]] void gemm(
    device T* out [[buffer(0)]], const device M* mask [[buffer(3)]], uint i [[thread_position_in_grid]]) {
  out[i] = T(mask[i]) * W;
}
template <typename T, int W, bool flag = false>
[[kernel, max_total_threads_per_threadgroup(W * 64)]] void gemm(
    device T* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  out[i] = flag ? -W : W;
}
template [[host_name("masked")]] [[kernel]] decltype(gemm<float, int, 2>) gemm<float, int, 2>;
template [[host_name("plain")]] [[kernel]] decltype(gemm<float, 3>) gemm<float, 3>;
template [[host_name("flagged")]] [[kernel]] decltype(gemm<float, 4, true>) gemm<float, 4, true>;
`
	lib := compileT(t, src, CompileOptions{})
	masked, plain, flagged := functionT(t, lib, "masked"), functionT(t, lib, "plain"), functionT(t, lib, "flagged")
	if masked.MaxTotalThreadsPerThreadgroup != 64 || plain.MaxTotalThreadsPerThreadgroup != 192 || flagged.MaxTotalThreadsPerThreadgroup != 256 {
		t.Fatalf("max total threads %d, %d, %d, want 64, 192, 256", masked.MaxTotalThreadsPerThreadgroup, plain.MaxTotalThreadsPerThreadgroup, flagged.MaxTotalThreadsPerThreadgroup)
	}
	if len(masked.Params) != 3 || masked.Params[1].Index != 3 || len(plain.Params) != 2 || plain.Params[0].Index != 1 {
		t.Fatalf("parameters %+v and %+v, want out and mask at 0 and 3, and out at 1", masked.Params, plain.Params)
	}
	mask, out := newMem(t, 4*32), newF32(t, 32)
	for i := range mask.i32() {
		mask.i32()[i] = int32(i)
	}
	runBufs(t, lib, "masked", 32, out, newMem(t, 4), newMem(t, 4), mask)
	if g := out.f32()[5]; g != 10 {
		t.Fatalf("masked: out[5] = %v, want 10", g)
	}
	runBufs(t, lib, "flagged", 32, newMem(t, 4), out)
	if g := out.f32()[5]; g != -4 {
		t.Fatalf("flagged: out[5] = %v, want -4", g)
	}
}

// A branch on a bool template parameter that its instantiation never takes
// may assign a bfloat to an integer, as MSL converts bfloat implicitly
// (MLX's sort: KernelMergeSort<T, U, ARG_SORT, ...>::block_sort writes
// out[i] = tgp_vals[i] under if (!ARG_SORT), with U uint and T bfloat for
// an arg-sort); the branch it takes runs.
func TestTemplateParameterBranch(t *testing.T) {
	src := mslPrelude + `
template <typename T, typename U, bool ARG, bool NEG = false>
struct Sorter {
  static void write(const device T* in, device U* out, uint i) {
    threadgroup T vals[32];
    vals[i] = in[i];
    if (ARG) {
      out[i] = 31 - i;
    } else {
      out[i] = vals[i];
    }
    if (!NEG) {
    } else {
      out[i] = -vals[i];
    }
  }
};
template <typename T, typename U, bool ARG, bool NEG>
[[kernel]] void k(const device T* in [[buffer(0)]], device U* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  Sorter<T, U, ARG, NEG>::write(in, out, i);
}
template [[host_name("arg")]] [[kernel]] decltype(k<bfloat, uint, true, false>) k<bfloat, uint, true, false>;
template [[host_name("vals")]] [[kernel]] decltype(k<bfloat, bfloat, false, false>) k<bfloat, bfloat, false, false>;
template [[host_name("neg")]] [[kernel]] decltype(k<bfloat, bfloat, false, true>) k<bfloat, bfloat, false, true>;
`
	lib := compileT(t, src, CompileOptions{})
	in := newMem(t, 2*32)
	for i := range in.u16() {
		in.u16()[i] = uint16(math.Float32bits(float32(i)+0.5) >> 16)
	}
	arg, vals := newMem(t, 4*32), newMem(t, 2*32)
	runBufs(t, lib, "arg", 32, in, arg)
	runBufs(t, lib, "vals", 32, in, vals)
	for i := 0; i < 32; i++ {
		if g := arg.u32()[i]; g != uint32(31-i) {
			t.Fatalf("arg: out[%d] = %d, want %d", i, g, 31-i)
		}
		if g := vals.u16()[i]; g != in.u16()[i] {
			t.Fatalf("vals: out[%d] = %#x, want %#x", i, g, in.u16()[i])
		}
	}
	runBufs(t, lib, "neg", 32, in, vals)
	if g, w := vals.u16()[3], in.u16()[3]|0x8000; g != w {
		t.Fatalf("neg: out[3] = %#x, want %#x", g, w)
	}
}

// A function template taking threadgroup T* parameters that alone name T
// is called with threadgroup bfloat arrays (in the generic address space
// here) as with float ones (MLX's quantized gather_qmm_rhs:
// gemm_loop_aligned(threadgroup T* As, threadgroup T* Bs, thread mma_t&
// mma_op, ...) called with threadgroup T Xs[...], T bfloat).
func TestThreadgroupDeducedParameter(t *testing.T) {
	src := mslPrelude + `
template <typename T, typename Op>
void fill(threadgroup T* a, const threadgroup T& b, thread Op& op, uint i) {
  T x = T(i) + b;
  a[i] = op(x);
}
struct Twice { template <typename U> U operator()(U x) { return x * U(2); } };
template <typename T>
[[kernel]] void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  threadgroup T buf[32];
  threadgroup T one;
  if (i == 0) one = T(1);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  Twice op;
  fill(buf, one, op, i);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[i] = float(buf[31 - i]);
}
template [[host_name("k_f")]] [[kernel]] decltype(k<float>) k<float>;
template [[host_name("k_h")]] [[kernel]] decltype(k<half>) k<half>;
template [[host_name("k_b")]] [[kernel]] decltype(k<bfloat>) k<bfloat>;
`
	lib := compileT(t, src, CompileOptions{})
	checkInstances(t, lib, []string{"k_f", "k_h", "k_b"}, func(i int) float32 { return float32(2 * (31 - i + 1)) })
}

// A function template deduces T from a vec<T, N> parameter, or one through
// an alias template naming it, of every element type, bfloat's too (MLX's
// steel attention: template <typename U> using dtype_frag_t = typename
// metal::vec<U, kElemsPerFrag>; mma(thread frag_type& D, thread
// dtype_frag_t<Atype>& A, ...), beside an overload on matrices).
func TestVecAliasDeduction(t *testing.T) {
	src := mslPrelude + `
template <typename T, int N>
struct Frag {
  template <typename U> using frag_t = typename metal::vec<U, N>;
  template <typename A, typename B>
  static void add(thread vec<T, N>& d, thread frag_t<A>& a, const thread metal::vec<B, N>& b) {
    for (int i = 0; i < N; i++) d[i] = T(a[i]) + T(b[i]) + T(sizeof(A));
  }
  template <typename A, typename B>
  static void add(thread vec<T, N>& d, thread A* a, B b) {
    for (int i = 0; i < N; i++) d[i] = T(a[i]) * T(b);
  }
};
template <typename E>
[[kernel]] void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  vec<float, 2> d;
  vec<E, 2> a = vec<E, 2>(E(i), E(1));
  half2 b = half2(2, 3);
  Frag<float, 2>::add(d, a, b);
  float p[2] = {1, 2};
  vec<float, 2> e;
  Frag<float, 2>::add(e, p, 10);
  out[i] = d.x + d.y * 100 + e.y * 1000;
}
template [[host_name("k_f")]] [[kernel]] decltype(k<float>) k<float>;
template [[host_name("k_h")]] [[kernel]] decltype(k<half>) k<half>;
template [[host_name("k_b")]] [[kernel]] decltype(k<bfloat>) k<bfloat>;
`
	lib := compileT(t, src, CompileOptions{})
	for name, size := range map[string]float32{"k_f": 4, "k_h": 2, "k_b": 2} {
		out := newF32(t, 32)
		runBufs(t, lib, name, 32, out)
		for i, g := range out.f32() {
			if w := float32(i) + 2 + size + (1+3+size)*100 + 20000; g != w {
				t.Fatalf("%s: out[%d] = %v, want %v", name, i, g, w)
			}
		}
	}
}

// A cast of a threadgroup pointer to a threadgroup bfloat pointer (or
// bfloat4's) gives a pointer the bfloat declaration it initializes takes
// (mistral.rs's flash attention: threadgroup bfloat *sq = (threadgroup
// bfloat *)(shmem_f16 + 0 * T)), whose accesses reach the threadgroup
// memory.
func TestThreadgroupBfloatCast(t *testing.T) {
	src := mslPrelude + `
kernel void k(device float* out [[buffer(0)]], threadgroup half* shmem [[threadgroup(0)]], uint i [[thread_position_in_grid]]) {
  threadgroup bfloat *sb = (threadgroup bfloat *)(shmem + 32);
  threadgroup bfloat4 *sb4 = (threadgroup bfloat4 *)(shmem + 32);
  sb[i] = bfloat(float(i) + 0.5f);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  bfloat4 v = sb4[(31 - i) / 4];
  out[i] = float(v[(31 - i) % 4]);
}
`
	lib := compileT(t, src, CompileOptions{})
	f := functionT(t, lib, "k")
	out := newF32(t, 32)
	d := &Dispatch{Grid: ThreadsGrid([3]int{32, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0] = out.binding()
	d.ThreadgroupMemoryLength[0] = 2 * 64
	if _, err := f.Run(d); err != nil {
		t.Fatal(err)
	}
	for i, g := range out.f32() {
		if w := float32(31-i) + 0.5; g != w {
			t.Fatalf("out[%d] = %v, want %v", i, g, w)
		}
	}
}
