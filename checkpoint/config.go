package checkpoint

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// ErrConfig is returned (wrapped) for a config.json that does not describe
// a model this package loads: an unknown model_type, a missing or
// inconsistent field. The error names the field and its value.
var ErrConfig = errors.New("checkpoint: unsupported or inconsistent config")

// Layer types of Config.LayerTypes, as HF's configs spell them.
const (
	LinearAttention = "linear_attention"
	FullAttention   = "full_attention"
)

// Config is what the forward pass of a Qwen3-Next, Qwen3.5 (dense or MoE)
// or Qwen3 (dense or MoE) text model needs from its config.json (SPEC
// section 14). A vision-language wrapper's text_config is read; the vision
// tower is ignored.
type Config struct {
	// ModelType is the text model's type: "qwen3_next", "qwen3_5_text",
	// "qwen3_5_moe_text", "qwen3" or "qwen3_moe" (a wrapper's
	// "qwen3_5"/"qwen3_5_moe" becomes its text_config's type).
	ModelType string
	// Wrapped is set for the vision-language wrapper (text_config), whose
	// HF tensors live under model.language_model.
	Wrapped bool
	DType   string // "bfloat16", "float16", "float32": the checkpoint's dtype

	HiddenSize, NumLayers, VocabSize, IntermediateSize int
	LayerTypes                                         []string // per layer: LinearAttention or FullAttention
	RMSNormEps                                         float64
	TieWordEmbeddings                                  bool

	// Attention layers.
	NumHeads, NumKVHeads, HeadDim int
	RopeTheta                     float64
	PartialRotaryFactor           float64 // rotary_dim = HeadDim * PartialRotaryFactor

	// Linear-attention layers (Gated DeltaNet).
	LinearKeyHeadDim, LinearValueHeadDim   int
	LinearNumKeyHeads, LinearNumValueHeads int
	LinearConvKernel                       int
	NumExperts, NumExpertsPerTok           int // 0 experts: a dense model
	NormTopKProb                           bool
	MoEIntermediateSize                    int
	SharedExpertIntermediateSize           int // 0: no shared expert
	DecoderSparseStep                      int
	MLPOnlyLayers                          []int
	BOSTokenIDs, EOSTokenIDs               []int32
	Quantization                           *Quantization // MLX affine quantization; nil for HF checkpoints
}

// Quantization is MLX's "quantization" entry of config.json: the default
// bits and group size, and per-module overrides keyed by the module's path
// as the checkpoint names it (such as "model.layers.0.mlp.gate").
type Quantization struct {
	Bits, GroupSize int
	Mode            string // "affine" (the only mode this package reads)
	Modules         map[string]QuantParams
	// Skipped lists the modules the entry marks false: stored unquantized.
	Skipped []string
}

// QuantParams is the quantization of one module.
type QuantParams struct{ Bits, GroupSize int }

// For returns the quantization of the module at path (its name without
// ".weight"): its override, or the default.
func (q *Quantization) For(path string) QuantParams {
	if p, ok := q.Modules[path]; ok {
		return p
	}
	return QuantParams{q.Bits, q.GroupSize}
}

// ReadConfig reads dir/config.json.
func ReadConfig(dir string) (*Config, error) {
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return ParseConfig(data)
}

