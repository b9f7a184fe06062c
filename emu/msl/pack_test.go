package msl

import (
	"math"
	"math/rand"
	"testing"
)

// The pack and unpack functions of <metal_pack> (the specification's "Pack
// and Unpack Functions"), each called by the kernel below on codes and
// values with every edge (0, the largest code, the most negative snorm,
// NaN, infinities, values out of range, ties) and random ones, and
// compared bit for bit with the formulas of the specification's
// conversion rules computed in Go.
func init() {
	stdlibFamilies["pack"] = []string{
		"unpack_unorm4x8_to_float", "unpack_snorm4x8_to_float", "unpack_unorm4x8_srgb_to_float",
		"unpack_unorm2x16_to_float", "unpack_snorm2x16_to_float", "unpack_unorm10a2_to_float", "unpack_unorm565_to_float",
		"unpack_unorm4x8_to_half", "unpack_snorm4x8_to_half", "unpack_unorm4x8_srgb_to_half",
		"unpack_unorm2x16_to_half", "unpack_snorm2x16_to_half", "unpack_unorm10a2_to_half", "unpack_unorm565_to_half",
		"pack_float_to_unorm4x8", "pack_float_to_snorm4x8", "pack_float_to_srgb_unorm4x8",
		"pack_float_to_unorm2x16", "pack_float_to_snorm2x16", "pack_float_to_unorm10a2", "pack_float_to_unorm565",
		"pack_half_to_unorm4x8", "pack_half_to_snorm4x8", "pack_half_to_srgb_unorm4x8",
		"pack_half_to_unorm2x16", "pack_half_to_snorm2x16", "pack_half_to_unorm10a2", "pack_half_to_unorm565",
	}
}

// unpackOuts and packOuts are how many values the kernel writes per input.
const (
	unpackOuts = 4 + 4 + 4 + 2 + 2 + 4 + 3 // each unpack function's components, float then half
	packOuts   = 14
)

const stdPackSrc = `#include <metal_pack>
using namespace metal;
kernel void k(device const uint* codes [[buffer(0)]], device const float4* values [[buffer(1)]],
              device float* unpacked [[buffer(2)]], device float* unpacked_half [[buffer(3)]],
              device uint* packed [[buffer(4)]], uint i [[thread_position_in_grid]]) {
    uint c = codes[i];
    device float* u = unpacked + i * 23;
    device float* h = unpacked_half + i * 23;
    float4 f4[] = {unpack_unorm4x8_to_float(c), unpack_snorm4x8_to_float(c), unpack_unorm4x8_srgb_to_float(c)};
    half4 h4[] = {unpack_unorm4x8_to_half(c), unpack_snorm4x8_to_half(c), unpack_unorm4x8_srgb_to_half(c)};
    for (int k = 0; k < 3; k++) for (int j = 0; j < 4; j++) { u[4 * k + j] = f4[k][j]; h[4 * k + j] = h4[k][j]; }
    float2 f2[] = {unpack_unorm2x16_to_float(c), unpack_snorm2x16_to_float(c)};
    half2 h2[] = {unpack_unorm2x16_to_half(c), unpack_snorm2x16_to_half(c)};
    for (int k = 0; k < 2; k++) for (int j = 0; j < 2; j++) { u[12 + 2 * k + j] = f2[k][j]; h[12 + 2 * k + j] = h2[k][j]; }
    float4 a = unpack_unorm10a2_to_float(c);
    half4 ah = unpack_unorm10a2_to_half(c);
    float3 b = unpack_unorm565_to_float(ushort(c));
    half3 bh = unpack_unorm565_to_half(ushort(c));
    for (int j = 0; j < 4; j++) { u[16 + j] = a[j]; h[16 + j] = ah[j]; }
    for (int j = 0; j < 3; j++) { u[20 + j] = b[j]; h[20 + j] = bh[j]; }

    float4 v = values[i];
    half4 vh = half4(v);
    device uint* p = packed + i * 14;
    p[0] = pack_float_to_unorm4x8(v);
    p[1] = pack_float_to_snorm4x8(v);
    p[2] = pack_float_to_srgb_unorm4x8(v);
    p[3] = pack_float_to_unorm2x16(v.xy);
    p[4] = pack_float_to_snorm2x16(v.zw);
    p[5] = pack_float_to_unorm10a2(v);
    p[6] = pack_float_to_unorm565(v.xyz);
    p[7] = pack_half_to_unorm4x8(vh);
    p[8] = pack_half_to_snorm4x8(vh);
    p[9] = pack_half_to_srgb_unorm4x8(vh);
    p[10] = pack_half_to_unorm2x16(vh.xy);
    p[11] = pack_half_to_snorm2x16(vh.zw);
    p[12] = pack_half_to_unorm10a2(vh);
    p[13] = pack_half_to_unorm565(vh.xyz);
}
`

