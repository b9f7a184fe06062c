package ops_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// TestRoPE checks the RoPE kernel for every type against cpuref.RoPE64 on
// the same rounded inputs and frequencies: full and partial rotary
// dimensions, a head stride (queries inside [query | gate]), positions of
// several sequences in one dispatch; elements past RotaryDim and between
// heads are left as they were.
//
// Bound per rotated element: the float32 angle carries an error of at
// most |a| * 2^-24 (one rounded product), cos and sin a few ulp each, and
// the two products and the sum three roundings, so |error| <=
// (|x_i| + |x_j|) * (|a| + 6) * 2^-24, plus the rounding to x's type
// (roundErr).
func TestRoPE(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		seed := uint64(0)
		for _, xt := range kernels.ElemTypes {
			for _, c := range []struct{ tokens, heads, headDim, stride, rotary int }{
				{3, 2, 64, 0, 64},
				{4, 3, 48, 96, 12},   // partial rotary factor 0.25, query halves
				{2, 1, 256, 512, 64}, // Qwen3-Next's head_dim and rotary_dim
				{1, 2, 6, 0, 2},
			} {
				seed++
				name := fmt.Sprintf("%v/%+v", xt, c)
				rng := rand.New(rand.NewPCG(seed, 0x40e))
				p := ops.RoPEParams{Tokens: c.tokens, Heads: c.heads, HeadDim: c.headDim, HeadStride: c.stride, RotaryDim: c.rotary}
				stride := max(c.stride, c.headDim)
				x := rounded(xt, random(rng, c.tokens*c.heads*stride, 2))
				pos, posInt := randomPositions(rng, c.tokens, 5000)
				inv := ops.RoPEInvFreq(c.rotary, 1e7)
				xv := r.view(xt, x)
				r.run(func(enc *mtl.ComputeCommandEncoder) error {
					return r.k.RoPE(enc, p, xv, ints(r, tensor.I32, pos), r.view(tensor.F32, inv))
				})
				got := r.read(xv)
				// the oracle on the heads gathered without their gaps
				heads := make([]float64, 0, c.tokens*c.heads*c.headDim)
				for h := 0; h < c.tokens*c.heads; h++ {
					heads = append(heads, cpuref.Widen(x[h*stride:h*stride+c.headDim])...)
				}
				want := append([]float64(nil), heads...)
				cpuref.RoPE64(want, c.heads, c.headDim, c.rotary, posInt, cpuref.Widen(inv))
				for h := 0; h < c.tokens*c.heads; h++ {
					g, w, in := got[h*stride:h*stride+c.headDim], want[h*c.headDim:(h+1)*c.headDim], heads[h*c.headDim:(h+1)*c.headDim]
					half := c.rotary / 2
					within(t, fmt.Sprintf("%s head %d", name, h), g, w, func(i int) float64 {
						if i >= c.rotary {
							return 0 // not rotated: unchanged
						}
						j := i % half
						a := float64(pos[h/c.heads]) * float64(inv[j])
						return (math.Abs(in[j])+math.Abs(in[j+half]))*(a+6)*0x1p-24 + roundErr(xt, w[i])
					})
					for j := h*stride + c.headDim; j < (h+1)*stride; j++ {
						if got[j] != x[j] {
							t.Fatalf("%s: element %d between heads changed", name, j)
						}
					}
				}
			}
		}
	})
}

// TestRoPEInvFreq checks the frequencies against cpuref.InvFreq, HF's
// float32 computation, bit for bit.
func TestRoPEInvFreq(t *testing.T) {
	for _, c := range []struct {
		dim   int
		theta float64
	}{{64, 1e7}, {128, 1e6}, {256, 5e6}, {32, 10000}} {
		got, want := ops.RoPEInvFreq(c.dim, c.theta), cpuref.InvFreq(c.dim, c.theta)
		for i := range want {
			if float64(got[i]) != want[i] {
				t.Errorf("RoPEInvFreq(%d, %g)[%d] = %g, want %g", c.dim, c.theta, i, got[i], want[i])
			}
		}
	}
	if ops.RoPEInvFreq(7, 1e4) != nil || ops.RoPEInvFreq(8, math.NaN()) != nil {
		t.Errorf("RoPEInvFreq accepts an odd dimension or a NaN theta")
	}
}

