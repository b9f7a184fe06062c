package model

import (
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// pass is one forward pass: n tokens of seqs sequences, each sequence
// owning n / seqs of them in order. decode: one token per sequence.
type pass struct {
	n, seqs int
	decode  bool
	in      inputs // what the host wrote for this pass
	// sample, when Tokens is set, draws each sequence's next token from
	// its logits on the device into Tokens (a later pass's input).
	sample struct {
		ops.SampleParams
		Tokens tensor.View
		Seen   tensor.View // the sequence's seen set, with a RepetitionPenalty
	}
	// lastOnly: the logits of each sequence's last token only (a
	// prefill's), else of every token.
	lastOnly bool
	// rows, when not nil (a Batcher's decode pass, one row per
	// sequence), give each row its input token (in.tokens is not read)
	// and its own sampling: one embedding and one draw of Rows 1 per row,
	// so that a row computes and is keyed exactly as the same sequence
	// decoded alone.
	rows []rowIO
}

// rowIO is one row of a batched decode pass: its input token (U32 [1],
// which an earlier pass drew on the device), its sampler's settings (Step
// the sequence's own) and where its token goes (U32 [1]).
type rowIO struct {
	in, out tensor.View
	sample  ops.SampleParams
	seen    tensor.View // the sequence's seen set, with a RepetitionPenalty
}

// row returns row i of v, rows of width elements.
func row(v tensor.View, i, width int) tensor.View {
	return tensor.NewView(v.Buffer, v.Offset+i*width*v.Type.Size(), v.Type, width)
}

// linearParams returns the gdn parameters of the linear-attention layers
// for seqs sequences of perSeq tokens each over a pool of slots slots.
func (m *Model) linearParams(perSeq, seqs, slots int) gdn.Params {
	c := m.Config
	h := c.LinearHeads()
	core := gdn.QwenCore()
	core.NormEps = float32(c.RMSNormEps)
	return gdn.Params{Shape: gdn.Shape{DK: h.DK, DV: h.DV, NKHeads: h.NKHeads, NVHeads: h.NVHeads, NTokens: perSeq, NSeqs: seqs, NSlots: slots},
		QScale: qScale(h.DK), Activation: m.Act, State: gdn.F32, Fused: gdn.FusedAll, Core: core}
}

// product encodes y = x W^T for n rows of x.
func (m *Model) product(enc *mtl.ComputeCommandEncoder, l linear, x, y tensor.View, n int) error {
	x, y = head(x, n*l.in), head(y, n*l.out)
	if !l.quantized() {
		return m.ops.Linear(enc, l.w, x, tensor.View{}, y, n, l.in, l.out)
	}
	if n <= ops.MatVecMaxRows {
		return m.ops.QuantMatVec(enc, l.q, x, tensor.View{}, y, n)
	}
	return m.ops.QuantMatMul(enc, l.q, x, tensor.View{}, y, n)
}

// product encodes y = x W^T for the n rows of pass p: a decode pass of
// more rows than the matvec takes runs it in groups of
// ops.MatVecMaxRows rows, so that each row's arithmetic (the matvec's,
// whatever the rows beside it) is the one it has decoded alone; the
// matmul would round differently. A prefill pass takes the matmul above
// MatVecMaxRows tokens.
func (s *Session) product(enc *mtl.ComputeCommandEncoder, l linear, x, y tensor.View, n int) error {
	if !s.decoding || n <= ops.MatVecMaxRows {
		return s.m.product(enc, l, x, y, n)
	}
	for i := 0; i < n; i += ops.MatVecMaxRows {
		rows := min(ops.MatVecMaxRows, n-i)
		xi := tensor.NewView(x.Buffer, x.Offset+i*l.in*x.Type.Size(), x.Type, rows*l.in)
		yi := tensor.NewView(y.Buffer, y.Offset+i*l.out*y.Type.Size(), y.Type, rows*l.out)
		if err := s.m.product(enc, l, xi, yi, rows); err != nil {
			return err
		}
	}
	return nil
}

// gather encodes the products of the experts ids chose, y [n][k][out].
func (m *Model) gather(enc *mtl.ComputeCommandEncoder, l linear, x, ids, y tensor.View, n, k int, perSlot bool) error {
	rows := n
	if perSlot {
		rows = n * k
	}
	x, ids, y = head(x, rows*l.in), head(ids, n*k), head(y, n*k*l.out)
	g := ops.Gather{Tokens: n, TopK: k, Experts: l.experts, In: l.in, Out: l.out, XPerSlot: perSlot}
	if l.quantized() {
		return m.ops.GatherQuantMatVec(enc, l.q, x, ids, y, g)
	}
	return m.ops.GatherMatVec(enc, l.w, x, ids, y, g)
}

func (m *Model) normParams(rows int, n norm) ops.RMSNormParams {
	return ops.RMSNormParams{Rows: rows, Dim: m.Config.HiddenSize, Eps: float32(m.Config.RMSNormEps), Offset: n.offset}
}

// encode encodes pass p over the session's scratch, whose tokens, pos,
// slots and lens the caller has filled: every layer, the final norm and
// the lm_head into s.logits.
func (s *Session) encode(enc *mtl.ComputeCommandEncoder, p pass) error {
	m, x, n := s.m, &s.s, p.n
	s.decoding = p.decode
	hid := m.Config.HiddenSize
	h, xs, y := head(x.h, n*hid), head(x.x, n*hid), head(x.y, n*hid)
	// The embedding goes to the residual stream and, for the first norm,
	// which normalises in place in the activations' type, to x as well.
	if err := s.embed(enc, p, h, xs); err != nil {
		return err
	}
	for i, ly := range m.layers {
		var err error
		if i == 0 {
			err = m.ops.RMSNorm(enc, m.normParams(n, ly.in), xs, ly.in.w, tensor.View{})
		}
		if err == nil && ly.attn != nil {
			err = s.attention(enc, ly.attn, p)
		} else if err == nil {
			err = s.linearAttention(enc, ly.lin, p)
		}
		if err == nil {
			err = m.ops.RMSNormResidual(enc, m.normParams(n, ly.post), h, y, ly.post.w, xs)
		}
		if err == nil {
			err = s.mlp(enc, ly.mlp, n)
		}
		if err != nil {
			return err
		}
		next, out := m.norm, head(x.xn, n*hid)
		if i+1 < len(m.layers) {
			next, out = m.layers[i+1].in, xs
		}
		if err := m.ops.RMSNormResidual(enc, m.normParams(n, next), h, y, next.w, out); err != nil {
			return err
		}
	}
	rows, from := n, x.xn
	if p.lastOnly {
		// One sequence per prefill pass: its last token's row.
		rows, from = 1, row(x.xn, n-1, hid)
	}
	if err := s.product(enc, m.lmHead, from, x.logits, rows); err != nil {
		return err
	}
	vocab := m.Config.VocabSize
	for i, r := range p.rows {
		sp := r.sample
		sp.Rows, sp.Vocab = 1, vocab
		if err := m.ops.Sample(enc, sp, row(x.logits, i, vocab), r.seen, r.out); err != nil {
			return err
		}
	}
	if p.sample.Tokens.IsZero() {
		return nil
	}
	sp := p.sample.SampleParams
	sp.Rows, sp.Vocab = rows, vocab
	return m.ops.Sample(enc, sp, head(x.logits, rows*sp.Vocab), p.sample.Seen, head(p.sample.Tokens, rows))
}

// embed encodes the embedding of p's tokens into the residual stream h
// and, for the first norm, x: of in.tokens, or of each row's own token.
func (s *Session) embed(enc *mtl.ComputeCommandEncoder, p pass, h, x tensor.View) error {
	m, hid := s.m, s.m.Config.HiddenSize
	if p.rows == nil {
		ids := head(p.in.tokens, p.n)
		if err := m.embedTokens(enc, ids, h, p.n); err != nil {
			return err
		}
		return m.embedTokens(enc, ids, x, p.n)
	}
	for i, r := range p.rows {
		if err := m.embedTokens(enc, r.in, row(h, i, hid), 1); err != nil {
			return err
		}
		if err := m.embedTokens(enc, r.in, row(x, i, hid), 1); err != nil {
			return err
		}
	}
	return nil
}

func (m *Model) embedTokens(enc *mtl.ComputeCommandEncoder, ids, h tensor.View, n int) error {
	e := m.embed
	if e.quantized() {
		return m.ops.QuantEmbed(enc, e.q, ids, h, n)
	}
	return m.ops.Embed(enc, e.w, e.out, e.in, ids, h, n)
}

// attention encodes a full-attention layer: x -> y.
func (s *Session) attention(enc *mtl.ComputeCommandEncoder, at *attention, p pass) error {
	m, x, n, c := s.m, &s.s, p.n, s.m.Config
	d, nh, nkv := c.HeadDim, c.NumHeads, c.NumKVHeads
	q, k, v, o := head(x.q, n*nh*d), head(x.k, n*nkv*d), head(x.v, n*nkv*d), head(x.o, n*nh*d)
	a := ops.Attention{Type: m.Act, HeadDim: d, Heads: nh, KVHeads: nkv, Slots: len(s.used), MaxLen: m.opts.MaxLen}
	views := ops.AttentionViews{Q: q, K: k, V: v, Out: o, KCache: s.kc[at.kvIndex], VCache: s.vc[at.kvIndex],
		Slots: head(p.in.slots, p.seqs), CacheLens: head(p.in.lens, p.seqs)}
	pos := head(p.in.pos, n)
	err := s.product(enc, at.q, x.x, q, n)
	if err == nil && at.gate.out > 0 {
		a.GateStride, views.Gate = d, head(x.gate, n*nh*d)
		err = s.product(enc, at.gate, x.x, views.Gate, n)
	}
	if err == nil {
		err = s.product(enc, at.k, x.x, k, n)
	}
	if err == nil {
		err = s.product(enc, at.v, x.x, v, n)
	}
	if err == nil {
		err = m.ops.RMSNorm(enc, ops.RMSNormParams{Rows: n * nh, Dim: d, Eps: float32(c.RMSNormEps), Offset: at.qNorm.offset}, q, at.qNorm.w, tensor.View{})
	}
	if err == nil {
		err = m.ops.RMSNorm(enc, ops.RMSNormParams{Rows: n * nkv, Dim: d, Eps: float32(c.RMSNormEps), Offset: at.kNorm.offset}, k, at.kNorm.w, tensor.View{})
	}
	if err == nil {
		err = m.ops.RoPE(enc, ops.RoPEParams{Tokens: n, Heads: nh, HeadDim: d, RotaryDim: c.RotaryDim()}, q, pos, m.invFreq)
	}
	if err == nil {
		err = m.ops.RoPE(enc, ops.RoPEParams{Tokens: n, Heads: nkv, HeadDim: d, RotaryDim: c.RotaryDim()}, k, pos, m.invFreq)
	}
	step := ops.AttentionStep{Tokens: n, Seqs: p.seqs, Splits: 1}
	if p.decode && x.splits > 1 {
		// Long caches: each sequence's keys in up to x.splits partitions
		// at once, then a reducing pass.
		step.Splits = x.splits
		views.PartialO, views.PartialML = head(x.partialO, d*x.splits*nh*p.seqs), head(x.partialML, 2*x.splits*nh*p.seqs)
	}
	if err == nil {
		err = m.ops.KVAppend(enc, a, step, views)
	}
	if err == nil && p.decode {
		err = m.ops.AttentionDecode(enc, a, step, views)
	} else if err == nil {
		err = m.ops.AttentionPrefill(enc, a, step, views)
	}
	if err != nil {
		return err
	}
	return s.product(enc, at.o, o, x.y, n)
}

// linearAttention encodes a Gated DeltaNet layer: the input projections,
// the whole layer core (a decode pass: gdn.Kernels.DecodeCore, one
// dispatch, the conv and recurrent states updated in place in the slots;
// a prefill pass of one sequence: prefillCore, two), out_proj.
func (s *Session) linearAttention(enc *mtl.ComputeCommandEncoder, lin *linearAttn, p pass) error {
	m, x, n := s.m, &s.s, p.n
	gp := m.linearParams(n/p.seqs, p.seqs, len(s.used))
	h := gp.Shape
	mixed, z, core := head(x.mixed, n*h.ConvDim()), head(x.z, n*h.NVHeads*h.DV), head(x.core, n*h.NVHeads*h.DV)
	ga, gb := head(x.ga, n*h.NVHeads), head(x.gb, n*h.NVHeads)
	err := s.product(enc, lin.qkv, x.x, mixed, n)
	if err == nil {
		err = s.product(enc, lin.z, x.x, z, n)
	}
	if err == nil {
		err = s.product(enc, lin.b, x.x, gb, n)
	}
	if err == nil {
		err = s.product(enc, lin.a, x.x, ga, n)
	}
	if err != nil {
		return err
	}
	state, conv := s.pool.States[lin.stateIndex], s.pool.ConvStates[lin.stateIndex]
	b := gdn.Buffers{G: ga, Beta: gb, StateIn: state, StateOut: state, Output: core, ALog: lin.aLog, DtBias: lin.dtBias, Slots: head(p.in.slots, p.seqs)}
	cb := gdn.CoreBuffers{MixedQKV: mixed, ConvWeight: lin.conv, ConvStateIn: conv, ConvStateOut: conv, Z: z, NormWeight: lin.normW}
	if p.decode || p.seqs != 1 || n < 2 {
		err = m.gdn.DecodeCore(enc, gp, b, cb)
	} else {
		err = s.prefillCore(enc, gp, b, cb)
	}
	if err != nil {
		return err
	}
	return s.product(enc, lin.out, core, x.y, n)
}

// prefillCore encodes the Gated DeltaNet core of a prefill pass of one
// sequence, n >= 2 tokens: the prefill kernel gdn.Kernels.PrefillCore
// picks (the chunked prefill for long passes) for the first n-1 tokens,
// then gdn.Kernels.DecodeCore for the last. The prefills write the conv
// state apart from the one they read (with grouped heads a key head's
// value-head threadgroups all read it), so the first dispatch reads the
// slot's conv state from the pool and writes it to the session's
// convStage, and the last token's dispatch reads it there and writes it
// back to the pool: the pool holds every slot's conv state after the
// pass, as decode passes over several slots need, with no copy.
func (s *Session) prefillCore(enc *mtl.ComputeCommandEncoder, gp gdn.Params, b gdn.Buffers, c gdn.CoreBuffers) error {
	h := gp.Shape
	n := h.NTokens
	first, last := gp, gp
	first.Shape.NTokens, last.Shape.NTokens = n-1, 1
	// The token-major views, split after n-1 tokens.
	split := func(v tensor.View, perToken int) (tensor.View, tensor.View) {
		return head(v, (n-1)*perToken), tensor.NewView(v.Buffer, v.Offset+(n-1)*perToken*v.Type.Size(), v.Type, perToken)
	}
	fb, lb := b, b
	fc, lc := c, c
	fb.G, lb.G = split(b.G, h.NVHeads)
	fb.Beta, lb.Beta = split(b.Beta, h.NVHeads)
	fb.Output, lb.Output = split(b.Output, h.NVHeads*h.DV)
	fc.MixedQKV, lc.MixedQKV = split(c.MixedQKV, h.ConvDim())
	fc.Z, lc.Z = split(c.Z, h.NVHeads*h.DV)
	fc.ConvStateOut, lc.ConvStateIn = s.s.convStage, s.s.convStage
	if err := s.m.gdn.PrefillCore(enc, first, fb, fc); err != nil {
		return err
	}
	return s.m.gdn.DecodeCore(enc, last, lb, lc)
}

// mlp encodes a layer's MLP: x -> y.
func (s *Session) mlp(enc *mtl.ComputeCommandEncoder, ml mlp, n int) error {
	m, x := s.m, &s.s
	if ml.router.out == 0 {
		return s.swiglu(enc, swiglu{ml.gate, ml.up, ml.down}, x.mg, x.mu, x.ma, x.y, n)
	}
	c := m.Config
	k, e, mi, hid := c.NumExpertsPerTok, c.NumExperts, c.MoEIntermediateSize, c.HiddenSize
	route, ids, wts := head(x.route, n*e), head(x.ids, n*k), head(x.wts, n*k)
	err := s.product(enc, ml.router, x.x, route, n)
	if err == nil {
		err = m.ops.MoERoute(enc, ops.MoERouteParams{Tokens: n, Experts: e, TopK: k, NormTop: c.NormTopKProb}, route, ids, wts)
	}
	switch {
	case err != nil:
	case ml.gateUp.experts > 0:
		// HF's fused experts: one gathered product of [gate | up] rows.
		err = m.gather(enc, ml.gateUp, x.x, ids, x.eg, n, k, false)
		if err == nil {
			err = m.ops.SwiGLUFused(enc, n*k, mi, head(x.eg, n*k*2*mi), head(x.ea, n*k*mi))
		}
	default:
		err = m.gather(enc, ml.gate, x.x, ids, x.eg, n, k, false)
		if err == nil {
			err = m.gather(enc, ml.up, x.x, ids, x.eu, n, k, false)
		}
		if err == nil {
			err = m.ops.SwiGLU(enc, n*k, mi, head(x.eg, n*k*mi), head(x.eu, n*k*mi), head(x.ea, n*k*mi))
		}
	}
	if err == nil {
		err = m.gather(enc, ml.down, x.ea, ids, x.ed, n, k, true)
	}
	var shared, gate tensor.View
	if err == nil && ml.shared != nil {
		shared, gate = head(x.sy, n*hid), head(x.sgl, n)
		err = s.swiglu(enc, *ml.shared, x.sg, x.su, x.sa, shared, n)
		if err == nil {
			err = s.product(enc, ml.sharedGate, x.x, gate, n)
		}
	}
	if err != nil {
		return err
	}
	return m.ops.MoECombine(enc, ops.MoECombineParams{Tokens: n, Dim: hid, TopK: k}, head(x.ed, n*k*hid), wts, shared, gate, head(x.y, n*hid))
}

// swiglu encodes down(silu(gate x) * up x) into out, through g, u and a.
func (s *Session) swiglu(enc *mtl.ComputeCommandEncoder, f swiglu, g, u, a, out tensor.View, n int) error {
	m, x, w := s.m, &s.s, f.gate.out
	err := s.product(enc, f.gate, x.x, g, n)
	if err == nil {
		err = s.product(enc, f.up, x.x, u, n)
	}
	if err == nil {
		err = m.ops.SwiGLU(enc, n, w, head(g, n*w), head(u, n*w), head(a, n*w))
	}
	if err != nil {
		return err
	}
	return s.product(enc, f.down, a, out, n)
}
