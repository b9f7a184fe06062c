package emu_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/mtl"
)

// Swizzles read and write vector components in any order; float3 has the
// size and alignment of float4 in buffers, packed_float3 is three floats.
func TestSwizzlesAndFloat3Layout(t *testing.T) {
	g := newGPU(t, orders[2])
	p := g.pipeline("layout.metal", "swizzle")
	const n = 40
	in, iv := buffer[float32](g, 4*n) // float3: four floats apart
	out, ov := buffer[float32](g, 8*n)
	sizes, sv := buffer[uint32](g, 6)
	packed, pv := buffer[float32](g, 3*n)
	packedOut, qv := buffer[float32](g, 4*n)
	r := rand.New(rand.NewPCG(21, 22))
	for i := range iv {
		iv[i] = float32(r.NormFloat64())
		if i%4 == 3 {
			iv[i] = nan // padding, never read
		}
	}
	for i := range pv {
		pv[i] = float32(r.NormFloat64())
	}
	poison(ov)
	poison(qv)
	poisonU32(sv)
	completed(t, g.run(func(enc *mtl.ComputeCommandEncoder) {
		enc.SetComputePipelineState(p)
		enc.SetBuffers([]*mtl.Buffer{in, out, sizes, packed, packedOut}, []int{0, 0, 0, 0, 0}, 0)
		enc.DispatchThreads(size1(n), size1(32))
	}))
	if want := []uint32{16, 16, 12, 32, 8, 4}; !slices.Equal(sv, want) {
		t.Errorf("sizeof(float3), alignof(float3), sizeof(packed_float3), sizeof(Pair), sizeof(half3), sizeof(uchar3) = %v, want %v", sv, want)
	}
	for i := range n {
		x, y, z := iv[4*i], iv[4*i+1], iv[4*i+2]
		// w = (z, y, x, x+y), then w.xz = w.zx*2: (2x, y, 2z, x+y);
		// float4(y, y, 1, z).wzyx = (z, 1, y, y)
		want := []float32{2 * x, y, 2 * z, x + y, z, 1, y, y}
		for k, w := range want {
			if got := ov[8*i+k]; math.Float32bits(got) != math.Float32bits(w) {
				t.Fatalf("thread %d component %d = %v, want %v (all %v)", i, k, got, w, ov[8*i:8*i+8])
			}
		}
		for k := range 3 {
			if got, w := qv[4*i+k], pv[3*i+k]*3; math.Float32bits(got) != math.Float32bits(w) {
				t.Fatalf("packed_float3 %d component %d = %v, want %v", i, k, got, w)
			}
		}
	}
}

// half arithmetic rounds every operation to half precision, scalar and
// vector; widening to float first does not.
func TestHalfArithmetic(t *testing.T) {
	g := newGPU(t, orders[0])
	p := g.pipeline("layout.metal", "half_math")
	const n = 300
	a, av := buffer[uint16](g, n)
	b, bv := buffer[uint16](g, n)
	c, cv := buffer[uint16](g, n)
	out, ov := buffer[uint16](g, n)
	out4, o4 := buffer[uint16](g, 4*n)
	wide, wv := buffer[float32](g, n)
	r := rand.New(rand.NewPCG(77, 78))
	for i := range n {
		av[i] = floatToHalf(float32(r.NormFloat64() * 8))
		bv[i] = floatToHalf(float32(r.NormFloat64() * 8))
		cv[i] = floatToHalf(float32(r.NormFloat64()))
	}
	poisonHalf(ov)
	poisonHalf(o4)
	poison(wv)
	completed(t, g.run(func(enc *mtl.ComputeCommandEncoder) {
		enc.SetComputePipelineState(p)
		enc.SetBuffers([]*mtl.Buffer{a, b, c, out, out4, wide}, []int{0, 0, 0, 0, 0, 0}, 0)
		enc.DispatchThreads(size1(n), size1(64))
	}))
	singleRounding := 0
	for i := range n {
		x, y, z := halfToFloat(av[i]), halfToFloat(bv[i]), halfToFloat(cv[i])
		// products of halves are exact in float32; the sum is rounded to
		// float32 first, which cannot change the half result
		want := floatToHalf(halfRound(x*y) + z)
		if ov[i] != want {
			t.Fatalf("a*b+c for %v, %v, %v = %#04x (%v), want %#04x (%v)", x, y, z, ov[i], halfToFloat(ov[i]), want, halfToFloat(want))
		}
		if floatToHalf(x*y+z) != want {
			singleRounding++
		}
		v := [4]float32{x, y, z, 1.5}
		for k := range 4 {
			if got, w := o4[4*i+k], floatToHalf(halfRound(v[k]*v[3-k])-0.25); got != w {
				t.Fatalf("half4 component %d of %d = %#04x, want %#04x", k, i, got, w)
			}
		}
		if wv[i] != x*y {
			t.Fatalf("float(a)*float(b) = %v, want %v", wv[i], x*y)
		}
	}
	t.Logf("%d of %d results differ from a single rounding of a*b+c: half operations round each step", singleRounding, n)
	if singleRounding == 0 {
		t.Fatalf("no input distinguishes per-operation rounding; the test data is too easy")
	}
}
