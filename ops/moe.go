package ops

import (
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// MoERouteParams is the shape of a router dispatch.
type MoERouteParams struct {
	Tokens  int
	Experts int  // num_experts, 1 to MaxExperts
	TopK    int  // num_experts_per_tok, 1 to min(Experts, 32)
	NormTop bool // norm_topk_prob: the weights divided by their sum
}

// MaxExperts is the most experts the router takes: one SIMD-group of 32
// lanes holding kernels.RoutePerLane logits each.
const MaxExperts = 32 * kernels.RoutePerLane

// routeParams is route_params of moe.metal.
type routeParams struct {
	Tokens, Experts, TopK, NormTop uint32
}

// MoERoute encodes the MoE router of SPEC section 14: per token,
// p = softmax(logits) in float32, the TopK experts of the largest logits
// (the largest p; equal logits to the lower expert index, where
// torch.topk leaves ties unspecified), and their weights p_e, divided by
// their sum when NormTop. logits is [Tokens][Experts] of any float type
// (the router's output); ids is U32 [Tokens][TopK] and weights F32
// [Tokens][TopK], in rank order, what the expert products read. A NaN
// logit makes the token's weights NaN. Refused: Tokens below 1, Experts
// outside 1..MaxExperts, TopK outside 1..min(Experts, 32), and views of
// the wrong type or length.
func (k *Kernels) MoERoute(enc *mtl.ComputeCommandEncoder, p MoERouteParams, logits, ids, weights tensor.View) error {
	if err := positive(dim{"MoERouteParams.Tokens", p.Tokens}); err != nil {
		return err
	}
	switch {
	case p.Experts < 1 || p.Experts > MaxExperts:
		return tensor.Invalid("MoERouteParams.Experts", "%d, must be 1 to %d (32 lanes * %d logits each)", p.Experts, MaxExperts, kernels.RoutePerLane)
	case p.TopK < 1 || p.TopK > min(p.Experts, simdWidth):
		return tensor.Invalid("MoERouteParams.TopK", "%d, must be 1 to min(Experts %d, 32)", p.TopK, p.Experts)
	}
	if err := tensor.FloatType("Logits", logits.Type); err != nil {
		return err
	}
	if err := tensor.Check(k.dev,
		tensor.Arg{Name: "Logits", View: logits, Type: logits.Type, Len: elems(p.Tokens, p.Experts), Formula: "Tokens*Experts"},
		tensor.Arg{Name: "IDs", View: ids, Type: tensor.U32, Len: elems(p.Tokens, p.TopK), Formula: "Tokens*TopK", Written: true},
		tensor.Arg{Name: "Weights", View: weights, Type: tensor.F32, Len: elems(p.Tokens, p.TopK), Formula: "Tokens*TopK", Written: true},
	); err != nil {
		return err
	}
	entry := kernels.MoERouteOf(logits.Type)
	if err := k.setPipeline(enc, entry, simdWidth*kernels.RouteTokens, "MoERouteParams", "the kernel's fixed 32*4"); err != nil {
		return err
	}
	norm := uint32(0)
	if p.NormTop {
		norm = 1
	}
	bind(enc, logits, 0)
	bind(enc, ids, 1)
	bind(enc, weights, 2)
	mtl.SetValue(enc, routeParams{Tokens: uint32(p.Tokens), Experts: uint32(p.Experts), TopK: uint32(p.TopK), NormTop: norm}, 3)
	enc.DispatchThreadgroups(mtl.Sz((p.Tokens+kernels.RouteTokens-1)/kernels.RouteTokens, 1, 1), mtl.Sz(simdWidth, kernels.RouteTokens, 1))
	return finish(enc, entry)
}

// MoECombineParams is the shape of a combine dispatch.
type MoECombineParams struct {
	Tokens int
	Dim    int // hidden size
	TopK   int // the experts' slots per token
}

// combineParams is combine_params of moe.metal.
type combineParams struct {
	Dim, TopK, Shared uint32
}

// combineGroup is the threadgroup width of the combine kernel.
const combineGroup = 256

// MoECombine encodes the MoE layer's output, per token t and element i:
//
//	out[t][i] = sum_j weights[t][j] * experts[t][j][i] + sigmoid(gate[t]) * shared[t][i]
//
// in float32 in slot order, rounded once. experts is [Tokens][TopK][Dim]
// (slot j holds the output of the expert MoERoute ranked j-th), weights
// F32 [Tokens][TopK] (MoERoute's), shared [Tokens][Dim] the shared
// expert's output and gate [Tokens] its gate logit (the [1][hidden]
// shared_expert_gate projection); shared and gate are both the zero View
// for a layer without a shared expert. experts, shared, gate and out have
// one float type. Refused: counts below 1, one of shared and gate without
// the other, and views of the wrong type or length.
func (k *Kernels) MoECombine(enc *mtl.ComputeCommandEncoder, p MoECombineParams, experts, weights, shared, gate, out tensor.View) error {
	if err := positive(dim{"MoECombineParams.Tokens", p.Tokens}, dim{"MoECombineParams.Dim", p.Dim}, dim{"MoECombineParams.TopK", p.TopK}); err != nil {
		return err
	}
	if shared.IsZero() != gate.IsZero() {
		return tensor.Invalid("Gate", "the shared expert's output and its gate go together: one is set, the other not")
	}
	if err := tensor.FloatType("Out", out.Type); err != nil {
		return err
	}
	n := elems(p.Tokens, p.Dim)
	if err := tensor.Check(k.dev,
		tensor.Arg{Name: "Experts", View: experts, Type: out.Type, TypeFrom: "Out's type", Len: elems(p.Tokens, p.TopK, p.Dim), Formula: "Tokens*TopK*Dim"},
		tensor.Arg{Name: "Weights", View: weights, Type: tensor.F32, Len: elems(p.Tokens, p.TopK), Formula: "Tokens*TopK"},
		tensor.Arg{Name: "Shared", View: shared, Type: out.Type, TypeFrom: "Out's type", Len: n, Formula: "Tokens*Dim", Optional: true},
		tensor.Arg{Name: "Gate", View: gate, Type: out.Type, TypeFrom: "Out's type", Len: p.Tokens, Formula: "Tokens", Optional: true},
		tensor.Arg{Name: "Out", View: out, Type: out.Type, Len: n, Formula: "Tokens*Dim", Written: true},
	); err != nil {
		return err
	}
	entry := kernels.MoECombineOf(out.Type)
	if err := k.setPipeline(enc, entry, combineGroup, "MoECombineParams", "the kernel's fixed"); err != nil {
		return err
	}
	withShared := uint32(1)
	if shared.IsZero() {
		shared, gate, withShared = experts, experts, 0 // bound, never read
	}
	bind(enc, experts, 0)
	bind(enc, weights, 1)
	bind(enc, shared, 2)
	bind(enc, gate, 3)
	bind(enc, out, 4)
	mtl.SetValue(enc, combineParams{Dim: uint32(p.Dim), TopK: uint32(p.TopK), Shared: withShared}, 5)
	enc.DispatchThreadgroups(mtl.Sz((p.Dim+combineGroup-1)/combineGroup, p.Tokens, 1), mtl.Sz(combineGroup, 1, 1))
	return finish(enc, entry)
}
