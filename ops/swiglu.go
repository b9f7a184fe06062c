package ops

import (
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// swigluParams is swiglu_params of swiglu.metal.
type swigluParams struct {
	Width, GateStride, UpStride uint32
}

// swigluGroup is the threadgroup width of the SwiGLU kernel.
const swigluGroup = 256

// SwiGLU encodes out = silu(gate) * up, silu(g) = g / (1 + exp(-g)),
// element by element over [rows][width], in float32 rounded once to the
// views' type (one float type for all three). Refused: rows or width
// below 1, and views of the wrong type or length.
func (k *Kernels) SwiGLU(enc *mtl.ComputeCommandEncoder, rows, width int, gate, up, out tensor.View) error {
	if err := checkSwiGLU(rows, width, out); err != nil {
		return err
	}
	n := elems(rows, width)
	if err := tensor.Check(k.dev,
		tensor.Arg{Name: "Gate", View: gate, Type: out.Type, TypeFrom: "Out's type", Len: n, Formula: "rows*width"},
		tensor.Arg{Name: "Up", View: up, Type: out.Type, TypeFrom: "Out's type", Len: n, Formula: "rows*width"},
		tensor.Arg{Name: "Out", View: out, Type: out.Type, Len: n, Formula: "rows*width", Written: true},
	); err != nil {
		return err
	}
	return k.swiglu(enc, rows, width, gate, up, out, width)
}

// SwiGLUFused is [Kernels.SwiGLU] on the output of one fused [gate | up]
// projection: gateUp is [rows][2*width], row r's gate in its first width
// elements and its up in the last width; out is [rows][width] of
// gateUp's type.
func (k *Kernels) SwiGLUFused(enc *mtl.ComputeCommandEncoder, rows, width int, gateUp, out tensor.View) error {
	if err := checkSwiGLU(rows, width, out); err != nil {
		return err
	}
	if err := tensor.Check(k.dev,
		tensor.Arg{Name: "GateUp", View: gateUp, Type: out.Type, TypeFrom: "Out's type", Len: elems(2, rows, width), Formula: "2*rows*width"},
		tensor.Arg{Name: "Out", View: out, Type: out.Type, Len: elems(rows, width), Formula: "rows*width", Written: true},
	); err != nil {
		return err
	}
	up := gateUp
	up.Offset += width * gateUp.Type.Size()
	return k.swiglu(enc, rows, width, gateUp, up, out, 2*width)
}

// checkSwiGLU refuses rows or width below 1 and an output of a type other
// than a float type.
func checkSwiGLU(rows, width int, out tensor.View) error {
	if err := positive(dim{"rows", rows}, dim{"width", width}); err != nil {
		return err
	}
	return tensor.FloatType("Out", out.Type)
}

// swiglu encodes the kernel on checked views, gate and up rows stride
// elements apart.
func (k *Kernels) swiglu(enc *mtl.ComputeCommandEncoder, rows, width int, gate, up, out tensor.View, stride int) error {
	entry := kernels.SwiGLUOf(out.Type)
	if err := k.setPipeline(enc, entry, swigluGroup, "width", "the kernel's fixed"); err != nil {
		return err
	}
	bind(enc, gate, 0)
	bind(enc, up, 1)
	bind(enc, out, 2)
	mtl.SetValue(enc, swigluParams{Width: uint32(width), GateStride: uint32(stride), UpStride: uint32(stride)}, 3)
	enc.DispatchThreadgroups(mtl.Sz((width+swigluGroup-1)/swigluGroup, rows, 1), mtl.Sz(swigluGroup, 1, 1))
	return finish(enc, entry)
}