func unormToFloat(c, max uint32) float32 { return float32(c) / float32(max) }

func snormToFloat(c int32, max int32) float32 {
	return float32(math.Max(float64(float32(c)/float32(max)), -1))
}

func floatToUnorm(f float32, max uint32) uint32 {
	if f != f {
		return 0
	}
	f = float32(math.Min(math.Max(float64(f), 0), 1))
	return uint32(math.RoundToEven(float64(f * float32(max))))
}

func floatToSnorm(f float32, max int32, bits uint) uint32 {
	if f != f {
		return 0
	}
	f = float32(math.Min(math.Max(float64(f), -1), 1))
	return uint32(int32(math.RoundToEven(float64(f*float32(max))))) & (1<<bits - 1)
}

// srgbToLinear and linearToSrgb are the specification's sRGB conversions
// in float arithmetic, with pow computed in float64 and rounded: the C
// library's powf may differ from it in the last place.
func srgbToLinear(c float32) float32 {
	if c <= 0.04045 {
		return c / 12.92
	}
	return powf((c+0.055)/1.055, 2.4)
}

func powf(x, y float32) float32 { return float32(math.Pow(float64(x), float64(y))) }

func linearToSrgb(c float32) float32 {
	switch {
	case c != c || c <= 0:
		return 0
	case c >= 1:
		return 1
	case c < 0.0031308:
		return 12.92 * c
	}
	return float32(1.055*powf(c, 1/2.4)) - 0.055 // the conversion keeps Go from fusing (arm64)
}

// unpackWant is the 23 values the kernel unpacks from code c, as floats.
func unpackWant(c uint32) []float32 {
	var w []float32
	for i := 0; i < 4; i++ {
		w = append(w, unormToFloat(c>>(8*i)&0xff, 255))
	}
	for i := 0; i < 4; i++ {
		w = append(w, snormToFloat(int32(int8(c>>(8*i))), 127))
	}
	for i := 0; i < 4; i++ {
		v := unormToFloat(c>>(8*i)&0xff, 255)
		if i < 3 {
			v = srgbToLinear(v)
		}
		w = append(w, v)
	}
	w = append(w, unormToFloat(c&0xffff, 65535), unormToFloat(c>>16, 65535))
	w = append(w, snormToFloat(int32(int16(c)), 32767), snormToFloat(int32(int16(c>>16)), 32767))
	w = append(w, unormToFloat(c&0x3ff, 1023), unormToFloat(c>>10&0x3ff, 1023), unormToFloat(c>>20&0x3ff, 1023), unormToFloat(c>>30, 3))
	s := c & 0xffff
	w = append(w, unormToFloat(s&0x1f, 31), unormToFloat(s>>5&0x3f, 63), unormToFloat(s>>11, 31))
	return w
}

// packWant is the 7 codes the float forms pack from v.
func packWant(v [4]float32) []uint32 {
	var unorm, snorm, srgb uint32
	for i, x := range v {
		unorm |= floatToUnorm(x, 255) << (8 * i)
		snorm |= floatToSnorm(x, 127, 8) << (8 * i)
		if i < 3 {
			x = linearToSrgb(x)
		}
		srgb |= floatToUnorm(x, 255) << (8 * i)
	}
	return []uint32{unorm, snorm, srgb,
		floatToUnorm(v[0], 65535) | floatToUnorm(v[1], 65535)<<16,
		floatToSnorm(v[2], 32767, 16) | floatToSnorm(v[3], 32767, 16)<<16,
		floatToUnorm(v[0], 1023) | floatToUnorm(v[1], 1023)<<10 | floatToUnorm(v[2], 1023)<<20 | floatToUnorm(v[3], 3)<<30,
		floatToUnorm(v[0], 31) | floatToUnorm(v[1], 63)<<5 | floatToUnorm(v[2], 31)<<11,
	}
}

