package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ErrTensors is returned (wrapped) when a checkpoint's tensors do not
// match its config: a tensor missing, of the wrong shape or dtype. The
// error names the tensor, the shape found and the shape the config implies.
var ErrTensors = errors.New("checkpoint: tensors do not match the config")

// A Model is a checkpoint folder opened for inference: its [Config] and
// its tensors, memory-mapped (never copied), found by their canonical
// names whatever the layout they were saved in (SPEC section 14).
//
// Canonical names are HF's names of the text model as Qwen3-Next and Qwen3
// save them: "model.embed_tokens.weight", "model.layers.N.<module>.weight",
// "model.norm.weight", "lm_head.weight", experts as
// "model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight". Qwen3.5's
// "model.language_model." prefix, mlx-lm's "language_model.model." and
// "language_model.lm_head.", experts stacked by mlx-lm (mlp.switch_mlp) or
// fused by HF (mlp.experts.gate_up_proj, mlp.experts.down_proj) all map to
// these; vision and multi-token-prediction tensors are ignored. With
// tie_word_embeddings, "lm_head.weight" is the embedding.
//
// Qwen3-Next's in_proj_qkvz and in_proj_ba keep their rows as stored
// (grouped per key head); [QKVZRows] and [BARows] give the permutation to
// the layer core's order.
type Model struct {
	Config  *Config
	Files   []*MappedFile
	weights map[string]*Weight
}

// A Weight is one parameter of the model: a view of the mapped bytes,
// with its logical shape and, for an MLX-quantized module, its scales,
// biases and quantization.
type Weight struct {
	Name string // canonical name
	// Shape is the logical shape, outermost first: [out, in] for a linear
	// layer or an embedding (in counted in elements, unpacked), [C, K] for
	// conv1d.weight (HF's [C, 1, K] and mlx-lm's [C, K, 1] hold the same
	// bytes), [n] for vectors.
	Shape []int
	// Data is the stored tensor (DType "U32" when quantized; for one expert
	// of a stacked tensor, its slice of the stack). Data.Shape is as stored.
	Data Tensor
	// Scales and Biases ([out, in/GroupSize], the model's dtype) and Quant
	// are set for an MLX affine-quantized weight: w = scale * q + bias.
	Scales, Biases Tensor
	Quant          QuantParams
	// NormOffset is what a norm weight's stored values need added to be
	// the multiplier of the normalised input: 1 for the zero-centred norms
	// of HF's Qwen3-Next and Qwen3.5 checkpoints (y = x_hat (1 + w)), 0 for
	// plain norms and for mlx-lm's checkpoints, which store 1 + w.
	NormOffset float64
}

// Quantized reports whether w is MLX affine-quantized.
func (w *Weight) Quantized() bool { return w.Quant.Bits != 0 }

