package cpuref

import (
	"math"

	"github.com/puremetal/puremetal/gdn/spec"
)

// validCore checks the buffers of the layer core against p.Core: each set
// exactly when its part is on, with the element count the shape implies
// and values of p.Activation.
func (in Inputs) validCore(p spec.Params) error {
	conv, norm := p.Core.Conv > 0, p.Core.Norm
	bufs := []struct {
		name string
		x    []float32
		on   bool
		want int
		part string
	}{
		{"mixed_qkv", in.MixedQKV, conv, p.MixedLen(), "Params.Core.Conv"},
		{"conv_weight", in.ConvWeight, conv, p.ConvWeightLen(), "Params.Core.Conv"},
		{"conv_state", in.ConvState, conv, p.ConvStateLen(), "Params.Core.Conv"},
		{"z", in.Z, norm, p.ZLen(), "Params.Core.Norm"},
		{"norm_weight", in.NormWeight, norm, p.DV, "Params.Core.Norm"},
	}
	for _, b := range bufs {
		switch {
		case !b.on && len(b.x) != 0:
			return invalidf("%s has %d elements but %s is off", b.name, len(b.x), b.part)
		case b.on && len(b.x) != b.want:
			return invalidf("%s has %d elements, shape %v with %s needs %d", b.name, len(b.x), p.Shape, b.part, b.want)
		}
		if i := unrepresentable(p.Activation, b.x); i >= 0 {
			return invalidf("%s[%d] = %v is not a value of Params.Activation = %v; round the inputs with Round", b.name, i, b.x[i], p.Activation)
		}
	}
	return nil
}

// convWindow is one sequence's view of the convolution's inputs: the K-1
// inputs of its conv state, then its tokens of mixed_qkv.
type convWindow struct {
	mixed, state  []float32 // mixed_qkv; the conv state of the sequence ([conv_dim, K-1])
	tok0, cd, km1 int
}

// at returns input channel c at the sequence's token t, t >= -(K-1): from
// the conv state for t < 0 (t = -1 the newest).
func (w convWindow) at(c, t int) float32 {
	if t < 0 {
		return w.state[(w.km1+t)*w.cd+c]
	}
	return w.mixed[(w.tok0+t)*w.cd+c]
}

// shift writes the conv state after the sequence's n tokens to w.state:
// the newest K-1 inputs of the window, which keeps part of the old state
// when n < K-1.
func (w convWindow) shift(n int) {
	next := make([]float32, len(w.state))
	for j := 0; j < w.km1; j++ {
		t := n - w.km1 + j
		for c := 0; c < w.cd; c++ {
			next[j*w.cd+c] = w.at(c, t)
		}
	}
	copy(w.state, next)
}

// convSplit maps channel c of one token to the buffer and index of q, k
// or v it lands in.
func convSplit[F float32 | float64](p spec.Params, q, k, v []F, tok, c int) (dst []F, i int) {
	qk := p.NKHeads * p.DK
	switch {
	case c < qk:
		return q, tok*qk + c
	case c < 2*qk:
		return k, tok*qk + c - qk
	}
	return v, tok*p.NVHeads*p.DV + c - 2*qk
}

