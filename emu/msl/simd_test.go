package msl

import (
	"math"
	"math/bits"
	"math/rand"
	"testing"
)

// Every SIMD-group function, written to its own slice of the outputs.
// Lanes listed in drop return before the first SIMD-group function, so the
// functions work over the lanes still running.
const simdSrc = `#include <metal_stdlib>
using namespace metal;

kernel void simd_fns(device const float* x [[buffer(0)]],
                     device const uint* u [[buffer(1)]],
                     device float* fo [[buffer(2)]],
                     device uint* uo [[buffer(3)]],
                     constant uint& drop [[buffer(4)]],
                     uint gid [[thread_position_in_grid]],
                     ushort lane [[thread_index_in_simdgroup]],
                     uint n [[threads_per_grid]]) {
    if (drop != 0 && gid % 7 == 3) {
        return;
    }
    const float v = x[gid];
    const uint w = u[gid];
    uint k = 0;
    fo[k++ * n + gid] = simd_sum(v);
    fo[k++ * n + gid] = simd_product(v);
    fo[k++ * n + gid] = simd_min(v);
    fo[k++ * n + gid] = simd_max(v);
    fo[k++ * n + gid] = simd_prefix_inclusive_sum(v);
    fo[k++ * n + gid] = simd_prefix_exclusive_sum(v);
    fo[k++ * n + gid] = simd_prefix_inclusive_product(v);
    fo[k++ * n + gid] = simd_prefix_exclusive_product(v);
    fo[k++ * n + gid] = simd_shuffle(v, (lane * 7 + 3) % 32);
    fo[k++ * n + gid] = simd_shuffle_xor(v, 5);
    fo[k++ * n + gid] = simd_shuffle_up(v, 3);
    fo[k++ * n + gid] = simd_shuffle_down(v, 3);
    fo[k++ * n + gid] = simd_shuffle_rotate_up(v, 3);
    fo[k++ * n + gid] = simd_shuffle_rotate_down(v, 5);
    fo[k++ * n + gid] = simd_broadcast(v, 9);
    fo[k++ * n + gid] = simd_broadcast_first(v);
    float4 s4 = simd_sum(float4(v, 2.0 * v, -v, v * v));
    fo[k++ * n + gid] = s4.x;
    fo[k++ * n + gid] = s4.y;
    fo[k++ * n + gid] = s4.z;
    fo[k++ * n + gid] = s4.w;
    fo[k++ * n + gid] = float(simd_sum(half(v)));
    k = 0;
    uo[k++ * n + gid] = simd_and(w);
    uo[k++ * n + gid] = simd_or(w);
    uo[k++ * n + gid] = simd_xor(w);
    uo[k++ * n + gid] = simd_sum(w);
    uo[k++ * n + gid] = simd_min(w);
    uo[k++ * n + gid] = simd_max(w);
    uo[k++ * n + gid] = simd_prefix_exclusive_sum(w);
    uo[k++ * n + gid] = simd_shuffle(w, 31 - lane);
    uo[k++ * n + gid] = simd_all(v > -2.0) ? 1 : 0;
    uo[k++ * n + gid] = simd_any(v > 2.0) ? 1 : 0;
    uo[k++ * n + gid] = simd_is_first() ? 1 : 0;
    uo[k++ * n + gid] = uint(ulong(simd_ballot(v > 0.0)));
    uo[k++ * n + gid] = uint(ulong(simd_active_threads_mask()));
}
`

const simdFloatOuts, simdUintOuts = 21, 13

