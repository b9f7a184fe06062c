package ops

import (
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// RMSNormParams is the shape of an RMSNorm dispatch.
type RMSNormParams struct {
	Rows int // rows to normalise: tokens, or tokens * heads for a per-head norm
	Dim  int // elements per row: hidden size or head_dim, 1 to MaxNormDim
	// Stride is the number of elements between the starts of two rows of
	// X and Out; 0 means Dim. A per-head norm of the query halves of a
	// [query | gate] q_proj output has Dim head_dim and Stride 2*head_dim.
	// [Kernels.RMSNormResidual] takes only 0 or Dim.
	Stride int
	Eps    float32 // rms_norm_eps, finite and >= 0
	// Offset is added to every weight: 0 for plain weights (Qwen3, the
	// gated norm), 1 for zero-centred ones (Qwen3-Next, Qwen3.5). Finite.
	Offset float32
}

// MaxNormDim is the widest row the RMSNorm kernels take: a threadgroup of
// at most 1024 threads keeps kernels.NormPerThread elements each.
const MaxNormDim = 1024 * kernels.NormPerThread

// normParams is norm_params of norm.metal.
type normParams struct {
	Dim, Stride uint32
	Eps, Offset float32
}

// stride returns the row stride, Dim where Stride is 0.
func (p RMSNormParams) stride() int {
	if p.Stride == 0 {
		return p.Dim
	}
	return p.Stride
}

// threads returns the threads of a threadgroup: enough SIMD-groups that
// each thread holds at most NormPerThread elements of a row.
func (p RMSNormParams) threads() int {
	return roundUp((p.Dim+kernels.NormPerThread-1)/kernels.NormPerThread, simdWidth)
}

func (p RMSNormParams) check() error {
	if err := positive(dim{"RMSNormParams.Rows", p.Rows}); err != nil {
		return err
	}
	switch {
	case p.Dim < 1 || p.Dim > MaxNormDim:
		return tensor.Invalid("RMSNormParams.Dim", "%d, must be 1 to %d (1024 threads * %d elements each)", p.Dim, MaxNormDim, kernels.NormPerThread)
	case p.Stride != 0 && p.Stride < p.Dim:
		return tensor.Invalid("RMSNormParams.Stride", "%d, less than Dim %d: rows would overlap", p.Stride, p.Dim)
	case p.Eps < 0:
		return tensor.Invalid("RMSNormParams.Eps", "%v, must be >= 0", p.Eps)
	}
	if err := finite("RMSNormParams.Eps", p.Eps); err != nil {
		return err
	}
	return finite("RMSNormParams.Offset", p.Offset)
}

// RMSNorm encodes y = x / sqrt(mean(x^2) + Eps) * (Offset + w) over each
// row of x, in float32, rounding y once to x's type. Row i of x is Dim
// elements starting at element i*Stride; x holds Rows*Stride elements (the
// gaps between rows are neither read nor written). w is [Dim] of any float
// type. out has x's type and layout, or is the zero View: then x is
// normalised in place. Refused: Rows < 1, Dim outside 1..MaxNormDim, a
// Stride below Dim, a negative or non-finite Eps, a non-finite Offset, and
// views of the wrong type or length.
func (k *Kernels) RMSNorm(enc *mtl.ComputeCommandEncoder, p RMSNormParams, x, w, out tensor.View) error {
	if err := p.check(); err != nil {
		return err
	}
	if err := floatTypes(named{"X", x}, named{"W", w}); err != nil {
		return err
	}
	n := elems(p.Rows, p.stride())
	if err := tensor.Check(k.dev,
		tensor.Arg{Name: "X", View: x, Type: x.Type, Len: n, Formula: "Rows*Stride", Written: out.IsZero()},
		tensor.Arg{Name: "W", View: w, Type: w.Type, Len: p.Dim, Formula: "Dim"},
		tensor.Arg{Name: "Out", View: out, Type: x.Type, TypeFrom: "X's type", Len: n, Formula: "Rows*Stride", Written: true, Optional: true},
	); err != nil {
		return err
	}
	if out.IsZero() {
		out = x
	}
	return k.norm(enc, kernels.RMSNormOf(x.Type, w.Type), p, x, w, out, tensor.View{})
}

// RMSNormResidual encodes the residual add and the norm after it, as a
// decoder layer runs them: h = h + r, rounded to h's type and written
// back, then out = RMSNorm(h) as [Kernels.RMSNorm] computes it from the
// rounded h. h is [Rows][Dim] of any float type (the residual stream, f32
// or the model's type); r and out are [Rows][Dim] of one float type; w is
// [Dim]. Stride must be 0 or Dim. It refuses what RMSNorm refuses.
func (k *Kernels) RMSNormResidual(enc *mtl.ComputeCommandEncoder, p RMSNormParams, h, r, w, out tensor.View) error {
	if err := p.check(); err != nil {
		return err
	}
	if p.stride() != p.Dim {
		return tensor.Invalid("RMSNormParams.Stride", "%d, the residual kernel takes rows of Dim %d elements (Stride 0 or Dim)", p.Stride, p.Dim)
	}
	if err := floatTypes(named{"H", h}, named{"W", w}, named{"Out", out}); err != nil {
		return err
	}
	n := elems(p.Rows, p.Dim)
	if err := tensor.Check(k.dev,
		tensor.Arg{Name: "H", View: h, Type: h.Type, Len: n, Formula: "Rows*Dim", Written: true},
		tensor.Arg{Name: "R", View: r, Type: out.Type, TypeFrom: "Out's type", Len: n, Formula: "Rows*Dim"},
		tensor.Arg{Name: "W", View: w, Type: w.Type, Len: p.Dim, Formula: "Dim"},
		tensor.Arg{Name: "Out", View: out, Type: out.Type, Len: n, Formula: "Rows*Dim", Written: true},
	); err != nil {
		return err
	}
	return k.norm(enc, kernels.RMSNormResidualOf(h.Type, out.Type, w.Type), p, h, w, out, r)
}

// norm encodes one of the RMSNorm kernels on checked arguments: x (or h)
// at 0, w at 1, out at 2, r at 3 when set, the parameters at 4.
func (k *Kernels) norm(enc *mtl.ComputeCommandEncoder, entry string, p RMSNormParams, x, w, out, r tensor.View) error {
	threads := p.threads()
	if err := k.setPipeline(enc, entry, threads, "RMSNormParams.Dim", "32*ceil(Dim/(32*8))"); err != nil {
		return err
	}
	bind(enc, x, 0)
	bind(enc, w, 1)
	bind(enc, out, 2)
	if !r.IsZero() {
		bind(enc, r, 3)
	}
	mtl.SetValue(enc, normParams{Dim: uint32(p.Dim), Stride: uint32(p.stride()), Eps: p.Eps, Offset: p.Offset}, 4)
	enc.DispatchThreadgroups(mtl.Sz(p.Rows, 1, 1), mtl.Sz(threads, 1, 1))
	return finish(enc, entry)
}
