package ops

import (
	"math"
	"unsafe"

	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// attnKind is one of the attention dispatchers, for their checks.
type attnKind int

const (
	attnAppend attnKind = iota
	attnDecode
	attnPrefill
)

// check checks the shape of a dispatch of kind and returns the kernel's
// parameter block:
//
//   - Type f32, f16 or bf16; HeadDim one of [kernels.AttentionHeadDims]
//     (the kernels keep a head in registers, 32 lanes wide);
//   - Heads, KVHeads, Slots and MaxLen positive, Heads a multiple of
//     KVHeads, and for decode Heads / KVHeads at most
//     [kernels.AttentionMaxGroup];
//   - Scale finite; GateStride 0 or at least HeadDim;
//   - Tokens and Seqs positive; without Varlen Tokens a multiple of Seqs;
//     decode one token per sequence, no Varlen; MaxSeqTokens 0 or, with
//     Varlen, at most Tokens, without it Tokens / Seqs;
//   - decode: Splits 0 (one) to [MaxAttentionSplits].
func (a Attention) check(s AttentionStep, kind attnKind) (attnParams, error) {
	if err := tensor.FloatType("Attention.Type", a.Type); err != nil {
		return attnParams{}, err
	}
	headDim := false
	for _, d := range kernels.AttentionHeadDims {
		headDim = headDim || a.HeadDim == d
	}
	switch {
	case !headDim:
		return attnParams{}, tensor.Invalid("Attention.HeadDim", "%d, the kernels take %v", a.HeadDim, kernels.AttentionHeadDims)
	case a.Heads <= 0 || a.KVHeads <= 0:
		return attnParams{}, tensor.Invalid("Attention.Heads", "Heads = %d, KVHeads = %d: both must be positive", a.Heads, a.KVHeads)
	case a.Heads%a.KVHeads != 0:
		return attnParams{}, tensor.Invalid("Attention.Heads", "Heads = %d is not a multiple of KVHeads = %d", a.Heads, a.KVHeads)
	case kind == attnDecode && a.Heads/a.KVHeads > kernels.AttentionMaxGroup:
		return attnParams{}, tensor.Invalid("Attention.Heads", "Heads / KVHeads = %d / %d = %d query heads per KV head, decode takes at most %d", a.Heads, a.KVHeads, a.Heads/a.KVHeads, kernels.AttentionMaxGroup)
	case a.Slots <= 0 || a.MaxLen <= 0:
		return attnParams{}, tensor.Invalid("Attention.Slots", "Slots = %d, MaxLen = %d: both must be positive", a.Slots, a.MaxLen)
	case math.IsNaN(float64(a.Scale)) || math.IsInf(float64(a.Scale), 0):
		return attnParams{}, tensor.Invalid("Attention.Scale", "%v, must be finite", a.Scale)
	case a.GateStride != 0 && a.GateStride < a.HeadDim:
		return attnParams{}, tensor.Invalid("Attention.GateStride", "%d, must be 0 (no gate) or at least HeadDim = %d", a.GateStride, a.HeadDim)
	case s.Tokens <= 0 || s.Seqs <= 0:
		return attnParams{}, tensor.Invalid("AttentionStep.Tokens", "Tokens = %d, Seqs = %d: both must be positive", s.Tokens, s.Seqs)
	case !s.Varlen && s.Tokens%s.Seqs != 0:
		return attnParams{}, tensor.Invalid("AttentionStep.Tokens", "Tokens = %d is not a multiple of Seqs = %d (without Varlen each sequence owns Tokens / Seqs)", s.Tokens, s.Seqs)
	case kind == attnDecode && (s.Varlen || s.Tokens != s.Seqs):
		return attnParams{}, tensor.Invalid("AttentionStep.Tokens", "decode takes one token per sequence without Varlen, got Tokens = %d, Seqs = %d, Varlen = %v", s.Tokens, s.Seqs, s.Varlen)
	case s.MaxSeqTokens < 0 || s.Varlen && s.MaxSeqTokens > s.Tokens:
		return attnParams{}, tensor.Invalid("AttentionStep.MaxSeqTokens", "%d, must be 0 to Tokens = %d", s.MaxSeqTokens, s.Tokens)
	case !s.Varlen && s.MaxSeqTokens != 0 && s.MaxSeqTokens != s.Tokens/s.Seqs:
		return attnParams{}, tensor.Invalid("AttentionStep.MaxSeqTokens", "%d, without Varlen every sequence has Tokens / Seqs = %d", s.MaxSeqTokens, s.Tokens/s.Seqs)
	case kind == attnDecode && (s.Splits < 0 || s.Splits > MaxAttentionSplits):
		return attnParams{}, tensor.Invalid("AttentionStep.Splits", "%d, must be 0 (one) to %d", s.Splits, MaxAttentionSplits)
	}
	scale := a.Scale
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(a.HeadDim)))
	}
	p := attnParams{
		headDim: uint32(a.HeadDim), heads: uint32(a.Heads), kvHeads: uint32(a.KVHeads),
		tokens: uint32(min(s.Tokens, math.MaxUint32)), seqs: uint32(min(s.Seqs, math.MaxUint32)),
		slots: uint32(min(a.Slots, math.MaxUint32)), maxLen: uint32(min(a.MaxLen, math.MaxUint32)),
		scale: scale, gateStride: uint32(min(a.GateStride, math.MaxUint32)), splits: uint32(max(s.Splits, 1)),
	}
	if s.Varlen {
		p.varlen = 1
	}
	return p, nil
}

