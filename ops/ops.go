// Package ops dispatches the kernels of a model's forward pass other than
// the Gated DeltaNet recurrence (package gdn). SPEC section 14 is the
// contract; package cpuref holds the references the tests compare with.
//
// Make a [Kernels] for a device with [New]; its methods encode:
//
//   - matrix products y = x W^T (+ r), W as HF stores nn.Linear: dense
//     [Kernels.Linear] (which picks [Kernels.MatVec] for decode, up to
//     [MatVecMaxRows] rows, or [Kernels.MatMul] above), MLX affine-quantized
//     [Kernels.QuantMatVec] and [Kernels.QuantMatMul] (a [QuantWeight]),
//     and over the experts a router chose, [Kernels.GatherMatVec] and
//     [Kernels.GatherQuantMatVec] (a [Gather]);
//   - the embedding lookup: [Kernels.Embed], [Kernels.QuantEmbed];
//   - norms and positions: [Kernels.RMSNorm], [Kernels.RMSNormResidual]
//     (the residual add fused in front), [Kernels.RoPE] and
//     [Kernels.RMSNormRoPE] (q_norm or k_norm and RoPE in one pass);
//   - attention over a KV cache (an [Attention], an [AttentionStep] and
//     its [AttentionViews]): [Kernels.KVAppend], then [Kernels.AttentionDecode]
//     or [Kernels.AttentionPrefill], then [Kernels.KVAdvance];
//   - the MLP and MoE: [Kernels.SwiGLU], [Kernels.SwiGLUFused],
//     [Kernels.MoERoute], [Kernels.MoECombine];
//   - the next token: [Kernels.Argmax], [Kernels.Sample].
//
// Tensors are [tensor.View]s of Metal buffers, row-major: [n][in] is n
// rows of in contiguous elements (attention's cache layout, given
// innermost first, is [Attention]'s). Activations, weights and outputs are
// f32, f16 or bf16 as each dispatcher says; token ids, positions and lengths are I32 or U32, as it
// says. Products and sums accumulate in float and each float output is
// rounded once to its type.
//
// Every dispatcher takes an encoder, the views it reads and writes and a
// few shape numbers; it checks them all before it encodes anything
// (element types, exact lengths, live buffers of the Kernels' device,
// written views sharing no byte with another argument) and returns an
// error wrapping [ErrInvalidArgument] that names the argument and the
// numbers; a released device or buffer also matches mtl.ErrReleased. Each
// doc comment says which shapes its kernel refuses and why. A dispatcher
// that accepts encodes one dispatch, except [Kernels.AttentionDecode] with
// more than one split, which encodes two (the splits, then their
// reduction). It never commits, and it allocates nothing on the host, so a
// decode step of hundreds of dispatches costs only their encoding.
package ops

import (
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// ErrInvalidArgument is wrapped by every error that reports a bad argument
// to a dispatcher; it is [tensor.ErrInvalidArgument]. Such errors name the
// argument and the numbers; nothing has been encoded when one is returned.
// A released device or buffer also matches mtl.ErrReleased.
var ErrInvalidArgument = tensor.ErrInvalidArgument

// Kernels dispatches the kernels of one device. Make one with [New]; its
// methods are safe for concurrent use as long as each goroutine encodes
// onto its own encoder.
type Kernels struct {
	dev *mtl.Device
	reg *kernels.Registry
	own bool // reg was made by New: Release releases it
}

// New returns the kernels of dev, with pipeline states taken from reg
// (compiled on first use). With a nil reg the Kernels makes a registry of
// its own, which [Kernels.Release] releases; a shared registry is left to
// its owner. A nil or released device is refused.
func New(dev *mtl.Device, reg *kernels.Registry) (*Kernels, error) {
	if dev == nil {
		return nil, tensor.Invalid("device", "nil device given to ops.New")
	}
	if dev.Released() {
		return nil, released("device", "the device given to ops.New was released")
	}
	k := &Kernels{dev: dev, reg: reg}
	if reg == nil {
		k.reg, k.own = kernels.NewRegistry(), true
	}
	return k, nil
}

// Release releases the registry New made, if any. It does nothing on a nil
// Kernels or a second time.
func (k *Kernels) Release() {
	if k != nil && k.own {
		k.reg.Release()
		k.own = false
	}
}

// Device returns the device the Kernels dispatch on.
func (k *Kernels) Device() *mtl.Device { return k.dev }

// Prepare makes the pipeline states of the named entry points ahead of
// time (see package kernels for the names), so that a first dispatch does
// not wait for Metal's compiler.
func (k *Kernels) Prepare(entries ...string) error {
	for _, e := range entries {
		if _, err := k.pipeline(e); err != nil {
			return err
		}
	}
	return nil
}

// pipeline returns the pipeline state of entry, refusing a nil Kernels or
// a released device.
func (k *Kernels) pipeline(entry string) (*mtl.ComputePipelineState, error) {
	if k == nil || k.dev == nil {
		return nil, tensor.Invalid("Kernels", "nil or zero ops.Kernels: make one with ops.New")
	}
	if k.dev.Released() {
		return nil, released("Kernels", "the device was released")
	}
	return k.reg.Pipeline(k.dev, entry)
}

// bind binds view v's buffer and offset at buffer index i.
func bind(enc *mtl.ComputeCommandEncoder, v tensor.View, i int) {
	enc.SetBuffer(v.Buffer, v.Offset, i)
}

// released is an invalid-argument error that also matches mtl.ErrReleased.
func released(arg, detail string) error {
	return &releasedError{tensor.Invalid(arg, "%s", detail)}
}

type releasedError struct{ err error }

func (e *releasedError) Error() string   { return e.err.Error() }
func (e *releasedError) Unwrap() []error { return []error{e.err, mtl.ErrReleased} }
