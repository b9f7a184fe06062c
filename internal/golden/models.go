package golden

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/checkpoint"
)

// ModelsSubdir is the folder of the whole-model cases (SPEC section 14):
// each case a checkpoint folder (config.json, model.safetensors) with
// golden.json and golden.safetensors, relative to the golden folder.
const ModelsSubdir = "hf-models"

// ModelCase is one whole-model case: its folder (a checkpoint [checkpoint.Open]
// reads), metadata and the float64 truth's logits along its greedy path.
type ModelCase struct {
	Name, Dir string
	ModelType string // golden.json's model_type (the config's, before unwrapping)
	DType     string // the checkpoint's dtype: "bf16", "f32", ...
	MadeBy    string
	Prompts   []ModelPrompt
}

// ModelPrompt is one prompt of a [ModelCase]: its token ids, the truth's
// greedy continuation, and the truth's logits at every step along it
// (teacher forcing): row 0 after the prompt's prefill, row s after feeding
// Tokens[s-1]. Hidden (prompt 0 only) holds the truth's hidden states of
// the prefill (the embedding, the output of each layer but the last, the
// final norm's output), [tokens][hidden] each, when the case has them.
type ModelPrompt struct {
	Prompt    []int32 `json:"prompt"`
	Tokens    []int32 `json:"tokens"`
	MarginMin float64 `json:"margin_min"`
	// The float32 peer's distance from the truth, relative to the largest
	// truth logit: HF's float32 run (HF-made cases) or the restatement's
	// (the others); one of the two is set.
	HFF32Rel  float64 `json:"hf_f32_vs_f64_rel"`
	RefF32Rel float64 `json:"ref_f32_vs_f64_rel"`
	// HFGPURel is HF's run on a GPU in the checkpoint's dtype, its
	// distance from the truth likewise (HF-made cases; 0 elsewhere).
	HFGPURel float64 `json:"hf_gpu_vs_f64_rel"`

	Logits []float64 // [len(Tokens)][vocab]
	Vocab  int
	Hidden [][]float64
}

// F32PeerRel is the float32 peer's distance from the truth (whichever
// peer the case has).
func (p ModelPrompt) F32PeerRel() float64 { return max(p.HFF32Rel, p.RefF32Rel) }

// LoadModelSet returns every case of the whole-model set ([ModelsSubdir]
// under the golden folder; see [SetDir]), failing the test on any error
// and skipping (failing in strict mode) when there are none.
func LoadModelSet(t testing.TB) []ModelCase {
	t.Helper()
	return loadSet(t, ModelsSubdir, ModelCases)
}

// ModelCases loads every case folder under dir (each holding a
// golden.json), sorted by name.
func ModelCases(dir string) ([]ModelCase, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var cs []ModelCase
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "golden.json")); !e.IsDir() || err != nil {
			continue
		}
		c, err := LoadModel(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// LoadModel loads the whole-model case in dir. A prompt whose logits are
// missing or misshapen is an error naming it.
func LoadModel(dir string) (ModelCase, error) {
	c := ModelCase{Name: filepath.Base(dir), Dir: dir}
	data, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		return c, err
	}
	var meta struct {
		ModelType string        `json:"model_type"`
		DType     string        `json:"dtype"`
		MadeBy    string        `json:"made_by"`
		Prompts   []ModelPrompt `json:"prompts"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return c, fmt.Errorf("golden: %s/golden.json: %w", c.Name, err)
	}
	c.ModelType, c.DType, c.MadeBy, c.Prompts = meta.ModelType, meta.DType, meta.MadeBy, meta.Prompts
	st, err := checkpoint.ReadSafetensors(filepath.Join(dir, "golden.safetensors"))
	if err != nil {
		return c, err
	}
	if len(c.Prompts) == 0 {
		return c, fmt.Errorf("golden: %s: no prompts", c.Name)
	}
	for i := range c.Prompts {
		p := &c.Prompts[i]
		name := fmt.Sprintf("p%d.logits_f64", i)
		x, shape, err := float64s(st, name)
		if err != nil {
			return c, fmt.Errorf("golden: %s: %w", c.Name, err)
		}
		if len(shape) != 2 || shape[0] != len(p.Tokens) || len(p.Prompt) == 0 {
			return c, fmt.Errorf("golden: %s: %s has shape %v for %d tokens after a prompt of %d", c.Name, name, shape, len(p.Tokens), len(p.Prompt))
		}
		p.Logits, p.Vocab = x, shape[1]
	}
	for k := 0; ; k++ {
		x, _, err := float64s(st, fmt.Sprintf("p0.hidden_%02d", k))
		if err != nil {
			break
		}
		c.Prompts[0].Hidden = append(c.Prompts[0].Hidden, x)
	}
	return c, nil
}

func float64s(st *checkpoint.Safetensors, name string) ([]float64, []int, error) {
	t, ok := st.Tensor(name)
	if !ok {
		return nil, nil, fmt.Errorf("no tensor %s in golden.safetensors", name)
	}
	x, err := t.Float32s()
	if err != nil {
		return nil, nil, err
	}
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y, slices.Clone(t.Shape), nil
}