// rawConfig is config.json's text-model fields as HF 5.17 writes them
// (pointers where absence differs from zero).
type rawConfig struct {
	ModelType                    string           `json:"model_type"`
	TextConfig                   *json.RawMessage `json:"text_config"`
	DType                        string           `json:"dtype"`
	TorchDType                   string           `json:"torch_dtype"`
	HiddenSize                   int              `json:"hidden_size"`
	NumHiddenLayers              int              `json:"num_hidden_layers"`
	VocabSize                    int              `json:"vocab_size"`
	IntermediateSize             int              `json:"intermediate_size"`
	LayerTypes                   []string         `json:"layer_types"`
	FullAttentionInterval        *int             `json:"full_attention_interval"`
	RMSNormEps                   *float64         `json:"rms_norm_eps"`
	TieWordEmbeddings            *bool            `json:"tie_word_embeddings"`
	NumAttentionHeads            int              `json:"num_attention_heads"`
	NumKeyValueHeads             *int             `json:"num_key_value_heads"`
	HeadDim                      *int             `json:"head_dim"`
	RopeTheta                    *float64         `json:"rope_theta"`
	PartialRotaryFactor          *float64         `json:"partial_rotary_factor"`
	RopeParameters               *ropeParameters  `json:"rope_parameters"`
	RopeScaling                  *ropeParameters  `json:"rope_scaling"`
	LinearKeyHeadDim             int              `json:"linear_key_head_dim"`
	LinearValueHeadDim           int              `json:"linear_value_head_dim"`
	LinearNumKeyHeads            int              `json:"linear_num_key_heads"`
	LinearNumValueHeads          int              `json:"linear_num_value_heads"`
	LinearConvKernelDim          *int             `json:"linear_conv_kernel_dim"`
	NumExperts                   int              `json:"num_experts"`
	NumExpertsPerTok             int              `json:"num_experts_per_tok"`
	NormTopKProb                 *bool            `json:"norm_topk_prob"`
	MoEIntermediateSize          int              `json:"moe_intermediate_size"`
	SharedExpertIntermediateSize int              `json:"shared_expert_intermediate_size"`
	DecoderSparseStep            *int             `json:"decoder_sparse_step"`
	MLPOnlyLayers                []int            `json:"mlp_only_layers"`
	BOSTokenID                   json.RawMessage  `json:"bos_token_id"`
	EOSTokenID                   json.RawMessage  `json:"eos_token_id"`
	Quantization                 json.RawMessage  `json:"quantization"`
	QuantizationConfig           json.RawMessage  `json:"quantization_config"`
	AttentionBias                bool             `json:"attention_bias"`
	HiddenAct                    string           `json:"hidden_act"`
	UseSlidingWindow             bool             `json:"use_sliding_window"`
}

type ropeParameters struct {
	RopeType            string   `json:"rope_type"`
	Type                string   `json:"type"`
	RopeTheta           *float64 `json:"rope_theta"`
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
}

// family holds what differs between the supported text model types.
type family struct {
	hybrid     bool    // Gated DeltaNet layers, zero-centred norms, gated attention
	moe        bool    // experts by default
	shared     bool    // MoE layers have a shared expert
	rotary     float64 // HF's default partial_rotary_factor
	defaultEps float64
}

var families = map[string]family{
	"qwen3_next":       {hybrid: true, moe: true, shared: true, rotary: 0.25, defaultEps: 1e-6},
	"qwen3_5_text":     {hybrid: true, rotary: 0.25, defaultEps: 1e-6},
	"qwen3_5_moe_text": {hybrid: true, moe: true, shared: true, rotary: 0.25, defaultEps: 1e-6},
	"qwen3":            {rotary: 1, defaultEps: 1e-6},
	"qwen3_moe":        {moe: true, rotary: 1, defaultEps: 1e-6},
}

// maxLayers bounds num_hidden_layers, so that a damaged config cannot make
// the parser allocate without bound (the largest models have about 100).
const maxLayers = 1 << 16

