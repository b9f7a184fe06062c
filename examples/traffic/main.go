// Command traffic measures the bytes one decode step moves at a real
// model's shapes, on the emulated device, against the floor
// (model.Model.DecodeFloor), and says which kernels move more than their
// weights.
//
// It writes a checkpoint of a real model's architecture with few layers
// (-layers, default 4: for Qwen3-Next three linear-attention layers and one
// full-attention layer, each of the real model's per-layer shapes) into a
// temporary folder, every weight zero, as sparse files (checkpoint.WriteZeros:
// one per layer and one for the rest; each header is written and the
// tensors' bytes skipped), so a checkpoint of tens of gigabytes costs a
// few pages of disk.
// model.Load maps it, so nothing is read but what the kernels read (and
// the few weights the loader permutes or converts, which it copies).
// Weights of zero move the same bytes as trained ones: the router's
// logits all tie, so top-k picks the same num_experts_per_tok experts
// every time, as many as a trained router picks.
//
// It prefills a short prompt (-prompt tokens), then runs one decode step
// in one command buffer and reads the emulator's counters
// (emu.DispatchCounters: the bytes each dispatch loaded and stored through
// each buffer binding) and a capture of the step (mtl.CaptureManager: each
// dispatch's kernel and bindings). It prints the bytes the step moved,
// Model.DecodeFloor (every weight the step uses read once, the KV caches
// and the recurrent and conv states read and written once) and their
// ratio, and then per kernel (by the dispatched function's name): the
// dispatches, bytes loaded and stored, the bytes loaded through bindings
// of weights, and the weights' floor: the bytes of the weights those
// dispatches are bound to (an MoE layer's top-k experts, one embedding
// row). A binding is a weight's when its buffer and offset are those of a
// tensor of the mapped file, or of a weight the loader copies (the
// permuted q_proj and in_proj_qkvz / in_proj_ba of Qwen3-Next), and the
// dispatch reads through it (an encoder keeps earlier dispatches'
// bindings). Weights the loader converts to float32 (a bf16 A_log and
// dt_bias, a few hundred bytes a layer) are not told from the session's
// buffers: they count as moved, not as weights.
//
// The emulator's counters charge every load a thread makes: a vector that
// each SIMD-group of a matrix-vector product re-reads, or a parameter
// block every thread reads, counts in full where a GPU's caches serve it.
// At real shapes the weights dominate, so the ratio says how close the
// kernels' own reads are to the floor; the per-kernel figures say where
// the excess is.
//
// Each dispatch is counted to a layer, in order: a dispatch bound to a
// layer's input_layernorm starts the next layer, one bound to a weight
// outside the layers (the embedding, the final norm, the lm_head) counts
// to none, and any other (the attention over the KV cache, a product of
// a copied weight) to the layer of the dispatch before it. From the figures of each
// layer type (linear attention, full attention), it scales the step to
// the real model's depth analytically: the bytes outside the layers (the
// embedding row, the final norm, the lm_head), plus the first layer's
// (whose input norm adds no residual), plus each layer type's average
// over the other measured layers times the real model's count of it
// after the first. Layers of a type move the same bytes, so this is what
// the real depth measures (the test checks it on a small model). The
// real depth's floor is Model.DecodeFloor of the real-depth checkpoint,
// loaded but not run (-depth-floor).
//
// The lm_head is the largest single read (vocab x hidden: 151936 x 2048
// bf16 is 622 MB for Qwen3-Next) and the emulator runs a kernel on the
// CPU, about a hundred times slower than a GPU; -vocab cuts the
// vocabulary, which changes the embedding row a little and the lm_head's
// bytes in proportion (both in the step and in the floor; the lines
// outside the layers say so), and no layer's figures.
//
// Run it from the repository root:
//
//	go run ./examples/traffic                         # Qwen3-Next-80B-A3B's shapes, 4 layers
//	go run ./examples/traffic -vocab 16384            # a cut vocabulary: a faster lm_head
//	go run ./examples/traffic -model qwen3.5-35b-a3b  # Qwen3.5's MoE shapes
//	go run ./examples/traffic -config config.json -layers 4
//
// -model names a built-in config: qwen3-next-80b-a3b (the default), the
// config.json of Qwen/Qwen3-Next-80B-A3B-Instruct's model card, and
// qwen3.5-35b-a3b, the defaults of transformers' Qwen3_5MoeTextConfig,
// which describe Qwen3.5-35B-A3B. -config takes any unquantized text
// model's config.json instead (for Qwen3.5, the text_config with its
// model_type; Qwen3 dense or MoE).
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/puremetal/puremetal/checkpoint"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/mtl"
)

