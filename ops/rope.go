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
	pso, err := k.launchPipeline(entry, ropeGroup, "RoPEParams", "the kernel's fixed")
	if err != nil {
		return err
	}
	enc.SetComputePipelineState(pso)
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
