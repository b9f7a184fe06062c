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