func main() { os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr)) }

// models are the configs -model names: Qwen3-Next-80B-A3B's config.json
// as its Hugging Face model card gives it (48 layers, every fourth full
// attention with 16 query heads, 2 KV heads of 256, a quarter rotary and
// the output gate; Gated DeltaNet with 16 key heads and 32 value heads of
// 128; 512 experts of which 10 are used, each of 512, and a shared
// expert of 512), and Qwen3.5-35B-A3B's text model as transformers'
// Qwen3_5MoeTextConfig defaults describe it (40 layers, the same
// attention, linear attention and expert shapes, 256 experts of which 8
// are used, vocabulary 248320), not checked against the checkpoint's
// config.json.
var models = map[string]string{
	"qwen3-next-80b-a3b": `{
  "model_type": "qwen3_next", "torch_dtype": "bfloat16",
  "hidden_size": 2048, "num_hidden_layers": 48, "full_attention_interval": 4, "vocab_size": 151936,
  "intermediate_size": 5120, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
  "partial_rotary_factor": 0.25, "rope_theta": 10000000, "linear_conv_kernel_dim": 4,
  "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
  "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
  "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [],
  "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "hidden_act": "silu",
  "bos_token_id": 151643, "eos_token_id": 151645
}`,
	"qwen3.5-35b-a3b": `{
  "model_type": "qwen3_5_moe_text", "dtype": "bfloat16",
  "hidden_size": 2048, "num_hidden_layers": 40, "full_attention_interval": 4, "vocab_size": 248320,
  "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
  "partial_rotary_factor": 0.25, "rope_theta": 10000000, "linear_conv_kernel_dim": 4,
  "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
  "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
  "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "hidden_act": "silu"
}`,
}

// options are what the flags say.
type options struct {
	config      []byte // config.json's bytes
	name        string // what the config is, for the report
	layers      int
	vocab       int // 0: the config's
	prompt      int
	depthFloor  bool
	listKernels int
}

// errUsage marks a bad flag: exit status 2.
var errUsage = errors.New("usage")

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("traffic", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("model", "qwen3-next-80b-a3b", "the model whose shapes to measure: qwen3-next-80b-a3b or qwen3.5-35b-a3b")
	config := fs.String("config", "", "a text model's config.json, instead of -model's")
	var o options
	fs.IntVar(&o.layers, "layers", 4, "layers of the measured model (the config's first ones)")
	fs.IntVar(&o.vocab, "vocab", 0, "cut the vocabulary to this many tokens (0: the config's); changes the embedding row and the lm_head")
	fs.IntVar(&o.prompt, "prompt", 4, "prompt tokens prefilled before the measured step")
	fs.BoolVar(&o.depthFloor, "depth-floor", true, "load the real-depth checkpoint (not run) for its DecodeFloor")
	fs.IntVar(&o.listKernels, "kernels", 0, "list this many kernels, most bytes first (0: all)")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	switch {
	case o.layers < 1:
		return o, fmt.Errorf("%w: -layers %d, want at least 1", errUsage, o.layers)
	case o.vocab < 0:
		return o, fmt.Errorf("%w: -vocab %d, want 0 (the config's) or more", errUsage, o.vocab)
	case o.prompt < 1:
		return o, fmt.Errorf("%w: -prompt %d, want at least 1", errUsage, o.prompt)
	case o.listKernels < 0:
		return o, fmt.Errorf("%w: -kernels %d, want 0 (all) or more", errUsage, o.listKernels)
	}
	builtin, ok := models[*name]
	if !ok {
		return o, fmt.Errorf("%w: -model %q, want qwen3-next-80b-a3b or qwen3.5-35b-a3b", errUsage, *name)
	}
	o.config, o.name = []byte(builtin), *name
	if *config != "" {
		b, err := os.ReadFile(*config)
		if err != nil {
			return o, fmt.Errorf("%w: -config: %w", errUsage, err)
		}
		o.config, o.name = b, *config
	}
	return o, nil
}