// simdModel computes the expected outputs of simdSrc in Go, for one
// SIMD-group whose lanes hold xs and us and whose live lanes are in live.
func simdModel(xs []float32, us []uint32, live []bool) (fo [][]float32, uo [][]uint32) {
	lanes := len(xs)
	fo = make([][]float32, simdFloatOuts)
	uo = make([][]uint32, simdUintOuts)
	for i := range fo {
		fo[i] = make([]float32, lanes)
	}
	for i := range uo {
		uo[i] = make([]uint32, lanes)
	}
	first := -1
	for l := 0; l < lanes; l++ {
		if live[l] && first < 0 {
			first = l
		}
	}
	has := func(l int) bool { return l >= 0 && l < lanes && live[l] }
	reduce := func(f func(a, b float32) float32) float32 {
		r := xs[first]
		for l := first + 1; l < lanes; l++ {
			if live[l] {
				r = f(r, xs[l])
			}
		}
		return r
	}
	sum := reduce(func(a, b float32) float32 { return a + b })
	prod := reduce(func(a, b float32) float32 { return a * b })
	mn := reduce(func(a, b float32) float32 { return float32(math.Min(float64(a), float64(b))) })
	mx := reduce(func(a, b float32) float32 { return float32(math.Max(float64(a), float64(b))) })
	var vs [4]float32
	var hsum float32
	for l := first; l < lanes; l++ {
		if !live[l] {
			continue
		}
		v := xs[l]
		c := [4]float32{v, float32(2.0) * v, -v, v * v}
		if l == first {
			vs = c
			hsum = halfRound(v)
		} else {
			for j := range vs {
				vs[j] += c[j]
			}
			hsum = halfRound(hsum + halfRound(v))
		}
	}
	var uand, uor, uxor, usum, umin, umax uint32 = us[first], us[first], us[first], us[first], us[first], us[first]
	var all, any = true, false
	var ballot, active uint32
	for l := 0; l < lanes; l++ {
		if !live[l] {
			continue
		}
		if l != first {
			uand &= us[l]
			uor |= us[l]
			uxor ^= us[l]
			usum += us[l]
			umin = min(umin, us[l])
			umax = max(umax, us[l])
		}
		all = all && xs[l] > -2
		any = any || xs[l] > 2
		if xs[l] > 0 {
			ballot |= 1 << l
		}
		active |= 1 << l
	}
	shuffle := func(l, src int) float32 {
		if has(src) {
			return xs[src]
		}
		return xs[l]
	}
	var incS, incP float32 = 0, 1
	var excU uint32
	for l := 0; l < lanes; l++ {
		if !live[l] {
			continue
		}
		fo[5][l] = incS
		fo[7][l] = incP
		incS += xs[l]
		incP *= xs[l]
		fo[4][l] = incS
		fo[6][l] = incP
		uo[6][l] = excU
		excU += us[l]
	}
	for l := 0; l < lanes; l++ {
		if !live[l] {
			continue
		}
		fo[0][l], fo[1][l], fo[2][l], fo[3][l] = sum, prod, mn, mx
		fo[8][l] = shuffle(l, (l*7+3)%32)
		fo[9][l] = shuffle(l, l^5)
		fo[10][l] = shuffle(l, l-3)
		fo[11][l] = shuffle(l, l+3)
		fo[12][l] = shuffle(l, (l-3+lanes)%lanes)
		fo[13][l] = shuffle(l, (l+5)%lanes)
		fo[14][l] = shuffle(l, 9)
		fo[15][l] = xs[first]
		fo[16][l], fo[17][l], fo[18][l], fo[19][l] = vs[0], vs[1], vs[2], vs[3]
		fo[20][l] = hsum
		uo[0][l], uo[1][l], uo[2][l], uo[3][l], uo[4][l], uo[5][l] = uand, uor, uxor, usum, umin, umax
		if has(31 - l) {
			uo[7][l] = us[31-l]
		} else {
			uo[7][l] = us[l]
		}
		uo[8][l] = b2u(all)
		uo[9][l] = b2u(any)
		uo[10][l] = b2u(l == first)
		uo[11][l] = ballot
		uo[12][l] = active
	}
	return fo, uo
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

func TestSIMDFunctions(t *testing.T) {
	lib := compileT(t, simdSrc, CompileOptions{})
	f := functionT(t, lib, "simd_fns")
	cases := []struct {
		name    string
		threads int
		tg      int
		drop    bool
	}{
		{"full SIMD-groups", 128, 64, false},
		{"partial SIMD-group (100 threads, threadgroups of 64)", 100, 64, false},
		{"lanes returned early", 100, 64, true},
	}
	for _, tc := range cases {
		n := tc.threads
		x, u := newF32(t, n), newMem(t, 4*n)
		fo, uo := newF32(t, simdFloatOuts*n), newMem(t, 4*simdUintOuts*n)
		drop := newMem(t, 4)
		r := rand.New(rand.NewSource(int64(n)))
		for i := range x.f32() {
			// near 1 keeps products finite; some above 2 and below 0
			x.f32()[i] = float32(0.75 + 0.5*r.Float64())
			if i%11 == 4 {
				x.f32()[i] = -x.f32()[i]
			}
			if i == 37 {
				x.f32()[i] = 2.5
			}
			u.u32()[i] = r.Uint32()
		}
		if tc.drop {
			drop.u32()[0] = 1
		}
		for _, order := range []Order{Forward, Reverse, Shuffled} {
			poison(fo.f32())
			for i := range uo.u32() {
				uo.u32()[i] = 0xDEADBEEF
			}
			d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{tc.tg, 1, 1}), Order: order, Seed: 3}
			for i, m := range []*mem{x, u, fo, uo, drop} {
				d.Buffers[i] = m.binding()
			}
			c, err := f.Run(d)
			if err != nil {
				t.Fatalf("%s, %v: %v", tc.name, order, err)
			}
			groups := 0
			for tg0 := 0; tg0 < n; tg0 += tc.tg {
				for sg0 := tg0; sg0 < min(tg0+tc.tg, n); sg0 += 32 {
					lanes := min(32, min(tg0+tc.tg, n)-sg0)
					live := make([]bool, lanes)
					for l := range live {
						live[l] = !(tc.drop && (sg0+l)%7 == 3)
					}
					groups++
					wf, wu := simdModel(x.f32()[sg0:sg0+lanes], u.u32()[sg0:sg0+lanes], live)
					for l := 0; l < lanes; l++ {
						gid := sg0 + l
						for k := 0; k < simdFloatOuts; k++ {
							got := fo.f32()[k*n+gid]
							if !live[l] {
								if !math.IsNaN(float64(got)) {
									t.Fatalf("%s, %v: returned lane %d wrote float output %d", tc.name, order, gid, k)
								}
								continue
							}
							if math.Float32bits(got) != math.Float32bits(wf[k][l]) {
								t.Fatalf("%s, %v: float output %d of thread %d = %v, want %v", tc.name, order, k, gid, got, wf[k][l])
							}
						}
						for k := 0; k < simdUintOuts; k++ {
							got := uo.u32()[k*n+gid]
							if !live[l] {
								if got != 0xDEADBEEF {
									t.Fatalf("%s, %v: returned lane %d wrote uint output %d", tc.name, order, gid, k)
								}
								continue
							}
							if got != wu[k][l] {
								t.Fatalf("%s, %v: uint output %d of thread %d = %#x, want %#x (live lanes %032b)", tc.name, order, k, gid, got, wu[k][l], bits.Reverse32(wu[12][l]))
							}
						}
					}
				}
			}
			// 2 + 19 float and 13 uint functions per SIMD-group
			if want := uint64(groups * (21 - 3 + 13)); c.SIMDGroupOps != want {
				t.Fatalf("%s, %v: %d SIMD-group operations, want %d", tc.name, order, c.SIMDGroupOps, want)
			}
		}
	}
}

