package cpuref

import (
	"math"

	"github.com/puremetal/puremetal/gdn/spec"
)

// l2Epsilon is added to the sum of squares under the square root of the
// fused L2 norm (SPEC section 10).
const l2Epsilon = 1e-6

// softplusThreshold is torch's: softplus(x) = x above it.
const softplusThreshold = 20

// softplus returns log(1 + e^x), or x above torch's threshold of 20.
func softplus(x float64) float64 {
	if x > softplusThreshold {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// step holds what the recurrence runs on for one call, after the fused
// parts of p: q^ and k^, g and beta. Parts that are not fused are the
// inputs themselves, not copies.
type step[F float32 | float64] struct {
	q, k, g, beta []F
}

// fused32 computes in float32 the parts of the step that p.Fused asks for:
//
//	q^_j = q_j / sqrt(sum_j q_j^2 + 1e-6)   (k^ likewise), once per key head and token
//	g    = exp(A_log[h]) * softplus(a + dt_bias[h])
//	beta = 1 / (1 + exp(-b))
//
// The sum of squares runs over j in increasing order, every square rounded
// to float32 before it is added; each elementary function (sqrt, exp,
// log1p) is computed in float64 and rounded to float32 once.
func fused32(p spec.Params, in Inputs) step[float32] {
	st := step[float32]{q: in.Q, k: in.K, g: in.G, beta: in.Beta}
	if p.Fused.L2Norm {
		st.q, st.k = l2Normalised32(in.Q, p.DK), l2Normalised32(in.K, p.DK)
	}
	if p.Fused.Gate {
		st.g = make([]float32, len(in.G))
		for i, a := range in.G {
			h := i % p.NVHeads
			x := float32(a + in.DtBias[h])
			sp := x
			if x <= softplusThreshold {
				sp = float32(math.Log1p(math.Exp(float64(x))))
			}
			st.g[i] = float32(float32(math.Exp(float64(in.ALog[h]))) * sp)
		}
	}
	if p.Fused.Beta {
		st.beta = make([]float32, len(in.Beta))
		for i, b := range in.Beta {
			st.beta[i] = float32(1 / (1 + math.Exp(-float64(b))))
		}
	}
	return st
}

// l2Normalised32 returns x with every run of dk elements (one key head of
// one token) divided by its L2 norm, in float32.
func l2Normalised32(x []float32, dk int) []float32 {
	y := make([]float32, len(x))
	for h := 0; h < len(x); h += dk {
		var ss float32
		for _, v := range x[h : h+dk] {
			ss += float32(v * v)
		}
		norm := float32(math.Sqrt(float64(float32(ss + l2Epsilon))))
		for j, v := range x[h : h+dk] {
			y[h+j] = v / norm
		}
	}
	return y
}

// fused64 is [fused32] in float64, on q and k (the inputs widened, or the
// convolution's float64 output; normalised in place) and the float32 gate
// inputs; the parts p.Fused leaves out are the inputs widened.
func fused64(p spec.Params, in Inputs, q, k []float64) step[float64] {
	st := step[float64]{q: q, k: k, g: Widen(in.G), beta: Widen(in.Beta)}
	if p.Fused.L2Norm {
		l2Normalise64(st.q, p.DK)
		l2Normalise64(st.k, p.DK)
	}
	if p.Fused.Gate {
		for i, a := range st.g {
			h := i % p.NVHeads
			st.g[i] = math.Exp(float64(in.ALog[h])) * softplus(a+float64(in.DtBias[h]))
		}
	}
	if p.Fused.Beta {
		for i, b := range st.beta {
			st.beta[i] = 1 / (1 + math.Exp(-b))
		}
	}
	return st
}

// l2Normalise64 divides every run of dk elements of x by its L2 norm, in
// place.
func l2Normalise64(x []float64, dk int) {
	for h := 0; h < len(x); h += dk {
		var ss float64
		for _, v := range x[h : h+dk] {
			ss += v * v
		}
		norm := math.Sqrt(ss + l2Epsilon)
		for j := range x[h : h+dk] {
			x[h+j] /= norm
		}
	}
}