func cli(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "traffic:", err)
		return 2
	}
	dev, err := emu.NewDevice()
	if err != nil {
		fmt.Fprintln(stderr, "traffic: the emulated device:", err)
		return 1
	}
	defer dev.Release()
	if _, err := run(o, dev, stdout); err != nil {
		fmt.Fprintln(stderr, "traffic:", err)
		return 1
	}
	return 0
}

// withLayers returns config with num_hidden_layers set to layers (and
// layer_types, when given, cut to them) and, when vocab > 0, vocab_size
// set to it; and the real model's layer types.
func withLayers(config []byte, layers, vocab int) ([]byte, *checkpoint.Config, error) {
	full, err := checkpoint.ParseConfig(config)
	if err != nil {
		return nil, nil, err
	}
	if layers > full.NumLayers {
		return nil, nil, fmt.Errorf("%w: -layers %d, the model has %d", errUsage, layers, full.NumLayers)
	}
	if vocab > full.VocabSize {
		return nil, nil, fmt.Errorf("%w: -vocab %d, the model's is %d", errUsage, vocab, full.VocabSize)
	}
	var raw map[string]any
	if err := json.Unmarshal(config, &raw); err != nil {
		return nil, nil, err
	}
	raw["num_hidden_layers"] = layers
	if t, ok := raw["layer_types"].([]any); ok {
		raw["layer_types"] = t[:layers]
	}
	if vocab > 0 {
		raw["vocab_size"] = vocab
	}
	b, err := json.MarshalIndent(raw, "", "  ")
	return b, full, err
}

// kernel is what the dispatches of one function moved.
type kernel struct {
	name                      string
	dispatches                int
	loaded, stored            int64
	weightLoaded, weightFloor int64
	moved                     int64 // loaded + stored
	params                    int64 // loaded through setBytes bindings
	weightStored              int64
}

// part is what the dispatches counted to one layer (or to none: -1)
// moved, and the floor of the weights they are bound to.
type part struct {
	moved, weightFloor int64
}

// result is what run measured.
type result struct {
	config              *checkpoint.Config // the measured model's
	full                *checkpoint.Config
	held                int
	moved, floor        int64
	params              int64 // of moved, loaded through setBytes bindings
	weightFloor         int64 // the weights' floor over all dispatches
	kernels             []kernel
	layers              map[int]part // by layer, -1 outside the layers
	scaledMoved         int64
	scaledMissing       []string // layer types the real model has and the measured one has not but as its first
	scaledFloor         int64    // 0 when not measured
	dispatches, unbound int
}

