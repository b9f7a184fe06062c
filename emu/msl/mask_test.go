package msl

import "testing"

// A comparison of vectors converted to a numeric vector gives 1 for true,
// as MSL's bool vectors convert: float4(a > b), (float4)(a > b), int4(a ==
// b), and through a template parameter, T(x > 0), as ggml's leaky ReLU
// computes TC(x > 0)*x + TC(x <= 0)*(x*slope) with TC float4. A
// comparison of scalars converts as a bool.
func TestVectorComparisonConverts(t *testing.T) {
	src := mslPrelude + `template <typename T, typename TC>
void relu(device const T* x, device T* out, float slope, uint i) {
    const TC v = TC(x[i]);
    out[i] = T(TC(v > 0)*v + TC(v <= 0)*(v*slope));
}
kernel void k(device const float4* a [[buffer(0)]],
              device const float4* b [[buffer(1)]],
              device float4* out [[buffer(2)]],
              device int4* iout [[buffer(3)]],
              device float* sout [[buffer(4)]],
              device float4* rout [[buffer(5)]],
              uint i [[thread_position_in_grid]]) {
    float4 x = a[i], y = b[i];
    out[4*i] = float4(x > y);
    out[4*i + 1] = (float4)(x <= y) - float4(x != y);
    out[4*i + 2] = float4(half4(x == y)) + float4(static_cast<float>(i) < x);
    out[4*i + 3] = float4(x > y ? 2.0f : 3.0f) + float4(select(x, y, x > y) > 0.5f);
    iout[i] = int4(x >= y) + int4(all(x > y));
    sout[i] = float(x.x > y.x) + (float)(x.y < y.y);
    relu<float4, float4>(a, rout, 0.25f, i);
}
`
	lib := compileT(t, src, CompileOptions{})
	const n = 8
	a, b, out, iout, sout, rout := newMem(t, 16*n), newMem(t, 16*n), newMem(t, 64*n), newMem(t, 16*n), newMem(t, 4*n), newMem(t, 16*n)
	fillRandom(a.f32(), 1)
	fillRandom(b.f32(), 2)
	for i := 0; i < 4*n; i += 5 {
		b.f32()[i] = a.f32()[i] // some equal components
	}
	d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{n, 1, 1})}
	for k, m := range []*mem{a, b, out, iout, sout, rout} {
		d.Buffers[k] = m.binding()
	}
	if _, err := functionT(t, lib, "k").Run(d); err != nil {
		t.Fatal(err)
	}
	one := func(c bool) float32 {
		if c {
			return 1
		}
		return 0
	}
	for i := 0; i < n; i++ {
		x, y := a.f32()[4*i:4*i+4], b.f32()[4*i:4*i+4]
		allGT := true
		for c := range x {
			allGT = allGT && x[c] > y[c]
		}
		for c := 0; c < 4; c++ {
			sel := x[c]
			if x[c] > y[c] {
				sel = y[c]
			}
			ternary := float32(3)
			if x[c] > y[c] {
				ternary = 2
			}
			want := []float32{one(x[c] > y[c]), one(x[c] <= y[c]) - one(x[c] != y[c]),
				one(x[c] == y[c]) + one(float32(i) < x[c]), ternary + one(sel > 0.5)}
			for k, w := range want {
				if g := out.f32()[16*i+4*k+c]; g != w {
					t.Errorf("out[%d] component %d of thread %d = %v, want %v (x %v, y %v)", k, c, i, g, w, x[c], y[c])
				}
			}
			if g, w := iout.i32()[4*i+c], int32(one(x[c] >= y[c])+one(allGT)); g != w {
				t.Errorf("int4(x >= y) + int4(all(x > y)) component %d of thread %d = %d, want %d", c, i, g, w)
			}
			w := x[c]
			if x[c] <= 0 {
				w = x[c] * 0.25
			}
			if g := rout.f32()[4*i+c]; g != w {
				t.Errorf("leaky relu component %d of thread %d = %v, want %v", c, i, g, w)
			}
		}
		if g, w := sout.f32()[i], one(x[0] > y[0])+one(x[1] < y[1]); g != w {
			t.Errorf("scalar comparisons of thread %d = %v, want %v", i, g, w)
		}
	}
}