const simdDivergenceSrc = `#include <metal_stdlib>
using namespace metal;

kernel void diverge(device float* out [[buffer(0)]],
                    uint lane [[thread_index_in_simdgroup]]) {
    float v = float(lane);
    if (lane < 16) {
        v = simd_sum(v);
    } else {
        v = simd_max(v);
    }
    out[lane] = v;
}
`

func TestSIMDDivergenceReported(t *testing.T) {
	lib := compileT(t, simdDivergenceSrc, CompileOptions{})
	f := functionT(t, lib, "diverge")
	out := newF32(t, 32)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0] = out.binding()
	_, err := f.Run(d)
	ke := kernelErrorT(t, err)
	if ke.Line != 8 && ke.Line != 10 {
		t.Fatalf("error at line %d, want 8 or 10: %v", ke.Line, err)
	}
	if !contains(ke.Msg, "simd_sum at line 8") || !contains(ke.Msg, "simd_max at line 10") {
		t.Fatalf("message %q does not name both call sites", ke.Msg)
	}
}

// halfRound rounds a float32 to the nearest half (ties to even).
func halfRound(f float32) float32 { return halfToFloat(floatToHalf(f)) }

func floatToHalf(f float32) uint16 {
	x := math.Float32bits(f)
	sign := uint16(x>>16) & 0x8000
	e := int32(x>>23) & 0xff
	m := x & 0x7fffff
	if e == 0xff {
		if m != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	he := e - 127 + 15
	if he >= 31 {
		return sign | 0x7c00
	}
	if he <= 0 {
		if he < -10 {
			return sign
		}
		m |= 0x800000
		shift := uint32(14 - he)
		hm := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && hm&1 == 1 {
			hm++
		}
		return sign | uint16(hm)
	}
	r := uint32(sign) | uint32(he)<<10 | m>>13
	rem := m & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && r&1 == 1 {
		r++
	}
	return uint16(r)
}

func halfToFloat(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	e := uint32(h>>10) & 0x1f
	m := uint32(h & 0x3ff)
	switch {
	case e == 0 && m == 0:
		return math.Float32frombits(sign)
	case e == 0:
		// subnormal: m * 2^-24
		v := float32(m) * float32(1.0/16777216.0)
		if sign != 0 {
			v = -v
		}
		return v
	case e == 31:
		return math.Float32frombits(sign | 0x7f800000 | m<<13)
	}
	return math.Float32frombits(sign | (e+112)<<23 | m<<13)
}