// wrappers maps a vision-language wrapper's model_type to its text model's.
var wrappers = map[string]string{"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}

// ParseConfig parses config.json's bytes. Absent fields take HF 5.17's
// defaults where the forward pass does not depend on the model's size
// (eps, conv kernel 4, decoder_sparse_step 1, norm_topk_prob); the sizes
// must be present. layer_types absent is derived from
// full_attention_interval (default 4) as HF does: layer i is full
// attention when (i+1) % interval == 0. RoPE's theta and partial rotary
// factor are read, as HF's config classes standardise them, from
// rope_parameters first (or the legacy rope_scaling), then the top-level
// rope_theta / partial_rotary_factor, then the type's default (theta
// 10000; factor 0.25 for the hybrids, 1 for Qwen3).
func ParseConfig(data []byte) (*Config, error) {
	var top rawConfig
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%w: config.json: %w", ErrConfig, err)
	}
	raw, c := top, &Config{}
	if text, ok := wrappers[top.ModelType]; ok {
		if top.TextConfig == nil {
			return nil, fmt.Errorf("%w: model_type %q has no text_config", ErrConfig, top.ModelType)
		}
		raw = rawConfig{}
		if err := json.Unmarshal(*top.TextConfig, &raw); err != nil {
			return nil, fmt.Errorf("%w: text_config: %w", ErrConfig, err)
		}
		if raw.ModelType == "" {
			raw.ModelType = text
		}
		if raw.ModelType != text {
			return nil, fmt.Errorf("%w: model_type %q wraps text_config.model_type %q, want %q", ErrConfig, top.ModelType, raw.ModelType, text)
		}
		c.Wrapped = true
		if top.TieWordEmbeddings != nil { // the wrapper's own flag is the one HF ties by
			raw.TieWordEmbeddings = top.TieWordEmbeddings
		}
		raw.Quantization, raw.QuantizationConfig = top.Quantization, top.QuantizationConfig
	}
	fam, ok := families[raw.ModelType]
	if !ok {
		return nil, fmt.Errorf("%w: model_type %q is not one of qwen3_next, qwen3_5, qwen3_5_text, qwen3_5_moe, qwen3_5_moe_text, qwen3, qwen3_moe", ErrConfig, raw.ModelType)
	}
	c.ModelType = raw.ModelType
	switch {
	case raw.AttentionBias:
		return nil, fmt.Errorf("%w: attention_bias is true (the projections of model_type %s have no bias here)", ErrConfig, c.ModelType)
	case raw.HiddenAct != "" && raw.HiddenAct != "silu":
		return nil, fmt.Errorf("%w: hidden_act %q, want \"silu\"", ErrConfig, raw.HiddenAct)
	case raw.UseSlidingWindow:
		return nil, fmt.Errorf("%w: use_sliding_window is true (sliding-window attention is not supported)", ErrConfig)
	}
	c.DType = cmp.Or(raw.DType, raw.TorchDType, top.DType, top.TorchDType)
	c.HiddenSize, c.NumLayers, c.VocabSize, c.IntermediateSize = raw.HiddenSize, raw.NumHiddenLayers, raw.VocabSize, raw.IntermediateSize
	c.RMSNormEps = deref(raw.RMSNormEps, fam.defaultEps)
	c.TieWordEmbeddings = deref(raw.TieWordEmbeddings, false)
	c.NumHeads = raw.NumAttentionHeads
	c.NumKVHeads = deref(raw.NumKeyValueHeads, raw.NumAttentionHeads)
	if raw.NumAttentionHeads > 0 {
		c.HeadDim = deref(raw.HeadDim, raw.HiddenSize/raw.NumAttentionHeads)
	}
	rope := raw.RopeParameters
	if rope == nil {
		rope = raw.RopeScaling
	}
	if rope == nil {
		rope = &ropeParameters{}
	}
	if t := cmp.Or(rope.RopeType, rope.Type, "default"); t != "default" {
		return nil, fmt.Errorf("%w: rope_type %q (only \"default\" RoPE is supported)", ErrConfig, t)
	}
	c.RopeTheta = deref(rope.RopeTheta, deref(raw.RopeTheta, 10000))
	c.PartialRotaryFactor = deref(rope.PartialRotaryFactor, deref(raw.PartialRotaryFactor, fam.rotary))
	if fam.hybrid {
		c.LinearKeyHeadDim, c.LinearValueHeadDim = raw.LinearKeyHeadDim, raw.LinearValueHeadDim
		c.LinearNumKeyHeads, c.LinearNumValueHeads = raw.LinearNumKeyHeads, raw.LinearNumValueHeads
		c.LinearConvKernel = deref(raw.LinearConvKernelDim, 4)
	}
	c.LayerTypes = raw.LayerTypes
	if c.NumLayers <= 0 || c.NumLayers > maxLayers {
		return nil, fmt.Errorf("%w: num_hidden_layers is %d, want 1..%d (model_type %s)", ErrConfig, c.NumLayers, maxLayers, c.ModelType)
	}
	if c.LayerTypes == nil {
		c.LayerTypes = make([]string, c.NumLayers)
		interval := deref(raw.FullAttentionInterval, 4)
		if !fam.hybrid {
			interval = 1
		}
		if interval <= 0 {
			return nil, fmt.Errorf("%w: full_attention_interval %d, want > 0", ErrConfig, interval)
		}
		for i := range c.LayerTypes {
			c.LayerTypes[i] = LinearAttention
			if (i+1)%interval == 0 {
				c.LayerTypes[i] = FullAttention
			}
		}
	}
	if fam.moe {
		c.NumExperts, c.NumExpertsPerTok = raw.NumExperts, raw.NumExpertsPerTok
		c.NormTopKProb = deref(raw.NormTopKProb, true)
		c.MoEIntermediateSize = raw.MoEIntermediateSize
		if fam.shared {
			c.SharedExpertIntermediateSize = raw.SharedExpertIntermediateSize
		}
		c.DecoderSparseStep = deref(raw.DecoderSparseStep, 1)
		c.MLPOnlyLayers = raw.MLPOnlyLayers
	}
	var err error
	if c.BOSTokenIDs, err = tokenIDs("bos_token_id", cmpOrRaw(raw.BOSTokenID, top.BOSTokenID)); err != nil {
		return nil, err
	}
	if c.EOSTokenIDs, err = tokenIDs("eos_token_id", cmpOrRaw(raw.EOSTokenID, top.EOSTokenID)); err != nil {
		return nil, err
	}
	if len(raw.Quantization) == 0 || string(raw.Quantization) == "null" {
		// mlx-lm writes its entry under both names; another method's
		// quantization_config (HF's GPTQ, AWQ, FP8...) is not MLX's.
		var method struct {
			QuantMethod string `json:"quant_method"`
		}
		if len(raw.QuantizationConfig) != 0 && json.Unmarshal(raw.QuantizationConfig, &method) == nil && method.QuantMethod != "" {
			return nil, fmt.Errorf("%w: quantization_config.quant_method %q (only MLX affine quantization is supported)", ErrConfig, method.QuantMethod)
		}
		raw.Quantization = raw.QuantizationConfig
	}
	if c.Quantization, err = parseQuantization(raw.Quantization); err != nil {
		return nil, err
	}
	return c, c.validate()
}

