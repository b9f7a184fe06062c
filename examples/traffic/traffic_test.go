package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/checkpoint"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
)

// tinyNext is a Qwen3-Next config of the golden models' shapes (hidden
// 128), bf16, with 8 layers: two of the 4-layer pattern.
const tinyNext = `{
  "model_type": "qwen3_next", "dtype": "bfloat16",
  "hidden_size": 128, "num_hidden_layers": 8, "full_attention_interval": 4, "vocab_size": 512,
  "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
  "partial_rotary_factor": 0.25, "linear_conv_kernel_dim": 4,
  "linear_key_head_dim": 32, "linear_value_head_dim": 32, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
  "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64,
  "tie_word_embeddings": false
}`

func tinyOptions(t *testing.T, args ...string) options {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(tinyNext), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags(append([]string{"-config", path, "-prompt", "3"}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestTrafficScales runs the program on 4 of the tiny model's 8 layers and
// on all 8. Every layer of a type moves the same bytes, so the 4-layer
// run's figure scaled to 8 layers must be the 8-layer run's measured one,
// and the 8-layer checkpoint's floor the one the full run reports. Each
// step moves at least its floor, every layer is counted some dispatches,
// and the products read each weight they are bound to at least once.
func TestTrafficScales(t *testing.T) {
	dev := testdevice.Emulated(t, emu.Options{})
	var out bytes.Buffer
	part, err := run(tinyOptions(t, "-layers", "4"), dev, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, &out)
	}
	t.Logf("4 layers:\n%s", &out)
	for _, want := range []string{"decode step at 3 held positions", "matvec_bf16_bf16", "gather_matvec_bf16_bf16", "scaled analytically to the real depth (8 layers)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	out.Reset()
	whole, err := run(tinyOptions(t, "-layers", "8"), dev, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, &out)
	}
	if part.scaledMoved != whole.moved {
		t.Errorf("4 layers scaled to 8 move %d bytes, 8 layers measured %d", part.scaledMoved, whole.moved)
	}
	if part.scaledFloor != whole.floor {
		t.Errorf("the 8-layer checkpoint's floor is %d loaded beside the 4-layer run, %d in the 8-layer run", part.scaledFloor, whole.floor)
	}
	for _, r := range []*result{part, whole} {
		if r.moved < r.floor {
			t.Errorf("%d layers: moved %d bytes, below the floor %d", r.config.NumLayers, r.moved, r.floor)
		}
		var sum int64
		for l := -1; l < r.config.NumLayers; l++ {
			if r.layers[l].moved == 0 {
				t.Errorf("%d layers: nothing counted to layer %d", r.config.NumLayers, l)
			}
			sum += r.layers[l].moved
		}
		if len(r.layers) != r.config.NumLayers+1 || sum != r.moved {
			t.Errorf("%d layers: %d parts moving %d bytes in all, want %d parts and %d bytes", r.config.NumLayers, len(r.layers), sum, r.config.NumLayers+1, r.moved)
		}
		for _, k := range r.kernels {
			if strings.Contains(k.name, "matvec") && (k.weightFloor == 0 || k.weightLoaded < k.weightFloor) {
				t.Errorf("%d layers: %s loaded %d bytes of weights whose floor is %d", r.config.NumLayers, k.name, k.weightLoaded, k.weightFloor)
			}
		}
	}
}

// TestTrafficFlags checks that bad flags and configs are refused with
// exit status 2, naming what is wrong.
func TestTrafficFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-layers", "0"}, "-layers 0"},
		{[]string{"-vocab", "-1"}, "-vocab -1"},
		{[]string{"-prompt", "0"}, "-prompt 0"},
		{[]string{"-config", "/nonexistent/config.json"}, "-config"},
		{[]string{"-model", "llama"}, `-model "llama"`},
		{[]string{"-kernels", "-2"}, "-kernels -2"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		var stderr bytes.Buffer
		if code := cli(c.args, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
	o := tinyOptions(t, "-layers", "9")
	if _, _, err := withLayers(o.config, o.layers, o.vocab); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "-layers 9, the model has 8") {
		t.Errorf("9 of 8 layers: %v", err)
	}
	if _, _, err := withLayers([]byte(`{"model_type": "llama"}`), 1, 0); !errors.Is(err, checkpoint.ErrConfig) {
		t.Errorf("a llama config: %v, want checkpoint.ErrConfig", err)
	}
}
