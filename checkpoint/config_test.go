package checkpoint_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/checkpoint"
)

// modelsDir is the whole-model golden set in the repository.
const modelsDir = "../testdata/golden/hf-models"

// TestReadConfigGolden reads the golden checkpoints' configs: the VL
// wrapper's text_config, rope_parameters, tied embeddings, token ids, MoE
// fields and MLX quantization with its overrides.
func TestReadConfigGolden(t *testing.T) {
	read := func(name string) *checkpoint.Config {
		c, err := checkpoint.ReadConfig(filepath.Join(modelsDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	hybrid := []string{checkpoint.LinearAttention, checkpoint.LinearAttention, checkpoint.LinearAttention, checkpoint.FullAttention}
	c := read("qwen35_dense_bf16")
	if c.ModelType != "qwen3_5_text" || !c.Wrapped || !c.Hybrid() || c.RopeTheta != 10000 || c.RotaryDim() != 16 ||
		!slices.Equal(c.LayerTypes, hybrid) || c.TieWordEmbeddings || c.NumExperts != 0 || c.IsMoELayer(0) ||
		c.LinearHeads() != (checkpoint.Heads{DK: 32, DV: 32, NKHeads: 2, NVHeads: 4}) || c.LinearConvKernel != 4 || c.DType != "bfloat16" {
		t.Errorf("qwen35_dense_bf16: %+v", c)
	}
	c = read("qwen3_dense_bf16")
	if c.ModelType != "qwen3" || c.Hybrid() || c.RopeTheta != 1e6 || c.RotaryDim() != 64 || !c.TieWordEmbeddings ||
		!slices.Equal(c.BOSTokenIDs, []int32{2048}) || !slices.Equal(c.EOSTokenIDs, []int32{2050}) || c.VocabSize != 2112 {
		t.Errorf("qwen3_dense_bf16: %+v", c)
	}
	c = read("qwen35moe_bf16")
	if c.ModelType != "qwen3_5_moe_text" || c.NumExperts != 8 || c.NumExpertsPerTok != 2 || !c.NormTopKProb ||
		c.MoEIntermediateSize != 64 || c.SharedExpertIntermediateSize != 64 || !c.IsMoELayer(0) || !c.IsMoELayer(3) {
		t.Errorf("qwen35moe_bf16: %+v", c)
	}
	c = read("qwen3next_moe_mlx4")
	q := c.Quantization
	if q == nil || q.Bits != 4 || q.GroupSize != 64 || q.For("model.layers.2.mlp.gate") != (checkpoint.QuantParams{Bits: 8, GroupSize: 64}) ||
		q.For("model.layers.2.mlp.switch_mlp.up_proj") != (checkpoint.QuantParams{Bits: 4, GroupSize: 64}) {
		t.Errorf("qwen3next_moe_mlx4 quantization: %+v", q)
	}
}

// qwen3Base is a small Qwen3 config.json, edited by the cases below.
func qwen3Base() map[string]any {
	return map[string]any{
		"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 4, "vocab_size": 100, "intermediate_size": 96,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-5,
	}
}

// hybridBase is a small text-only Qwen3.5 config.json.
func hybridBase() map[string]any {
	m := qwen3Base()
	m["model_type"] = "qwen3_5_text"
	for k, v := range map[string]any{"linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_num_key_heads": 2, "linear_num_value_heads": 4} {
		m[k] = v
	}
	return m
}

func parse(t *testing.T, m map[string]any, edits map[string]any) (*checkpoint.Config, error) {
	t.Helper()
	for k, v := range edits {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return checkpoint.ParseConfig(data)
}

// TestParseConfigDefaults checks HF's derivations: layer_types from
// full_attention_interval, RoPE's precedence (rope_parameters, then the
// top-level fields, then the type's default) and the MoE layer rule.
func TestParseConfigDefaults(t *testing.T) {
	L, F := checkpoint.LinearAttention, checkpoint.FullAttention
	for _, c := range []struct {
		name   string
		base   map[string]any
		edits  map[string]any
		check  func(*checkpoint.Config) bool
		expect string
	}{
		{"interval", hybridBase(), map[string]any{"full_attention_interval": 2},
			func(c *checkpoint.Config) bool { return slices.Equal(c.LayerTypes, []string{L, F, L, F}) }, "layer_types [L F L F]"},
		{"interval default", hybridBase(), nil,
			func(c *checkpoint.Config) bool { return slices.Equal(c.LayerTypes, []string{L, L, L, F}) }, "layer_types [L L L F]"},
		{"qwen3 layers", qwen3Base(), nil,
			func(c *checkpoint.Config) bool { return slices.Equal(c.LayerTypes, []string{F, F, F, F}) }, "all full attention"},
		{"hybrid rope defaults", hybridBase(), nil,
			func(c *checkpoint.Config) bool { return c.RopeTheta == 10000 && c.PartialRotaryFactor == 0.25 }, "theta 10000, factor 0.25"},
		{"top-level rope", hybridBase(), map[string]any{"rope_theta": 5e6, "partial_rotary_factor": 0.5},
			func(c *checkpoint.Config) bool { return c.RopeTheta == 5e6 && c.RotaryDim() == 8 }, "theta 5e6, rotary 8"},
		{"rope_parameters first", hybridBase(), map[string]any{"rope_theta": 5e6, "partial_rotary_factor": 0.5, "rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 1.0}},
			func(c *checkpoint.Config) bool { return c.RopeTheta == 1e6 && c.RotaryDim() == 16 }, "theta 1e6, rotary 16"},
		{"rope_parameters partial", hybridBase(), map[string]any{"rope_theta": 5e6, "rope_parameters": map[string]any{"rope_type": "default"}},
			func(c *checkpoint.Config) bool { return c.RopeTheta == 5e6 && c.RotaryDim() == 4 }, "theta 5e6 from the top level, rotary 4"},
		{"qwen3 rope", qwen3Base(), nil,
			func(c *checkpoint.Config) bool { return c.RotaryDim() == 16 && c.RMSNormEps == 1e-5 }, "rotary 16 (factor 1), eps 1e-5"},
		{"moe layers", qwen3Base(), map[string]any{"model_type": "qwen3_moe", "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "decoder_sparse_step": 2, "mlp_only_layers": []int{3}},
			func(c *checkpoint.Config) bool {
				return !c.IsMoELayer(0) && c.IsMoELayer(1) && !c.IsMoELayer(2) && !c.IsMoELayer(3) && c.NormTopKProb && c.SharedExpertIntermediateSize == 0
			}, "MoE layers {1}, norm_topk_prob true, no shared expert"},
		{"eos list", qwen3Base(), map[string]any{"eos_token_id": []int32{7, 9}, "bos_token_id": nil},
			func(c *checkpoint.Config) bool {
				return slices.Equal(c.EOSTokenIDs, []int32{7, 9}) && c.BOSTokenIDs == nil
			}, "eos [7 9], no bos"},
		{"mlx quantization_config", qwen3Base(), map[string]any{"quantization_config": map[string]any{"bits": 8, "group_size": 32}},
			func(c *checkpoint.Config) bool {
				return c.Quantization != nil && c.Quantization.Bits == 8 && c.Quantization.GroupSize == 32
			}, "8 bits, group 32"},
		{"kv heads default", qwen3Base(), map[string]any{"num_key_value_heads": nil, "head_dim": nil},
			func(c *checkpoint.Config) bool { return c.NumKVHeads == 4 && c.HeadDim == 16 }, "4 KV heads, head_dim 64/4"},
	} {
		cfg, err := parse(t, c.base, c.edits)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !c.check(cfg) {
			t.Errorf("%s: %+v, want %s", c.name, cfg, c.expect)
		}
	}
}

// TestParseConfigRefuses checks that a config this package cannot run is
// an error matching ErrConfig that names the field and its value.
func TestParseConfigRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		base  map[string]any
		edits map[string]any
		want  string
	}{
		{"unknown type", qwen3Base(), map[string]any{"model_type": "llama"}, `"llama"`},
		{"layers", qwen3Base(), map[string]any{"num_hidden_layers": 1 << 40}, "num_hidden_layers is 1099511627776"},
		{"no hidden size", qwen3Base(), map[string]any{"hidden_size": nil}, "hidden_size is 0"},
		{"no linear heads", hybridBase(), map[string]any{"linear_num_key_heads": nil}, "linear_num_key_heads is 0"},
		{"layer types count", qwen3Base(), map[string]any{"layer_types": []string{"full_attention"}}, "layer_types has 1 entries"},
		{"linear layer in qwen3", qwen3Base(), map[string]any{"layer_types": []string{"full_attention", "linear_attention", "full_attention", "full_attention"}}, `layer_types[1] is "linear_attention"`},
		{"gqa", qwen3Base(), map[string]any{"num_key_value_heads": 3}, "num_key_value_heads 3"},
		{"rotary", hybridBase(), map[string]any{"partial_rotary_factor": 0.3}, "partial_rotary_factor 0.3"},
		{"rope type", qwen3Base(), map[string]any{"rope_parameters": map[string]any{"rope_type": "yarn", "factor": 4}}, `"yarn"`},
		{"wrapper", qwen3Base(), map[string]any{"model_type": "qwen3_5"}, "no text_config"},
		{"quant bits", qwen3Base(), map[string]any{"quantization": map[string]any{"bits": 7, "group_size": 64}}, "bits 7"},
		{"quant override", qwen3Base(), map[string]any{"quantization": map[string]any{"bits": 4, "group_size": 64, "model.layers.0.mlp.gate": map[string]any{"bits": 8, "group_size": 0}}}, "model.layers.0.mlp.gate: group_size 0"},
		{"top k", qwen3Base(), map[string]any{"model_type": "qwen3_moe", "num_experts": 2, "num_experts_per_tok": 3, "moe_intermediate_size": 8}, "num_experts_per_tok 3"},
		{"eos", qwen3Base(), map[string]any{"eos_token_id": "x"}, "eos_token_id"},
		{"gptq", qwen3Base(), map[string]any{"quantization_config": map[string]any{"quant_method": "gptq", "bits": 4}}, `quant_method "gptq"`},
		{"bias", qwen3Base(), map[string]any{"attention_bias": true}, "attention_bias"},
		{"act", qwen3Base(), map[string]any{"hidden_act": "gelu"}, `"gelu"`},
		{"sliding", qwen3Base(), map[string]any{"use_sliding_window": true}, "use_sliding_window"},
	} {
		_, err := parse(t, c.base, c.edits)
		if !errors.Is(err, checkpoint.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error matching ErrConfig saying %s", c.name, err, c.want)
		}
	}
}

// FuzzParseConfig feeds ParseConfig arbitrary JSON: an error or a config
// whose derived sizes are usable, never a panic.
func FuzzParseConfig(f *testing.F) {
	for _, name := range []string{"qwen35_dense_bf16", "qwen35moe_bf16", "qwen3_dense_bf16", "qwen3next_moe_mlx4"} {
		data, err := os.ReadFile(filepath.Join(modelsDir, name, "config.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"model_type": "qwen3_moe", "hidden_size": 8, "num_hidden_layers": 2, "vocab_size": 4, "num_attention_heads": 2, "num_key_value_heads": 0, "num_experts": 2, "decoder_sparse_step": 0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := checkpoint.ParseConfig(data)
		if err != nil {
			if !errors.Is(err, checkpoint.ErrConfig) {
				t.Fatalf("error %v does not match ErrConfig", err)
			}
			return
		}
		if len(c.LayerTypes) != c.NumLayers || c.HiddenSize <= 0 {
			t.Fatalf("accepted %+v", c)
		}
		for i := range c.NumLayers {
			c.IsMoELayer(i)
		}
	})
}
