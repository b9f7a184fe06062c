package emu_test

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/puremetal/puremetal/mtl"
)

// Every SIMD-group function against the same computation in Go, bit for
// bit: over full SIMD-groups, over a partial SIMD-group at the edge of a
// grid that is not a multiple of 32 (dispatchThreads), and over the lanes
// left when some returned early; in every scheduling order.
func TestSIMDFunctions(t *testing.T) {
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
	for _, o := range orders {
		t.Run(o.Order.String(), func(t *testing.T) {
			g := newGPU(t, o)
			p := g.pipeline("simd.metal", "simd_fns")
			for _, tc := range cases {
				n := tc.threads
				x, xv := buffer[float32](g, n)
				u, uv := buffer[uint32](g, n)
				fo, fv := buffer[float32](g, simdFloatOuts*n)
				uo, ov := buffer[uint32](g, simdUintOuts*n)
				r := rand.New(rand.NewPCG(uint64(n), 5))
				for i := range xv {
					// near 1 keeps products finite; some above 2 and below 0
					xv[i] = float32(0.75 + 0.5*r.Float64())
					if i%11 == 4 {
						xv[i] = -xv[i]
					}
					if i == 37 {
						xv[i] = 2.5
					}
					uv[i] = r.Uint32()
				}
				poison(fv)
				poisonU32(ov)
				drop := uint32(0)
				if tc.drop {
					drop = 1
				}
				completed(t, g.run(func(enc *mtl.ComputeCommandEncoder) {
					enc.SetComputePipelineState(p)
					enc.SetBuffers([]*mtl.Buffer{x, u, fo, uo}, []int{0, 0, 0, 0}, 0)
					enc.SetBytes(u32Bytes(drop), 4)
					enc.DispatchThreads(size1(n), size1(tc.tg))
				}))
				for tg0 := 0; tg0 < n; tg0 += tc.tg {
					end := min(tg0+tc.tg, n)
					for sg0 := tg0; sg0 < end; sg0 += 32 {
						lanes := min(32, end-sg0)
						live := make([]bool, lanes)
						for l := range live {
							live[l] = !(tc.drop && (sg0+l)%7 == 3)
						}
						wf, wu := simdModel(xv[sg0:sg0+lanes], uv[sg0:sg0+lanes], live)
						for l := range lanes {
							gid := sg0 + l
							for k := range simdFloatOuts {
								got := fv[k*n+gid]
								if !live[l] {
									if got == got {
										t.Fatalf("%s: returned lane %d wrote float output %d", tc.name, gid, k)
									}
									continue
								}
								if math.Float32bits(got) != math.Float32bits(wf[k][l]) {
									t.Fatalf("%s: float output %d of thread %d = %v, want %v", tc.name, k, gid, got, wf[k][l])
								}
							}
							for k := range simdUintOuts {
								got := ov[k*n+gid]
								if !live[l] {
									if got != 0xDEADBEEF {
										t.Fatalf("%s: returned lane %d wrote uint output %d", tc.name, gid, k)
									}
									continue
								}
								if got != wu[k][l] {
									t.Fatalf("%s: uint output %d of thread %d = %#x, want %#x (live lanes %032b)", tc.name, k, gid, got, wu[k][l], bits.Reverse32(wu[12][l]))
								}
							}
						}
					}
				}
			}
		})
	}
}

const simdFloatOuts, simdUintOuts = 21, 13

// simdModel computes the expected outputs of simd.metal in Go, for one
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
