package cpuref

import (
	"math"

	"github.com/puremetal/puremetal/checkpoint"
)

// attention64 is a full-attention layer in float64.
type attention64 struct {
	nHeads, nKV, d, rotary int
	gated                  bool // q_proj emits per head [query | gate] (Qwen3-Next, Qwen3.5)
	q, k, v, o             []float64
	qNorm, kNorm           norm64
}

func loadAttention64(l *loader, c *checkpoint.Config, p func(string) string) *attention64 {
	return &attention64{nHeads: c.NumHeads, nKV: c.NumKVHeads, d: c.HeadDim, rotary: c.RotaryDim(), gated: c.Hybrid(),
		q: l.get(p("self_attn.q_proj.weight")), k: l.get(p("self_attn.k_proj.weight")),
		v: l.get(p("self_attn.v_proj.weight")), o: l.get(p("self_attn.o_proj.weight")),
		qNorm: l.norm(p("self_attn.q_norm.weight")), kNorm: l.norm(p("self_attn.k_norm.weight"))}
}

// forward runs the layer on x [n][hidden] at positions pos, appending the
// tokens' keys (after RoPE) and values to the KV cache lc:
//
//	q, gate = q_proj x (per head [query | gate]); k = k_proj x; v = v_proj x
//	q, k = RMSNorm per head; RoPE on the first rotary dimensions
//	y = o_proj(softmax(q k^T / sqrt(head_dim)) v * sigmoid(gate))
func (at *attention64) forward(x []float64, lc *layerCache64, pos []int, invFreq []float64, eps float64) []float64 {
	n := len(pos)
	hid := len(x) / n
	qw, kw := at.nHeads*at.d, at.nKV*at.d
	qRows := qw
	if at.gated {
		qRows *= 2
	}
	qg := Linear64(x, at.q, qRows, hid)
	q, gate := qg, []float64(nil)
	if at.gated {
		q, gate = make([]float64, n*qw), make([]float64, n*qw)
		for t := 0; t < n; t++ {
			for h := 0; h < at.nHeads; h++ {
				src := qg[t*qRows+h*2*at.d:]
				copy(q[t*qw+h*at.d:], src[:at.d])
				copy(gate[t*qw+h*at.d:], src[at.d:2*at.d])
			}
		}
	}
	q = at.qNorm.apply(q, eps)
	k := at.kNorm.apply(Linear64(x, at.k, kw, hid), eps)
	RoPE64(q, at.nHeads, at.d, at.rotary, pos, invFreq)
	RoPE64(k, at.nKV, at.d, at.rotary, pos, invFreq)
	lc.k = append(lc.k, k...)
	lc.v = append(lc.v, Linear64(x, at.v, kw, hid)...)
	y := Attention64(q, lc.k, lc.v, at.nHeads, at.nKV, at.d, pos, 1/math.Sqrt(float64(at.d)))
	if at.gated {
		sigmoidAll(gate)
		for i := range y {
			y[i] *= gate[i]
		}
	}
	return Linear64(y, at.o, hid, qw)
}
