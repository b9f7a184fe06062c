package ops_test

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// normTol bounds |got - want| of an RMSNorm output against the float64
// oracle on the same rounded inputs: the kernel's float32 sum of Dim
// squares (all terms positive: relative error at most Dim * 2^-24 however
// it is ordered), the mean, eps, rsqrt (a few roundings), halved by the
// square root, and three products (x * inv * (offset + w)) give a relative
// error below (Dim/2 + 8) * 2^-24; the store adds its rounding (roundErr).
func normTol(dim int, out tensor.ElemType, want []float64) func(i int) float64 {
	rel := (float64(dim)/2 + 8) * 0x1p-24
	return func(i int) float64 { return rel*math.Abs(want[i]) + roundErr(out, want[i]) }
}

// TestRMSNorm checks rms_norm for every activation and weight type against
// cpuref.RMSNorm64: widths around the thread counts (1, 37, 128, 300,
// 2048), a row stride (the query half of [query | gate] heads), weight
// offsets 0 and 1, in place and not; the gaps between rows stay untouched.
func TestRMSNorm(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		seed := uint64(0)
		for _, xt := range kernels.ElemTypes {
			for _, wt := range kernels.ElemTypes {
				for _, c := range []struct {
					rows, dim, stride int
					offset            float32
					inPlace           bool
				}{
					{3, 37, 0, 0, false},
					{5, 128, 256, 1, true},
					{2, 300, 301, 1, false},
					{1, 1, 0, 0, true},
					{2, 2048, 0, 1, false},
				} {
					seed++
					name := fmt.Sprintf("%v/%v/%dx%d/stride%d/offset%v/inplace%v", xt, wt, c.rows, c.dim, c.stride, c.offset, c.inPlace)
					stride := max(c.stride, c.dim)
					rng := rand.New(rand.NewPCG(seed, 0x9a7))
					x := rounded(xt, random(rng, c.rows*stride, 3))
					w := rounded(wt, random(rng, c.dim, 1))
					p := ops.RMSNormParams{Rows: c.rows, Dim: c.dim, Stride: c.stride, Eps: 1e-6, Offset: c.offset}
					xv, wv := r.view(xt, x), r.view(wt, w)
					out := tensor.View{}
					if !c.inPlace {
						out = r.empty(xt, len(x))
					}
					r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.RMSNorm(enc, p, xv, wv, out) })
					if c.inPlace {
						out = xv
					}
					got, err := out.Float32s()
					if err != nil {
						t.Fatal(err)
					}
					for i := 0; i < c.rows; i++ {
						row := x[i*stride : i*stride+c.dim]
						want := cpuref.RMSNorm64(cpuref.Widen(row), cpuref.Widen(w), 1e-6, float64(c.offset))
						within(t, name, got[i*stride:i*stride+c.dim], want, normTol(c.dim, xt, want))
						for j := i*stride + c.dim; j < (i+1)*stride; j++ {
							untouched := got[j] != got[j] // still the poison
							if c.inPlace {
								untouched = got[j] == x[j]
							}
							if !untouched {
								t.Fatalf("%s: element %d between rows was written: %g", name, j, got[j])
							}
						}
					}
				}
			}
		}
	})
}

