package msl

import "testing"

// simd_shuffle_and_fill_up and _down, with and without modulo, on uint and
// uint2 (as MLX's 64-bit shuffles use them): lane i of each vector of
// modulo lanes reads data from i -/+ delta, and past the vector's edge
// filling from the other end.
func TestSIMDShuffleAndFill(t *testing.T) {
	src := mslPrelude + `
kernel void fill(device uint* out [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
    uint data = lane, filling = 100 + lane;
    out[0 * 32 + lane] = simd_shuffle_and_fill_up(data, filling, ushort(3));
    out[1 * 32 + lane] = simd_shuffle_and_fill_down(data, filling, ushort(3));
    out[2 * 32 + lane] = simd_shuffle_and_fill_up(data, filling, ushort(3), ushort(8));
    out[3 * 32 + lane] = simd_shuffle_and_fill_down(data, filling, ushort(3), ushort(8));
    uint2 v = simd_shuffle_and_fill_up(uint2(data, data + 1000), uint2(filling, filling + 1000), ushort(5));
    out[4 * 32 + lane] = v.x;
    out[5 * 32 + lane] = v.y - 1000;
}
`
	lib := compileT(t, src, CompileOptions{})
	out := newMem(t, 4*6*32)
	for i := range out.u32() {
		out.u32()[i] = 0xDEADBEEF
	}
	runT(t, functionT(t, lib, "fill"), ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1}), out)
	want := func(up bool, delta, modulo, lane int) uint32 {
		i, base := lane%modulo, lane-lane%modulo
		if up {
			if i-delta >= 0 {
				return uint32(base + i - delta)
			}
			return uint32(100 + base + i - delta + modulo)
		}
		if i+delta < modulo {
			return uint32(base + i + delta)
		}
		return uint32(100 + base + i + delta - modulo)
	}
	for k, c := range []struct {
		what          string
		up            bool
		delta, modulo int
	}{
		{"up 3", true, 3, 32}, {"down 3", false, 3, 32}, {"up 3 modulo 8", true, 3, 8}, {"down 3 modulo 8", false, 3, 8},
		{"uint2 up 5 (x)", true, 5, 32}, {"uint2 up 5 (y)", true, 5, 32},
	} {
		wantU32(t, c.what, out.u32()[32*k:32*k+32], func(l int) uint32 { return want(c.up, c.delta, c.modulo, l) })
	}
}