// Open opens the checkpoint folder dir: config.json, and model.safetensors
// or the shards model.safetensors.index.json lists, mapped read-only. Every
// tensor the config implies is checked to be there with its shape; a
// missing or misshapen one is an error matching [ErrTensors] that names it.
// Close the model to unmap its files.
func Open(dir string) (*Model, error) {
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	files, err := mapFiles(dir)
	if err != nil {
		return nil, err
	}
	m := &Model{Config: cfg, Files: files}
	if err := m.index(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// mapFiles maps dir's safetensors files: the shards of
// model.safetensors.index.json's weight_map, or model.safetensors.
func mapFiles(dir string) ([]*MappedFile, error) {
	idx, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	if errors.Is(err, os.ErrNotExist) {
		f, err := MapSafetensors(filepath.Join(dir, "model.safetensors"))
		if err != nil {
			return nil, err
		}
		return []*MappedFile{f}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(idx, &index); err != nil {
		return nil, fmt.Errorf("%w: model.safetensors.index.json: %w", ErrMalformed, err)
	}
	var shards []string
	for _, s := range index.WeightMap {
		if s != filepath.Base(s) {
			return nil, fmt.Errorf("%w: model.safetensors.index.json names shard %q outside the folder", ErrMalformed, s)
		}
		if !slices.Contains(shards, s) {
			shards = append(shards, s)
		}
	}
	sort.Strings(shards)
	var files []*MappedFile
	fail := func(err error) ([]*MappedFile, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	for _, s := range shards {
		f, err := MapSafetensors(filepath.Join(dir, s))
		if err != nil {
			return fail(err)
		}
		files = append(files, f)
	}
	for name, s := range index.WeightMap {
		i := sort.SearchStrings(shards, s)
		if _, ok := files[i].Tensor(name); !ok {
			return fail(fmt.Errorf("%w: model.safetensors.index.json puts tensor %s in %s, which does not hold it", ErrMalformed, name, s))
		}
	}
	return files, nil
}

// Close unmaps the model's files; its weights' bytes become invalid.
func (m *Model) Close() error {
	var errs []error
	for _, f := range m.Files {
		if f.data != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// Weight returns the weight with canonical name, or an error matching
// [ErrTensors] naming it.
func (m *Model) Weight(name string) (*Weight, error) {
	w, ok := m.weights[name]
	if !ok {
		return nil, fmt.Errorf("%w: no tensor %s in the checkpoint (model_type %s)", ErrTensors, name, m.Config.ModelType)
	}
	return w, nil
}

// Names returns the canonical names of the model's weights, sorted.
func (m *Model) Names() []string {
	names := make([]string, 0, len(m.weights))
	for n := range m.weights {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// canonical returns the canonical name of a stored tensor name, or "" for
// tensors the text model ignores (vision tower, multi-token prediction).
func canonical(stored string) string {
	name := stored
	for _, p := range [][2]string{{"model.language_model.", "model."}, {"language_model.model.", "model."}, {"language_model.lm_head.", "lm_head."}} {
		if rest, ok := strings.CutPrefix(stored, p[0]); ok {
			name = p[1] + rest
			break
		}
	}
	for _, skip := range []string{"model.visual.", "visual.", "vision_tower.", "mtp.", "model.mtp."} {
		if strings.HasPrefix(name, skip) {
			return ""
		}
	}
	return name
}

// index builds the canonical weights from every file's tensors and checks
// them against the config.
func (m *Model) index() error {
	stored := map[string]Tensor{} // canonical full name -> tensor
	for _, f := range m.Files {
		for _, n := range f.Names() {
			c := canonical(n)
			if c == "" {
				continue
			}
			if _, dup := stored[c]; dup {
				return fmt.Errorf("%w: tensor %s is stored twice (as %s in %s and before)", ErrMalformed, c, n, f.Path)
			}
			stored[c], _ = f.Tensor(n)
		}
	}
	cfg := m.Config
	m.weights = map[string]*Weight{}
	mlx := false // mlx-lm's sanitized layout: conv1d [C, K, 1], norms stored as 1 + w
	for name, t := range stored {
		if strings.HasSuffix(name, "conv1d.weight") && len(t.Shape) == 3 && t.Shape[2] == 1 && t.Shape[1] != 1 {
			mlx = true
		}
	}
	for name, t := range stored {
		module, last := splitLast(name)
		if last == "scales" || last == "biases" {
			continue
		}
		w := &Weight{Name: name, Data: t, Shape: slices.Clone(t.Shape)}
		if sc, ok := stored[module+".scales"]; ok && last == "weight" {
			if err := m.quantized(w, module, sc, stored); err != nil {
				return err
			}
		}
		if strings.HasSuffix(name, "conv1d.weight") && len(w.Shape) == 3 {
			w.Shape = []int{w.Shape[0], w.Shape[1] * w.Shape[2]}
		}
		if cfg.Hybrid() && !mlx && zeroCentred(name) {
			w.NormOffset = 1
		}
		if err := m.addExperts(w, module, last); err != nil {
			return err
		}
	}
	if cfg.TieWordEmbeddings {
		if e, ok := m.weights["model.embed_tokens.weight"]; ok {
			m.weights["lm_head.weight"] = e
		}
	}
	return m.check()
}

// quantized fills w's quantization from its .scales and .biases tensors
// and the config's bits and group size for module.
func (m *Model) quantized(w *Weight, module string, scales Tensor, stored map[string]Tensor) error {
	q := m.Config.Quantization
	if q == nil {
		return fmt.Errorf("%w: tensor %s.scales is there but config.json has no quantization", ErrTensors, module)
	}
	biases, ok := stored[module+".biases"]
	if !ok {
		return fmt.Errorf("%w: quantized %s has scales but no tensor %s.biases", ErrTensors, module, module)
	}
	w.Quant = q.For(m.storedModule(module))
	w.Scales, w.Biases = scales, biases
	s := w.Data.Shape
	if w.Data.DType != "U32" || len(s) < 2 {
		return fmt.Errorf("%w: quantized %s.weight is %s %v, want U32 [.., out, in*bits/32]", ErrTensors, module, w.Data.DType, s)
	}
	w.Shape[len(s)-1] = s[len(s)-1] * 32 / w.Quant.Bits
	want := slices.Clone(w.Shape)
	want[len(want)-1] = divCeil(w.Shape[len(want)-1], w.Quant.GroupSize)
	if w.Shape[len(want)-1]%w.Quant.GroupSize != 0 {
		return fmt.Errorf("%w: quantized %s has %d columns, not groups of %d", ErrTensors, module, w.Shape[len(want)-1], w.Quant.GroupSize)
	}
	for _, t := range []Tensor{scales, biases} {
		if !slices.Equal(t.Shape, want) {
			return fmt.Errorf("%w: tensor %s has shape %v; %s.weight %v at %d bits, group %d implies %v", ErrTensors, t.Name, t.Shape, module, s, w.Quant.Bits, w.Quant.GroupSize, want)
		}
	}
	return nil
}

// storedModule returns the module path under which the checkpoint's
// quantization overrides name a canonical module (mlx-lm keys them by the
// stored path).
func (m *Model) storedModule(module string) string {
	if q := m.Config.Quantization; q != nil {
		if _, ok := q.Modules[module]; ok {
			return module
		}
		for _, p := range [][2]string{{"model.", "language_model.model."}, {"lm_head", "language_model.lm_head"}} {
			if rest, ok := strings.CutPrefix(module, p[0]); ok {
				if _, ok := q.Modules[p[1]+rest]; ok {
					return p[1] + rest
				}
			}
		}
	}
	return module
}

// addExperts adds w, or one weight per expert for a stacked tensor:
// mlx-lm's mlp.switch_mlp.P.weight [E, out, in] and HF's fused
// mlp.experts.gate_up_proj [E, 2 I, H] (gate rows first) and
// mlp.experts.down_proj [E, H, I].
func (m *Model) addExperts(w *Weight, module, last string) error {
	var projs []string
	var layer string
	switch {
	case last == "weight" && strings.HasSuffix(splitParent(module), ".mlp.switch_mlp"):
		parent, proj := splitLast(module)
		layer, projs = strings.TrimSuffix(parent, ".switch_mlp"), []string{proj}
	case strings.HasSuffix(module, ".mlp.experts") && last == "gate_up_proj":
		layer, projs = strings.TrimSuffix(module, ".experts"), []string{"gate_proj", "up_proj"}
	case strings.HasSuffix(module, ".mlp.experts") && last == "down_proj":
		layer, projs = strings.TrimSuffix(module, ".experts"), []string{"down_proj"}
	default:
		m.weights[w.Name] = w
		return nil
	}
	if len(w.Shape) != 3 || w.Shape[1]%len(projs) != 0 {
		return fmt.Errorf("%w: stacked experts %s have shape %v, want [experts, out, in]", ErrTensors, w.Data.Name, w.Shape)
	}
	experts := w.Shape[0]
	for e := 0; e < experts; e++ {
		for p, proj := range projs {
			x := &Weight{Name: fmt.Sprintf("%s.experts.%d.%s.weight", layer, e, proj), Quant: w.Quant,
				Shape: []int{w.Shape[1] / len(projs), w.Shape[2]}}
			x.Data = expertSlice(w.Data, e, p, len(projs))
			if w.Quantized() {
				x.Scales = expertSlice(w.Scales, e, p, len(projs))
				x.Biases = expertSlice(w.Biases, e, p, len(projs))
			}
			m.weights[x.Name] = x
		}
	}
	return nil
}

// expertSlice returns part p of parts (split along rows) of expert e of a
// stacked tensor t [E, rows, cols], as a tensor of its own sharing t's bytes.
func expertSlice(t Tensor, e, p, parts int) Tensor {
	per := len(t.Data) / t.Shape[0] / parts
	off := (e*parts + p) * per
	return Tensor{Name: t.Name, DType: t.DType, Shape: []int{t.Shape[1] / parts, t.Shape[2]},
		Data: t.Data[off : off+per : off+per], Offset: t.Offset + int64(off)}
}

// zeroCentred reports whether a canonical name is one of the five norms
// Qwen3-Next and Qwen3.5 store zero-centred (SPEC section 14).
func zeroCentred(name string) bool {
	for _, s := range []string{".input_layernorm.weight", ".post_attention_layernorm.weight", ".q_norm.weight", ".k_norm.weight"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return name == "model.norm.weight"
}

func splitLast(name string) (module, last string) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return "", name
	}
	return name[:i], name[i+1:]
}

func splitParent(module string) string { p, _ := splitLast(module); return p }

func divCeil(a, b int) int { return (a + b - 1) / b }

// Uint32s returns a U32 tensor's elements (the packed words of a quantized
// weight).
func (t Tensor) Uint32s() ([]uint32, error) {
	if t.DType != "U32" {
		return nil, fmt.Errorf("checkpoint: tensor %q: dtype %s, want U32", t.Name, t.DType)
	}
	x := make([]uint32, len(t.Data)/4)
	for i := range x {
		x[i] = binary.LittleEndian.Uint32(t.Data[4*i:])
	}
	return x, nil
}

// layerName returns the canonical name of a module of layer i.
func layerName(i int, rest string) string { return "model.layers." + strconv.Itoa(i) + "." + rest }
