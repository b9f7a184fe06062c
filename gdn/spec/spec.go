// Package spec holds the types of the Gated DeltaNet contract that the
// kernels' dispatchers (package gdn), the CPU references (package cpuref),
// the examples and the tests share: the [Shape] of a call, the [HeadMap],
// the [ElemType] of a buffer, the [Params] of a dispatch, and the element
// count every buffer must have. It depends on the standard library alone,
// so the references need not import Metal.
//
// Buffer layouts, innermost dimension first:
//
//	q, k                  [D_k, n_k_heads, n_tokens, n_seqs]
//	v, output             [D_v, n_v_heads, n_tokens, n_seqs]
//	g, beta               [n_v_heads, n_tokens, n_seqs]
//	state_in, state_out   [D_k, D_v, n_v_heads, n_seqs]   (row i of S: D_k elements)
//	capture               [D_k, D_v, n_v_heads, n_tokens, n_seqs]
//
// A server batching sequences (SPEC section 11) may keep the states in a
// pool of [Shape.NSlots] states, [D_k, D_v, n_v_heads, n_slots], with an
// int32 slot index per sequence naming the state it reads and writes, and
// may pack the tokens of sequences of different lengths along one axis
// ([Shape.Varlen]: q, k [D_k, n_k_heads, total_tokens], v and the output
// [D_v, n_v_heads, total_tokens], g and beta [n_v_heads, total_tokens],
// capture [D_k, D_v, n_v_heads, total_tokens]) with an int32
// cu_seqlens[n_seqs+1] saying which tokens each sequence owns. The counts
// of [Shape] follow both.
//
// "SPEC section N" is section N of SPEC.md at the repository root.
package spec

import (
	"fmt"
	"math"
	"math/bits"
)

// Shape holds the dimensions of one Gated DeltaNet call: key and value head
// sizes, head counts, tokens per sequence and sequences.
type Shape struct {
	DK      int // D_k: columns of S, length of q and k
	DV      int // D_v: rows of S, length of v and of the output
	NKHeads int // key heads (q, k)
	NVHeads int // value heads (v, g, beta, S); a multiple of NKHeads
	NTokens int // tokens per sequence; with Varlen, the tokens of all sequences
	NSeqs   int // independent sequences

	// NSlots, when positive, is the number of states in a state pool
	// (vLLM's ssm_state_indices): state_in and state_out then hold
	// [D_k, D_v, n_v_heads, n_slots], and an int32 slot index per sequence
	// names the state sequence s reads and writes; a negative index is
	// padding, a sequence skipped. 0, the default, gives every sequence
	// the state of its own index, n_seqs states in order.
	NSlots int
	// Varlen packs the tokens of all sequences along one axis, in sequence
	// order (flash-linear-attention's cu_seqlens): NTokens is then their
	// total, and an int32 cu_seqlens[n_seqs+1] (0 first, non-decreasing,
	// NTokens last) gives sequence s the tokens cu_seqlens[s] to
	// cu_seqlens[s+1]-1. A sequence may be empty: its state is left as it
	// is. Every sequence may be (NTokens 0): the call then writes nothing.
	Varlen bool
}

// Tokens is the number of tokens in the call: NTokens * NSeqs, or NTokens
// with Varlen. It saturates like every count of Shape.
func (s Shape) Tokens() int {
	if s.Varlen {
		return count(s.NTokens)
	}
	return count(s.NTokens, s.NSeqs)
}

// States is the number of states in state_in and in state_out: NSlots
// with a state pool, NSeqs without.
func (s Shape) States() int {
	if s.NSlots > 0 {
		return s.NSlots
	}
	return max(s.NSeqs, 0)
}

// SlotsLen is the element count of the slot index buffer: n_seqs with a
// state pool, 0 without.
func (s Shape) SlotsLen() int {
	if s.NSlots > 0 {
		return max(s.NSeqs, 0)
	}
	return 0
}