// TestRMSNormResidual checks rms_norm_residual for every residual,
// activation and weight type: h + r rounded to h's type equals the float32
// sum rounded once, bit for bit, and the output matches
// cpuref.RMSNorm64 of that sum.
func TestRMSNormResidual(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		seed := uint64(100)
		for _, ht := range kernels.ElemTypes {
			for _, xt := range kernels.ElemTypes {
				for _, wt := range kernels.ElemTypes {
					seed++
					rows, dim := 2+int(seed%3), []int{33, 96, 257}[seed%3]
					name := fmt.Sprintf("%v/%v/%v/%dx%d", ht, xt, wt, rows, dim)
					rng := rand.New(rand.NewPCG(seed, 0x4e5))
					h := rounded(ht, random(rng, rows*dim, 4))
					res := rounded(xt, random(rng, rows*dim, 2))
					w := rounded(wt, random(rng, dim, 1))
					hv, rv, wv, out := r.view(ht, h), r.view(xt, res), r.view(wt, w), r.empty(xt, rows*dim)
					p := ops.RMSNormParams{Rows: rows, Dim: dim, Eps: 1e-5, Offset: float32(seed % 2)}
					r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.RMSNormResidual(enc, p, hv, rv, wv, out) })
					sum := make([]float32, len(h))
					for i := range sum {
						sum[i] = h[i] + res[i]
					}
					sum = rounded(ht, sum)
					gotH, got := r.read(hv), r.read(out)
					for i := range sum {
						if gotH[i] != sum[i] {
							t.Fatalf("%s: h[%d] = %g, want h + r rounded = %g", name, i, gotH[i], sum[i])
						}
					}
					for i := 0; i < rows; i++ {
						want := cpuref.RMSNorm64(cpuref.Widen(sum[i*dim:(i+1)*dim]), cpuref.Widen(w), 1e-5, float64(p.Offset))
						within(t, name, got[i*dim:(i+1)*dim], want, normTol(dim, xt, want))
					}
				}
			}
		}
	})
}

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

// TestSwiGLU checks SwiGLU and SwiGLUFused for every type against
// cpuref.SwiGLU64 on the same rounded inputs. Bound: exp within a few ulp
// (its relative error passes to silu scaled by e/(1+e) <= 1), then the
// sum, the quotient and the product, one rounding each: relative
// 8 * 2^-24, plus the rounding to the output type (roundErr).
func TestSwiGLU(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		for i, xt := range kernels.ElemTypes {
			for _, fused := range []bool{false, true} {
				rows, width := 3, 300+i
				rng := rand.New(rand.NewPCG(uint64(i)*2+uint64(len(fmt.Sprint(fused))), 0x5e1))
				gate := rounded(xt, random(rng, rows*width, 12))
				up := rounded(xt, random(rng, rows*width, 3))
				out := r.empty(xt, rows*width)
				if fused {
					gu := make([]float32, 0, 2*rows*width)
					for row := 0; row < rows; row++ {
						gu = append(append(gu, gate[row*width:(row+1)*width]...), up[row*width:(row+1)*width]...)
					}
					v := r.view(xt, gu)
					r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.SwiGLUFused(enc, rows, width, v, out) })
				} else {
					g, u := r.view(xt, gate), r.view(xt, up)
					r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.SwiGLU(enc, rows, width, g, u, out) })
				}
				want := cpuref.SwiGLU64(cpuref.Widen(gate), cpuref.Widen(up))
				within(t, fmt.Sprintf("%v fused=%v", xt, fused), r.read(out), want, func(i int) float64 {
					return 8*0x1p-24*math.Abs(want[i]) + roundErr(xt, want[i])
				})
			}
		}
	})
}

// ranking returns the indices of x ordered as the kernels rank them: the
// larger value first, equal values by the lower index.
func ranking(x []float32) []int {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(x[b], x[a]) })
	return idx
}

