package msl

import (
	"debug/elf"
	"strings"
	"testing"
)

// Pragmas asking for a loop to be unrolled are left to the optimizer: a
// kernel built with each form has the same code as without it, and still
// computes the same sums.
func TestUnrollHintsLeftToTheOptimizer(t *testing.T) {
	const body = `#define UNROLL_FULL _Pragma("clang loop unroll(full)")

kernel void sums(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) {
    float s = 0;
    PRAGMA
    for (int k = 0; k < 512; k++) {
        s += in[(i + k) % 64] * float(k);
    }
    out[i] = s;
}
`
	textSize := func(lib *Library) uint64 {
		f, err := elf.Open(lib.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return f.Section(".text").Size
	}
	in := newF32(t, 64)
	for i := range in.f32() {
		in.f32()[i] = float32(i%7) - 3
	}
	var want [64]float32
	for i := range want {
		for k := 0; k < 512; k++ {
			want[i] += in.f32()[(i+k)%64] * float32(k)
		}
	}
	plain := compileT(t, mslPrelude+strings.Replace(body, "PRAGMA", "", 1), CompileOptions{})
	base := textSize(plain)
	for _, p := range []string{"#pragma unroll", "#pragma unroll 8", "#pragma unroll (512)", "#pragma GCC unroll 16",
		"#pragma clang loop unroll(full)", "#pragma clang loop unroll_count(4)", "UNROLL_FULL"} {
		lib := compileT(t, mslPrelude+strings.Replace(body, "PRAGMA", p, 1), CompileOptions{})
		if got := textSize(lib); got != base {
			t.Errorf("%s: %d bytes of code, want %d as without it", p, got, base)
		}
		out := newF32(t, 64)
		poison(out.f32())
		runT(t, functionT(t, lib, "sums"), ThreadsGrid([3]int{64, 1, 1}, [3]int{64, 1, 1}), in, out)
		for i, w := range want {
			if g := out.f32()[i]; g != w {
				t.Fatalf("%s: out[%d] = %v, want %v", p, i, g, w)
			}
		}
	}
}
