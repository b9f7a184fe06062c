// Package cpuref holds two independent CPU references for the Gated DeltaNet
// recurrence that puremetal's Metal kernels implement:
//
//   - [Oracle64], a float64 oracle written from the matrix form of the paper
//     (Yang, Kautz, Hatamizadeh, "Gated Delta Networks", ICLR 2025):
//     S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T,
//     o_t = scale S_t q_t. It builds the matrices and multiplies them.
//   - [Reference32], a float32 reference that follows the kernels'
//     per-element order: decay first, then delta_i = beta (v_i - sum_j S_ij k_j),
//     S_ij += delta_i k_j, out_i = scale sum_j S_ij q_j.
//
// Both take the same [spec.Params] and [Inputs], in the memory layouts of the
// kernels (innermost dimension first; every value a float32):
//
//	q, k                  [D_k, n_k_heads, n_tokens, n_seqs]
//	v, output             [D_v, n_v_heads, n_tokens, n_seqs]
//	g, beta               [n_v_heads, n_tokens, n_seqs]   (a, b with the fused gates)
//	A_log, dt_bias        [n_v_heads]
//	state_in, state_out   [D_k, D_v, n_v_heads, n_seqs]   (row i of S: D_k floats)
//	capture               [D_k, D_v, n_v_heads, n_tokens, n_seqs]
//
// The gate is g with alpha = exp(-g) (g >= 0 in real models). Libraries that
// pass log(alpha) (flash-linear-attention, HF transformers) need g = -g_fla;
// mlx-lm passes alpha itself, so g = -log(alpha).
//
// Element types (SPEC section 9). With a 16-bit p.Activation the inputs q,
// k, v, g and beta (or a and b) hold float32 values that type represents
// exactly, as a 16-bit buffer widens to; with a 16-bit p.State so does
// state_in. [Round] rounds a slice to a type, [RandomInputs] draws inputs
// already rounded, and package half reads and writes the 16-bit bits.
// [Reference32] rounds the output to the activation type once, at
// write-back, and the state to the state type each time it is written
// (state_out and every capture slot); the state itself stays in float32
// through the token loop. [Oracle64] returns the float64 truth those
// rounded results are measured against, and [DecodeDrift] measures how far
// a 16-bit state drifts from it when a model decodes one token per call.
//
// The fused step (SPEC section 10), each part on its own, as p.Fused says:
// q and k L2-normalised by the reference itself, q^ = q / sqrt(sum_j q_j^2
// + 1e-6), once per key head and token; g computed from the raw projection
// a held in g and the layer constants A_log and dt_bias as
// g = exp(A_log[h]) * softplus(a + dt_bias[h]) with softplus(x) = x above
// 20 (torch's threshold); beta = sigmoid(b) from the raw projection b held
// in beta. Reference32 computes them in float32, Oracle64 in float64.
//
// Errors. Parameters or inputs that break the contract are an error
// wrapping [ErrInvalidInput] that names the input and the numbers.
//
// "SPEC section N" is section N of SPEC.md at the repository root.
package cpuref

import (
	"errors"
	"fmt"
	"math"

	"github.com/puremetal/puremetal/gdn/spec"
)

// Inputs are the buffers of one call, in the kernels' layouts (see the
// package documentation).
type Inputs struct {
	Q, K    []float32 // [D_k, n_k_heads, n_tokens, n_seqs]
	V       []float32 // [D_v, n_v_heads, n_tokens, n_seqs]
	G, Beta []float32 // [n_v_heads, n_tokens, n_seqs]; alpha = exp(-g); a and b with p.Fused.Gate, p.Fused.Beta
	StateIn []float32 // [D_k, D_v, n_v_heads, n_seqs]

	// ALog and DtBias are the layer constants A_log and dt_bias
	// ([n_v_heads], float32 whatever the activation type) of the fused gate;
	// empty unless p.Fused.Gate.
	ALog, DtBias []float32

	// Slots ([n_seqs]) names the state of each sequence in a pool of
	// p.NSlots states; empty unless p.NSlots > 0. Negative is padding.
	Slots []int32
	// CuSeqlens ([n_seqs+1]) gives sequence s the packed tokens
	// CuSeqlens[s] to CuSeqlens[s+1]-1; empty unless p.Varlen.
	CuSeqlens []int32

	// The layer core (SPEC section 13), as p.Core says; all empty when
	// it is off.
	//
	// With p.Core.Conv = K: MixedQKV ([conv_dim, tokens], type
	// p.Activation) replaces Q, K and V, which are then empty;
	// ConvWeight ([K, conv_dim], K fastest, p.Activation) and ConvState
	// ([conv_dim, K-1, states], oldest input first, p.Activation; states
	// as the recurrent state: n_seqs, or n_slots with a pool).
	MixedQKV, ConvWeight, ConvState []float32
	// With p.Core.Norm: Z ([D_v, n_v_heads, tokens]) and NormWeight
	// ([D_v]), both p.Activation.
	Z, NormWeight []float32
}

