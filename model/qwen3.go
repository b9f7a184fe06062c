package model

// Qwen3 (dense and MoE): every layer full attention, no output gate.
func init() { register(architecture{}, "qwen3", "qwen3_moe") }
