package ops_test

import (
	"math"
	"testing"

	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// TestNormRoPESwiGLUMoESampleRefusals checks that RMSNorm,
// RMSNormResidual, RoPE, SwiGLU, SwiGLUFused, MoERoute, MoECombine,
// Sample and Argmax refuse each bad shape, setting and view before
// encoding anything, naming the argument and the numbers.
func TestNormRoPESwiGLUMoESampleRefusals(t *testing.T) {
	r := newRig(t, testdevice.Orders[0])
	f32 := func(n int) tensor.View { return r.empty(tensor.F32, n) }
	nan, inf := float32(math.NaN()), float32(math.Inf(1))

	// RMSNorm: 2 rows of 8.
	np := ops.RMSNormParams{Rows: 2, Dim: 8, Eps: 1e-6, Offset: 1}
	x, w, out, h, res := f32(16), f32(8), f32(16), f32(16), f32(16)
	norm := func(p ops.RMSNormParams, x, w, out tensor.View) func(*mtl.ComputeCommandEncoder) error {
		return func(enc *mtl.ComputeCommandEncoder) error { return r.k.RMSNorm(enc, p, x, w, out) }
	}
	residual := func(p ops.RMSNormParams, h, res, w, out tensor.View) func(*mtl.ComputeCommandEncoder) error {
		return func(enc *mtl.ComputeCommandEncoder) error { return r.k.RMSNormResidual(enc, p, h, res, w, out) }
	}
	with := func(edit func(p *ops.RMSNormParams)) ops.RMSNormParams { p := np; edit(&p); return p }
	wide := f32(32)
	xIn := tensor.NewView(wide.Buffer, 0, tensor.F32, 16)

	// RoPE: 2 tokens, 2 heads of 8, rotary 4.
	rp := ops.RoPEParams{Tokens: 2, Heads: 2, HeadDim: 8, RotaryDim: 4}
	pos, inv := r.empty(tensor.I32, 2), f32(2)
	rope := func(edit func(p *ops.RoPEParams, x, pos, inv *tensor.View)) func(*mtl.ComputeCommandEncoder) error {
		p, x, pos, inv := rp, f32(32), pos, inv
		edit(&p, &x, &pos, &inv)
		return func(enc *mtl.ComputeCommandEncoder) error { return r.k.RoPE(enc, p, x, pos, inv) }
	}

	// MoE: 2 tokens, 8 experts, top 2, dim 4.
	mp := ops.MoERouteParams{Tokens: 2, Experts: 8, TopK: 2, NormTop: true}
	route := func(edit func(p *ops.MoERouteParams, logits, ids, weights *tensor.View)) func(*mtl.ComputeCommandEncoder) error {
		p, logits, ids, weights := mp, f32(16), r.empty(tensor.U32, 4), f32(4)
		edit(&p, &logits, &ids, &weights)
		return func(enc *mtl.ComputeCommandEncoder) error { return r.k.MoERoute(enc, p, logits, ids, weights) }
	}
	cp := ops.MoECombineParams{Tokens: 2, Dim: 4, TopK: 2}
	combine := func(edit func(p *ops.MoECombineParams, experts, weights, shared, gate, out *tensor.View)) func(*mtl.ComputeCommandEncoder) error {
		p, experts, weights, shared, gate, out := cp, f32(16), f32(4), f32(8), f32(2), f32(8)
		edit(&p, &experts, &weights, &shared, &gate, &out)
		return func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.MoECombine(enc, p, experts, weights, shared, gate, out)
		}
	}

	// Sampling: 2 rows of 50.
	sp := ops.SampleParams{Rows: 2, Vocab: 50, Temperature: 0.7, TopK: 20, TopP: 0.9, MinP: 0.05}
	sample := func(edit func(p *ops.SampleParams, logits, tokens *tensor.View)) func(*mtl.ComputeCommandEncoder) error {
		p, logits, tokens := sp, f32(100), r.empty(tensor.U32, 2)
		edit(&p, &logits, &tokens)
		return func(enc *mtl.ComputeCommandEncoder) error { return r.k.Sample(enc, p, logits, tokens) }
	}

	checkRefusals(t, r, []refusal{
		{"norm Rows zero", norm(with(func(p *ops.RMSNormParams) { p.Rows = 0 }), x, w, out), "RMSNormParams.Rows", []string{"0"}},
		{"norm Dim above the kernel's", norm(with(func(p *ops.RMSNormParams) { p.Dim = 8193 }), x, w, out), "RMSNormParams.Dim", []string{"8193", "8192"}},
		{"norm Stride below Dim", norm(with(func(p *ops.RMSNormParams) { p.Stride = 7 }), x, w, out), "RMSNormParams.Stride", []string{"7", "8"}},
		{"norm Eps negative", norm(with(func(p *ops.RMSNormParams) { p.Eps = -1 }), x, w, out), "RMSNormParams.Eps", []string{"-1"}},
		{"norm Eps NaN", norm(with(func(p *ops.RMSNormParams) { p.Eps = nan }), x, w, out), "RMSNormParams.Eps", []string{"NaN"}},
		{"norm Offset infinite", norm(with(func(p *ops.RMSNormParams) { p.Offset = inf }), x, w, out), "RMSNormParams.Offset", []string{"Inf"}},
		{"norm X integer", norm(np, r.empty(tensor.I32, 16), w, out), "X", []string{"i32"}},
		{"norm X without the last row's gap", norm(with(func(p *ops.RMSNormParams) { p.Stride = 10 }), f32(18), w, f32(20)), "X", []string{"18", "20"}},
		{"norm W short", norm(np, x, f32(7), out), "W", []string{"7", "8"}},
		{"norm Out of another type", norm(np, x, w, r.empty(tensor.F16, 16)), "Out", []string{"f16", "f32"}},
		{"norm Out overlaps X", norm(np, xIn, w, tensor.NewView(wide.Buffer, 4, tensor.F32, 16)), "Out", []string{"X"}},
		{"residual Stride", residual(with(func(p *ops.RMSNormParams) { p.Stride = 16 }), h, res, w, out), "RMSNormParams.Stride", []string{"16"}},
		{"residual R of another type", residual(np, h, r.empty(tensor.BF16, 16), w, out), "R", []string{"bf16", "f32"}},
		{"residual H overlaps Out", residual(np, xIn, res, w, tensor.NewView(wide.Buffer, 8, tensor.F32, 16)), "H", []string{"Out"}},
		{"residual H short", residual(np, f32(15), res, w, out), "H", []string{"15", "16"}},
		{"rope Tokens zero", rope(func(p *ops.RoPEParams, _, _, _ *tensor.View) { p.Tokens = 0 }), "RoPEParams.Tokens", []string{"0"}},
		{"rope RotaryDim odd", rope(func(p *ops.RoPEParams, _, _, _ *tensor.View) { p.RotaryDim = 3 }), "RoPEParams.RotaryDim", []string{"3"}},
		{"rope RotaryDim above HeadDim", rope(func(p *ops.RoPEParams, _, _, _ *tensor.View) { p.RotaryDim = 10 }), "RoPEParams.RotaryDim", []string{"10", "8"}},
		{"rope HeadStride below HeadDim", rope(func(p *ops.RoPEParams, _, _, _ *tensor.View) { p.HeadStride = 6 }), "RoPEParams.HeadStride", []string{"6", "8"}},
		{"rope X without the head stride", rope(func(p *ops.RoPEParams, _, _, _ *tensor.View) { p.HeadStride = 16 }), "X", []string{"32", "64"}},
		{"rope Pos unsigned", rope(func(_ *ops.RoPEParams, _, pos, _ *tensor.View) { *pos = r.empty(tensor.U32, 2) }), "Pos", []string{"u32", "i32"}},
		{"rope InvFreq short", rope(func(_ *ops.RoPEParams, _, _, inv *tensor.View) { *inv = f32(1) }), "InvFreq", []string{"1", "2"}},
		{"swiglu rows zero", func(enc *mtl.ComputeCommandEncoder) error { return r.k.SwiGLU(enc, 0, 4, f32(8), f32(8), f32(8)) }, "rows", []string{"0"}},
		{"swiglu width negative", func(enc *mtl.ComputeCommandEncoder) error { return r.k.SwiGLU(enc, 2, -4, f32(8), f32(8), f32(8)) }, "width", []string{"-4"}},
		{"swiglu Up of another type", func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.SwiGLU(enc, 2, 4, f32(8), r.empty(tensor.F16, 8), f32(8))
		}, "Up", []string{"f16", "f32"}},
		{"swiglu Out is Gate", func(enc *mtl.ComputeCommandEncoder) error { g := f32(8); return r.k.SwiGLU(enc, 2, 4, g, f32(8), g) }, "Out", []string{"Gate"}},
		{"swiglu fused GateUp of one half", func(enc *mtl.ComputeCommandEncoder) error { return r.k.SwiGLUFused(enc, 2, 4, f32(8), f32(8)) }, "GateUp", []string{"8", "16"}},
		{"route Experts above 512", route(func(p *ops.MoERouteParams, l, _, _ *tensor.View) { p.Experts = 513; *l = f32(2 * 513) }), "MoERouteParams.Experts", []string{"513", "512"}},
		{"route TopK zero", route(func(p *ops.MoERouteParams, _, _, _ *tensor.View) { p.TopK = 0 }), "MoERouteParams.TopK", []string{"0"}},
		{"route TopK above Experts", route(func(p *ops.MoERouteParams, _, _, _ *tensor.View) { p.TopK = 9 }), "MoERouteParams.TopK", []string{"9", "8"}},
		{"route IDs signed", route(func(_ *ops.MoERouteParams, _, ids, _ *tensor.View) { *ids = r.empty(tensor.I32, 4) }), "IDs", []string{"i32", "u32"}},
		{"route Weights f16", route(func(_ *ops.MoERouteParams, _, _, w *tensor.View) { *w = r.empty(tensor.F16, 4) }), "Weights", []string{"f16", "f32"}},
		{"route Logits short", route(func(_ *ops.MoERouteParams, l, _, _ *tensor.View) { *l = f32(15) }), "Logits", []string{"15", "16"}},
		{"combine Dim zero", combine(func(p *ops.MoECombineParams, _, _, _, _, _ *tensor.View) { p.Dim = 0 }), "MoECombineParams.Dim", []string{"0"}},
		{"combine shared without gate", combine(func(_ *ops.MoECombineParams, _, _, _, g, _ *tensor.View) { *g = tensor.View{} }), "Gate", []string{"shared"}},
		{"combine Experts per token, not per slot", combine(func(_ *ops.MoECombineParams, e, _, _, _, _ *tensor.View) { *e = f32(8) }), "Experts", []string{"8", "16"}},
		{"combine Weights of the experts' type", combine(func(_ *ops.MoECombineParams, _, w, _, _, _ *tensor.View) { *w = r.empty(tensor.BF16, 4) }), "Weights", []string{"bf16", "f32"}},
		{"sample Vocab zero", sample(func(p *ops.SampleParams, _, _ *tensor.View) { p.Vocab = 0 }), "SampleParams.Vocab", []string{"0"}},
		{"sample Temperature negative", sample(func(p *ops.SampleParams, _, _ *tensor.View) { p.Temperature = -1 }), "SampleParams.Temperature", []string{"-1"}},
		{"sample Temperature NaN", sample(func(p *ops.SampleParams, _, _ *tensor.View) { p.Temperature = nan }), "SampleParams.Temperature", []string{"NaN"}},
		{"sample TopK above 64", sample(func(p *ops.SampleParams, _, _ *tensor.View) { p.TopK = 65 }), "SampleParams.TopK", []string{"65", "64"}},
		{"sample TopP zero", sample(func(p *ops.SampleParams, _, _ *tensor.View) { p.TopP = 0 }), "SampleParams.TopP", []string{"0"}},
		{"sample TopP without TopK", sample(func(p *ops.SampleParams, _, _ *tensor.View) { p.TopK = 0 }), "SampleParams.TopP", []string{"0.9", "TopK"}},
		{"sample MinP one", sample(func(p *ops.SampleParams, _, _ *tensor.View) { p.MinP = 1 }), "SampleParams.MinP", []string{"1"}},
		{"sample Tokens signed", sample(func(_ *ops.SampleParams, _, tok *tensor.View) { *tok = r.empty(tensor.I32, 2) }), "Tokens", []string{"i32", "u32"}},
		{"sample Logits integer", sample(func(_ *ops.SampleParams, l, _ *tensor.View) { *l = r.empty(tensor.U32, 100) }), "Logits", []string{"u32"}},
		{"argmax vocab zero", func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.Argmax(enc, 2, 0, f32(100), r.empty(tensor.U32, 2))
		}, "vocab", []string{"0"}},
		{"argmax Tokens short", func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.Argmax(enc, 2, 50, f32(100), r.empty(tensor.U32, 1))
		}, "Tokens", []string{"1", "2"}},
	})
}
