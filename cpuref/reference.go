package cpuref

import (
	"math"
	"slices"

	"github.com/puremetal/puremetal/gdn/spec"
)

// Reference32 runs the recurrence in float32 in the kernels' per-element
// order. For every sequence s, value head h and token t, each row i of S
// (D_k contiguous floats) is updated as
//
//	alpha    = exp(-g[t])                     computed in float64, rounded once
//	S[i][j]  = alpha * S[i][j]                decay first
//	delta_i  = beta[t] * (v[t]_i - sum_j S[i][j] * k[t]_j)
//	S[i][j]  = S[i][j] + delta_i * k[t]_j
//	out[t]_i = scale * sum_j S[i][j] * q[t]_j
//
// Sums run over j in increasing order from 0 and accumulate in float32;
// every product is rounded to float32 before it is added, so no platform
// fuses a multiply-add and the order of operations is fixed. The scale
// (p.Scale()) multiplies the finished sum at write-back. Value head h reads
// q and k from key head p.HeadMap.KeyHead(h, n_k_heads, n_v_heads).
//
// The step's inputs are first computed as p.Fused says (in float32; see
// the package documentation). The output is rounded to p.Activation once,
// after the scale; StateOut and every capture slot are rounded to p.State
// when written, while the state the next token reads stays float32.
//
// With capture set, Result.Capture holds the state after every token;
// its last token's slot equals StateOut bit for bit.
//
// With p.Core (SPEC section 13) the convolution first turns mixed_qkv into
// q, k and v and the gated norm then turns each value head's output into
// y, both in float32 ([conv32], [gatedNorm32]); y is rounded once.
func Reference32(p spec.Params, in Inputs, capture bool) (Result, error) {
	if err := in.Validate(p); err != nil {
		return Result{}, err
	}
	dk, dv := p.DK, p.DV
	res := Result{
		Output:   make([]float32, p.VLen()),
		StateOut: make([]float32, p.StateLen()),
	}
	if capture {
		res.Capture = make([]float32, p.CaptureLen())
	}
	v := in.V
	if p.Core.Conv > 0 {
		res.ConvState = slices.Clone(in.ConvState)
		in.Q, in.K, v = conv32(p, in, res.ConvState)
	}
	scale := p.Scale()
	x := fused32(p, in)
	copy(res.StateOut, in.StateIn)
	o := make([]float32, dv)
	for _, r := range headRuns(p, in) {
		S := res.StateOut[r.st : r.st+dv*dk]
		for t := r.tok0; t < r.tok0+r.n; t++ {
			qk, vo, gi := r.at(p, t)
			q := x.q[qk : qk+dk]
			k := x.k[qk : qk+dk]
			v := v[vo : vo+dv]
			alpha := float32(math.Exp(-float64(x.g[gi])))
			beta := x.beta[gi]
			for i := 0; i < dv; i++ {
				row := S[i*dk : (i+1)*dk]
				for j := range row {
					row[j] = float32(alpha * row[j])
				}
				var sk float32
				for j := range row {
					sk += float32(row[j] * k[j])
				}
				delta := float32(beta * float32(v[i]-sk))
				for j := range row {
					row[j] += float32(delta * k[j])
				}
				var sq float32
				for j := range row {
					sq += float32(row[j] * q[j])
				}
				o[i] = float32(scale * sq)
			}
			if p.Core.Norm {
				gatedNorm32(p, o, in.Z[vo:vo+dv], in.NormWeight)
			}
			for i, oi := range o {
				res.Output[vo+i] = round(p.Activation, oi)
			}
			if capture {
				co := gi * dv * dk
				copy(res.Capture[co:co+dv*dk], S)
				Round(p.State, res.Capture[co:co+dv*dk])
			}
		}
		Round(p.State, S)
	}
	return res, nil
}
