package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/puremetal/puremetal/checkpoint"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// ErrUnsupported is wrapped by the error of Load for a checkpoint this
// package cannot run (an unknown model type, a shape no kernel takes).
var ErrUnsupported = errors.New("model: unsupported checkpoint")

// ErrInvalidArgument is wrapped by every error that reports a bad argument
// (a token outside the vocabulary, a slot out of range, a sequence past
// its cache); it is tensor.ErrInvalidArgument.
var ErrInvalidArgument = tensor.ErrInvalidArgument

// Options say how Load lays a model out on the device.
type Options struct {
	// Slots is the number of sequences the caches hold at once (1 when 0).
	Slots int
	// MaxLen is the most positions a sequence's KV cache holds (4096 when
	// 0).
	MaxLen int
	// Chunk is the most prompt tokens one prefill pass takes (64 when 0);
	// longer prompts run in chunks of it, the caches carried between them.
	Chunk int
	// InFlight is the most decode steps Generate keeps committed and not
	// yet completed (2 when 0): the host encodes step t+1 while the GPU
	// runs step t.
	InFlight int
	// F32Activations computes every activation in float32 whatever the
	// checkpoint's type (the weights are read as stored): a reference run
	// against which the 16-bit one can be judged, at twice the activation
	// bytes.
	F32Activations bool
	// Registry, when not nil, supplies the compiled kernels (shared with
	// other users of the device); otherwise the Model makes its own.
	Registry *kernels.Registry
}

func (o Options) withDefaults() Options {
	if o.Slots == 0 {
		o.Slots = 1
	}
	if o.MaxLen == 0 {
		o.MaxLen = 4096
	}
	if o.InFlight == 0 {
		o.InFlight = 2
	}
	if o.Chunk == 0 {
		o.Chunk = 64
	}
	return o
}

// Model is a checkpoint's weights on a Metal device with the kernels that
// run its forward pass (SPEC section 14): cpuref.Model64's recipe, op by
// op, on the GPU.
type Model struct {
	Config *checkpoint.Config
	// Act is the activations' element type: the checkpoint's dtype (for
	// MLX checkpoints the scales' dtype). The residual stream is f32;
	// norms, the router's softmax and the recurrence compute in f32, as HF
	// does.
	Act tensor.ElemType
	// CopiedBytes is how many bytes of weights Load copied rather than
	// viewed in place in the mapped files.
	CopiedBytes int64

	opts   Options
	dev    *mtl.Device
	ck     *checkpoint.Model
	ownCk  bool
	reg    *kernels.Registry
	ownReg bool
	ops    *ops.Kernels
	gdn    *gdn.Kernels
	w      *weights

	embed, lmHead linear
	norm          norm
	layers        []layer
	invFreq       tensor.View // f32 [rotary/2]
}

// layer is one decoder layer: its norms, its mixer (linear attention or
// attention) and its MLP.
type layer struct {
	in, post norm
	lin      *linearAttn
	attn     *attention
	mlp      mlp
}

// attention is a full-attention layer's weights.
type attention struct {
	q, gate, k, v, o linear // gate: the gate rows of q_proj (hybrids), else empty
	qNorm, kNorm     norm
	kvIndex          int // its KV cache among the model's attention layers
}

// linearAttn is a Gated DeltaNet layer's weights.
type linearAttn struct {
	qkv, z, b, a, out linear
	conv, normW       tensor.View // Act: [K][conv_dim] (K fastest), [D_v]
	aLog, dtBias      tensor.View // f32 [n_v_heads]
	stateIndex        int         // its states among the model's linear-attention layers
}

// mlp is a layer's feed-forward block: dense SwiGLU, or a mixture of
// experts with an optional shared expert.
type mlp struct {
	gate, up, down linear // dense, or the experts stacked
	// gateUp, when set, is the experts' gate and up projections as HF
	// fuses them ([E][2 moe_intermediate][hidden], each expert's gate rows
	// then its up rows), viewed in place; gate and up are then unset.
	gateUp     linear
	router     linear
	shared     *swiglu
	sharedGate linear
}

type swiglu struct{ gate, up, down linear }

// Load opens the checkpoint folder dir and loads it onto dev (see New);
// the Model closes the checkpoint on Release.
func Load(dev *mtl.Device, dir string, opts Options) (*Model, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	m, err := New(dev, ck, opts)
	if err != nil {
		ck.Close()
		return nil, err
	}
	m.ownCk = true
	return m, nil
}