// CuSeqlensLen is the element count of cu_seqlens: n_seqs + 1 with
// Varlen, 0 without.
func (s Shape) CuSeqlensLen() int {
	if s.Varlen && s.NSeqs > 0 {
		return s.NSeqs + 1
	}
	return 0
}

// QKLen is the element count of q and of k: D_k * n_k_heads * tokens,
// tokens = n_tokens * n_seqs ([Shape.Tokens]). Like every count of
// [Shape], it saturates at math.MaxInt instead of wrapping, so a count past
// any limit is always seen as such, and it is 0 when a dimension is not
// positive.
func (s Shape) QKLen() int { return count(s.DK, s.NKHeads, s.Tokens()) }

// VLen is the element count of v and of the output: D_v * n_v_heads *
// tokens.
func (s Shape) VLen() int { return count(s.DV, s.NVHeads, s.Tokens()) }

// GateLen is the element count of g and of beta: n_v_heads * tokens.
func (s Shape) GateLen() int { return count(s.NVHeads, s.Tokens()) }

// StateLen is the element count of state_in and of state_out: D_k * D_v *
// n_v_heads * states, states = n_seqs, or n_slots with a state pool
// ([Shape.States]).
func (s Shape) StateLen() int { return count(s.DK, s.DV, s.NVHeads, s.States()) }

// CaptureLen is the element count of a capture buffer holding the state
// after every token: D_k * D_v * n_v_heads * tokens. Capture is per
// sequence, never per slot.
func (s Shape) CaptureLen() int { return count(s.DK, s.DV, s.NVHeads, s.Tokens()) }

