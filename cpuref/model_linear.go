package cpuref

import (
	"fmt"
	"math"

	"github.com/puremetal/puremetal/checkpoint"
)

// linear64 is a Gated DeltaNet layer (SPEC sections 10, 13) in float64,
// its projections' rows in the layer core's order whatever the checkpoint.
type linear64 struct {
	heads          checkpoint.Heads
	hid, k         int       // the model's hidden size; the convolution's kernel size
	qkv, z, b, a   []float64 // [conv_dim | n_v D_v | n_v | n_v][hidden]
	conv           []float64 // [conv_dim][K]
	aLog, dtBias   []float64 // [n_v]
	normW, outProj []float64 // [D_v]; [hidden][n_v D_v]
}

func loadLinear64(l *loader, c *checkpoint.Config, p func(string) string) (*linear64, error) {
	h := c.LinearHeads()
	cd := h.ConvDim()
	lin := &linear64{heads: h, hid: c.HiddenSize, k: c.LinearConvKernel,
		conv: l.get(p("linear_attn.conv1d.weight")), aLog: l.get(p("linear_attn.A_log")), dtBias: l.get(p("linear_attn.dt_bias")),
		normW: l.get(p("linear_attn.norm.weight")), outProj: l.get(p("linear_attn.out_proj.weight"))}
	if c.ModelType != "qwen3_next" {
		lin.qkv, lin.z = l.get(p("linear_attn.in_proj_qkv.weight")), l.get(p("linear_attn.in_proj_z.weight"))
		lin.b, lin.a = l.get(p("linear_attn.in_proj_b.weight")), l.get(p("linear_attn.in_proj_a.weight"))
		return lin, l.err
	}
	// Qwen3-Next groups in_proj_qkvz's and in_proj_ba's rows per key head:
	// permute them to the core's order once.
	qkvz, ba := l.get(p("linear_attn.in_proj_qkvz.weight")), l.get(p("linear_attn.in_proj_ba.weight"))
	if l.err != nil {
		return nil, l.err
	}
	hid := c.HiddenSize
	rows, err := checkpoint.QKVZRows(h)
	if err != nil {
		return nil, err
	}
	if qkvz, err = checkpoint.Permute(qkvz, hid, rows); err != nil {
		return nil, fmt.Errorf("cpuref: %s: %w", p("linear_attn.in_proj_qkvz.weight"), err)
	}
	baRows, _ := checkpoint.BARows(h)
	if ba, err = checkpoint.Permute(ba, hid, baRows); err != nil {
		return nil, fmt.Errorf("cpuref: %s: %w", p("linear_attn.in_proj_ba.weight"), err)
	}
	lin.qkv, lin.z = qkvz[:cd*hid], qkvz[cd*hid:]
	lin.b, lin.a = ba[:h.NVHeads*hid], ba[h.NVHeads*hid:]
	return lin, nil
}

// forward runs the layer on x [n][hidden] for the sequence whose conv and
// recurrent states lc holds, updating them:
//
//	mixed = in_proj_qkv x; u = silu(causal depthwise conv(mixed))
//	q, k = L2-normalised per key head (q also scaled by 1/sqrt(D_k)); v
//	g = -exp(A_log) softplus(a + dt_bias); beta = sigmoid(b)
//	S = exp(g) S; S += beta (v - S k) k^T; o = S q     per value head
//	y = out_proj(norm_w * o / sqrt(mean(o^2) + eps) * silu(z))
//
// Value head h reads key head h / (n_v / n_k) (HF's repeat_interleave).
func (lin *linear64) forward(x []float64, lc *layerCache64, eps float64) []float64 {
	h, hid := lin.heads, lin.hid
	n := len(x) / hid
	cd, vd := h.ConvDim(), h.NVHeads*h.DV
	mixed := Linear64(x, lin.qkv, cd, hid)
	z := Linear64(x, lin.z, vd, hid)
	b := Linear64(x, lin.b, h.NVHeads, hid)
	a := Linear64(x, lin.a, h.NVHeads, hid)
	u := lin.convolve(mixed, lc.conv)
	r := h.NVHeads / h.NKHeads
	scale := 1 / math.Sqrt(float64(h.DK))
	o := make([]float64, n*vd)
	for t := 0; t < n; t++ {
		ut := u[t*cd : (t+1)*cd]
		q := ut[:h.NKHeads*h.DK]
		k := ut[h.NKHeads*h.DK : 2*h.NKHeads*h.DK]
		v := ut[2*h.NKHeads*h.DK:]
		l2Normalise64(q, h.DK)
		l2Normalise64(k, h.DK)
		for hv := 0; hv < h.NVHeads; hv++ {
			kh := hv / r
			qh, khv := q[kh*h.DK:(kh+1)*h.DK], k[kh*h.DK:(kh+1)*h.DK]
			g := -math.Exp(lin.aLog[hv]) * softplus(a[t*h.NVHeads+hv]+lin.dtBias[hv])
			beta := Sigmoid64(b[t*h.NVHeads+hv])
			S := lc.state[hv*h.DV*h.DK : (hv+1)*h.DV*h.DK]
			oh := o[t*vd+hv*h.DV : t*vd+(hv+1)*h.DV]
			deltaStep64(S, qh, khv, v[hv*h.DV:(hv+1)*h.DV], math.Exp(g), beta, scale, oh)
			gated := RMSNorm64(oh, lin.normW, eps, 0)
			for i := range oh {
				oh[i] = gated[i] * SiLU64(z[t*vd+hv*h.DV+i])
			}
		}
	}
	return Linear64(o, lin.outProj, hid, vd)
}

// deltaStep64 is one token of the gated delta rule on one value head's
// state S [D_v][D_k]: decay, the delta update, the read-out o = scale S q.
func deltaStep64(S, q, k, v []float64, decay, beta, scale float64, o []float64) {
	dk := len(k)
	for i := range v {
		row := S[i*dk : (i+1)*dk]
		for j := range row {
			row[j] *= decay
		}
		delta := beta * (v[i] - dot64(row, k))
		for j := range row {
			row[j] += delta * k[j]
		}
		o[i] = scale * dot64(row, q)
	}
}

// convolve is the causal depthwise convolution of mixed [n][conv_dim]
// with silu, reading the K-1 inputs before the first token from state
// [K-1][conv_dim] (oldest first) and leaving the newest K-1 inputs there.
func (lin *linear64) convolve(mixed, state []float64) []float64 {
	cd, kk := lin.heads.ConvDim(), lin.k
	n := len(mixed) / cd
	window := append(append([]float64(nil), state...), mixed...) // [K-1+n][conv_dim]
	u := make([]float64, n*cd)
	for t := 0; t < n; t++ {
		for c := 0; c < cd; c++ {
			var acc float64
			for j := 0; j < kk; j++ {
				acc += lin.conv[c*kk+j] * window[(t+j)*cd+c]
			}
			u[t*cd+c] = SiLU64(acc)
		}
	}
	copy(state, window[n*cd:])
	return u
}