// New loads the opened checkpoint ck onto dev: the mapped files become
// no-copy buffers and the weights views into them, but for those the
// kernels cannot read in place (CopiedBytes). ck must stay open until the
// Model is released.
func New(dev *mtl.Device, ck *checkpoint.Model, opts Options) (*Model, error) {
	opts = opts.withDefaults()
	switch {
	case opts.Slots < 1 || opts.MaxLen < 1 || opts.Chunk < 1 || opts.InFlight < 1 || opts.InFlight > 32:
		return nil, tensor.Invalid("Options", "Slots %d, MaxLen %d, Chunk %d, InFlight %d: each must be positive, InFlight at most 32", opts.Slots, opts.MaxLen, opts.Chunk, opts.InFlight)
	case ck == nil || ck.Config == nil:
		return nil, tensor.Invalid("checkpoint", "nil")
	case dev.Released():
		return nil, tensor.Invalid("device", "nil or released")
	}
	c := ck.Config
	a, err := archOf(c)
	if err != nil {
		return nil, err
	}
	m := &Model{Config: c, opts: opts, dev: dev, ck: ck, reg: opts.Registry}
	if m.reg == nil {
		m.reg, m.ownReg = kernels.NewRegistry(), true
	}
	if m.w, err = newWeights(dev, ck); err != nil {
		m.Release()
		return nil, err
	}
	if err := m.load(a); err != nil {
		m.Release()
		return nil, err
	}
	if m.ops, err = ops.New(dev, m.reg); err == nil {
		m.gdn, err = gdn.New(dev, m.reg)
	}
	if err != nil {
		m.Release()
		return nil, err
	}
	return m, nil
}

// actType returns the activations' type of c: the dtype, or for an MLX
// checkpoint the scales' type.
func actType(ck *checkpoint.Model) (tensor.ElemType, error) {
	e, err := ck.Weight("model.embed_tokens.weight")
	if err != nil {
		return 0, err
	}
	if e.Quantized() {
		t, _ := elemType(e.Scales.DType)
		return t, nil
	}
	switch ck.Config.DType {
	case "float32":
		return tensor.F32, nil
	case "float16":
		return tensor.F16, nil
	case "bfloat16":
		return tensor.BF16, nil
	}
	return 0, fmt.Errorf("%w: dtype %q", ErrUnsupported, ck.Config.DType)
}

func (m *Model) load(a architecture) error {
	c, w := m.Config, m.w
	var err error
	if m.Act, err = actType(m.ck); err != nil {
		return err
	}
	if m.opts.F32Activations {
		m.Act = tensor.F32
	}
	m.embed, m.lmHead, m.norm = w.linear("model.embed_tokens.weight"), w.linear("lm_head.weight"), w.norm("model.norm.weight")
	if c.Has(checkpoint.FullAttention) {
		m.invFreq = w.alloc(tensor.F32, c.RotaryDim()/2)
		w.fail(m.invFreq.Store(ops.RoPEInvFreq(c.RotaryDim(), c.RopeTheta)))
	}
	nAttn, nLin := 0, 0
	for i, t := range c.LayerTypes {
		p := fmt.Sprintf("model.layers.%d.", i)
		ly := layer{in: w.norm(p + "input_layernorm.weight"), post: w.norm(p + "post_attention_layernorm.weight")}
		if t == checkpoint.LinearAttention {
			if a.linearProjections == nil {
				return fmt.Errorf("%w: layer %d is linear attention in a %s model", ErrUnsupported, i, c.ModelType)
			}
			ly.lin = m.loadLinearAttn(a, p+"linear_attn.", nLin)
			nLin++
		} else {
			ly.attn = m.loadAttention(a, p+"self_attn.", nAttn)
			nAttn++
		}
		ly.mlp = m.loadMLP(i, p+"mlp.")
		m.layers = append(m.layers, ly)
		if w.err != nil {
			return w.err
		}
	}
	m.CopiedBytes = w.copied
	return w.err
}

