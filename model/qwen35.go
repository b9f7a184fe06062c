package model

import "github.com/puremetal/puremetal/checkpoint"

// Qwen3.5 (dense and MoE): Gated DeltaNet layers with the input
// projections stored apart in the core's order, gated attention.
func init() {
	register(architecture{gatedAttention: true, linearProjections: func(w *weights, _ checkpoint.Heads, p string) (qkv, z, b, a linear) {
		return w.linear(p + "in_proj_qkv.weight"), w.linear(p + "in_proj_z.weight"), w.linear(p + "in_proj_b.weight"), w.linear(p + "in_proj_a.weight")
	}}, "qwen3_5_text", "qwen3_5_moe_text")
}
