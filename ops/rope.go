package ops

import (
	"math"

	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// RoPEParams is the shape of a RoPE dispatch.
type RoPEParams struct {
	Tokens  int // tokens, each with its own position
	Heads   int // heads per token
	HeadDim int // elements per head
	// HeadStride is the number of elements between the starts of two
	// heads; 0 means HeadDim. The query halves of a [query | gate] q_proj
	// output have HeadStride 2*HeadDim.
	HeadStride int
	// RotaryDim is the number of leading elements of each head rotated:
	// head_dim * partial_rotary_factor, even, 2 to HeadDim.
	RotaryDim int
}

// ropeParams is rope_params of rope.metal.
type ropeParams struct {
	Heads, HeadStride, HalfRot uint32
}

// ropeGroup is the threadgroup width of the RoPE kernel (rope.metal).
const ropeGroup = 32

func (p RoPEParams) headStride() int {
	if p.HeadStride == 0 {
		return p.HeadDim
	}
	return p.HeadStride
}

func (p RoPEParams) check() error {
	if err := positive(dim{"RoPEParams.Tokens", p.Tokens}, dim{"RoPEParams.Heads", p.Heads}, dim{"RoPEParams.HeadDim", p.HeadDim}); err != nil {
		return err
	}
	switch {
	case p.HeadStride != 0 && p.HeadStride < p.HeadDim:
		return tensor.Invalid("RoPEParams.HeadStride", "%d, less than HeadDim %d: heads would overlap", p.HeadStride, p.HeadDim)
	case p.RotaryDim < 2 || p.RotaryDim > p.HeadDim || p.RotaryDim%2 != 0:
		return tensor.Invalid("RoPEParams.RotaryDim", "%d, must be even and 2 to HeadDim %d", p.RotaryDim, p.HeadDim)
	}
	return nil
}

// RoPE encodes the rotary position embedding, rotate-half (NeoX) form, in
// place on x: for each head of each token t, the pairs (i, i + RotaryDim/2)
// of its first RotaryDim elements are rotated by the angle
// float32(pos[t]) * invFreq[i] (a float32 product, as HF computes it);
// the other elements of the head are neither read nor written. x is
// [Tokens][Heads][HeadStride] of any float type, the arithmetic float32
// and each result rounded once to x's type; pos is I32 [Tokens], each
// token's position in its own sequence (positions are used as given; they
// are exact up to 2^24); invFreq is F32 [RotaryDim/2] (see
// [RoPEInvFreq]). Refused: counts below 1, HeadStride below HeadDim, an
// odd RotaryDim or one outside 2..HeadDim, and views of the wrong type or
// length.
func (k *Kernels) RoPE(enc *mtl.ComputeCommandEncoder, p RoPEParams, x, pos, invFreq tensor.View) error {
	if err := p.check(); err != nil {
		return err
	}
	if err := tensor.FloatType("X", x.Type); err != nil {
		return err
	}
	if err := tensor.Check(k.dev,
		tensor.Arg{Name: "X", View: x, Type: x.Type, Len: elems(p.Tokens, p.Heads, p.headStride()), Formula: "Tokens*Heads*HeadStride", Written: true},
		tensor.Arg{Name: "Pos", View: pos, Type: tensor.I32, Len: p.Tokens, Formula: "Tokens"},
		tensor.Arg{Name: "InvFreq", View: invFreq, Type: tensor.F32, Len: p.RotaryDim / 2, Formula: "RotaryDim/2"},
	); err != nil {
		return err
	}
	entry := kernels.RoPEOf(x.Type)
	if err := k.setPipeline(enc, entry, ropeGroup, "RoPEParams", "the kernel's fixed"); err != nil {
		return err
	}
	bind(enc, x, 0)
	bind(enc, pos, 1)
	bind(enc, invFreq, 2)
	half := p.RotaryDim / 2
	mtl.SetValue(enc, ropeParams{Heads: uint32(p.Heads), HeadStride: uint32(p.headStride()), HalfRot: uint32(half)}, 3)
	enc.DispatchThreadgroups(mtl.Sz((half+ropeGroup-1)/ropeGroup, p.Heads, p.Tokens), mtl.Sz(ropeGroup, 1, 1))
	return finish(enc, entry)
}

// RoPEInvFreq returns the rotary frequencies inv_freq[i] =
// 1 / theta^(2i / rotaryDim), i < rotaryDim/2, as HF's default RoPE
// computes them in float32: the exponent 2i/rotaryDim divided in float32,
// the power rounded to float32, its reciprocal in float32. It returns nil
// for a rotaryDim that is not even and positive or a theta that is not
// finite and above 1.
func RoPEInvFreq(rotaryDim int, theta float64) []float32 {
	if rotaryDim < 2 || rotaryDim%2 != 0 || !(theta > 1) || math.IsInf(theta, 0) {
		return nil
	}
	f := make([]float32, rotaryDim/2)
	for i := range f {
		e := float32(2*i) / float32(rotaryDim)
		f[i] = 1 / float32(math.Pow(float64(float32(theta)), float64(e)))
	}
	return f
}

// normRoPEParams is norm_rope_params of norm.metal.
type normRoPEParams struct {
	Heads, HalfRot uint32
}

// RMSNormRoPE encodes, in one dispatch and in place on x, the per-head
// RMSNorm of [Kernels.RMSNorm] (each head a row of HeadDim, weight
// offset + w, w [HeadDim]) followed by the RoPE of [Kernels.RoPE] on the
// normalised head, with nothing rounded in between: q_norm or k_norm and
// the rotary embedding of an attention layer. x, pos and invFreq are as
// RoPE takes them. It refuses what RMSNorm and RoPE refuse, and a
// RotaryDim above kernels.NormRoPEMaxRotary.
func (k *Kernels) RMSNormRoPE(enc *mtl.ComputeCommandEncoder, p RoPEParams, eps, offset float32, x, w, pos, invFreq tensor.View) error {
	if err := p.check(); err != nil {
		return err
	}
	if p.RotaryDim > kernels.NormRoPEMaxRotary {
		return tensor.Invalid("RoPEParams.RotaryDim", "%d, above the %d the fused norm and RoPE take", p.RotaryDim, kernels.NormRoPEMaxRotary)
	}
	np := RMSNormParams{Rows: p.Tokens * p.Heads, Dim: p.HeadDim, Stride: p.headStride(), Eps: eps, Offset: offset}
	if err := np.check(); err != nil {
		return err
	}
	if err := floatTypes(named{"X", x}, named{"W", w}); err != nil {
		return err
	}
	if err := tensor.Check(k.dev,
		tensor.Arg{Name: "X", View: x, Type: x.Type, Len: elems(p.Tokens, p.Heads, p.headStride()), Formula: "Tokens*Heads*HeadStride", Written: true},
		tensor.Arg{Name: "W", View: w, Type: w.Type, Len: p.HeadDim, Formula: "HeadDim"},
		tensor.Arg{Name: "Pos", View: pos, Type: tensor.I32, Len: p.Tokens, Formula: "Tokens"},
		tensor.Arg{Name: "InvFreq", View: invFreq, Type: tensor.F32, Len: p.RotaryDim / 2, Formula: "RotaryDim/2"},
	); err != nil {
		return err
	}
	entry := kernels.RMSNormRoPEOf(x.Type, w.Type)
	threads := np.threads()
	if err := k.setPipeline(enc, entry, threads, "RoPEParams.HeadDim", "32*ceil(HeadDim/(32*8))"); err != nil {
		return err
	}
	bind(enc, x, 0)
	bind(enc, w, 1)
	mtl.SetValue(enc, normParams{Dim: uint32(np.Dim), Stride: uint32(np.Stride), Eps: eps, Offset: offset}, 4)
	bind(enc, pos, 5)
	bind(enc, invFreq, 6)
	mtl.SetValue(enc, normRoPEParams{Heads: uint32(p.Heads), HalfRot: uint32(p.RotaryDim / 2)}, 7)
	enc.DispatchThreadgroups(mtl.Sz(np.Rows, 1, 1), mtl.Sz(threads, 1, 1))
	return finish(enc, entry)
}
