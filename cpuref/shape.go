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
// Both take the same [Params] and [Inputs], in the memory layouts of the
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
)

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

// String returns "block", "tiled", or "HeadMap(n)" for an unknown value.
func (m HeadMap) String() string {
	switch m {
	case Block:
		return "block"
	case Tiled:
		return "tiled"
	}
	return fmt.Sprintf("HeadMap(%d)", uint32(m))
}

// ParseHeadMap turns "block" or "tiled" into a HeadMap.
func ParseHeadMap(s string) (HeadMap, error) {
	switch s {
	case "block":
		return Block, nil
	case "tiled":
		return Tiled, nil
	}
	return 0, fmt.Errorf("cpuref: head map %q: want \"block\" or \"tiled\"", s)
}

// KeyHead returns the key head that value head h reads, for a shape with
// nKHeads key heads and nVHeads value heads.
func (m HeadMap) KeyHead(h, nKHeads, nVHeads int) int {
	if m == Tiled {
		return h % nKHeads
	}
	return h / (nVHeads / nKHeads)
}

// Shape holds the dimensions of one Gated DeltaNet call: key and value head
// sizes, head counts, tokens per sequence and sequences.
type Shape struct {
	DK, DV           int // D_k (columns of S, length of q and k), D_v (rows of S)
	NKHeads, NVHeads int // key heads (q, k) and value heads (v, g, beta, S)
	NTokens, NSeqs   int // tokens per sequence, independent sequences
}

// QKLen is the element count of q and k: D_k * n_k_heads * n_tokens * n_seqs.
func (s Shape) QKLen() int { return s.DK * s.NKHeads * s.NTokens * s.NSeqs }

// VLen is the element count of v and of the output:
// D_v * n_v_heads * n_tokens * n_seqs.
func (s Shape) VLen() int { return s.DV * s.NVHeads * s.NTokens * s.NSeqs }

// GateLen is the element count of g and beta: n_v_heads * n_tokens * n_seqs.
func (s Shape) GateLen() int { return s.NVHeads * s.NTokens * s.NSeqs }

// StateLen is the element count of state_in and state_out:
// D_k * D_v * n_v_heads * n_seqs.
func (s Shape) StateLen() int { return s.DK * s.DV * s.NVHeads * s.NSeqs }

// CaptureLen is the element count of a capture buffer holding the state
// after every token: D_k * D_v * n_v_heads * n_tokens * n_seqs.
func (s Shape) CaptureLen() int { return s.StateLen() * s.NTokens }

// Validate checks that every dimension is positive, that n_v_heads is a
// multiple of n_k_heads, and that no element count overflows an int.
func (s Shape) Validate() error {
	dims := []struct {
		name string
		v    int
	}{
		{"D_k", s.DK}, {"D_v", s.DV}, {"n_k_heads", s.NKHeads},
		{"n_v_heads", s.NVHeads}, {"n_tokens", s.NTokens}, {"n_seqs", s.NSeqs},
	}
	for _, d := range dims {
		if d.v <= 0 {
			return fmt.Errorf("cpuref: %s = %d: must be > 0", d.name, d.v)
		}
	}
	if s.NVHeads%s.NKHeads != 0 {
		return fmt.Errorf("cpuref: n_v_heads = %d is not a multiple of n_k_heads = %d", s.NVHeads, s.NKHeads)
	}
	// The largest count is the capture buffer's: every other count is at
	// most it (n_k_heads <= n_v_heads), so checking it covers them all.
	n := 1
	for _, d := range []int{s.DK, s.DV, s.NVHeads, s.NTokens, s.NSeqs} {
		if n > math.MaxInt/d {
			return fmt.Errorf("cpuref: shape %v: element count overflows int", s)
		}
		n *= d
	}
	return nil
}

// String formats the shape with the specification's names.
func (s Shape) String() string {
	return fmt.Sprintf("{D_k=%d D_v=%d n_k_heads=%d n_v_heads=%d n_tokens=%d n_seqs=%d}",
		s.DK, s.DV, s.NKHeads, s.NVHeads, s.NTokens, s.NSeqs)
}

// Params are a shape plus the two run-time options every kernel takes: the
// head mapping and the q scale.
type Params struct {
	Shape
	HeadMap HeadMap
	// QScale multiplies every output at write-back (o = QScale * S q), so q
	// need not be pre-scaled; typically 1/sqrt(D_k). Zero means q is
	// already scaled (scale 1).
	QScale float32
}

// Scale returns the factor applied to the output: QScale, or 1 when QScale
// is zero.
func (p Params) Scale() float32 {
	if p.QScale == 0 {
		return 1
	}
	return p.QScale
}

// Validate checks the shape, that the head mapping is known and that QScale
// is finite.
func (p Params) Validate() error {
	if err := p.Shape.Validate(); err != nil {
		return err
	}
	if p.HeadMap != Block && p.HeadMap != Tiled {
		return fmt.Errorf("cpuref: head map = %d: want 0 (block) or 1 (tiled)", uint32(p.HeadMap))
	}
	if f := float64(p.QScale); math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("cpuref: q scale = %v: must be finite", p.QScale)
	}
	return nil
}

// Inputs are the buffers of one call, in the kernels' layouts (see the
// package documentation).
type Inputs struct {
	Q, K    []float32 // [D_k, n_k_heads, n_tokens, n_seqs]
	V       []float32 // [D_v, n_v_heads, n_tokens, n_seqs]
	G, Beta []float32 // [n_v_heads, n_tokens, n_seqs]; alpha = exp(-g)
	StateIn []float32 // [D_k, D_v, n_v_heads, n_seqs]
}

// Validate checks p and that every buffer has exactly the element count p
// implies.
func (in Inputs) Validate(p Params) error {
	if err := p.Validate(); err != nil {
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
