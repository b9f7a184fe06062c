package cpuref

import (
	"fmt"
	"sort"
)

// Route64 is the MoE router of one token (SPEC section 14): p =
// softmax(logits) over the experts, the topK experts by p, and their
// weights p_e, divided by their sum when normTopK. Experts come out in
// decreasing p; equal p are broken by the lower expert index first.
// torch.topk does not document its order for ties; exact ties of two
// router probabilities do not occur with real weights, and where they do
// the choice changes nothing but which of two equal weights an expert gets,
// so a test that meets one compares sums, not orders.
//
// HF computes the softmax in float32 (F.softmax(..., dtype=torch.float))
// even in a float64 run; this reference computes it in float64. The two
// differ by float32 rounding (a few 1e-8 relative per weight), below every
// bound a model test states, and choose different experts only where two
// probabilities are within that rounding of each other.
func Route64(logits []float64, topK int, normTopK bool) (experts []int, weights []float64) {
	if topK <= 0 || topK > len(logits) {
		panic(fmt.Sprintf("cpuref.Route64: topK %d of %d experts", topK, len(logits)))
	}
	p := Softmax64(logits)
	idx := make([]int, len(p))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] > p[idx[b]] })
	experts = idx[:topK:topK]
	weights = make([]float64, topK)
	var sum float64
	for i, e := range experts {
		weights[i] = p[e]
		sum += p[e]
	}
	if normTopK {
		for i := range weights {
			weights[i] /= sum
		}
	}
	return experts, weights
}
