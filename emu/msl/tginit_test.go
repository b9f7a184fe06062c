package msl

import "testing"

// An initializer of a threadgroup variable is accepted and not applied, as
// with Apple's compiler, where such memory (threadgroup float buf[32] =
// {0}; in MLX's layer_norm, which stores it before reading it) is not
// initialized either: before a store it holds what the threadgroup memory
// held, here the emulator's fill (0xFF bytes).
func TestThreadgroupInitializerNotApplied(t *testing.T) {
	src := mslPrelude + `
kernel void k(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]], uint l [[thread_index_in_threadgroup]]) {
  threadgroup uint vals[4] = {1, 2, 3, 4};
  threadgroup uint count = 7;
  out[2 * i] = vals[l % 4];
  out[2 * i + 1] = count;
}
`
	lib := compileT(t, src, CompileOptions{})
	out := newMem(t, 4*2*64)
	runBufs(t, lib, "k", 64, out)
	for i, g := range out.u32() {
		if g != 0xffffffff {
			t.Fatalf("out[%d] = %#x, want the fill 0xffffffff (the initializer not applied)", i, g)
		}
	}
}