// checkViews checks the views a dispatch of kind uses (tensor.Check) and,
// where the CPU can read them, the sequences' int32 values
// (checkSequences). Views it does not use are not looked at.
func (a Attention) checkViews(dev *mtl.Device, s AttentionStep, v AttentionViews, kind attnKind) error {
	const typeFrom = "Attention.Type"
	tokens := elems(a.HeadDim, a.Heads, s.Tokens)
	kv := elems(a.HeadDim, a.KVHeads, s.Tokens)
	cache := elems(a.HeadDim, a.MaxLen, a.KVHeads, a.Slots)
	seqs := [...]tensor.Arg{
		{Name: "Slots", View: v.Slots, Type: tensor.I32, Len: s.Seqs, Formula: "Seqs"},
		{Name: "CacheLens", View: v.CacheLens, Type: tensor.I32, Len: s.Seqs, Formula: "Seqs"},
		{Name: "CuSeqlens", View: v.CuSeqlens, Type: tensor.I32, Len: s.Seqs + 1, Formula: "Seqs+1", Optional: !s.Varlen},
	}
	if !s.Varlen {
		seqs[2].View = tensor.View{}
	}
	var err error
	if kind == attnAppend {
		err = tensor.Check(dev,
			tensor.Arg{Name: "K", View: v.K, Type: a.Type, TypeFrom: typeFrom, Len: kv, Formula: "HeadDim*KVHeads*Tokens"},
			tensor.Arg{Name: "V", View: v.V, Type: a.Type, TypeFrom: typeFrom, Len: kv, Formula: "HeadDim*KVHeads*Tokens"},
			tensor.Arg{Name: "KCache", View: v.KCache, Type: a.Type, TypeFrom: typeFrom, Len: cache, Formula: "HeadDim*MaxLen*KVHeads*Slots", Written: true},
			tensor.Arg{Name: "VCache", View: v.VCache, Type: a.Type, TypeFrom: typeFrom, Len: cache, Formula: "HeadDim*MaxLen*KVHeads*Slots", Written: true},
			seqs[0], seqs[1], seqs[2])
	} else {
		gate := tensor.Arg{Name: "Gate", Type: a.Type, TypeFrom: typeFrom, Optional: true}
		if a.GateStride != 0 {
			gate.View, gate.Optional = v.Gate, false
			gate.Len, gate.Formula = elems(s.Tokens*a.Heads-1, a.GateStride)+a.HeadDim, "(Tokens*Heads-1)*GateStride+HeadDim"
		}
		splits := max(s.Splits, 1)
		partO := tensor.Arg{Name: "PartialO", Type: tensor.F32, Optional: true, Written: true}
		partML := tensor.Arg{Name: "PartialML", Type: tensor.F32, Optional: true, Written: true}
		if kind == attnDecode && splits > 1 {
			partO.View, partO.Optional = v.PartialO, false
			partO.Len, partO.Formula = elems(a.HeadDim, splits, a.Heads, s.Seqs), "HeadDim*Splits*Heads*Seqs"
			partML.View, partML.Optional = v.PartialML, false
			partML.Len, partML.Formula = elems(2, splits, a.Heads, s.Seqs), "2*Splits*Heads*Seqs"
		}
		err = tensor.Check(dev,
			tensor.Arg{Name: "Q", View: v.Q, Type: a.Type, TypeFrom: typeFrom, Len: tokens, Formula: "HeadDim*Heads*Tokens"},
			tensor.Arg{Name: "KCache", View: v.KCache, Type: a.Type, TypeFrom: typeFrom, Len: cache, Formula: "HeadDim*MaxLen*KVHeads*Slots"},
			tensor.Arg{Name: "VCache", View: v.VCache, Type: a.Type, TypeFrom: typeFrom, Len: cache, Formula: "HeadDim*MaxLen*KVHeads*Slots"},
			tensor.Arg{Name: "Out", View: v.Out, Type: a.Type, TypeFrom: typeFrom, Len: tokens, Formula: "HeadDim*Heads*Tokens", Written: true},
			gate, partO, partML, seqs[0], seqs[1], seqs[2])
	}
	if err != nil {
		return err
	}
	return a.checkSequences(s, v)
}

