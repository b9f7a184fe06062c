package gdn

import (
	"fmt"

	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// EncodeCore encodes kernel kern with the layer core of Params.Core (SPEC
// section 13) in the same dispatch, as [Kernels.Core] does with its own
// kernel: with Core.Conv the depthwise causal convolution of
// c.MixedQKV with its conv state and silu before the step, with Core.Norm
// the gated RMSNorm of each value head's output with c.Z and
// c.NormWeight after it. It takes [KernelPrefillChunked], the fast path
// for long prompts (gated_delta_net_chunked_core_{A}_{S}, the chunked
// kernel's threadgroups: one per value head and sequence, which holds all
// D_v rows, so the norm's reduction stays inside it); the other kernels
// are refused. Everything runs in f32, y is rounded once to
// Params.Activation, the state once to Params.State, and the conv state
// holds copies of inputs. A key head's q and k convolution is computed by
// each of its value heads' threadgroups and its conv state written by the
// first only, so with grouped heads ConvStateOut must not be ConvStateIn
// (as for Kernels.Core). With a zero Params.Core and zero c it is
// [Kernels.Encode]: the same kernel, bindings and results as today's
// calls. The rules are [ValidateCoreOn]'s.
func (k *Kernels) EncodeCore(enc *mtl.ComputeCommandEncoder, kern Kernel, p Params, b Buffers, c CoreBuffers) error {
	if k == nil || k.pipelines == nil {
		return invalid("Kernels", "nil or zero, it knows no device: make one with gdn.New")
	}
	if enc == nil {
		return invalid("encoder", "nil compute command encoder")
	}
	return k.dispatchCoreOn(mtlEncoder{enc}, kern, p, b, c)
}

func (k *Kernels) dispatchCoreOn(enc encoder, kern Kernel, p Params, b Buffers, c CoreBuffers) error {
	if p.Core == (spec.Core{}) {
		if c != (CoreBuffers{}) {
			return invalid("CoreBuffers", "set, but Params.Core is zero: the %s kernel runs neither the convolution nor the norm", kern)
		}
		return k.dispatch(enc, kern, p, b)
	}
	if err := ValidateCoreOn(kern, p, b, c); err != nil {
		return err
	}
	if err := k.checkDevice(b); err != nil {
		return err
	}
	if err := k.checkCoreDevice(c); err != nil {
		return err
	}
	if p.Shape.Varlen && p.Shape.NTokens == 0 {
		return nil // every sequence is empty: nothing to read or write
	}
	entry := coreEntryOn(kern, p)
	pso, maxThreads, err := k.pipelines.pipeline(entry)
	if err != nil {
		return fmt.Errorf("gdn: %s kernel with the core: %w", kern, err)
	}
	s := p.Shape
	grid, group := chunkedGeometry(s)
	if n := group.Width; n > maxThreads {
		return invalid("Shape.DV", "at %v the %s kernel runs 4*D_v = %d threads per threadgroup, more than the %d the %s pipeline allows", s, kern, n, maxThreads, entry)
	}
	enc.SetComputePipelineState(pso)
	bindCore(enc, p, b, c, false)
	enc.SetThreadgroupMemoryLength(kernels.ChunkedCoreThreadgroupMemory(s.DK, s.DV), 0)
	enc.DispatchThreadgroups(grid, group)
	if err := enc.Err(); err != nil {
		return fmt.Errorf("gdn: %s kernel with the core: %w", kern, err)
	}
	return nil
}

// coreEntryOn is the entry point of kern with the layer core, for a kern
// that takes it.
func coreEntryOn(kern Kernel, p Params) string {
	return kernels.PrefillChunkedCoreOf(p.Activation, p.State)
}

// checkCoreDevice refuses core views in buffers of another device than
// New's.
func (k *Kernels) checkCoreDevice(c CoreBuffers) error {
	if k.dev == nil {
		return nil
	}
	views := [...]struct {
		name string
		v    View
	}{
		{"CoreBuffers.MixedQKV", c.MixedQKV}, {"CoreBuffers.ConvWeight", c.ConvWeight},
		{"CoreBuffers.ConvStateIn", c.ConvStateIn}, {"CoreBuffers.ConvStateOut", c.ConvStateOut},
		{"CoreBuffers.Z", c.Z}, {"CoreBuffers.NormWeight", c.NormWeight},
	}
	for i := range views {
		if buf := views[i].v.Buffer; buf != nil && !buf.Device().Same(k.dev) {
			return invalid(views[i].name, "its buffer belongs to %v, the kernels to %v", buf.Device(), k.dev)
		}
	}
	return nil
}