// TestMoERoute checks the router for every logit type against
// cpuref.Route64: the ids are the top-k by logit with ties to the lower
// index (bf16 logits of 512 experts have many ties), each rank's logit is
// the one Route64 ranks there, and the weights are within the bound of
// float32 arithmetic: exp (a few ulp), the softmax's sum of Experts
// positive terms (Experts * 2^-24 relative) and the division, the top-k
// sum (TopK * 2^-24) and the second division: (Experts + TopK + 8) *
// 2^-24 relative.
func TestMoERoute(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		seed := uint64(0)
		for _, xt := range kernels.ElemTypes {
			for _, c := range []ops.MoERouteParams{
				{Tokens: 3, Experts: 512, TopK: 10, NormTop: true},
				{Tokens: 6, Experts: 61, TopK: 4},
				{Tokens: 1, Experts: 1, TopK: 1, NormTop: true},
				{Tokens: 5, Experts: 40, TopK: 32, NormTop: true},
			} {
				seed++
				name := fmt.Sprintf("%v/%+v", xt, c)
				rng := rand.New(rand.NewPCG(seed, 0x0e))
				logits := rounded(xt, random(rng, c.Tokens*c.Experts, 4))
				ids, w := r.empty(tensor.U32, c.Tokens*c.TopK), r.empty(tensor.F32, c.Tokens*c.TopK)
				lv := r.view(xt, logits)
				r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.MoERoute(enc, c, lv, ids, w) })
				gotIDs := make([]uint32, c.Tokens*c.TopK)
				if err := tensor.LoadInts(ids, gotIDs); err != nil {
					t.Fatal(err)
				}
				gotW := r.read(w)
				for tok := 0; tok < c.Tokens; tok++ {
					row := logits[tok*c.Experts : (tok+1)*c.Experts]
					wantIDs, wantW := cpuref.Route64(cpuref.Widen(row), c.TopK, c.NormTop)
					rank := ranking(row)
					for j := 0; j < c.TopK; j++ {
						got := int(gotIDs[tok*c.TopK+j])
						if got != rank[j] || row[got] != row[wantIDs[j]] {
							t.Errorf("%s: token %d rank %d: expert %d (logit %g), want %d (Route64: %d, logit %g)", name, tok, j, got, row[min(got, c.Experts-1)], rank[j], wantIDs[j], row[wantIDs[j]])
						}
					}
					within(t, fmt.Sprintf("%s token %d weights", name, tok), gotW[tok*c.TopK:(tok+1)*c.TopK], wantW, func(i int) float64 {
						return float64(c.Experts+c.TopK+8) * 0x1p-24 * wantW[i]
					})
				}
			}
		}
	})
}

// TestMoECombine checks the weighted sum of the experts' outputs, with and
// without the gated shared expert, against a float64 sum with
// cpuref.Sigmoid64. Bound: TopK + 1 products summed in float32 err by at
// most (TopK + 3) * 2^-24 of the sum of their magnitudes, the sigmoid by a
// few ulp of its term; then the rounding to the output type.
func TestMoECombine(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		seed := uint64(50)
		for _, xt := range kernels.ElemTypes {
			for _, shared := range []bool{true, false} {
				seed++
				p := ops.MoECombineParams{Tokens: 3, Dim: 300, TopK: 10}
				rng := rand.New(rand.NewPCG(seed, 0xc0b))
				experts := rounded(xt, random(rng, p.Tokens*p.TopK*p.Dim, 2))
				weights := random(rng, p.Tokens*p.TopK, 1)
				sh := rounded(xt, random(rng, p.Tokens*p.Dim, 2))
				gate := rounded(xt, random(rng, p.Tokens, 6))
				out := r.empty(xt, p.Tokens*p.Dim)
				ev, wv := r.view(xt, experts), r.view(tensor.F32, weights)
				var sv, gv tensor.View
				if shared {
					sv, gv = r.view(xt, sh), r.view(xt, gate)
				}
				r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.MoECombine(enc, p, ev, wv, sv, gv, out) })
				want, mag := make([]float64, p.Tokens*p.Dim), make([]float64, p.Tokens*p.Dim)
				for tok := 0; tok < p.Tokens; tok++ {
					for i := 0; i < p.Dim; i++ {
						o := tok*p.Dim + i
						for j := 0; j < p.TopK; j++ {
							term := float64(weights[tok*p.TopK+j]) * float64(experts[(tok*p.TopK+j)*p.Dim+i])
							want[o] += term
							mag[o] += math.Abs(term)
						}
						if shared {
							term := cpuref.Sigmoid64(float64(gate[tok])) * float64(sh[o])
							want[o] += term
							mag[o] += 4 * math.Abs(term)
						}
					}
				}
				within(t, fmt.Sprintf("%v shared=%v", xt, shared), r.read(out), want, func(i int) float64 {
					return float64(p.TopK+3)*0x1p-24*mag[i] + roundErr(xt, want[i])
				})
			}
		}
	})
}
