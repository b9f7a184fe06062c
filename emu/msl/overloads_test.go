package msl

import "testing"

// Free functions overloaded by the address space of a parameter, as MLX's
// complex.h defines operator+= for thread, threadgroup and device
// references: device and thread objects share one address space here, so
// one of those two overloads is kept; the threadgroup one stays. Each is
// called on an object of its space.
func TestAddressSpaceOverloadedFunctions(t *testing.T) {
	src := mslPrelude + `
struct pair_t {
    float a, b;
};

template <typename T>
constexpr thread T& accumulate(thread T& x, T y) {
    x.a += y.a;
    x.b += y.b;
    return x;
}

template <typename T>
constexpr threadgroup T& accumulate(threadgroup T& x, T y) {
    x.a += 10 * y.a;
    x.b += 10 * y.b;
    return x;
}

template <typename T>
constexpr device T& accumulate(device T& x, T y) {
    x.a += y.a;
    x.b += y.b;
    return x;
}

inline thread pair_t& operator+=(thread pair_t& x, float y) { x.a += y; return x; }
inline device pair_t& operator+=(device pair_t& x, float y) { x.a += y; return x; }

inline thread float& twice(thread float& x) { x *= 2; return x; }
inline device float& twice(device float& x) { x *= 2; return x; }

kernel void k(device pair_t* out [[buffer(0)]], device float* f [[buffer(1)]],
              uint i [[thread_position_in_grid]], uint l [[thread_position_in_threadgroup]]) {
    threadgroup pair_t shared[32];
    shared[l].a = 0;
    shared[l].b = 0;
    pair_t p = {1, 2};
    pair_t y = {float(i), 1};
    accumulate(p, y);
    accumulate(out[i], p);
    accumulate(shared[l], y);
    out[i].a += shared[l].a;
    out[i].b += shared[l].b;
    p += 1.0f;
    out[i] += p.a;
    float v = float(i);
    twice(v);
    twice(f[i]);
    f[i] += v;
}
`
	lib := compileT(t, src, CompileOptions{})
	out, f := newF32(t, 2*32), newF32(t, 32)
	for i := range 32 {
		out.f32()[2*i], out.f32()[2*i+1], f.f32()[i] = 5, 6, float32(i)
	}
	runT(t, functionT(t, lib, "k"), ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1}), out, f)
	for i := range 32 {
		x := float32(i)
		wantA, wantB := 5+(1+x)+10*x+(2+x), 6+3+10
		if a, b := out.f32()[2*i], out.f32()[2*i+1]; a != wantA || b != float32(wantB) {
			t.Errorf("out[%d] = {%v, %v}, want {%v, %v}", i, a, b, wantA, wantB)
		}
		if g := f.f32()[i]; g != 4*x {
			t.Errorf("f[%d] = %v, want %v", i, g, 4*x)
		}
	}
}
