package msl

import (
	"testing"
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