// conv32 runs the depthwise causal convolution of every sequence that is
// not padding, in float32, and returns q, k and v in their usual layouts;
// it writes each sequence's new conv state into cs (a copy of in.ConvState)
// in place. Per channel c and token t:
//
//	acc  = sum_{j=0..K-1} w[c][j] * x_c(t-K+1+j)   j increasing, each product rounded
//	u    = silu(acc) = acc / (1 + exp(-acc))      in float64, rounded once
//
// The tokens of padding are left zero (no recurrence reads them).
func conv32(p spec.Params, in Inputs, cs []float32) (q, k, v []float32) {
	q, k, v = make([]float32, p.QKLen()), make([]float32, p.QKLen()), make([]float32, p.VLen())
	kk, cd := p.Core.Conv, p.ConvDim()
	for _, sq := range sequences(p, in) {
		if sq.skip {
			continue
		}
		w := convWindow{mixed: in.MixedQKV, state: cs[sq.state*(kk-1)*cd : (sq.state+1)*(kk-1)*cd], tok0: sq.tok0, cd: cd, km1: kk - 1}
		for t := 0; t < sq.n; t++ {
			for c := 0; c < cd; c++ {
				var acc float32
				for j := 0; j < kk; j++ {
					acc += float32(in.ConvWeight[c*kk+j] * w.at(c, t-kk+1+j))
				}
				dst, i := convSplit(p, q, k, v, sq.tok0+t, c)
				dst[i] = float32(float64(acc) / (1 + math.Exp(-float64(acc))))
			}
		}
		w.shift(sq.n)
	}
	return q, k, v
}

// conv64 is [conv32] in float64: the convolution's sums and silu, from
// the same inputs; cs is the conv state, widened, updated in place.
func conv64(p spec.Params, in Inputs, cs []float64) (q, k, v []float64) {
	q, k, v = make([]float64, p.QKLen()), make([]float64, p.QKLen()), make([]float64, p.VLen())
	kk, cd := p.Core.Conv, p.ConvDim()
	for _, sq := range sequences(p, in) {
		if sq.skip {
			continue
		}
		st := in.ConvState[sq.state*(kk-1)*cd : (sq.state+1)*(kk-1)*cd]
		w := convWindow{mixed: in.MixedQKV, state: append([]float32(nil), st...), tok0: sq.tok0, cd: cd, km1: kk - 1}
		for t := 0; t < sq.n; t++ {
			for c := 0; c < cd; c++ {
				var acc float64
				for j := 0; j < kk; j++ {
					acc += float64(in.ConvWeight[c*kk+j]) * float64(w.at(c, t-kk+1+j))
				}
				dst, i := convSplit(p, q, k, v, sq.tok0+t, c)
				dst[i] = acc / (1 + math.Exp(-acc))
			}
		}
		w.shift(sq.n)
		for i, x := range w.state {
			cs[sq.state*(kk-1)*cd+i] = float64(x)
		}
	}
	return q, k, v
}

// gatedNorm32 replaces the output o of one value head and token (D_v
// floats, scaled, not rounded) by the gated RMSNorm of SPEC section 13,
// in float32:
//
//	ss  = sum_i o_i^2                          i increasing, each square rounded
//	r   = 1 / sqrt(ss / D_v + eps)             in float64, rounded once
//	y_i = ((o_i * r) * norm_w[i]) * act(z_i)   act in float64, rounded once
func gatedNorm32(p spec.Params, o, z, w []float32) {
	var ss float32
	for _, x := range o {
		ss += float32(x * x)
	}
	mean := ss / float32(len(o))
	r := float32(1 / math.Sqrt(float64(mean+p.Core.NormEps)))
	for i, x := range o {
		act := float32(normGate(p.Core.NormGate, float64(z[i])))
		o[i] = float32(float32(float32(x*r)*w[i]) * act)
	}
}

// gatedNorm64 is the gated RMSNorm in float64:
// y = norm_w * o / sqrt(mean(o^2) + eps) * act(z).
func gatedNorm64(p spec.Params, o []float64, z, w []float32) {
	var ss float64
	for _, x := range o {
		ss += x * x
	}
	d := math.Sqrt(ss/float64(len(o)) + float64(p.Core.NormEps))
	for i, x := range o {
		o[i] = float64(w[i]) * x / d * normGate(p.Core.NormGate, float64(z[i]))
	}
}

// normGate returns act(z): silu(z) = z / (1 + exp(-z)) or sigmoid(z) =
// 1 / (1 + exp(-z)).
func normGate(g spec.NormGate, z float64) float64 {
	if g == spec.GateSigmoid {
		return 1 / (1 + math.Exp(-z))
	}
	return z / (1 + math.Exp(-z))
}
