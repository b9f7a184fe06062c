package model_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/puremetal/puremetal/checkpoint"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/golden"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/model"
)

var expertName = regexp.MustCompile(`^(.*\.mlp)\.experts\.(\d+)\.(gate|up|down)_proj\.weight$`)

// fuseExperts writes into dir the checkpoint of src with every layer's
// experts as HF's fused tensors: mlp.experts.gate_up_proj [E, 2I, H]
// (each expert's gate rows, then its up rows) and mlp.experts.down_proj
// [E, H, I].
func fuseExperts(t *testing.T, src, dir string) {
	t.Helper()
	st, err := checkpoint.ReadSafetensors(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	var out []checkpoint.Tensor
	var order []string // the MoE modules, each once
	for _, name := range st.Names() {
		x, _ := st.Tensor(name)
		m := expertName.FindStringSubmatch(name)
		if m == nil {
			out = append(out, x)
		} else if !slices.Contains(order, m[1]) {
			order = append(order, m[1])
		}
	}
	for _, mlp := range order {
		var gateUp, down []byte
		var shapeGU, shapeD []int
		for e := 0; ; e++ {
			g, ok := st.Tensor(mlp + ".experts." + strconv.Itoa(e) + ".gate_proj.weight")
			if !ok {
				shapeGU, shapeD = []int{e, 2 * shapeGU[0], shapeGU[1]}, []int{e, shapeD[0], shapeD[1]}
				break
			}
			u, _ := st.Tensor(mlp + ".experts." + strconv.Itoa(e) + ".up_proj.weight")
			d, _ := st.Tensor(mlp + ".experts." + strconv.Itoa(e) + ".down_proj.weight")
			gateUp, down = append(append(gateUp, g.Data...), u.Data...), append(down, d.Data...)
			shapeGU, shapeD = g.Shape, d.Shape
		}
		dt, _ := st.Tensor(mlp + ".experts.0.gate_proj.weight")
		out = append(out, checkpoint.Tensor{Name: mlp + ".experts.gate_up_proj", DType: dt.DType, Shape: shapeGU, Data: gateUp},
			checkpoint.Tensor{Name: mlp + ".experts.down_proj", DType: dt.DType, Shape: shapeD, Data: down})
	}
	var buf bytes.Buffer
	if err := checkpoint.WriteSafetensors(&buf, out); err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"model.safetensors": buf.Bytes(), "config.json": config} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFusedExperts checks that HF's fused experts (gate_up_proj,
// down_proj) are viewed in place, not copied, and give the same logits,
// bit for bit, as the same experts stored one tensor each.
func TestFusedExperts(t *testing.T) {
	c, err := golden.LoadModel(filepath.Join(golden.SetDir(t, golden.ModelsSubdir), "qwen35moe_bf16"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fuseExperts(t, c.Dir, dir)
	testdevice.CheckReleased(t)
	dev := testdevice.Emulated(t, emu.Options{})
	var logits [2][]float32
	var copied [2]int64
	for i, d := range []string{c.Dir, dir} {
		m, err := model.Load(dev, d, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Release()
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Release()
		slot, _ := s.Acquire()
		p := c.Prompts[0]
		if logits[i], err = s.Prefill(slot, p.Prompt, nil); err != nil {
			t.Fatal(err)
		}
		step, err := s.Decode([]int{slot}, p.Tokens[:1], nil)
		if err != nil {
			t.Fatal(err)
		}
		logits[i] = append(logits[i], step...)
		copied[i] = m.CopiedBytes
	}
	if !slices.Equal(logits[0], logits[1]) {
		t.Errorf("fused experts: logits differ from the per-expert tensors' by %.3g", relErr32(logits[1], logits[0]))
	}
	ck, err := checkpoint.ReadConfig(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	experts := int64(ck.NumLayers * ck.NumExperts * 3 * ck.MoEIntermediateSize * ck.HiddenSize * 2)
	if copied[0]-copied[1] != experts {
		t.Errorf("copied %d bytes from per-expert tensors, %d from fused ones: want %d less (every expert's bf16 weights)", copied[0], copied[1], experts)
	}
	t.Logf("copied %d bytes with per-expert tensors, %d with fused ones", copied[0], copied[1])
}