// ErrInvalidInput is wrapped by the error of every function of the
// package given parameters or inputs that break the contract: invalid
// Params (the error is also the [*spec.ArgumentError] of
// spec.Params.Validate), an input of the wrong length, a value that is
// not one of its element type, slots or cu_seqlens out of order. The
// message names the input and the numbers.
var ErrInvalidInput = errors.New("cpuref: invalid input")

// inputError is an error wrapping ErrInvalidInput, and err when set.
type inputError struct {
	msg string
	err error
}

func (e *inputError) Error() string        { return e.msg }
func (e *inputError) Is(target error) bool { return target == ErrInvalidInput }
func (e *inputError) Unwrap() error        { return e.err }

// invalidf returns an error wrapping ErrInvalidInput, its message
// "cpuref: " and the formatted text.
func invalidf(format string, a ...any) error {
	return &inputError{msg: "cpuref: " + fmt.Sprintf(format, a...)}
}

// validParams checks p against the contract (spec.Params.Validate) and
// that no element count overflows an int, so that every buffer of p can be
// allocated.
func validParams(p spec.Params) error {
	if err := p.Validate(); err != nil {
		return &inputError{msg: "cpuref: " + err.Error(), err: err}
	}
	// The capture buffer's count is the largest (n_k_heads <= n_v_heads):
	// checking it covers every other. Counts saturate at math.MaxInt.
	if p.CaptureLen() == math.MaxInt {
		return invalidf("shape %v: element count overflows int", p.Shape)
	}
	return nil
}

// Validate checks p, that every buffer has exactly the element count p
// implies, and that every value of a 16-bit type is a value of that type.
func (in Inputs) Validate(p spec.Params) error {
	if err := validParams(p); err != nil {
		return err
	}
	qkLen, vLen := p.QKLen(), p.VLen()
	if p.Core.Conv > 0 {
		qkLen, vLen = 0, 0 // the convolution makes them from mixed_qkv
	}
	bufs := []struct {
		name string
		got  int
		want int
	}{
		{"q", len(in.Q), qkLen},
		{"k", len(in.K), qkLen},
		{"v", len(in.V), vLen},
		{"g", len(in.G), p.GateLen()},
		{"beta", len(in.Beta), p.GateLen()},
		{"state_in", len(in.StateIn), p.StateLen()},
	}
	for _, b := range bufs {
		if b.got != b.want {
			return invalidf("%s has %d elements, shape %v needs %d", b.name, b.got, p.Shape, b.want)
		}
	}
	if err := in.validIndices(p); err != nil {
		return err
	}
	if err := in.validCore(p); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		x    []float32
	}{{"A_log", in.ALog}, {"dt_bias", in.DtBias}} {
		switch {
		case p.Fused.Gate && len(c.x) != p.NVHeads:
			return invalidf("%s has %d elements, the fused gate needs n_v_heads = %d", c.name, len(c.x), p.NVHeads)
		case !p.Fused.Gate && len(c.x) != 0:
			return invalidf("%s has %d elements but Params.Fused.Gate is off: g holds the gate itself", c.name, len(c.x))
		}
	}
	typed := []struct {
		name string
		x    []float32
		t    spec.ElemType
		of   string
	}{
		{"q", in.Q, p.Activation, "Params.Activation"},
		{"k", in.K, p.Activation, "Params.Activation"},
		{"v", in.V, p.Activation, "Params.Activation"},
		{gateName(p.Fused.Gate, "g", "a"), in.G, p.Activation, "Params.Activation"},
		{gateName(p.Fused.Beta, "beta", "b"), in.Beta, p.Activation, "Params.Activation"},
		{"state_in", in.StateIn, p.State, "Params.State"},
	}
	for _, b := range typed {
		if i := unrepresentable(b.t, b.x); i >= 0 {
			return invalidf("%s[%d] = %v is not a value of %s = %v; round the inputs with Round", b.name, i, b.x[i], b.of, b.t)
		}
	}
	return nil
}

// gateName names a gate buffer by what it holds: the raw projection when
// the gate is fused, the gate itself otherwise.
func gateName(fused bool, gate, raw string) string {
	if fused {
		return raw + " (in " + gate + ")"
	}
	return gate
}

// Result holds the float32 outputs of a run.
type Result struct {
	Output   []float32 // [D_v, n_v_heads, n_tokens, n_seqs]; y with p.Core.Norm
	StateOut []float32 // [D_k, D_v, n_v_heads, n_seqs] (n_slots with a state pool)
	Capture  []float32 // [D_k, D_v, n_v_heads, n_tokens, n_seqs]; nil unless asked for
	// ConvState is the conv state after the call, [conv_dim, K-1,
	// states], rounded to p.Activation; nil without p.Core.Conv.
	ConvState []float32
}

// Result64 holds the float64 outputs of [Oracle64], in the same layouts as
// [Result].
type Result64 struct {
	Output    []float64
	StateOut  []float64
	Capture   []float64 // nil unless asked for
	ConvState []float64 // nil without p.Core.Conv
}

// Float32 rounds every value to the nearest float32.
func (r Result64) Float32() Result {
	return Result{Output: round32(r.Output), StateOut: round32(r.StateOut), Capture: round32(r.Capture), ConvState: round32(r.ConvState)}
}

func round32(x []float64) []float32 {
	if x == nil {
		return nil
	}
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}