func (m *Model) loadAttention(a architecture, p string, index int) *attention {
	c, w := m.Config, m.w
	at := &attention{k: w.linear(p + "k_proj.weight"), v: w.linear(p + "v_proj.weight"), o: w.linear(p + "o_proj.weight"),
		qNorm: w.norm(p + "q_norm.weight"), kNorm: w.norm(p + "k_norm.weight"), kvIndex: index}
	if !a.gatedAttention {
		at.q = w.linear(p + "q_proj.weight")
		return at
	}
	// q_proj emits per head [query | gate]: its rows permuted once into
	// [every head's query | every head's gate], so that the query and the
	// gate are two products into dense tensors.
	d, nh := c.HeadDim, c.NumHeads
	rows := make([]int, 0, 2*nh*d)
	for half := 0; half < 2; half++ {
		for h := 0; h < nh; h++ {
			for i := 0; i < d; i++ {
				rows = append(rows, 2*h*d+half*d+i)
			}
		}
	}
	qg := w.permuted(p+"q_proj.weight", rows)
	if w.err == nil {
		at.q, at.gate = qg.rows(0, nh*d), qg.rows(nh*d, 2*nh*d)
	}
	return at
}

func (m *Model) loadLinearAttn(a architecture, p string, index int) *linearAttn {
	c, w := m.Config, m.w
	h := c.LinearHeads()
	lin := &linearAttn{out: w.linear(p + "out_proj.weight"), stateIndex: index}
	lin.qkv, lin.z, lin.b, lin.a = a.linearProjections(w, h, p)
	if cw := w.get(p + "conv1d.weight"); cw != nil {
		lin.conv = w.view(cw.Data, m.Act)
	}
	if cw := w.get(p + "norm.weight"); cw != nil {
		lin.normW = w.view(cw.Data, m.Act)
	}
	if cw := w.get(p + "A_log"); cw != nil {
		lin.aLog = w.view(cw.Data, tensor.F32)
	}
	if cw := w.get(p + "dt_bias"); cw != nil {
		lin.dtBias = w.view(cw.Data, tensor.F32)
	}
	if c.LinearConvKernel != 4 {
		w.fail(fmt.Errorf("%w: linear_conv_kernel_dim %d, the layer core takes 4", ErrUnsupported, c.LinearConvKernel))
	}
	return lin
}

func (m *Model) loadSwiGLU(p string) swiglu {
	w := m.w
	return swiglu{gate: w.linear(p + "gate_proj.weight"), up: w.linear(p + "up_proj.weight"), down: w.linear(p + "down_proj.weight")}
}

func (m *Model) loadMLP(i int, p string) mlp {
	c, w := m.Config, m.w
	if !c.IsMoELayer(i) {
		s := m.loadSwiGLU(p)
		return mlp{gate: s.gate, up: s.up, down: s.down}
	}
	names := func(proj string) []string {
		ns := make([]string, c.NumExperts)
		for e := range ns {
			ns[e] = fmt.Sprintf("%sexperts.%d.%s.weight", p, e, proj)
		}
		return ns
	}
	ml := mlp{router: w.linear(p + "gate.weight"), down: w.stacked(names("down_proj"))}
	if ml.gateUp = w.fused(names("gate_proj"), names("up_proj")); ml.gateUp.experts == 0 {
		ml.gate, ml.up = w.stacked(names("gate_proj")), w.stacked(names("up_proj"))
	}
	if c.NumExperts > ops.MaxExperts {
		w.fail(fmt.Errorf("%w: %d experts, the router takes at most %d", ErrUnsupported, c.NumExperts, ops.MaxExperts))
	}
	if c.SharedExpertIntermediateSize > 0 {
		s := m.loadSwiGLU(p + "shared_expert.")
		ml.shared, ml.sharedGate = &s, w.linear(p+"shared_expert_gate.weight")
	}
	return ml
}

// Release releases the model's buffers and kernels, and closes the
// checkpoint Load opened. A second call does nothing.
func (m *Model) Release() {
	if m == nil {
		return
	}
	if m.w != nil {
		m.w.release()
		m.w = nil
	}
	if m.ops != nil {
		m.ops.Release()
		m.ops = nil
	}
	if m.gdn != nil {
		m.gdn.Release()
		m.gdn = nil
	}
	if m.ownReg && m.reg != nil {
		m.reg.Release()
		m.reg = nil
	}
	if m.ownCk && m.ck != nil {
		m.ck.Close()
		m.ck = nil
	}
}

// Device returns the device the model runs on.
func (m *Model) Device() *mtl.Device { return m.dev }

// qScale is 1/sqrt(D_k), the linear attention's query scale.
func qScale(dk int) float32 { return float32(1 / math.Sqrt(float64(dk))) }

// MappedBytes is the size of the checkpoint's files mapped for the
// device (the weights read in place).
func (m *Model) MappedBytes() int64 {
	var n int64
	for _, f := range m.ck.Files {
		n += int64(len(f.Pages()))
	}
	return n
}
