package checkpoint_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/checkpoint"
)

// open opens a checkpoint folder, closing it when the test ends.
func open(t *testing.T, dir string) *checkpoint.Model {
	t.Helper()
	m, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func weight(t *testing.T, m *checkpoint.Model, name string) *checkpoint.Weight {
	t.Helper()
	w, err := m.Weight(name)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestOpenGoldenModels opens every golden checkpoint and checks what the
// model is built on: canonical names whatever the layout, the norms'
// convention, conv1d's shape, quantization per module, tied lm_head.
func TestOpenGoldenModels(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(modelsDir, "*", "config.json"))
	if len(dirs) == 0 {
		t.Fatal("no golden checkpoints")
	}
	for _, c := range dirs {
		m := open(t, filepath.Dir(c))
		for _, n := range m.Names() {
			if strings.Contains(n, "visual") || strings.Contains(n, "language_model") || strings.Contains(n, "switch_mlp") || strings.HasSuffix(n, "scales") {
				t.Errorf("%s: name %s is not canonical", filepath.Base(filepath.Dir(c)), n)
			}
		}
	}
	for _, c := range []struct {
		dir, name string
		offset    float64
	}{
		{"qwen3next_moe_f32", "model.layers.0.input_layernorm.weight", 1},
		{"qwen3next_moe_f32", "model.layers.3.self_attn.q_norm.weight", 1},
		{"qwen3next_moe_f32", "model.norm.weight", 1},
		{"qwen3next_moe_f32", "model.layers.0.linear_attn.norm.weight", 0},
		{"qwen35_dense_bf16", "model.layers.3.self_attn.k_norm.weight", 1},
		{"qwen3next_moe_mlx4", "model.layers.0.post_attention_layernorm.weight", 0}, // stored as 1 + w
		{"qwen3_dense_bf16", "model.layers.0.input_layernorm.weight", 0},
	} {
		if w := weight(t, open(t, filepath.Join(modelsDir, c.dir)), c.name); w.NormOffset != c.offset {
			t.Errorf("%s %s: NormOffset %v, want %v", c.dir, c.name, w.NormOffset, c.offset)
		}
	}
	mlx := open(t, filepath.Join(modelsDir, "qwen3next_moe_mlx4"))
	up := weight(t, mlx, "model.layers.1.mlp.experts.5.up_proj.weight")
	if !up.Quantized() || up.Quant.Bits != 4 || !slices.Equal(up.Shape, []int{64, 128}) || !slices.Equal(up.Data.Shape, []int{64, 16}) || !slices.Equal(up.Scales.Shape, []int{64, 2}) {
		t.Errorf("mlx expert: quant %+v shape %v, stored %v, scales %v", up.Quant, up.Shape, up.Data.Shape, up.Scales.Shape)
	}
	stack, _ := mlx.Files[0].Tensor("model.layers.1.mlp.switch_mlp.up_proj.weight")
	if per := len(stack.Data) / 8; !bytes.Equal(up.Data.Data, stack.Data[5*per:6*per]) || up.Data.Offset != stack.Offset+int64(5*per) {
		t.Error("mlx expert 5 is not the stack's fifth slice")
	}
	if g := weight(t, mlx, "model.layers.1.mlp.gate.weight"); g.Quant.Bits != 8 || !slices.Equal(g.Shape, []int{8, 128}) {
		t.Errorf("mlx router: quant %+v shape %v, want 8 bits [8 128]", g.Quant, g.Shape)
	}
	if cv := weight(t, mlx, "model.layers.0.linear_attn.conv1d.weight"); !slices.Equal(cv.Shape, []int{256, 4}) {
		t.Errorf("mlx conv1d shape %v, want [256 4]", cv.Shape)
	}
	q3 := open(t, filepath.Join(modelsDir, "qwen3_dense_bf16"))
	if weight(t, q3, "lm_head.weight") != weight(t, q3, "model.embed_tokens.weight") {
		t.Error("tied lm_head.weight is not the embedding")
	}
}

// source returns a golden checkpoint's folder, config.json and tensors
// (read into memory, for rewriting).
func source(t *testing.T, name string) (dir string, config []byte, ts []checkpoint.Tensor) {
	t.Helper()
	dir = filepath.Join(modelsDir, name)
	config, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.ReadSafetensors(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Names() {
		x, _ := st.Tensor(n)
		ts = append(ts, x)
	}
	return dir, config, ts
}

// writeModel writes config and tensors as a checkpoint folder, in shards
// files (with model.safetensors.index.json when more than one).
func writeModel(t *testing.T, config []byte, ts []checkpoint.Tensor, shards int) string {
	t.Helper()
	dir := t.TempDir()
	writeIn(t, dir, "config.json", config)
	index := map[string]string{}
	for s := 0; s < shards; s++ {
		name := "model.safetensors"
		if shards > 1 {
			name = fmt.Sprintf("model-%05d-of-%05d.safetensors", s+1, shards)
		}
		var part []checkpoint.Tensor
		for i := s; i < len(ts); i += shards {
			part = append(part, ts[i])
			index[ts[i].Name] = name
		}
		var buf bytes.Buffer
		if err := checkpoint.WriteSafetensors(&buf, part); err != nil {
			t.Fatal(err)
		}
		writeIn(t, dir, name, buf.Bytes())
	}
	if shards > 1 {
		data, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": index})
		writeIn(t, dir, "model.safetensors.index.json", data)
	}
	return dir
}

// expertRE matches one expert's projection in HF's per-expert names.
var expertRE = regexp.MustCompile(`^(.*\.mlp)\.experts\.(\d+)\.(gate|up|down)_proj\.weight$`)

// TestOpenDoesNotReadWeights checks that opening a checkpoint leaves the
// tensors in the mapping: every weight's bytes lie in a mapped file, and
// Open allocates less than the embedding alone (1 MiB of the 7 MB file).
func TestOpenDoesNotReadWeights(t *testing.T) {
	dir := filepath.Join(modelsDir, "qwen3next_moe_f32")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m := open(t, dir)
	runtime.ReadMemStats(&after)
	embed := weight(t, m, "model.embed_tokens.weight")
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc >= uint64(len(embed.Data.Data)) {
		t.Errorf("Open allocated %d bytes, as much as the %d-byte embedding", alloc, len(embed.Data.Data))
	}
	for _, n := range m.Names() {
		w := weight(t, m, n)
		all := m.Files[0].Bytes()
		if &all[w.Data.Offset] != &w.Data.Data[0] {
			t.Errorf("%s is not a view of the mapping at its Offset %d", n, w.Data.Offset)
		}
	}
}

// stacked returns ts with every layer's experts stacked into one tensor
// per name name(layer prefix, projection) returns; fused stacks gate and
// up into one [E, 2I, H] tensor (HF's gate_up_proj).
func stacked(t *testing.T, ts []checkpoint.Tensor, experts int, fused bool, name func(prefix, proj string) string) []checkpoint.Tensor {
	t.Helper()
	byName := map[string]checkpoint.Tensor{}
	var out []checkpoint.Tensor
	for _, x := range ts {
		if expertRE.MatchString(x.Name) {
			byName[x.Name] = x
		} else {
			out = append(out, x)
		}
	}
	done := map[string]bool{}
	for _, x := range ts {
		m := expertRE.FindStringSubmatch(x.Name)
		if m == nil || done[m[1]+m[3]] {
			continue
		}
		projs := [][]string{{m[3]}}
		if fused && m[3] != "down" {
			projs = [][]string{{"gate", "up"}}
		}
		for _, group := range projs {
			if done[m[1]+group[0]] {
				continue
			}
			var data []byte
			rows := 0
			for e := 0; e < experts; e++ {
				for _, p := range group {
					part := byName[fmt.Sprintf("%s.experts.%d.%s_proj.weight", m[1], e, p)]
					data = append(data, part.Data...)
					if e == 0 {
						rows += part.Shape[0]
					}
				}
			}
			for _, p := range group {
				done[m[1]+p] = true
			}
			out = append(out, checkpoint.Tensor{Name: name(m[1], strings.Join(group, "_")), DType: x.DType, Shape: []int{experts, rows, x.Shape[1]}, Data: data})
		}
	}
	return out
}

// renamed returns ts with every name passed through f.
func renamed(ts []checkpoint.Tensor, f func(string) string) []checkpoint.Tensor {
	out := slices.Clone(ts)
	for i := range out {
		out[i].Name = f(out[i].Name)
	}
	return out
}

// TestOpenLayouts writes the Qwen3.5 MoE golden checkpoint in the other
// layouts a loader meets (mlx-lm's names with stacked experts, HF's fused
// experts, shards) and checks that every canonical weight has the same
// bytes, shape and convention as in the original.
func TestOpenLayouts(t *testing.T) {
	src, config, ts := source(t, "qwen35moe_bf16")
	mlxName := func(n string) string {
		if rest, ok := strings.CutPrefix(n, "model.language_model."); ok {
			return "language_model.model." + rest
		}
		return "language_model." + n
	}
	layouts := map[string]string{
		"mlx names, switch_mlp": writeModel(t, config, renamed(stacked(t, ts, 8, false, func(p, proj string) string {
			return p + ".switch_mlp." + proj + "_proj.weight"
		}), mlxName), 1),
		"hf fused experts": writeModel(t, config, stacked(t, ts, 8, true, func(p, proj string) string {
			return p + ".experts." + proj + "_proj"
		}), 1),
		"three shards": writeModel(t, config, ts, 3),
	}
	want := open(t, src)
	for name, dir := range layouts {
		got := open(t, dir)
		if g, w := got.Names(), want.Names(); !slices.Equal(g, w) {
			extra := slices.DeleteFunc(slices.Clone(g), func(n string) bool { return slices.Contains(w, n) })
			missing := slices.DeleteFunc(slices.Clone(w), func(n string) bool { return slices.Contains(g, n) })
			t.Errorf("%s: names differ: extra %v, missing %v", name, extra, missing)
			continue
		}
		for _, n := range want.Names() {
			g, w := weight(t, got, n), weight(t, want, n)
			if !bytes.Equal(g.Data.Data, w.Data.Data) || !slices.Equal(g.Shape, w.Shape) || g.NormOffset != w.NormOffset {
				t.Errorf("%s: %s differs from the original (shape %v, want %v)", name, n, g.Shape, w.Shape)
			}
		}
	}
}

// TestOpenRefuses checks that a checkpoint that does not match its config,
// or is damaged, is an error naming the tensor, field or file.
func TestOpenRefuses(t *testing.T) {
	_, config, ts := source(t, "qwen3_dense_bf16")
	without := func(name string) []checkpoint.Tensor {
		return slices.DeleteFunc(slices.Clone(ts), func(x checkpoint.Tensor) bool { return x.Name == name })
	}
	edit := func(old, new string) []byte {
		if !bytes.Contains(config, []byte(old)) {
			t.Fatalf("config.json has no %q", old)
		}
		return bytes.Replace(config, []byte(old), []byte(new), 1)
	}
	for _, c := range []struct {
		name string
		dir  string
		is   error
		want string
	}{
		{"missing tensor", writeModel(t, config, without("model.layers.2.self_attn.k_norm.weight"), 1), checkpoint.ErrTensors, "model.layers.2.self_attn.k_norm.weight"},
		{"config contradicts", writeModel(t, edit(`"intermediate_size": 256`, `"intermediate_size": 512`), ts, 1), checkpoint.ErrTensors, "model.layers.0.mlp.down_proj.weight has shape [128 256] (stored BF16 [128 256]), the config implies [128 512]"},
		{"untied without lm_head", writeModel(t, edit(`"tie_word_embeddings": true`, `"tie_word_embeddings": false`), ts, 1), checkpoint.ErrTensors, "lm_head.weight"},
		{"unknown model", writeModel(t, edit(`"model_type": "qwen3"`, `"model_type": "mistral"`), ts, 1), checkpoint.ErrConfig, `"mistral"`},
	} {
		_, err := checkpoint.Open(c.dir)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error matching %v naming %s", c.name, err, c.is, c.want)
		}
	}
	// A truncated file, and shards the index misdescribes.
	dir := writeModel(t, config, ts, 1)
	path := filepath.Join(dir, "model.safetensors")
	fi, _ := os.Stat(path)
	if err := os.Truncate(path, fi.Size()-1); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Open(dir); !errors.Is(err, checkpoint.ErrMalformed) {
		t.Errorf("truncated model.safetensors: %v, want ErrMalformed", err)
	}
	dir = writeModel(t, config, ts, 2)
	data, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte(`"model.norm.weight":"model-00001`), []byte(`"model.norm.weight":"model-00002`), 1)
	data = bytes.Replace(data, []byte(`"model.norm.weight":"model-00002-of-00002.safetensors"`), []byte(`"model.norm.weight":"model-00001-of-00002.safetensors"`), 1)
	writeIn(t, dir, "model.safetensors.index.json", data)
	if _, err := checkpoint.Open(dir); !errors.Is(err, checkpoint.ErrMalformed) || !strings.Contains(err.Error(), "model.norm.weight") {
		t.Errorf("index with a tensor in the wrong shard: %v, want ErrMalformed naming model.norm.weight", err)
	}
}
