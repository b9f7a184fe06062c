package cpuref

import (
	"fmt"
	"slices"

	"github.com/puremetal/puremetal/checkpoint"
)

// Model64 is the float64 reference of a whole Qwen3-Next, Qwen3.5 or Qwen3
// (dense or MoE) text model (SPEC section 14), built from this package's
// float64 operations on a checkpoint's weights widened to float64 (MLX
// weights dequantized with [Dequantize64]):
//
//	h = embed_tokens[id]
//	for each layer: h += mixer(norm_in(h)); h += mlp(norm_post(h))
//	logits = lm_head(norm_final(h))
//
// where the mixer is the Gated DeltaNet layer (in_proj, convolution, the
// gated delta rule, gated norm, out_proj) or attention (Qwen3-Next and
// Qwen3.5: q/k norm, partial RoPE, output gate; Qwen3: plain), and the MLP
// is dense SwiGLU or a mixture of experts (with the shared expert and its
// sigmoid gate where the model has one). Nothing is rounded: HF computes
// its norms and the delta rule in float32 even in a float64 run, so HF's
// logits differ from these by float32 rounding (about 1e-6 of the largest
// logit on the golden models).
//
// It is an oracle for tests: slow (every product a float64 loop), simple,
// and sharing no code with the kernels.
type Model64 struct {
	Config  *checkpoint.Config
	embed   []float64 // [vocab][hidden]
	lmHead  []float64 // [vocab][hidden]; embed when tied
	norm    norm64
	layers  []layer64
	invFreq []float64
}

// norm64 is an RMSNorm's weight and offset (y = x_hat (w + offset)).
type norm64 struct {
	w      []float64
	offset float64
}

func (n norm64) apply(x []float64, eps float64) []float64 { return RMSNorm64(x, n.w, eps, n.offset) }

// layer64 is one decoder layer: its two norms, its mixer (one of linear or
// attn) and its MLP.
type layer64 struct {
	in, post norm64
	linear   *linear64
	attn     *attention64
	mlp      mlp64
}

// Cache64 is a sequence's state between calls of [Model64.Forward]: the
// number of tokens seen, and per layer the KV cache (attention) or the
// conv and recurrent states (linear attention).
type Cache64 struct {
	pos    int
	layers []layerCache64
}

type layerCache64 struct {
	k, v  []float64 // [pos][n_kv_heads*head_dim], keys after RoPE
	conv  []float64 // [K-1][conv_dim], oldest first
	state []float64 // [n_v_heads][D_v][D_k]
}

// loader widens a checkpoint's weights to float64 by canonical name,
// remembering the first error.
type loader struct {
	m   *checkpoint.Model
	err error
}

// get returns the weight name widened (dequantized when MLX-quantized).
func (l *loader) get(name string) []float64 {
	if l.err != nil {
		return nil
	}
	x, err := widen(l.m, name)
	if err != nil {
		l.err = err
	}
	return x
}

// norm returns the norm weight name with its offset.
func (l *loader) norm(name string) norm64 {
	w := l.get(name)
	if l.err != nil {
		return norm64{}
	}
	cw, _ := l.m.Weight(name)
	return norm64{w: w, offset: cw.NormOffset}
}

// widen returns the weight called name in float64: floats widened exactly,
// quantized weights as scale * q + bias from the stored values.
func widen(m *checkpoint.Model, name string) ([]float64, error) {
	w, err := m.Weight(name)
	if err != nil {
		return nil, err
	}
	if !w.Quantized() {
		x, err := w.Data.Float32s()
		return Widen(x), err
	}
	words, err := w.Data.Uint32s()
	if err != nil {
		return nil, err
	}
	scales, err := w.Scales.Float32s()
	if err != nil {
		return nil, err
	}
	biases, err := w.Biases.Float32s()
	if err != nil {
		return nil, err
	}
	cols := w.Shape[len(w.Shape)-1]
	rows := len(words) * 32 / w.Quant.Bits / cols
	return Dequantize64(words, Widen(scales), Widen(biases), rows, cols, w.Quant.Bits, w.Quant.GroupSize), nil
}

