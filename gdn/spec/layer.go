package spec

import "math"

// NormGate is the activation applied to z by the gated RMSNorm of a
// layer's core (SPEC section 13).
type NormGate uint8

const (
	// GateSiLU multiplies the normalised output by silu(z) = z / (1 +
	// exp(-z)), as Qwen3-Next and Qwen3.5 do. It is the zero value.
	GateSiLU NormGate = 0
	// GateSigmoid multiplies it by sigmoid(z) = 1 / (1 + exp(-z)).
	GateSigmoid NormGate = 1
)

var normGateNames = names{GateSiLU: "silu", GateSigmoid: "sigmoid"}

// String returns "silu", "sigmoid", or "NormGate(n)".
func (g NormGate) String() string { return normGateNames.of(uint64(g), "NormGate") }

// ConvKernel is the only supported size of the short convolution
// (Qwen3-Next's and Qwen3.5's linear_conv_kernel_dim).
const ConvKernel = 4

// Core says which parts of a linear-attention layer's core around the
// recurrence the kernel runs (SPEC section 13), each on its own. The zero
// value runs neither: q, k and v are given, the output is the recurrence's.
//
// With Conv set, the kernel reads the pre-convolution mixed_qkv
// ([conv_dim, tokens], conv_dim = 2 n_k_heads D_k + n_v_heads D_v: q, then
// k, then v) instead of q, k and v, and per channel c and token t computes,
// in f32,
//
//	c(t) = sum_{j=0..K-1} w[c][j] x_c(t-K+1+j)   x at t' < 0 from the conv state
//	u    = silu(c) = c / (1 + exp(-c))
//
// then splits u into q, k and v. The conv state ([conv_dim, K-1, states],
// oldest input first, type Activation) holds the last K-1 inputs of a
// sequence and is indexed by the same slot as the recurrent state.
//
// With Norm set, the output of value head h is the gated RMSNorm
//
//	y = norm_w * o / sqrt(mean_j o_j^2 + NormEps) * act(z)
//
// of the recurrence's output o (f32, never rounded) with z ([D_v,
// n_v_heads, tokens], type Activation) and norm_w ([D_v], type Activation).
type Core struct {
	// Conv is the size K of the depthwise causal convolution, 0 for none;
	// only [ConvKernel] (4) is supported.
	Conv int
	// Norm turns the gated RMSNorm of the output on.
	Norm bool
	// NormGate is the activation of z: GateSiLU (the zero value) or
	// GateSigmoid.
	NormGate NormGate
	// NormEps is added to the mean of squares; finite and > 0 with Norm
	// (Qwen3-Next and Qwen3.5: 1e-6).
	NormEps float32
}

// QwenCore returns the core of a Qwen3-Next or Qwen3.5 linear-attention
// layer: the convolution of size 4 and the gated RMSNorm with silu(z) and
// eps 1e-6. Each call returns a new value, so a change to one layer's
// Params.Core reaches no other.
func QwenCore() Core {
	return Core{Conv: ConvKernel, Norm: true, NormGate: GateSiLU, NormEps: 1e-6}
}

// Validate checks c: Conv 0 or 4; with Norm, a known gate and a finite
// NormEps > 0; without it, no gate or eps set. The error is an
// [*ArgumentError] naming the field.
func (c Core) Validate() error {
	if c.Conv != 0 && c.Conv != ConvKernel {
		return argError("Core.Conv", "%d, want 0 (no convolution) or %d (the only supported kernel size)", c.Conv, ConvKernel)
	}
	if !c.Norm {
		if c.NormGate != GateSiLU || c.NormEps != 0 {
			return argError("Core.Norm", "off, but Core.NormGate = %v and Core.NormEps = %v are set", c.NormGate, c.NormEps)
		}
		return nil
	}
	if c.NormGate != GateSiLU && c.NormGate != GateSigmoid {
		return argError("Core.NormGate", "%v is neither GateSiLU (0) nor GateSigmoid (1)", c.NormGate)
	}
	if e := float64(c.NormEps); math.IsNaN(e) || math.IsInf(e, 0) || e <= 0 {
		return argError("Core.NormEps", "%v, must be finite and > 0", c.NormEps)
	}
	return nil
}

// ConvDim is the number of channels of mixed_qkv and of the conv state:
// 2 n_k_heads D_k + n_v_heads D_v (saturating like every count).
func (s Shape) ConvDim() int {
	qk := count(2, s.NKHeads, s.DK)
	v := count(s.NVHeads, s.DV)
	if qk == 0 || v == 0 || qk > math.MaxInt-v {
		if qk == 0 || v == 0 {
			return 0
		}
		return math.MaxInt
	}
	return qk + v
}

// MixedLen is the element count of mixed_qkv: conv_dim * tokens.
func (s Shape) MixedLen() int { return count(s.ConvDim(), s.Tokens()) }

// ZLen is the element count of z: D_v * n_v_heads * tokens, as the
// output.
func (s Shape) ZLen() int { return s.VLen() }

// ConvWeightLen is the element count of the conv weight, [K, conv_dim]
// with K = p.Core.Conv fastest; 0 without the convolution.
func (p Params) ConvWeightLen() int { return count(p.Core.Conv, p.ConvDim()) }

// ConvStateLen is the element count of a conv state buffer, [conv_dim,
// K-1, states] (states as [Shape.States]); 0 without the convolution.
func (p Params) ConvStateLen() int { return count(p.ConvDim(), p.Core.Conv-1, p.States()) }