// run measures a decode step of the model o describes on dev, an emulated
// device, and prints the report.
func run(o options, dev *mtl.Device, stdout io.Writer) (*result, error) {
	cfg, full, err := withLayers(o.config, o.layers, o.vocab)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "traffic-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c, err := checkpoint.WriteZeros(dir, cfg)
	if err != nil {
		return nil, err
	}
	lin := 0
	for _, t := range c.LayerTypes {
		if t == checkpoint.LinearAttention {
			lin++
		}
	}
	fmt.Fprintf(stdout, "%s's shapes: %d of its %d layers (%d linear attention, %d full attention), vocab %d of %d, %s; every weight zero, in sparse files in %s\n",
		o.name, c.NumLayers, full.NumLayers, lin, c.NumLayers-lin, c.VocabSize, full.VocabSize, c.DType, dir)

	// A chunk of the prompt's length keeps the session's buffers off the
	// sizes of the weights the loader copies (see weightRegions).
	m, err := model.Load(dev, dir, model.Options{MaxLen: o.prompt + 1, Chunk: o.prompt})
	if err != nil {
		return nil, err
	}
	defer m.Release()
	s, err := m.NewSession()
	if err != nil {
		return nil, err
	}
	defer s.Release()
	slot, err := s.Acquire()
	if err != nil {
		return nil, err
	}
	prompt := make([]int32, o.prompt)
	for i := range prompt {
		prompt[i] = int32(i+1) % int32(c.VocabSize)
	}
	if _, err := s.Prefill(slot, prompt, nil); err != nil {
		return nil, err
	}
	r := &result{config: c, full: full, held: s.Len(slot)}
	r.floor = m.DecodeFloor(r.held)
	dispatches, counters, err := measureStep(s, slot, dir)
	if err != nil {
		return nil, err
	}
	regions, err := weightRegions(dir, c)
	if err != nil {
		return nil, err
	}
	r.tally(dispatches, counters, regions)
	if o.depthFloor && full.NumLayers != c.NumLayers {
		if r.scaledFloor, err = depthFloor(dev, o, full.NumLayers, r.held); err != nil {
			return nil, err
		}
	}
	r.print(stdout, o.listKernels)
	if r.moved < r.floor {
		return r, fmt.Errorf("the step moved %d bytes, less than the floor %d: the floor counts something the step does not read", r.moved, r.floor)
	}
	for _, k := range r.kernels {
		if k.weightStored > 0 {
			return r, fmt.Errorf("%s stored %d bytes through bindings taken for weights: a buffer of the session has a weight's size", k.name, k.weightStored)
		}
	}
	return r, nil
}

// depthFloor loads the real depth's checkpoint of zeros (not run) and
// returns its DecodeFloor at held positions.
func depthFloor(dev *mtl.Device, o options, layers, held int) (int64, error) {
	cfg, _, err := withLayers(o.config, layers, o.vocab)
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "traffic-depth-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	if _, err := checkpoint.WriteZeros(dir, cfg); err != nil {
		return 0, err
	}
	m, err := model.Load(dev, dir, model.Options{MaxLen: held + 1, Chunk: o.prompt})
	if err != nil {
		return 0, err
	}
	defer m.Release()
	return m.DecodeFloor(held), nil
}

// dispatch is one dispatch of a capture: its function and buffer
// bindings.
type dispatch struct {
	kernel   string
	bindings map[int]binding
}

// binding is a buffer bound to a dispatch: the buffer's length and the
// offset bound; or bytes set with setBytes (params).
type binding struct {
	length, offset int
	params         bool
}

// measureStep runs one decode step of the slot in one command buffer,
// captured, and returns its dispatches and their counters, in order.
func measureStep(s *model.Session, slot int, dir string) ([]dispatch, []counts, error) {
	q, err := s.Model().Device().NewCommandQueue()
	if err != nil {
		return nil, nil, err
	}
	defer q.Release()
	cm, err := mtl.SharedCaptureManager()
	if err != nil {
		return nil, nil, err
	}
	trace := filepath.Join(dir, "step.gputrace")
	if err := cm.StartCapture(mtl.CaptureDescriptor{Object: q, Destination: mtl.CaptureDestinationGPUTraceDocument, OutputPath: trace}); err != nil {
		return nil, nil, err
	}
	cb, err := q.CommandBuffer()
	if err != nil {
		cm.StopCapture()
		return nil, nil, err
	}
	defer cb.Release()
	err = s.EncodeDecode(cb, slot, 1)
	if err == nil {
		cb.Commit()
		cb.WaitUntilCompleted()
	}
	cm.StopCapture()
	if err != nil {
		return nil, nil, err
	}
	if err := cb.Error(); err != nil {
		return nil, nil, err
	}
	cs, err := emu.DispatchCounters(cb)
	if err != nil {
		return nil, nil, err
	}
	ds, err := readCapture(filepath.Join(trace, "capture.txt"))
	if err != nil {
		return nil, nil, err
	}
	if len(ds) != len(cs) {
		return nil, nil, fmt.Errorf("the capture holds %d dispatches, the counters %d", len(ds), len(cs))
	}
	out := make([]counts, len(cs))
	for i, c := range cs {
		for j := range c.Loaded {
			out[i].loaded[j], out[i].stored[j] = int64(c.Loaded[j]), int64(c.Stored[j])
		}
	}
	return ds, out, nil
}

