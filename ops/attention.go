package ops

import (
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// Attention is the shape of one attention layer over a KV cache (SPEC
// section 14): causal softmax(q k^T * Scale) v with grouped-query heads,
// the keys and values kept in a pool of cache slots, and optionally the
// hybrids' output gate, out * sigmoid(gate).
//
// The cache: KCache and VCache each hold Slots slots of KVHeads runs of
// MaxLen positions of HeadDim elements ([HeadDim, MaxLen, KVHeads, Slots],
// innermost first) in the activation type. A KV head's positions are
// contiguous, so that decode streams a sequence's keys as one range.
// Query head h reads KV head h / (Heads / KVHeads), as HF's repeat_kv
// does.
type Attention struct {
	Type    tensor.ElemType // the activation type: q, k, v, the output, the gate and the cache
	HeadDim int             // 64, 128 or 256
	Heads   int             // query heads
	KVHeads int             // key and value heads; Heads is a multiple of it
	Slots   int             // slots of the cache pool
	MaxLen  int             // positions a slot holds
	// Scale multiplies q k^T; 0 means 1 / sqrt(HeadDim).
	Scale float32
	// GateStride is 0 without a gate; otherwise element d of head h of
	// token t of the gate is Gate[(t*Heads+h)*GateStride + d], so
	// GateStride = HeadDim reads a [HeadDim, Heads, tokens] tensor and
	// 2*HeadDim reads the gate halves of the hybrids' q_proj output
	// ([query | gate] per head) in place, the view starting at the first
	// gate element.
	GateStride int
}

// AttentionStep says which query tokens one dispatch takes and how they
// belong to sequences (SPEC section 11's serving layout).
type AttentionStep struct {
	Tokens int // query tokens of all sequences, packed along one axis
	Seqs   int // sequences
	// Varlen says that CuSeqlens gives each sequence its tokens; without
	// it each sequence owns Tokens / Seqs tokens in order.
	Varlen bool
	// MaxSeqTokens bounds the tokens of one sequence (the append and
	// prefill grids are sized by it). 0 means Tokens / Seqs without
	// Varlen and Tokens with it.
	MaxSeqTokens int
	// Splits is the number of partitions of each cache decode runs at
	// once (1 to [MaxAttentionSplits]): 1 writes the output in one pass;
	// more need PartialO and PartialML and a second, reducing pass. A
	// sequence uses at most ceil(its keys / 32) of them, so a large value
	// costs short caches nothing but idle threadgroups; see
	// [AttentionSplits].
	Splits int
}

// AttentionViews are the views attention reads and writes. Each
// dispatcher says which it uses and ignores the others, so one value can
// serve a step's append and attention.
type AttentionViews struct {
	Q   tensor.View // [HeadDim, Heads, Tokens]
	K   tensor.View // [HeadDim, KVHeads, Tokens]: the step's keys, for the append
	V   tensor.View // [HeadDim, KVHeads, Tokens]: the step's values, for the append
	Out tensor.View // [HeadDim, Heads, Tokens], written

	KCache tensor.View // [HeadDim, MaxLen, KVHeads, Slots]
	VCache tensor.View // [HeadDim, MaxLen, KVHeads, Slots]

	Gate tensor.View // see Attention.GateStride; zero without a gate

	Slots     tensor.View // [Seqs] int32: each sequence's slot; negative is padding, skipped
	CacheLens tensor.View // [Seqs] int32: positions each slot held before this step
	CuSeqlens tensor.View // [Seqs+1] int32, with Varlen

	PartialO  tensor.View // [HeadDim, Splits, Heads, Seqs] f32, decode with Splits > 1
	PartialML tensor.View // [2, Splits, Heads, Seqs] f32, decode with Splits > 1
}

// MaxAttentionSplits is the largest AttentionStep.Splits. A sequence
// uses no more splits than its cache has blocks of 32 keys, so splits
// beyond that are idle threadgroups; 2^16 gives a block each to caches of
// 2^21 positions.
const MaxAttentionSplits = 1 << 16

// AttentionSplits returns a number of decode splits for caches of up to
// maxLen positions: one per 256 positions (a split then streams at least
// eight blocks of 32 keys before the reduction), 1 for caches up to 256
// positions, at most 64. It is a starting point, not a measured optimum:
// BenchmarkMetalAttention times decode on a Mac's GPU.
func AttentionSplits(maxLen int) int {
	return min(max((maxLen+255)/256, 1), 64)
}

// attnParams is attn_params of attention.metal.
type attnParams struct {
	headDim, heads, kvHeads, tokens uint32
	seqs, slots, maxLen, varlen     uint32
	scale                           float32
	gateStride, splits, _           uint32
}

// Buffer indices of attention.metal.
const (
	attnQ, attnKCache, attnVCache, attnOut = 0, 1, 2, 3
	attnParamsIndex                        = 4
	attnSlots, attnCacheLens, attnCu       = 5, 6, 7
	attnGate, attnPartialO, attnPartialML  = 8, 9, 10
)

// KVAppend encodes the write of a step's keys and values into the cache:
// token i of sequence s goes to position CacheLens[s] + i of slot
// Slots[s]. It reads K, V, Slots, CacheLens (and CuSeqlens with Varlen)
// and writes KCache and VCache. Run it before the attention of the same
// step, which reads the step's keys from the cache; [Kernels.KVAdvance]
// advances CacheLens after the attention.
func (k *Kernels) KVAppend(enc *mtl.ComputeCommandEncoder, a Attention, s AttentionStep, v AttentionViews) error {
	p, pso, err := k.prepareAttention(a, s, v, attnAppend, kernels.KVAppendOf(a.Type))
	if err != nil {
		return err
	}
	enc.SetComputePipelineState(pso)
	bind(enc, v.K, 0)
	bind(enc, v.V, 1)
	bind(enc, v.KCache, 2)
	bind(enc, v.VCache, 3)
	a.bindSequences(enc, s, v, v.K)
	mtl.SetValue(enc, p, attnParamsIndex)
	enc.DispatchThreadgroups(mtl.Size{Width: a.KVHeads, Height: s.maxSeqTokens(), Depth: s.Seqs}, mtl.Size{Width: a.HeadDim, Height: 1, Depth: 1})
	return nil
}

// AttentionDecode encodes decode attention: one query token per sequence
// (Tokens == Seqs, no Varlen) against the CacheLens[s] + 1 positions of
// its slot, the step's own key included (append it first). It reads Q,
// KCache, VCache, Slots, CacheLens and Gate (with a gate), writes Out,
// and with Splits > 1 writes PartialO and PartialML in a first dispatch
// and reads them in a second. The GQA ratio Heads / KVHeads is at most
// [kernels.AttentionMaxGroup]: the kernel keeps a KV head's queries in
// registers, so that each key and value is read once for all of them.
// Padding sequences' output rows are left as they were.
func (k *Kernels) AttentionDecode(enc *mtl.ComputeCommandEncoder, a Attention, s AttentionStep, v AttentionViews) error {
	p, pso, err := k.prepareAttention(a, s, v, attnDecode, kernels.AttentionDecodeOf(a.Type, a.HeadDim))
	if err != nil {
		return err
	}
	var reduce *mtl.ComputePipelineState
	if s.Splits > 1 {
		if reduce, err = k.pipeline(kernels.AttentionDecodeReduceOf(a.Type)); err != nil {
			return err
		}
	}
	a.bindAttention(enc, pso, p, s, v)
	part := [2]tensor.View{v.PartialO, v.PartialML}
	if s.Splits == 1 {
		part = [2]tensor.View{v.Q, v.Q} // unread stand-ins
	}
	bind(enc, part[0], attnPartialO)
	bind(enc, part[1], attnPartialML)
	lane := mtl.Size{Width: 32, Height: 1, Depth: 1}
	enc.DispatchThreadgroups(mtl.Size{Width: a.KVHeads, Height: s.Splits, Depth: s.Seqs}, lane)
	if reduce != nil {
		enc.SetComputePipelineState(reduce)
		enc.DispatchThreadgroups(mtl.Size{Width: a.Heads, Height: s.Seqs, Depth: 1}, lane)
	}
	return nil
}

// AttentionPrefill encodes causal attention of packed prompts or chunks
// of prompts: query token i of sequence s sits at position CacheLens[s] +
// i and sees positions 0 to CacheLens[s] + i of its slot, the prefix
// earlier chunks left there and the step's own keys (append them first).
// It reads Q, KCache, VCache, Slots, CacheLens, CuSeqlens (with Varlen)
// and Gate (with a gate) and writes Out; padding sequences' rows are left
// as they were. The kernel stages tiles of keys in threadgroup memory
// ([kernels.AttentionPrefillThreadgroupMemory]) and keeps a running
// softmax per query, so it never holds a score matrix.
func (k *Kernels) AttentionPrefill(enc *mtl.ComputeCommandEncoder, a Attention, s AttentionStep, v AttentionViews) error {
	p, pso, err := k.prepareAttention(a, s, v, attnPrefill, kernels.AttentionPrefillOf(a.Type, a.HeadDim))
	if err != nil {
		return err
	}
	a.bindAttention(enc, pso, p, s, v)
	rows := s.maxSeqTokens() * (a.Heads / a.KVHeads)
	tiles := (rows + kernels.AttentionRows - 1) / kernels.AttentionRows
	enc.DispatchThreadgroups(mtl.Size{Width: a.KVHeads, Height: tiles, Depth: s.Seqs}, mtl.Size{Width: 32, Height: kernels.AttentionRows, Depth: 1})
	return nil
}

// KVAdvance encodes the update of CacheLens after a step: each
// sequence's tokens are added to its cache length, on the GPU, so that
// the next step's append and attention find their positions without the
// host reading them back. It reads Slots (and CuSeqlens with Varlen) and
// writes CacheLens in place; padding and skipped sequences keep theirs.
// Encode it after the step's attention, on the same encoder (dispatches
// of one encoder run in order).
func (k *Kernels) KVAdvance(enc *mtl.ComputeCommandEncoder, a Attention, s AttentionStep, v AttentionViews) error {
	p, pso, err := k.prepareAttention(a, s, v, attnAdvance, kernels.KVAdvance)
	if err != nil {
		return err
	}
	enc.SetComputePipelineState(pso)
	a.bindSequences(enc, s, v, v.Slots)
	mtl.SetValue(enc, p, attnParamsIndex)
	enc.DispatchThreadgroups(mtl.Size{Width: (s.Seqs + 31) / 32, Height: 1, Depth: 1}, mtl.Size{Width: 32, Height: 1, Depth: 1})
	return nil
}

// prepareAttention checks a dispatch of kind on a, s and v and returns its
// parameters and entry's pipeline state; it encodes nothing.
func (k *Kernels) prepareAttention(a Attention, s AttentionStep, v AttentionViews, kind attnKind, entry string) (attnParams, *mtl.ComputePipelineState, error) {
	p, err := a.check(s, kind)
	if err != nil {
		return p, nil, err
	}
	if err := a.checkViews(k.dev, s, v, kind); err != nil {
		return p, nil, err
	}
	pso, err := k.pipeline(entry)
	return p, pso, err
}

// bindAttention sets pso and binds what decode and prefill share.
func (a Attention) bindAttention(enc *mtl.ComputeCommandEncoder, pso *mtl.ComputePipelineState, p attnParams, s AttentionStep, v AttentionViews) {
	enc.SetComputePipelineState(pso)
	bind(enc, v.Q, attnQ)
	bind(enc, v.KCache, attnKCache)
	bind(enc, v.VCache, attnVCache)
	bind(enc, v.Out, attnOut)
	gate := v.Gate
	if a.GateStride == 0 {
		gate = v.Q // unread stand-in
	}
	bind(enc, gate, attnGate)
	a.bindSequences(enc, s, v, v.Q)
	mtl.SetValue(enc, p, attnParamsIndex)
}

// bindSequences binds Slots, CacheLens and CuSeqlens, standIn for the
// last without Varlen.
func (a Attention) bindSequences(enc *mtl.ComputeCommandEncoder, s AttentionStep, v AttentionViews, standIn tensor.View) {
	bind(enc, v.Slots, attnSlots)
	bind(enc, v.CacheLens, attnCacheLens)
	if !s.Varlen {
		v.CuSeqlens = standIn
	}
	bind(enc, v.CuSeqlens, attnCu)
}

// maxSeqTokens returns MaxSeqTokens or its default.
func (s AttentionStep) maxSeqTokens() int {
	switch {
	case s.MaxSeqTokens > 0:
		return s.MaxSeqTokens
	case s.Varlen:
		return s.Tokens
	case s.Seqs > 0:
		return s.Tokens / s.Seqs
	}
	return 0
}
