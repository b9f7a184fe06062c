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
// kernels (innermost dimension first, all float32):
//
//	q, k                  [D_k, n_k_heads, n_tokens, n_seqs]
//	v, output             [D_v, n_v_heads, n_tokens, n_seqs]
//	g, beta               [n_v_heads, n_tokens, n_seqs]
//	state_in, state_out   [D_k, D_v, n_v_heads, n_seqs]   (row i of S: D_k floats)
//	capture               [D_k, D_v, n_v_heads, n_tokens, n_seqs]
//
// The gate is g with alpha = exp(-g) (g >= 0 in real models). Libraries that
// pass log(alpha) (flash-linear-attention, HF transformers) need g = -g_fla;
// mlx-lm passes alpha itself, so g = -log(alpha).
package cpuref

import (
	"fmt"
	"math"

	"github.com/puremetal/puremetal/gdn/spec"
)

// Inputs are the buffers of one call, in the kernels' layouts (see the
// package documentation).
type Inputs struct {
	Q, K    []float32 // [D_k, n_k_heads, n_tokens, n_seqs]
	V       []float32 // [D_v, n_v_heads, n_tokens, n_seqs]
	G, Beta []float32 // [n_v_heads, n_tokens, n_seqs]; alpha = exp(-g)
	StateIn []float32 // [D_k, D_v, n_v_heads, n_seqs]
}

// validParams checks p against the contract (spec.Params.Validate) and
// that no element count overflows an int, so that every buffer of p can be
// allocated.
func validParams(p spec.Params) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("cpuref: %w", err)
	}
	// The capture buffer's count is the largest (n_k_heads <= n_v_heads):
	// checking it covers every other. Counts saturate at math.MaxInt.
	if p.CaptureLen() == math.MaxInt {
		return fmt.Errorf("cpuref: shape %v: element count overflows int", p.Shape)
	}
	return nil
}

// Validate checks p and that every buffer has exactly the element count p
// implies.
func (in Inputs) Validate(p spec.Params) error {
	if err := validParams(p); err != nil {
		return err
	}
	bufs := []struct {
		name string
		got  int
		want int
	}{
		{"q", len(in.Q), p.QKLen()},
		{"k", len(in.K), p.QKLen()},
		{"v", len(in.V), p.VLen()},
		{"g", len(in.G), p.GateLen()},
		{"beta", len(in.Beta), p.GateLen()},
		{"state_in", len(in.StateIn), p.StateLen()},
	}
	for _, b := range bufs {
		if b.got != b.want {
			return fmt.Errorf("cpuref: %s has %d elements, shape %v needs %d", b.name, b.got, p.Shape, b.want)
		}
	}
	return nil
}

// Result holds the float32 outputs of a run.
type Result struct {
	Output   []float32 // [D_v, n_v_heads, n_tokens, n_seqs]
	StateOut []float32 // [D_k, D_v, n_v_heads, n_seqs]
	Capture  []float32 // [D_k, D_v, n_v_heads, n_tokens, n_seqs]; nil unless asked for
}

// Result64 holds the float64 outputs of [Oracle64], in the same layouts as
// [Result].
type Result64 struct {
	Output   []float64
	StateOut []float64
	Capture  []float64 // nil unless asked for
}

// Float32 rounds every value to the nearest float32.
func (r Result64) Float32() Result {
	return Result{Output: round32(r.Output), StateOut: round32(r.StateOut), Capture: round32(r.Capture)}
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