// NewModel64 widens every weight of m to float64 (m's files may be closed
// afterwards).
func NewModel64(m *checkpoint.Model) (*Model64, error) {
	c := m.Config
	l := &loader{m: m}
	md := &Model64{Config: c, embed: l.get("model.embed_tokens.weight"), lmHead: l.get("lm_head.weight"), norm: l.norm("model.norm.weight")}
	if c.Has(checkpoint.FullAttention) {
		md.invFreq = InvFreq(c.RotaryDim(), c.RopeTheta)
	}
	for i, t := range c.LayerTypes {
		p := func(rest string) string { return fmt.Sprintf("model.layers.%d.%s", i, rest) }
		ly := layer64{in: l.norm(p("input_layernorm.weight")), post: l.norm(p("post_attention_layernorm.weight"))}
		if t == checkpoint.LinearAttention {
			lin, err := loadLinear64(l, c, p)
			if err != nil {
				return nil, err
			}
			ly.linear = lin
		} else {
			ly.attn = loadAttention64(l, c, p)
		}
		ly.mlp = loadMLP64(l, c, i, p)
		md.layers = append(md.layers, ly)
	}
	if l.err != nil {
		return nil, l.err
	}
	return md, nil
}

// NewCache returns the empty state of a new sequence.
func (md *Model64) NewCache() *Cache64 {
	c := &Cache64{layers: make([]layerCache64, len(md.layers))}
	for i, ly := range md.layers {
		if ly.linear != nil {
			h := ly.linear.heads
			c.layers[i].conv = make([]float64, (ly.linear.k-1)*h.ConvDim())
			c.layers[i].state = make([]float64, h.NVHeads*h.DV*h.DK)
		}
	}
	return c
}

// Forward feeds tokens to the sequence whose state is c (a prompt, or one
// token at a time), updates c, and returns the logits after every token
// fed, [len(tokens)][vocab]. A token outside the vocabulary is an error.
func (md *Model64) Forward(c *Cache64, tokens []int32) ([]float64, error) {
	return md.forward(c, tokens, nil)
}

// Hidden is [Model64.Forward] that also returns the residual stream after
// the embedding and after every layer but the last, then the final norm's
// output, each [len(tokens)][hidden] (the golden set's hidden_NN), for
// finding where two implementations part.
func (md *Model64) Hidden(c *Cache64, tokens []int32) (logits []float64, hidden [][]float64, err error) {
	logits, err = md.forward(c, tokens, func(h []float64) { hidden = append(hidden, slices.Clone(h)) })
	return logits, hidden, err
}

// forward is Forward, handing record (when not nil) the hidden states
// [Model64.Hidden] returns.
func (md *Model64) forward(c *Cache64, tokens []int32, record func([]float64)) ([]float64, error) {
	cfg := md.Config
	hid, vocab := cfg.HiddenSize, cfg.VocabSize
	if len(c.layers) != len(md.layers) {
		return nil, fmt.Errorf("cpuref: a cache of %d layers for a model of %d; make it with NewCache", len(c.layers), len(md.layers))
	}
	n := len(tokens)
	h := make([]float64, n*hid)
	for t, id32 := range tokens {
		id := int(id32)
		if id < 0 || id >= vocab {
			return nil, fmt.Errorf("cpuref: token %d at %d is outside the vocabulary of %d", id, t, vocab)
		}
		copy(h[t*hid:], md.embed[id*hid:(id+1)*hid])
	}
	pos := make([]int, n)
	for t := range pos {
		pos[t] = c.pos + t
	}
	eps := cfg.RMSNormEps
	for i, ly := range md.layers {
		if record != nil {
			record(h)
		}
		x := ly.in.apply(h, eps)
		var y []float64
		if ly.linear != nil {
			y = ly.linear.forward(x, &c.layers[i], eps)
		} else {
			y = ly.attn.forward(x, &c.layers[i], pos, md.invFreq, eps)
		}
		addTo(h, y)
		addTo(h, ly.mlp.forward(ly.post.apply(h, eps)))
	}
	c.pos += n
	out := md.norm.apply(h, eps)
	if record != nil {
		record(out)
	}
	return Linear64(out, md.lmHead, vocab, hid), nil
}

func addTo(h, y []float64) {
	for i := range h {
		h[i] += y[i]
	}
}

// sigmoidAll applies the logistic function to every element of x in place.
func sigmoidAll(x []float64) {
	for i, v := range x {
		x[i] = Sigmoid64(v)
	}
}