// validate checks that the sizes the forward pass uses are there and
// consistent.
func (c *Config) validate() error {
	if len(c.LayerTypes) != c.NumLayers {
		return fmt.Errorf("%w: layer_types has %d entries for num_hidden_layers %d", ErrConfig, len(c.LayerTypes), c.NumLayers)
	}
	fam := families[c.ModelType]
	for i, t := range c.LayerTypes {
		if t != FullAttention && (t != LinearAttention || !fam.hybrid) {
			return fmt.Errorf("%w: layer_types[%d] is %q, which model_type %s does not have", ErrConfig, i, t, c.ModelType)
		}
	}
	type field struct {
		name string
		v    int
	}
	need := []field{{"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumLayers}, {"vocab_size", c.VocabSize}}
	if c.Has(FullAttention) {
		need = append(need, field{"num_attention_heads", c.NumHeads}, field{"num_key_value_heads", c.NumKVHeads}, field{"head_dim", c.HeadDim})
	}
	if c.Has(LinearAttention) {
		need = append(need, field{"linear_key_head_dim", c.LinearKeyHeadDim}, field{"linear_value_head_dim", c.LinearValueHeadDim},
			field{"linear_num_key_heads", c.LinearNumKeyHeads}, field{"linear_num_value_heads", c.LinearNumValueHeads}, field{"linear_conv_kernel_dim", c.LinearConvKernel})
	}
	if c.NumExperts > 0 {
		need = append(need, field{"num_experts_per_tok", c.NumExpertsPerTok}, field{"moe_intermediate_size", c.MoEIntermediateSize}, field{"decoder_sparse_step", c.DecoderSparseStep})
	}
	for i := range c.NumLayers {
		if !c.IsMoELayer(i) {
			need = append(need, field{"intermediate_size", c.IntermediateSize})
			break
		}
	}
	for _, f := range need {
		if f.v <= 0 {
			return fmt.Errorf("%w: %s is %d, want > 0 (model_type %s)", ErrConfig, f.name, f.v, c.ModelType)
		}
	}
	if c.NumHeads > 0 && (c.NumKVHeads <= 0 || c.NumHeads%c.NumKVHeads != 0) {
		return fmt.Errorf("%w: num_attention_heads %d is not a multiple of num_key_value_heads %d", ErrConfig, c.NumHeads, c.NumKVHeads)
	}
	if c.Has(FullAttention) {
		if r := c.RotaryDim(); r <= 0 || r%2 != 0 || float64(r) != float64(c.HeadDim)*c.PartialRotaryFactor {
			return fmt.Errorf("%w: head_dim %d * partial_rotary_factor %v is not an even number of dimensions > 0", ErrConfig, c.HeadDim, c.PartialRotaryFactor)
		}
	}
	if c.Has(LinearAttention) && c.LinearNumValueHeads%c.LinearNumKeyHeads != 0 {
		return fmt.Errorf("%w: linear_num_value_heads %d is not a multiple of linear_num_key_heads %d", ErrConfig, c.LinearNumValueHeads, c.LinearNumKeyHeads)
	}
	if c.NumExpertsPerTok > c.NumExperts {
		return fmt.Errorf("%w: num_experts_per_tok %d of num_experts %d", ErrConfig, c.NumExpertsPerTok, c.NumExperts)
	}
	return nil
}

// Has reports whether any layer is of layer type t.
func (c *Config) Has(t string) bool { return slices.Contains(c.LayerTypes, t) }

// Hybrid reports whether the model is Qwen3-Next or Qwen3.5: Gated
// DeltaNet layers, zero-centred RMSNorm weights (y = x_hat (1 + w)) and an
// output gate in q_proj. Qwen3 and Qwen3-MoE have none of these.
func (c *Config) Hybrid() bool { return families[c.ModelType].hybrid }

// IsMoELayer reports whether layer i's MLP is a mixture of experts: the
// model has experts, i is not in mlp_only_layers and (i+1) %
// decoder_sparse_step == 0 (SPEC section 14).
func (c *Config) IsMoELayer(i int) bool {
	return c.NumExperts > 0 && c.DecoderSparseStep > 0 && !slices.Contains(c.MLPOnlyLayers, i) && (i+1)%c.DecoderSparseStep == 0
}

// RotaryDim is the number of dimensions of each head RoPE rotates:
// head_dim * partial_rotary_factor.
func (c *Config) RotaryDim() int { return int(float64(c.HeadDim) * c.PartialRotaryFactor) }

// LinearHeads is the head layout of the linear-attention layers.
func (c *Config) LinearHeads() Heads {
	return Heads{DK: c.LinearKeyHeadDim, DV: c.LinearValueHeadDim, NKHeads: c.LinearNumKeyHeads, NVHeads: c.LinearNumValueHeads}
}

func parseQuantization(msg json.RawMessage) (*Quantization, error) {
	if len(msg) == 0 || string(msg) == "null" {
		return nil, nil
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(msg, &entries); err != nil {
		return nil, fmt.Errorf("%w: quantization: %w", ErrConfig, err)
	}
	q := &Quantization{Mode: "affine", Modules: map[string]QuantParams{}}
	for k, v := range entries {
		var err error
		switch k {
		case "bits":
			err = json.Unmarshal(v, &q.Bits)
		case "group_size":
			err = json.Unmarshal(v, &q.GroupSize)
		case "mode":
			err = json.Unmarshal(v, &q.Mode)
		default:
			if string(v) == "false" {
				q.Skipped = append(q.Skipped, k)
				continue
			}
			var m struct {
				Bits      int `json:"bits"`
				GroupSize int `json:"group_size"`
			}
			if err = json.Unmarshal(v, &m); err == nil {
				q.Modules[k] = QuantParams{m.Bits, m.GroupSize}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: quantization.%s: %w", ErrConfig, k, err)
		}
	}
	sort.Strings(q.Skipped)
	if q.Mode != "affine" {
		return nil, fmt.Errorf("%w: quantization.mode %q, want \"affine\"", ErrConfig, q.Mode)
	}
	for k, m := range q.Modules {
		if err := m.validate(); err != nil {
			return nil, fmt.Errorf("%w: quantization.%s: %w", ErrConfig, k, err)
		}
	}
	if err := (QuantParams{q.Bits, q.GroupSize}).validate(); err != nil {
		return nil, fmt.Errorf("%w: quantization: %w", ErrConfig, err)
	}
	return q, nil
}

func (p QuantParams) validate() error {
	switch {
	case !slices.Contains([]int{2, 3, 4, 5, 6, 8}, p.Bits):
		return fmt.Errorf("bits %d, want 2, 3, 4, 5, 6 or 8", p.Bits)
	case p.GroupSize <= 0:
		return fmt.Errorf("group_size %d, want > 0", p.GroupSize)
	}
	return nil
}

// tokenIDs reads a token id field: null, a number or a list of numbers.
func tokenIDs(field string, msg json.RawMessage) ([]int32, error) {
	if len(msg) == 0 || string(msg) == "null" {
		return nil, nil
	}
	var one int32
	if json.Unmarshal(msg, &one) == nil {
		return []int32{one}, nil
	}
	var list []int32
	if err := json.Unmarshal(msg, &list); err != nil {
		return nil, fmt.Errorf("%w: %s is %s, want null, a token id or a list of them", ErrConfig, field, strings.TrimSpace(string(msg)))
	}
	return list, nil
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func cmpOrRaw(a, b json.RawMessage) json.RawMessage {
	if len(a) != 0 && string(a) != "null" {
		return a
	}
	return b
}
