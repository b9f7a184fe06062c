package golden

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/gdn/spec"
)

type layerWant struct {
	shape spec.Shape
	act   spec.ElemType
	steps []int
}

// The four cases of the README's layer set: shape, type, sequences, steps.
var wantLayerCases = map[string]layerWant{
	"layer_bf16_hk2_hv4_d32": {spec.Shape{DK: 32, DV: 32, NKHeads: 2, NVHeads: 4, NTokens: 20, NSeqs: 2}, spec.BF16, []int{20, 1, 1, 1}},
	"layer_bf16_qwen35_d128": {spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 5, NSeqs: 1}, spec.BF16, []int{5, 1}},
	"layer_f16_hk2_hv2_d32":  {spec.Shape{DK: 32, DV: 32, NKHeads: 2, NVHeads: 2, NTokens: 2, NSeqs: 3}, spec.F16, []int{2, 1, 1}},
	"layer_f32_hk1_hv3_d64":  {spec.Shape{DK: 64, DV: 64, NKHeads: 1, NVHeads: 3, NTokens: 7, NSeqs: 1}, spec.F32, []int{7, 1, 1}},
}

func TestLoadLayerCases(t *testing.T) {
	eachWanted(t, LoadLayerSet, func(c LayerCase) string { return c.Name }, wantLayerCases, func(c LayerCase, want layerWant) {
		if len(c.Steps) != len(want.steps) {
			t.Fatalf("%s: %d steps, want %d", c.Name, len(c.Steps), len(want.steps))
		}
		for i, s := range c.Steps {
			p := s.Params
			ws := want.shape
			ws.NTokens = want.steps[i]
			if p.Shape != ws || p.Activation != want.act || p.Core != spec.QwenCore() || p.Fused != spec.FusedAll {
				t.Errorf("%s step %d: params %v %v %+v, want %v %v %+v", c.Name, i, p.Shape, p.Activation, p.Core, ws, want.act, spec.QwenCore())
			}
			zeros := make([]float32, p.StateLen())
			convZeros := make([]float32, p.ConvStateLen())
			if err := c.Inputs(i, zeros, convZeros).Validate(p); err != nil {
				t.Errorf("%s step %d: %v", c.Name, i, err)
			}
			for name, x := range map[string][]float32{
				"hidden": s.Hidden, "mixed_qkv": s.MixedQKV, "z": s.Z, "a": s.A, "b": s.B,
				"core_f64": s.CoreF64, "out_f64": s.OutF64, "state_f64": s.StateF64,
				"conv_state_f64": s.ConvStateF64, "core_hf": s.CoreHF, "out_hf": s.OutHF, "state_hf": s.StateHF,
			} {
				if !slices.ContainsFunc(x, func(v float32) bool { return v != 0 }) {
					t.Errorf("%s step %d: %s is empty or all zeros", c.Name, i, name)
				}
			}
		}
	})
}

func TestLoadLayerRejectsDamagedCase(t *testing.T) {
	checkRejectsDamaged(t, filepath.Join(SetDir(t, LayerSubdir), "layer_f16_hk2_hv2_d32"), LoadLayer, []damage{
		{"truncated file", func(dir string) error { return os.Truncate(filepath.Join(dir, "s1_z.f16"), 10) }, []string{"s1_z.f16"}},
		{"missing file", func(dir string) error { return os.Remove(filepath.Join(dir, "norm.f16")) }, []string{"norm.f16"}},
		{"wrong shape", func(dir string) error {
			return editMeta(dir, `"shape": [
    3,
    1,
    2,
    32
   ]`, `"shape": [
    3,
    1,
    2,
    16
   ]`)
		}, []string{"shape"}},
	})
}

// editMeta replaces the first old in the case's meta.json with new; it
// fails when meta.json holds no old.
func editMeta(dir, old, new string) error {
	p := filepath.Join(dir, "meta.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	s := strings.Replace(string(b), old, new, 1)
	if s == string(b) {
		return os.ErrNotExist
	}
	return os.WriteFile(p, []byte(s), 0o644)
}
