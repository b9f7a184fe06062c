package cpuref_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/checkpoint"
)

// TestModel64Qwen3MoEOneExpert checks the Qwen3-MoE path (no shared
// expert), which no golden case covers, against the dense model it must
// equal: the golden Qwen3's MLPs made the single expert of an MoE layer
// (router of one expert, top-1, renormalised), whose routing weight is
// exactly 1, so every logit must be the dense model's, bit for bit.
func TestModel64Qwen3MoEOneExpert(t *testing.T) {
	src := filepath.Join("..", "testdata", "golden", "hf-models", "qwen3_dense_bf16")
	var config map[string]any
	data, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &config); err != nil {
		t.Fatal(err)
	}
	config["model_type"] = "qwen3_moe"
	config["num_experts"], config["num_experts_per_tok"], config["norm_topk_prob"] = 1, 1, true
	config["moe_intermediate_size"] = config["intermediate_size"]
	st, err := checkpoint.ReadSafetensors(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	var ts []checkpoint.Tensor
	hidden := int(config["hidden_size"].(float64))
	for l := 0; l < int(config["num_hidden_layers"].(float64)); l++ {
		router, _ := checkpoint.NewTensor(fmt.Sprintf("model.layers.%d.mlp.gate.weight", l), "BF16", []int{1, hidden}, make([]float32, hidden))
		ts = append(ts, router)
	}
	for _, n := range st.Names() {
		x, _ := st.Tensor(n)
		for _, p := range []string{"gate_proj", "up_proj", "down_proj"} {
			x.Name = strings.Replace(x.Name, ".mlp."+p, ".mlp.experts.0."+p, 1)
		}
		ts = append(ts, x)
	}
	dir := t.TempDir()
	cfg, _ := json.Marshal(config)
	var buf bytes.Buffer
	if err := checkpoint.WriteSafetensors(&buf, ts); err != nil {
		t.Fatal(err)
	}
	if os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644) != nil || os.WriteFile(filepath.Join(dir, "model.safetensors"), buf.Bytes(), 0o644) != nil {
		t.Fatal("cannot write the MoE checkpoint")
	}
	dense, moe := openModel64(t, src), openModel64(t, dir)
	if !moe.Config.IsMoELayer(0) {
		t.Fatalf("layer 0 of %+v is not MoE", moe.Config)
	}
	prompt := []int32{762, 1554, 503, 391, 565}
	want, err := dense.Forward(dense.NewCache(), prompt)
	if err != nil {
		t.Fatal(err)
	}
	got, err := moe.Forward(moe.NewCache(), prompt)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("one-expert MoE logits differ from the dense model's by %.3g", relErr64(got, want))
	}
}
