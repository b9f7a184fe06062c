package checkpoint

import (
	"fmt"
	"slices"
)

// expected returns every weight the config implies, by canonical name,
// with its logical shape.
func (c *Config) expected() map[string][]int {
	h, d := c.HiddenSize, c.HeadDim
	want := map[string][]int{
		"model.embed_tokens.weight": {c.VocabSize, h},
		"model.norm.weight":         {h},
		"lm_head.weight":            {c.VocabSize, h},
	}
	add := func(i int, rest string, shape ...int) { want[layerName(i, rest)] = shape }
	mlp := func(i int, prefix string, inter int) {
		add(i, prefix+"gate_proj.weight", inter, h)
		add(i, prefix+"up_proj.weight", inter, h)
		add(i, prefix+"down_proj.weight", h, inter)
	}
	for i, t := range c.LayerTypes {
		add(i, "input_layernorm.weight", h)
		add(i, "post_attention_layernorm.weight", h)
		if t == LinearAttention {
			lh := c.LinearHeads()
			nv, vd, cd := lh.NVHeads, lh.NVHeads*lh.DV, lh.ConvDim()
			if c.ModelType == "qwen3_next" {
				add(i, "linear_attn.in_proj_qkvz.weight", cd+vd, h)
				add(i, "linear_attn.in_proj_ba.weight", 2*nv, h)
			} else {
				add(i, "linear_attn.in_proj_qkv.weight", cd, h)
				add(i, "linear_attn.in_proj_z.weight", vd, h)
				add(i, "linear_attn.in_proj_b.weight", nv, h)
				add(i, "linear_attn.in_proj_a.weight", nv, h)
			}
			add(i, "linear_attn.conv1d.weight", cd, c.LinearConvKernel)
			add(i, "linear_attn.A_log", nv)
			add(i, "linear_attn.dt_bias", nv)
			add(i, "linear_attn.norm.weight", lh.DV)
			add(i, "linear_attn.out_proj.weight", h, vd)
		} else {
			q := c.NumHeads * d
			if c.Hybrid() {
				q *= 2 // per head [query | gate]
			}
			add(i, "self_attn.q_proj.weight", q, h)
			add(i, "self_attn.k_proj.weight", c.NumKVHeads*d, h)
			add(i, "self_attn.v_proj.weight", c.NumKVHeads*d, h)
			add(i, "self_attn.o_proj.weight", h, c.NumHeads*d)
			add(i, "self_attn.q_norm.weight", d)
			add(i, "self_attn.k_norm.weight", d)
		}
		if !c.IsMoELayer(i) {
			mlp(i, "mlp.", c.IntermediateSize)
			continue
		}
		add(i, "mlp.gate.weight", c.NumExperts, h)
		for e := 0; e < c.NumExperts; e++ {
			mlp(i, fmt.Sprintf("mlp.experts.%d.", e), c.MoEIntermediateSize)
		}
		if c.SharedExpertIntermediateSize > 0 {
			mlp(i, "mlp.shared_expert.", c.SharedExpertIntermediateSize)
			add(i, "mlp.shared_expert_gate.weight", 1, h)
		}
	}
	return want
}

// floatDTypes are the dtypes a weight that is not quantized may have.
var floatDTypes = []string{"F32", "F16", "BF16"}

// check verifies that every weight the config implies is there with its
// shape, and unquantized weights hold floats.
func (m *Model) check() error {
	want := m.Config.expected()
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		w, ok := m.weights[n]
		if !ok {
			if n == "lm_head.weight" {
				return fmt.Errorf("%w: no tensor lm_head.weight, and tie_word_embeddings is false", ErrTensors)
			}
			return fmt.Errorf("%w: no tensor %s (model_type %s implies it, shape %v)", ErrTensors, n, m.Config.ModelType, want[n])
		}
		if !slices.Equal(w.Shape, want[n]) {
			return fmt.Errorf("%w: tensor %s has shape %v (stored %s %v), the config implies %v", ErrTensors, n, w.Shape, w.Data.DType, w.Data.Shape, want[n])
		}
		if !w.Quantized() && !slices.Contains(floatDTypes, w.Data.DType) {
			return fmt.Errorf("%w: tensor %s is %s, want F32, F16 or BF16 (or a quantized U32 with scales and biases)", ErrTensors, n, w.Data.DType)
		}
	}
	return nil
}