// TestRMSNormRoPE checks the fused per-head norm and RoPE for every
// activation and weight type against cpuref.RMSNorm64 then cpuref.RoPE64
// (the fused kernel rounds nothing in between): a head stride, partial
// and full rotary dimensions, and a head of 40 whose rotated pairs live in
// different threads. Bound: the norm's relative error (normTol's) carried
// through the rotation, plus RoPE's (TestRoPE's) on the normalised
// values, plus the rounding to x's type.
func TestRMSNormRoPE(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		seed := uint64(300)
		for _, xt := range kernels.ElemTypes {
			for _, wt := range kernels.ElemTypes {
				for _, c := range []struct{ tokens, heads, headDim, stride, rotary int }{
					{2, 2, 64, 128, 16},
					{1, 2, 256, 512, 64},
					{3, 1, 40, 0, 40},
				} {
					seed++
					name := fmt.Sprintf("%v/%v/%+v", xt, wt, c)
					rng := rand.New(rand.NewPCG(seed, 0x11))
					p := ops.RoPEParams{Tokens: c.tokens, Heads: c.heads, HeadDim: c.headDim, HeadStride: c.stride, RotaryDim: c.rotary}
					stride := max(c.stride, c.headDim)
					x := rounded(xt, random(rng, c.tokens*c.heads*stride, 3))
					w := rounded(wt, random(rng, c.headDim, 1))
					pos, posInt := randomPositions(rng, c.tokens, 3000)
					inv := ops.RoPEInvFreq(c.rotary, 1e6)
					xv := r.view(xt, x)
					r.run(func(enc *mtl.ComputeCommandEncoder) error {
						return r.k.RMSNormRoPE(enc, p, 1e-6, 1, xv, r.view(wt, w), ints(r, tensor.I32, pos), r.view(tensor.F32, inv))
					})
					got := r.read(xv)
					normed := make([]float64, 0, c.tokens*c.heads*c.headDim)
					for h := 0; h < c.tokens*c.heads; h++ {
						normed = append(normed, cpuref.RMSNorm64(cpuref.Widen(x[h*stride:h*stride+c.headDim]), cpuref.Widen(w), 1e-6, 1)...)
					}
					want := append([]float64(nil), normed...)
					cpuref.RoPE64(want, c.heads, c.headDim, c.rotary, posInt, cpuref.Widen(inv))
					normRel := (float64(c.headDim)/2 + 8) * 0x1p-24
					half := c.rotary / 2
					for h := 0; h < c.tokens*c.heads; h++ {
						in, wnt := normed[h*c.headDim:(h+1)*c.headDim], want[h*c.headDim:(h+1)*c.headDim]
						within(t, fmt.Sprintf("%s head %d", name, h), got[h*stride:h*stride+c.headDim], wnt, func(i int) float64 {
							if i >= c.rotary {
								return normRel*math.Abs(wnt[i]) + roundErr(xt, wnt[i])
							}
							j := i % half
							a := float64(pos[h/c.heads]) * float64(inv[j])
							return (math.Abs(in[j])+math.Abs(in[j+half]))*(normRel+(a+6)*0x1p-24) + roundErr(xt, wnt[i])
						})
						for j := h*stride + c.headDim; j < (h+1)*stride; j++ {
							if got[j] != x[j] {
								t.Fatalf("%s: element %d between heads changed", name, j)
							}
						}
					}
				}
			}
		}
	})
}

// randomPositions returns n random positions below limit, as the kernels
// take them and as cpuref.RoPE64 does.
func randomPositions(rng *rand.Rand, n, limit int) ([]int32, []int) {
	pos, posInt := make([]int32, n), make([]int, n)
	for i := range pos {
		pos[i] = int32(rng.IntN(limit))
		posInt[i] = int(pos[i])
	}
	return pos, posInt
}