func TestStdlibPack(t *testing.T) {
	namesIn(t, "pack", stdPackSrc)
	codes := []uint32{0, 0xffffffff, 0x80808080, 0x7f7f7f7f, 0x81818181, 0x80008000, 0x7fff7fff, 0x8001ffff,
		0x3ff003ff, 0xc00ffc00, 0x0000f800, 0x000007e0, 0x0000001f, 0x12345678}
	values := [][4]float32{{0, 1, -1, 0.5}, {2, -2, float32(math.Inf(1)), float32(math.Inf(-1))},
		{float32(math.NaN()), 0.25, -0.75, 1e-8}, {0.5 / 255, 1.5 / 255, -0.5 / 127, 2.5 / 127},
		{0.5 / 65535, -0.5 / 32767, 0.0031308, 0.04045}, {0.002, 0.2, 0.9999, float32(math.Copysign(0, -1))}}
	r := rand.New(rand.NewSource(31))
	for len(codes) < 256 {
		codes = append(codes, r.Uint32())
	}
	for len(values) < 256 {
		values = append(values, [4]float32{r.Float32()*2.4 - 1.2, r.Float32(), r.Float32()*2 - 1, r.Float32()})
	}
	n := len(codes)
	cm, vm := newMem(t, 4*n), newF32(t, 4*n)
	copy(cm.u32(), codes)
	for i, v := range values {
		copy(vm.f32()[4*i:], v[:])
	}
	unpacked, unpackedHalf, packed := newF32(t, unpackOuts*n), newF32(t, unpackOuts*n), newMem(t, 4*packOuts*n)
	poison(unpacked.f32())
	poison(unpackedHalf.f32())
	for i := range packed.u32() {
		packed.u32()[i] = 0xdeadbeef
	}
	lib := compileT(t, stdPackSrc, CompileOptions{})
	runT(t, functionT(t, lib, "k"), ThreadsGrid([3]int{n, 1, 1}, [3]int{64, 1, 1}), cm, vm, unpacked, unpackedHalf, packed)
	names := stdlibFamilies["pack"]
	// the unpack function of each of the 23 values (its float form's index
	// in names, 7 more for its half form's), and its component
	unpackOf := func(k int) (int, int) {
		starts := []int{0, 4, 8, 12, 14, 16, 20, 23}
		f := 0
		for k >= starts[f+1] {
			f++
		}
		return f, k - starts[f]
	}
	for i, c := range codes {
		for k, w := range unpackWant(c) {
			f, comp := unpackOf(k)
			name := names[f]
			srgb := name == "unpack_unorm4x8_srgb_to_float" && comp < 3
			got := unpacked.f32()[unpackOuts*i+k]
			if got != w && !(srgb && math.Abs(float64(got-w)) <= float64(ulp32(float64(w)))) {
				t.Errorf("%s(%#x)[%d] = %v, want %v", name, c, comp, got, w)
			}
			hw := float32(h16(float64(w)))
			if srgb {
				hw = float32(h16(float64(got))) // the float result, rounded: its last bit is the C library's
			}
			if got := unpackedHalf.f32()[unpackOuts*i+k]; got != hw {
				t.Errorf("%s(%#x)[%d] = %v, want %v", names[7+f], c, comp, got, hw)
			}
		}
	}
	for i, v := range values {
		var vh [4]float32
		for j, x := range v {
			vh[j] = float32(h16(float64(x)))
		}
		for _, form := range []struct {
			base int
			v    [4]float32
		}{{0, v}, {7, vh}} {
			for k, w := range packWant(form.v) {
				name := names[14+form.base+k]
				got := packed.u32()[packOuts*i+form.base+k]
				if got == w {
					continue
				}
				if k == 2 && srgbCodesClose(got, w) {
					continue // the transfer function's last place can move a code at its rounding boundary
				}
				t.Errorf("%s(%v) = %#x, want %#x", name, form.v, got, w)
			}
		}
	}
}

// srgbCodesClose reports whether two packed sRGB colors differ by at most
// one code in each color component and not at all in alpha.
func srgbCodesClose(a, b uint32) bool {
	for i := 0; i < 4; i++ {
		x, y := int(a>>(8*i)&0xff), int(b>>(8*i)&0xff)
		if d := x - y; d > 1 || d < -1 || (i == 3 && d != 0) {
			return false
		}
	}
	return true
}