// counts is a dispatch's bytes loaded and stored per binding.
type counts struct{ loaded, stored [msl.MaxBindings]int64 }

// readCapture reads the dispatches of the emulated device's capture
// record: "N: dispatchThreads kernel NAME ..." or "N:
// dispatchThreadgroups kernel NAME ...", each followed by its
// "buffer(J): buffer ["label"] length L offset O" or "buffer(J): setBytes
// N bytes ..." lines.
func readCapture(path string) ([]dispatch, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ds []dispatch
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 4 && strings.HasPrefix(fields[1], "dispatch") && fields[2] == "kernel":
			ds = append(ds, dispatch{kernel: fields[3], bindings: map[int]binding{}})
		case len(fields) >= 3 && strings.HasPrefix(fields[0], "buffer(") && len(ds) > 0:
			j, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(fields[0], "buffer("), "):"))
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
			}
			if fields[1] == "setBytes" {
				ds[len(ds)-1].bindings[j] = binding{params: true}
				continue
			}
			n := len(fields)
			if n < 6 || fields[1] != "buffer" || fields[n-4] != "length" || fields[n-2] != "offset" {
				return nil, fmt.Errorf("%s: %q: want ... length L offset O", path, sc.Text())
			}
			length, err1 := strconv.Atoi(fields[n-3])
			offset, err2 := strconv.Atoi(fields[n-1])
			if err := cmp.Or(err1, err2); err != nil {
				return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
			}
			ds[len(ds)-1].bindings[j] = binding{length: length, offset: offset}
		}
	}
	return ds, sc.Err()
}

// region is a weight as a dispatch binds it: its name (within its layer
// for a layer's weight), whether it lies outside the layers, and the bytes
// a decode step must read of it.
type region struct {
	name    string
	outside bool
	floor   int64
}

// weightRegions returns the weights of the checkpoint in dir by the
// bindings a dispatch makes of them: the mapped files' tensors at their
// offsets in the file's buffer (whose length is the file's in whole
// pages), the experts' stacks at their first expert, and the weights the
// loader copies into buffers of their own (of the weight's length) at the
// offsets of the parts it splits them into. The files of two layers of a
// type are alike, so a binding names a layer's weight but not its layer
// (see tally).
func weightRegions(dir string, c *checkpoint.Config) (map[binding]region, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	regions := map[binding]region{}
	es := 0
	for _, f := range ck.Files {
		pages := len(f.Pages())
		for _, n := range f.Names() {
			t, _ := f.Tensor(n)
			es = len(t.Data) / t.Elems()
			rg := region{name: n, outside: true, floor: int64(len(t.Data))}
			if rest, ok := strings.CutPrefix(n, "model.layers."); ok {
				_, rest, _ = strings.Cut(rest, ".")
				rg.name, rg.outside = rest, false
				if e, ok := strings.CutPrefix(rest, "mlp.experts."); ok {
					if !strings.HasPrefix(e, "0.") {
						continue // bound as the stack from expert 0
					}
					rg.floor *= int64(c.NumExpertsPerTok)
					rg.name = "mlp.experts (top-k of " + strings.TrimPrefix(e, "0.") + ")"
					if strings.HasPrefix(e, "0.gate_proj") {
						rg.name, rg.floor = "mlp.experts (top-k of gate_proj and up_proj, fused)", 2*rg.floor
					}
				}
			}
			if n == "model.embed_tokens.weight" {
				rg.name, rg.floor = n+" (one row)", rg.floor/int64(c.VocabSize)
			}
			b := binding{length: pages, offset: int(t.Offset)}
			if old, ok := regions[b]; ok && old != rg {
				return nil, fmt.Errorf("%s and %s lie at offset %d of files of %d bytes: a binding would not tell them apart", old.name, rg.name, b.offset, b.length)
			}
			regions[b] = rg
		}
	}
	copied := func(name string, rows, cols int, parts ...int) {
		length, off := rows*cols*es, 0
		for i, p := range parts {
			regions[binding{length: length, offset: off}] = region{name: fmt.Sprintf("%s (part %d of %d)", name, i+1, len(parts)), floor: int64(p * cols * es)}
			off += p * cols * es
		}
	}
	h := c.HiddenSize
	if c.Hybrid() {
		q := c.NumHeads * c.HeadDim
		copied("self_attn.q_proj (permuted: query, gate)", 2*q, h, q, q)
		lh := c.LinearHeads()
		if c.ModelType == "qwen3_next" {
			cd, vd, nv := lh.ConvDim(), lh.NVHeads*lh.DV, lh.NVHeads
			copied("linear_attn.in_proj_qkvz (permuted: qkv, z)", cd+vd, h, cd, vd)
			copied("linear_attn.in_proj_ba (permuted: b, a)", 2*nv, h, nv, nv)
		}
	}
	return regions, nil
}

