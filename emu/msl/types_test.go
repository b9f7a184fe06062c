package msl

import (
	"math"
	"math/rand"
	"testing"
)

// float3 has the size and alignment of float4 in MSL; packed_float3 is
// three floats. Swizzles read and write components in any order.
const swizzleSrc = `#include <metal_stdlib>
using namespace metal;

struct Pair {
    float3 a;
    float b;
};

kernel void swizzle(device const float3* in [[buffer(0)]],
                    device float4* out [[buffer(1)]],
                    device uint* sizes [[buffer(2)]],
                    device const packed_float3* packed [[buffer(3)]],
                    device float3* packed_out [[buffer(4)]],
                    uint i [[thread_position_in_grid]]) {
    float3 v = in[i];
    float4 w = float4(v.zyx, v.x + v.y);
    w.xz = w.zx * 2.0;
    out[2 * i] = w;
    out[2 * i + 1] = float4(v.yy, float2(1.0, v.z)).wzyx;
    packed_out[i] = float3(packed[i]) * 3.0;
    if (i == 0) {
        sizes[0] = sizeof(float3);
        sizes[1] = alignof(float3);
        sizes[2] = sizeof(packed_float3);
        sizes[3] = sizeof(Pair);
        sizes[4] = sizeof(half3);
        sizes[5] = sizeof(uchar3);
    }
}
`

func TestSwizzlesAndFloat3Layout(t *testing.T) {
	lib := compileT(t, swizzleSrc, CompileOptions{})
	f := functionT(t, lib, "swizzle")
	const n = 40
	in, out, sizes := newF32(t, 4*n), newF32(t, 8*n), newMem(t, 4*6)
	packed, packedOut := newF32(t, 3*n), newF32(t, 4*n)
	fillRandom(in.f32(), 21)
	fillRandom(packed.f32(), 22)
	for i := range in.f32() {
		if i%4 == 3 {
			in.f32()[i] = float32(math.NaN()) // padding, never read
		}
	}
	poison(out.f32())
	poison(packedOut.f32())
	d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{32, 1, 1})}
	for i, m := range []*mem{in, out, sizes, packed, packedOut} {
		d.Buffers[i] = m.binding()
	}
	if _, err := f.Run(d); err != nil {
		t.Fatal(err)
	}
	if got, want := sizes.u32(), []uint32{16, 16, 12, 32, 8, 4}; !equalU32(got, want) {
		t.Fatalf("sizeof(float3), alignof(float3), sizeof(packed_float3), sizeof(Pair), sizeof(half3), sizeof(uchar3) = %v, want %v", got, want)
	}
	for i := 0; i < n; i++ {
		x, y, z := in.f32()[4*i], in.f32()[4*i+1], in.f32()[4*i+2]
		want := []float32{y * 2, y, (x + y) * 2, z * 2, z, 1, y, y}
		// w = (z, y, x, x+y); w.xz = w.zx*2 -> (2x, y, 2z, x+y)
		want[0], want[1], want[2], want[3] = 2*x, y, 2*z, x+y
		for k := 0; k < 8; k++ {
			if got := out.f32()[8*i+k]; math.Float32bits(got) != math.Float32bits(want[k]) {
				t.Fatalf("thread %d component %d = %v, want %v (all %v)", i, k, got, want[k], out.f32()[8*i:8*i+8])
			}
		}
		for k := 0; k < 3; k++ {
			if got, want := packedOut.f32()[4*i+k], packed.f32()[3*i+k]*3; math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("packed_float3 %d component %d = %v, want %v", i, k, got, want)
			}
		}
	}
}

func equalU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// half arithmetic rounds every operation to half precision.
const halfSrc = `#include <metal_stdlib>
using namespace metal;

kernel void half_math(device const half* a [[buffer(0)]],
                      device const half* b [[buffer(1)]],
                      device const half* c [[buffer(2)]],
                      device half* out [[buffer(3)]],
                      device half4* out4 [[buffer(4)]],
                      device float* widened [[buffer(5)]],
                      uint i [[thread_position_in_grid]]) {
    half x = a[i] * b[i] + c[i];
    out[i] = x;
    half4 v = half4(a[i], b[i], c[i], 1.5h);
    out4[i] = v * v.wzyx - half4(0.25h);
    widened[i] = float(a[i]) * float(b[i]);
}
`

func TestHalfArithmetic(t *testing.T) {
	lib := compileT(t, halfSrc, CompileOptions{})
	f := functionT(t, lib, "half_math")
	const n = 300
	a, b, c := newMem(t, 2*n), newMem(t, 2*n), newMem(t, 2*n)
	out, out4, wide := newMem(t, 2*n), newMem(t, 8*n), newF32(t, n)
	r := rand.New(rand.NewSource(77))
	for i := 0; i < n; i++ {
		a.u16()[i] = floatToHalf(float32(r.NormFloat64() * 8))
		b.u16()[i] = floatToHalf(float32(r.NormFloat64() * 8))
		c.u16()[i] = floatToHalf(float32(r.NormFloat64()))
	}
	for i := range out.u16() {
		out.u16()[i] = 0x7e00
	}
	for i := range out4.u16() {
		out4.u16()[i] = 0x7e00
	}
	poison(wide.f32())
	d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{64, 1, 1})}
	for i, m := range []*mem{a, b, c, out, out4, wide} {
		d.Buffers[i] = m.binding()
	}
	if _, err := f.Run(d); err != nil {
		t.Fatal(err)
	}
	singleRounding := 0
	for i := 0; i < n; i++ {
		x, y, z := halfToFloat(a.u16()[i]), halfToFloat(b.u16()[i]), halfToFloat(c.u16()[i])
		// products of halves are exact in float32; the sum is rounded to
		// float32 first, which cannot change the half result
		want := floatToHalf(halfRound(x*y) + z)
		if out.u16()[i] != want {
			t.Fatalf("a*b+c for %v, %v, %v = %#04x (%v), want %#04x (%v)", x, y, z, out.u16()[i], halfToFloat(out.u16()[i]), want, halfToFloat(want))
		}
		if floatToHalf(x*y+z) != want {
			singleRounding++
		}
		v := [4]float32{x, y, z, 1.5}
		for k := 0; k < 4; k++ {
			w := floatToHalf(halfRound(v[k]*v[3-k]) - 0.25)
			if got := out4.u16()[4*i+k]; got != w {
				t.Fatalf("half4 component %d of %d = %#04x, want %#04x", k, i, got, w)
			}
		}
		if wide.f32()[i] != x*y {
			t.Fatalf("float(a)*float(b) = %v, want %v", wide.f32()[i], x*y)
		}
	}
	t.Logf("%d of %d results differ from a single rounding of a*b+c: half operations round each step", singleRounding, n)
	if singleRounding == 0 {
		t.Fatalf("no input distinguishes per-operation rounding; the test data is too easy")
	}
}
