package msl

import "testing"

// MSL's char is a signed 8-bit integer (int8_t) on every target, while C's
// plain char is unsigned on arm64 Linux: the kernels must see it signed
// there too.
const charSrc = mslPrelude + `
kernel void chars(device const char* in [[buffer(0)]],
                  device int* out [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
    char c = in[i];
    char2 v = char2(c, -c);
    out[4 * i + 0] = c;
    out[4 * i + 1] = c < 0;
    out[4 * i + 2] = c >> 1;
    out[4 * i + 3] = int(v.y) + int(simd_min(c));
}
`

func TestCharIsSigned(t *testing.T) {
	f := functionT(t, compileT(t, charSrc, CompileOptions{}), "chars")
	const n = 32
	in := newMem(t, n)
	for i := range in.b {
		in.b[i] = byte(int8(i*9 - 128))
	}
	out := newMem(t, 4*4*n)
	poison(out.f32())
	runT(t, f, ThreadsGrid([3]int{n, 1, 1}, [3]int{n, 1, 1}), in, out)
	o := out.i32()
	low := int32(int8(in.b[0]))
	for i := range in.b {
		c := int32(int8(in.b[i]))
		neg := int32(0)
		if c < 0 {
			neg = 1
		}
		want := []int32{c, neg, c >> 1, int32(int8(-int8(c))) + low}
		for k, w := range want {
			if got := o[4*i+k]; got != w {
				t.Errorf("thread %d (char %d): out[%d] = %d, want %d", i, c, k, got, w)
			}
		}
	}
}