// tally sums the counters per kernel and per layer. A dispatch is counted
// to the layers in order: to the next layer from the one bound to its
// input_layernorm on, to none (-1) when bound to a weight outside the
// layers, and else to the layer of the dispatch before it.
func (r *result) tally(ds []dispatch, cs []counts, regions map[binding]region) {
	byName := map[string]*kernel{}
	r.layers = map[int]part{}
	layer, started := -1, 0
	for i, d := range ds {
		next := started
		k := byName[d.kernel]
		if k == nil {
			k = &kernel{name: d.kernel}
			byName[d.kernel] = k
		}
		k.dispatches++
		var moved, floor int64
		bound := false
		for j := range cs[i].loaded {
			ld, st := cs[i].loaded[j], cs[i].stored[j]
			moved += ld + st
			k.loaded += ld
			k.stored += st
			b, ok := d.bindings[j]
			if !ok || ld+st == 0 {
				continue // unbound, or bound for an earlier dispatch and unused
			}
			if b.params {
				k.params += ld
				r.params += ld
				continue
			}
			rg, ok := regions[b]
			if !ok {
				continue
			}
			bound = true
			k.weightLoaded += ld
			k.weightStored += st
			k.weightFloor += rg.floor
			floor += rg.floor
			switch {
			case rg.outside:
				layer = -1
			case rg.name == "input_layernorm.weight":
				layer = next
			}
		}
		if !bound {
			r.unbound++
		}
		if layer == next {
			started++
		}
		r.dispatches++
		r.moved += moved
		r.weightFloor += floor
		p := r.layers[layer]
		p.moved += moved
		p.weightFloor += floor
		r.layers[layer] = p
	}
	for _, k := range byName {
		k.moved = k.loaded + k.stored
		r.kernels = append(r.kernels, *k)
	}
	slices.SortFunc(r.kernels, func(a, b kernel) int { return cmp.Or(cmp.Compare(b.moved, a.moved), strings.Compare(a.name, b.name)) })

	// The real depth: what lies outside the layers, plus each layer
	// type's average times the real model's count of it.
	// The first layer is its own: its input norm adds no residual.
	r.scaledMoved = r.layers[-1].moved + r.layers[0].moved
	for _, t := range []string{checkpoint.LinearAttention, checkpoint.FullAttention} {
		n := count(r.full.LayerTypes[1:], t)
		if avg, measured := r.typeAverage(t); measured > 0 {
			r.scaledMoved += avg.moved * int64(n)
		} else if n > 0 {
			r.scaledMissing = append(r.scaledMissing, t)
		}
	}
}

// typeAverage returns the average over the measured layers of type t but
// the first, and how many there are.
func (r *result) typeAverage(t string) (part, int) {
	var sum part
	n := 0
	for i, lt := range r.config.LayerTypes {
		if lt == t && i > 0 {
			sum.moved += r.layers[i].moved
			sum.weightFloor += r.layers[i].weightFloor
			n++
		}
	}
	if n == 0 {
		return part{}, 0
	}
	return part{sum.moved / int64(n), sum.weightFloor / int64(n)}, n
}

func count(types []string, t string) int {
	n := 0
	for _, x := range types {
		if x == t {
			n++
		}
	}
	return n
}

func mb(n int64) string { return fmt.Sprintf("%.2f MB", float64(n)/1e6) }

func ratio(a, b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3fx", float64(a)/float64(b))
}