// count multiplies dimensions, saturating at math.MaxInt; 0 when a
// dimension is not positive.
func count(dims ...int) int {
	n := uint64(1)
	for _, d := range dims {
		if d <= 0 {
			return 0
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt {
			return math.MaxInt
		}
		n = lo
	}
	return int(n)
}

// Validate checks the rules every kernel and reference shares: every
// dimension positive (NTokens may be 0 with Varlen: every sequence of the
// packed batch is empty, and the call writes nothing) and n_v_heads a
// multiple of n_k_heads. The error is an
// [*ArgumentError] naming the field.
func (s Shape) Validate() error {
	dims := [...]struct {
		name string
		n    int
	}{
		{"Shape.DK", s.DK}, {"Shape.DV", s.DV},
		{"Shape.NKHeads", s.NKHeads}, {"Shape.NVHeads", s.NVHeads},
		{"Shape.NTokens", s.NTokens}, {"Shape.NSeqs", s.NSeqs},
	}
	for _, d := range dims {
		if d.n == 0 && d.name == "Shape.NTokens" && s.Varlen {
			continue // a packed batch of empty sequences: nothing to do
		}
		if d.n <= 0 {
			if d.name == "Shape.NTokens" && !s.Varlen {
				return argError(d.name, "%d, must be > 0 (0 only with Shape.Varlen, every sequence empty)", d.n)
			}
			return argError(d.name, "%d, must be > 0", d.n)
		}
	}
	if s.NVHeads%s.NKHeads != 0 {
		return argError("Shape.NVHeads", "%d is not a multiple of Shape.NKHeads = %d", s.NVHeads, s.NKHeads)
	}
	if s.NSlots < 0 || s.NSlots > MaxSlots {
		return argError("Shape.NSlots", "%d, must be 0 (no state pool) or 1 to %d (slot indices are int32)", s.NSlots, MaxSlots)
	}
	if s.Varlen && s.NTokens > math.MaxInt32 {
		return argError("Shape.NTokens", "%d tokens in all, beyond the %d an int32 cu_seqlens holds", s.NTokens, math.MaxInt32)
	}
	return nil
}

// MaxSlots is the largest state pool: slot indices are int32, so slot
// 2^31-1 is the last one.
const MaxSlots = math.MaxInt32 + 1

// String formats the shape with the contract's names.
func (s Shape) String() string {
	str := fmt.Sprintf("{D_k=%d D_v=%d n_k_heads=%d n_v_heads=%d n_tokens=%d n_seqs=%d",
		s.DK, s.DV, s.NKHeads, s.NVHeads, s.NTokens, s.NSeqs)
	if s.NSlots > 0 {
		str += fmt.Sprintf(" n_slots=%d", s.NSlots)
	}
	if s.Varlen {
		str += " varlen"
	}
	return str + "}"
}

// HeadMap says which key head a value head reads q and k from when
// n_v_heads = r * n_k_heads (grouped-query attention).
type HeadMap uint32

const (
	// Block maps value head h to key head h / r, the layout of HF
	// transformers, MLX / mlx-lm and flash-linear-attention
	// (repeat_interleave). It is the zero value.
	Block HeadMap = 0
	// Tiled maps value head h to key head h % n_k_heads, the layout of GGUF
	// files converted for llama.cpp.
	Tiled HeadMap = 1
)

var headMapNames = names{Block: "block", Tiled: "tiled"}

// String returns "block", "tiled", or "HeadMap(n)" for an unknown value.
func (m HeadMap) String() string { return headMapNames.of(uint64(m), "HeadMap") }

// ParseHeadMap turns "block" or "tiled" into a HeadMap.
func ParseHeadMap(s string) (HeadMap, error) {
	v, err := headMapNames.parse(s, "head map")
	return HeadMap(v), err
}

// KeyHead returns the key head that value head h reads, for a shape with
// nKHeads key heads and nVHeads value heads.
func (m HeadMap) KeyHead(h, nKHeads, nVHeads int) int {
	if m == Tiled {
		return h % nKHeads
	}
	return h / (nVHeads / nKHeads)
}

// ElemType is the element type of a buffer.
type ElemType uint8

const (
	// F32 is IEEE-754 binary32, the zero value.
	F32 ElemType = iota
	// F16 is IEEE-754 binary16.
	F16
	// BF16 is bfloat16, the upper half of a binary32.
	BF16
)

// String returns "f32", "f16", "bf16", "i32", "u32", or "ElemType(n)".
func (t ElemType) String() string {
	switch t {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	case I32:
		return "i32"
	case U32:
		return "u32"
	}
	return fmt.Sprintf("ElemType(%d)", uint8(t))
}

// I32 is a 32-bit two's-complement integer, the element type of slot
// indices and cu_seqlens (SPEC section 11), never of activations or a
// state. It is numbered apart from the floating-point types.
const I32 ElemType = 32

// U32 is a 32-bit unsigned integer: the words of an MLX affine-quantized
// weight (SPEC section 14) and token ids. Like I32 it is never the type of
// activations or a state.
const U32 ElemType = 33

// Size returns the size of one element in bytes, 0 for an unknown type.
func (t ElemType) Size() int {
	switch t {
	case F32, I32, U32:
		return 4
	case F16, BF16:
		return 2
	}
	return 0
}

// known reports whether t is one of F32, F16 and BF16, the types of
// activations and states.
func (t ElemType) known() bool { return t <= BF16 }

// Fused says which parts of a layer's recurrent step the kernel computes
// itself from what the layer hands over after its short convolution, each
// part on its own. Per token and value head h, in f32:
//
//	q^   = q / sqrt(sum_j q_j^2 + 1e-6)       (k^ likewise; per key head and token)
//	g    = exp(A_log[h]) * softplus(a + dt_bias[h])
//	       softplus(x) = x for x > 20, else log1p(exp(x))
//	beta = 1 / (1 + exp(-b))
//
// then the recurrence on (q^, k^, v, g, beta). With every part on, one
// dispatch does a layer's whole recurrent step for a token or a window.
type Fused struct {
	// L2Norm normalises q and k in the kernel (flash-linear-attention's
	// use_qk_l2norm_in_kernel); the buffers hold the raw q and k.
	L2Norm bool
	// Gate computes g from the raw gate projection a, which the g buffer
	// then holds, and the layer's constants A_log and dt_bias
	// ([n_v_heads] f32).
	Gate bool
	// Beta computes beta = sigmoid(b) from the raw projection b, which the
	// beta buffer then holds.
	Beta bool
}

// FusedAll turns every part of [Fused] on: what a Qwen3-Next or Qwen3.5
// layer hands over, in one dispatch.
var FusedAll = Fused{L2Norm: true, Gate: true, Beta: true}

// Params are the parameters of one call: the shape and the run-time
// options every kernel and reference takes.
type Params struct {
	Shape
	HeadMap HeadMap
	// QScale multiplies every output at write-back (o = QScale * S q),
	// typically 1/sqrt(D_k), which saves scaling q in a dispatch of its
	// own. 0 means q is already scaled: the outputs are not multiplied.
	QScale float32
	// Activation is the element type of q, k, v, the output and the gate
	// inputs (g and beta, or a and b); F32, the zero value, by default.
	// Loads widen to f32 exactly, the recurrence runs in f32, and the
	// output is rounded to Activation once, to nearest even.
	Activation ElemType
	// State is the element type of state_in, state_out and capture; F32,
	// the zero value, by default. The state is widened once when read,
	// stays in f32 through the token loop, and is rounded once each time
	// it is written.
	State ElemType
	// Fused says which gates and norms the kernel computes itself.
	Fused Fused
	// Core says which parts of the layer's core around the step (the
	// short convolution, the gated RMSNorm; SPEC section 13) the kernel
	// runs; the zero value runs neither.
	Core Core
}

// Scale returns the factor applied to the output: QScale, or 1 when QScale
// is zero.
func (p Params) Scale() float32 {
	if p.QScale == 0 {
		return 1
	}
	return p.QScale
}

// Validate checks the shape, that the head mapping and both element types
// are known and that QScale is finite. The error is an [*ArgumentError] naming the field.
func (p Params) Validate() error {
	if err := p.Shape.Validate(); err != nil {
		return err
	}
	if p.HeadMap != Block && p.HeadMap != Tiled {
		return argError("HeadMap", "%d is neither Block (0) nor Tiled (1)", uint32(p.HeadMap))
	}
	if q := float64(p.QScale); math.IsNaN(q) || math.IsInf(q, 0) {
		return argError("QScale", "%v is not finite", p.QScale)
	}
	if !p.Activation.known() {
		return argError("Activation", "%v is not f32, f16 or bf16", p.Activation)
	}
	if !p.State.known() {
		return argError("State", "%v is not f32, f16 or bf16", p.State)
	}
	return p.Core.Validate()
}

// An ArgumentError reports a parameter that breaks the contract.
type ArgumentError struct {
	Arg    string // the field, such as "Shape.DK"
	Detail string // what is wrong, with the numbers
}

func (e *ArgumentError) Error() string { return e.Arg + ": " + e.Detail }

func argError(arg, format string, a ...any) error {
	return &ArgumentError{Arg: arg, Detail: fmt.Sprintf(format, a...)}
}

// Refused returns the error a package reports for a refused argument:
// its text is kind's then arg's, and it matches kind (the package's
// sentinel, such as gdn.ErrInvalidArgument or tensor.ErrInvalidArgument)
// and cause when not nil (such as mtl.ErrReleased) with errors.Is, and
// arg with errors.As.
func Refused(kind error, arg *ArgumentError, cause error) error {
	return &refusal{kind: kind, arg: arg, cause: cause}
}

// refusal is the error of [Refused].
type refusal struct {
	kind  error
	arg   *ArgumentError
	cause error
}

func (e *refusal) Error() string { return e.kind.Error() + ": " + e.arg.Error() }

// Unwrap makes the error match its kind, its *ArgumentError and its cause.
func (e *refusal) Unwrap() []error {
	if e.cause != nil {
		return []error{e.kind, e.arg, e.cause}
	}
	return []error{e.kind, e.arg}
}