// checkSequences checks the sequences' int32 values where the CPU reads
// what the GPU will (shared storage): every slot below Slots (negative is
// padding) and none named twice (two sequences would race on one cache);
// cu_seqlens 0 first, non-decreasing, Tokens last, no sequence longer
// than MaxSeqTokens; and each sequence's tokens fitting in its slot after
// CacheLens, which is not negative. The kernels skip a sequence that
// breaks these, so buffers the CPU cannot read are safe, only silent.
func (a Attention) checkSequences(s AttentionStep, v AttentionViews) error {
	slots, lens := hostInt32s(v.Slots), hostInt32s(v.CacheLens)
	var cu []int32
	if s.Varlen {
		if cu = hostInt32s(v.CuSeqlens); cu != nil {
			if cu[0] != 0 || int(cu[s.Seqs]) != s.Tokens {
				return tensor.Invalid("CuSeqlens", "starts at %d and ends at %d, must run from 0 to Tokens = %d", cu[0], cu[s.Seqs], s.Tokens)
			}
		}
	}
	per := s.maxSeqTokens()
	for i := range s.Seqs {
		n := per
		if cu != nil {
			if n = int(cu[i+1]) - int(cu[i]); n < 0 || n > per {
				return tensor.Invalid("CuSeqlens", "sequence %d has %d = %d - %d tokens, must be 0 to MaxSeqTokens = %d", i, n, cu[i+1], cu[i], per)
			}
		}
		if slots == nil || slots[i] < 0 {
			continue // unknown or padding
		}
		if int(slots[i]) >= a.Slots {
			return tensor.Invalid("Slots", "sequence %d names slot %d, beyond the pool's Slots = %d", i, slots[i], a.Slots)
		}
		for j := range i {
			if slots[j] == slots[i] {
				return tensor.Invalid("Slots", "sequences %d and %d both name slot %d", j, i, slots[i])
			}
		}
		if lens != nil && (lens[i] < 0 || int(lens[i])+n > a.MaxLen) {
			return tensor.Invalid("CacheLens", "sequence %d: %d positions cached and %d new, must be at least 0 and fit MaxLen = %d", i, lens[i], n, a.MaxLen)
		}
	}
	return nil
}

// hostInt32s returns the values of an int32 view whose buffer the CPU
// reads as the GPU will (shared storage), and nil otherwise (private
// storage has no CPU copy; a managed one may be older than the GPU's).
func hostInt32s(v tensor.View) []int32 {
	if v.Buffer == nil || v.Buffer.Options()&0xf0 != mtl.ResourceStorageModeShared {
		return nil
	}
	mem := v.Buffer.Contents()
	if mem == nil || v.Len == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&mem[v.Offset])), v.Len)
}