func (r *result) print(w io.Writer, list int) {
	fmt.Fprintf(w, "decode step at %d held positions: moved %d bytes (%s), floor %d bytes (%s, Model.DecodeFloor): %s\n",
		r.held, r.moved, mb(r.moved), r.floor, mb(r.floor), ratio(r.moved, r.floor))
	fmt.Fprintf(w, "of which the parameter blocks (setBytes, read by every thread; constant memory on a GPU) %d bytes: without them %d bytes (%s): %s\n",
		r.params, r.moved-r.params, mb(r.moved-r.params), ratio(r.moved-r.params, r.floor))
	fmt.Fprintf(w, "%d dispatches (%d bound to no weight); the weights they are bound to: %s (the floor less the KV caches and states, and a weight bound twice counted twice)\n",
		r.dispatches, r.unbound, mb(r.weightFloor))
	fmt.Fprintf(w, "\nper kernel, most bytes first: moved = loaded + stored; of the loads, those through the bindings of weights (and the floor of those weights), of parameter blocks, and of other buffers (activations, caches, states)\n")
	fmt.Fprintf(w, "%-40s %5s %11s %11s %11s %11s %11s %11s %9s\n", "kernel", "disp", "moved", "wt floor", "wt loaded", "params", "other load", "stored", "moved/wt")
	for i, k := range r.kernels {
		if list > 0 && i == list {
			fmt.Fprintf(w, "... %d more kernels\n", len(r.kernels)-list)
			break
		}
		fmt.Fprintf(w, "%-40s %5d %11s %11s %11s %11s %11s %11s %9s\n", k.name, k.dispatches, mb(k.moved), mb(k.weightFloor), mb(k.weightLoaded), mb(k.params), mb(k.loaded-k.weightLoaded-k.params), mb(k.stored), ratio(k.moved, k.weightFloor))
	}
	fmt.Fprintf(w, "\nper layer type (the average layer): moved / the floor of its weights\n")
	out, first := r.layers[-1], r.layers[0]
	fmt.Fprintf(w, "  outside the layers (embedding row, final norm, lm_head at vocab %d): moved %s, weights %s: %s\n", r.config.VocabSize, mb(out.moved), mb(out.weightFloor), ratio(out.moved, out.weightFloor))
	fmt.Fprintf(w, "  the first layer (%s, its input norm without a residual): moved %s, weights %s: %s\n", r.config.LayerTypes[0], mb(first.moved), mb(first.weightFloor), ratio(first.moved, first.weightFloor))
	for _, t := range []string{checkpoint.LinearAttention, checkpoint.FullAttention} {
		avg, n := r.typeAverage(t)
		if n == 0 {
			continue
		}
		fmt.Fprintf(w, "  %s after the first (%d measured, %d in the model): moved %s, weights %s: %s\n", t, n, count(r.full.LayerTypes[1:], t), mb(avg.moved), mb(avg.weightFloor), ratio(avg.moved, avg.weightFloor))
	}
	if r.full.NumLayers == r.config.NumLayers {
		return
	}
	if len(r.scaledMissing) > 0 {
		fmt.Fprintf(w, "\nnot scaled to the real depth (%d layers): no %s layer but the first measured; give more -layers\n", r.full.NumLayers, strings.Join(r.scaledMissing, " or "))
		return
	}
	fmt.Fprintf(w, "\nscaled analytically to the real depth (%d layers): outside the layers + the first layer + each type's average after the first x its count after the first: moved %s", r.full.NumLayers, mb(r.scaledMoved))
	if r.scaledFloor > 0 {
		fmt.Fprintf(w, ", floor %s (DecodeFloor of the %d-layer checkpoint of zeros): %s", mb(r.scaledFloor), r.full.NumLayers, ratio(r.scaledMoved, r.scaledFloor))
	}
	fmt.Fprintln(w)
	if r.config.VocabSize != r.full.VocabSize {
		fmt.Fprintf(w, "(the vocabulary is cut to %d of %d: the lm_head and embedding row, outside the layers, are in proportion smaller in both figures)\n", r.config.VocabSize, r.full.VocabSize)
	}
}
