package cpuref

import (
	"fmt"

	"github.com/puremetal/puremetal/checkpoint"
)

// swiglu64 is a SwiGLU feed-forward block: down(silu(gate x) * up x).
type swiglu64 struct {
	inter, hid     int
	gate, up, down []float64
}

func loadSwiGLU64(l *loader, prefix string, inter, hid int) swiglu64 {
	return swiglu64{inter: inter, hid: hid, gate: l.get(prefix + "gate_proj.weight"), up: l.get(prefix + "up_proj.weight"), down: l.get(prefix + "down_proj.weight")}
}

func (f swiglu64) forward(x []float64) []float64 {
	return Linear64(SwiGLU64(Linear64(x, f.gate, f.inter, f.hid), Linear64(x, f.up, f.inter, f.hid)), f.down, f.hid, f.inter)
}

// mlp64 is a layer's MLP: dense, or a mixture of experts (router, experts
// and, where the model has one, the shared expert and its sigmoid gate).
type mlp64 struct {
	dense      *swiglu64
	router     []float64 // [experts][hidden]
	experts    []swiglu64
	topK       int
	normTopK   bool
	shared     *swiglu64
	sharedGate []float64 // [1][hidden]
}

func loadMLP64(l *loader, c *checkpoint.Config, i int, p func(string) string) mlp64 {
	hid := c.HiddenSize
	if !c.IsMoELayer(i) {
		d := loadSwiGLU64(l, p("mlp."), c.IntermediateSize, hid)
		return mlp64{dense: &d}
	}
	m := mlp64{router: l.get(p("mlp.gate.weight")), topK: c.NumExpertsPerTok, normTopK: c.NormTopKProb}
	for e := 0; e < c.NumExperts; e++ {
		m.experts = append(m.experts, loadSwiGLU64(l, p(fmt.Sprintf("mlp.experts.%d.", e)), c.MoEIntermediateSize, hid))
	}
	if c.SharedExpertIntermediateSize > 0 {
		s := loadSwiGLU64(l, p("mlp.shared_expert."), c.SharedExpertIntermediateSize, hid)
		m.shared, m.sharedGate = &s, l.get(p("mlp.shared_expert_gate.weight"))
	}
	return m
}

// forward runs the MLP on x [n][hidden]. An MoE layer routes each token on
// its own ([Route64]): y = sum_e w_e expert_e(x) + sigmoid(shared_gate x)
// shared(x).
func (m mlp64) forward(x []float64) []float64 {
	if m.dense != nil {
		return m.dense.forward(x)
	}
	hid := len(m.router) / len(m.experts)
	n := len(x) / hid
	logits := Linear64(x, m.router, len(m.experts), hid)
	y := make([]float64, len(x))
	for t := 0; t < n; t++ {
		xt := x[t*hid : (t+1)*hid]
		yt := y[t*hid : (t+1)*hid]
		experts, weights := Route64(logits[t*len(m.experts):(t+1)*len(m.experts)], m.topK, m.normTopK)
		for i, e := range experts {
			for j, v := range m.experts[e].forward(xt) {
				yt[j] += weights[i] * v
			}
		}
		if m.shared != nil {
			g := Sigmoid64(dot64(xt, m.sharedGate))
			for j, v := range m.shared.forward(xt) {
				yt[j] += g * v
			}
		}
	}
	return y
}
