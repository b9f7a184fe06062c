package gdn

import (
	"fmt"

	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// EncodeCore encodes kernel kern with the layer core of Params.Core (SPEC
// section 13) in the same dispatch, as [Kernels.DecodeCore] does with its own
// kernel: with Core.Conv the depthwise causal convolution of
// c.MixedQKV with its conv state and silu before the step, with Core.Norm
// the gated RMSNorm of each value head's output with c.Z and
// c.NormWeight after it. It takes [KernelPrefillChunked], the fast path
// for long prompts (gated_delta_net_chunked_core_{A}_{S}, the chunked
// kernel's threadgroups: one per value head and sequence, which holds all
// D_v rows, so the norm's reduction stays inside it), and
// [KernelPrefillBlocked] (gated_delta_net_prefill_blocked_core_{A}_{S}_{NSG}:
// the blocked kernel splits a head's rows over D_v / 32 threadgroups, so
// with the core it runs the core kernel's grid, one threadgroup of 4 D_v
// threads per value head, and stages 16 tokens at a time as float: two
// barriers per block where the core kernel takes two per token, with the
// core kernel's arithmetic in its order: on the emulated device the same
// bytes), and [KernelPrefill] (gated_delta_net_prefill_core_{A}_{S}: one
// threadgroup of D_v threads per value head, the norm's sums of squares
// through simd_sum); the decode kernels are refused. Everything runs in
// f32, y is rounded once to Params.Activation, the state once to
// Params.State, and the conv state holds copies of inputs. A key head's q
// and k convolution is computed by each of its value heads' threadgroups
// and its conv state written by the first only, so with grouped heads
// ConvStateOut must not be ConvStateIn: nothing orders the threadgroups of
// one dispatch, and these kernels keep one threadgroup per value head
// (Kernels.DecodeCore takes a grouped conv state in place by switching to one
// threadgroup per key head). With a zero Params.Core and zero c it is
// [Kernels.Encode]: the same kernel, bindings and results as today's
// calls. The rules are [ValidateCoreOn]'s.
func (k *Kernels) EncodeCore(enc *mtl.ComputeCommandEncoder, kern Kernel, p Params, b Buffers, c CoreBuffers) error {
	if err := k.checkEncoder(enc); err != nil {
		return err
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
	t, _ := coreTargetOf(kern)
	entry := t.entry(p)
	pso, maxThreads, err := k.pipelines.pipeline(entry)
	if err != nil {
		return fmt.Errorf("gdn: %s kernel with the core: %w", kern, err)
	}
	l := t.launch(p)
	if n := l.group.Width * l.group.Height * l.group.Depth; n > maxThreads {
		return invalid(l.field, "at %v the %s kernel with the core runs %s = %d threads per threadgroup, more than the %d the %s pipeline allows", p.Shape, kern, l.formula, n, maxThreads, entry)
	}
	enc.SetComputePipelineState(pso)
	bindCore(enc, p, b, c, false)
	enc.SetThreadgroupMemoryLength(l.memory, 0)
	enc.DispatchThreadgroups(l.grid, l.group)
	if err := enc.Err(); err != nil {
		return fmt.Errorf("gdn: %s kernel with the core: %w", kern, err)
	}
	return nil
}

// takesCore reports whether [Kernels.EncodeCore] runs the layer core on k.
func (k Kernel) takesCore() bool {
	return k == KernelPrefillChunked || k == KernelPrefillBlocked || k == KernelPrefill
}

// chunkedCore is the chunked prefill's target: its own shape limits (D_k
// and D_v at most 128), its grid (4 D_v threads per value head), no
// capture.
var chunkedCore = coreTarget{
	name:    KernelPrefillChunked.String(),
	shape:   func(s Shape) error { return validateKernelShape(KernelPrefillChunked, s) },
	threads: func(s Shape) int { return kernels.ChunkLanes * s.DV }, channels: chunkedConvChannels, normRows: packedRowsPerGroup,
	serving: KernelPrefillChunked,
	entry:   func(p Params) string { return kernels.PrefillChunkedCoreOf(p.Activation, p.State) },
	launch: func(p Params) launch {
		grid, group := chunkedGeometry(p.Shape)
		return launch{grid, group, kernels.ChunkedCoreThreadgroupMemory(p.DK, p.DV), "Shape.DV", "4*D_v"}
	},
}

// maxThreadgroupMemory is the threadgroup memory every Apple GPU gives a
// threadgroup.
const maxThreadgroupMemory = 32 << 10

// blockedCore is the blocked prefill's target: its shape limits (D_k 64 or
// 128, D_v a multiple of 32), with the core the core kernel's grid (one
// threadgroup of 4 D_v threads per value head: D_v at most 256) and a
// block of 16 tokens staged as float in at most 32 KiB.
var blockedCore = coreTarget{
	name: KernelPrefillBlocked.String(),
	shape: func(s Shape) error {
		if err := validateKernelShape(KernelPrefillBlocked, s); err != nil {
			return err
		}
		if s.DV > coreMaxDV {
			return invalid("Shape.DV", "%d, the blocked kernel with the core runs 4 D_v threads per value head: D_v at most %d", s.DV, coreMaxDV)
		}
		if n := kernels.BlockedCoreThreadgroupMemory(s.DK, s.DV); n > maxThreadgroupMemory {
			return invalid("Shape.DV", "%d: at D_k = %d the blocked kernel with the core stages %d tokens in %d bytes of threadgroup memory, more than %d", s.DV, s.DK, kernels.BlockedCoreLen, n, maxThreadgroupMemory)
		}
		return nil
	},
	threads: func(s Shape) int { return 4 * s.DV }, channels: coreChannelsPerThread, normRows: packedRowsPerGroup,
	vector:  []string{"StateIn", "StateOut"},
	serving: KernelPrefillBlocked,
	entry:   func(p Params) string { return kernels.PrefillBlockedCoreOf(p.Activation, p.State, nsg(p.Shape)) },
	launch: func(p Params) launch {
		grid, group := coreGeometry(p.Shape, 0)
		return launch{grid, group, kernels.BlockedCoreThreadgroupMemory(p.DK, p.DV), "Shape.DV", "4*D_v"}
	},
}

// The convolution's channels per thread of the chunked and token-by-token
// prefills with the core (GDN_CHUNK_CONV_CHANNELS, GDN_PREFILL_CONV_CHANNELS).
const (
	chunkedConvChannels = 2
	prefillConvChannels = 4
)

// prefillCore is the token-by-token prefill's target: its shape limits
// (D_k and D_v at most 128), its grid (D_v threads per value head, one per
// row: the norm adds SIMD-groups with simd_sum, any D_v), 4 channels of the
// convolution per thread, no capture.
var prefillCore = coreTarget{
	name:    KernelPrefill.String(),
	shape:   func(s Shape) error { return validateKernelShape(KernelPrefill, s) },
	threads: func(s Shape) int { return s.DV }, channels: prefillConvChannels,
	serving: KernelPrefill,
	entry:   func(p Params) string { return kernels.PrefillCoreOf(p.Activation, p.State) },
	launch: func(p Params) launch {
		grid, group := prefillGeometry(p.Shape)
		return launch{grid, group, kernels.PrefillCoreThreadgroupMemory(p.DK, p.DV), "Shape.DV", "D_v"}
	},
}

// coreTargetOf returns the target of kern for [Kernels.EncodeCore].
func coreTargetOf(kern Kernel) (coreTarget, error) {
	switch kern {
	case KernelPrefill:
		return prefillCore, nil
	case KernelPrefillChunked:
		return chunkedCore, nil
	case KernelPrefillBlocked:
		return blockedCore, nil
	}
	return coreTarget{}, invalid("kernel", "the %s kernel does not run the layer core; Kernels.DecodeCore and the prefills (token by token, chunked, blocked) do", kern)
}

// checkCoreDevice refuses core views in buffers of another device than
// New's.
func (k *Kernels) checkCoreDevice(c CoreBuffers) error {
	views := [...]namedView{
		{"CoreBuffers.MixedQKV", c.MixedQKV}, {"CoreBuffers.ConvWeight", c.ConvWeight},
		{"CoreBuffers.ConvStateIn", c.ConvStateIn}, {"CoreBuffers.ConvStateOut", c.ConvStateOut},
		{"CoreBuffers.Z", c.Z}, {"CoreBuffers.NormWeight", c.NormWeight},
	}
	return k.checkViewsDevice(views[:])
}

// PrefillCore encodes the prefill kernel [PrefillCoreKernel] picks for p
// and b with the layer core of Params.Core: the same choice as
// [Kernels.Prefill] among the kernels whose limits with the core take p
// (see [ValidateCoreOn]). The rules are [Kernels.EncodeCore]'s.
//
// With grouped heads and the conv state updated in place (ConvStateOut
// the same view as ConvStateIn, as a state pool has it), which none of the
// prefills takes (they run a threadgroup per value head, and nothing
// orders the threadgroups of a dispatch), it encodes [Kernels.DecodeCore]
// instead, whose grouped geometry (a threadgroup per key head) takes any
// number of tokens, two barriers per token.
func (k *Kernels) PrefillCore(enc *mtl.ComputeCommandEncoder, p Params, b Buffers, c CoreBuffers) error {
	if p.Core != (spec.Core{}) && coreGrouped(p, c) {
		return k.DecodeCore(enc, p, b, c)
	}
	return k.EncodeCore(enc, PrefillCoreKernel(p, b), p, b, c)
}

// PrefillCoreKernel returns the kernel [Kernels.PrefillCore] encodes for
// p and b: the chunked prefill from [ChunkedMinTokens] tokens on where its
// limits with the core take p; below, the blocked prefill where they take
// p and StateIn and StateOut are at offsets of 4 elements (with the core
// it stages 16 tokens at a time, two barriers per block); then the
// token-by-token prefill; otherwise the chunked prefill, whose error says
// why p is refused. With a zero Params.Core it is [PrefillKernel].
func PrefillCoreKernel(p Params, b Buffers) Kernel {
	if p.Core == (spec.Core{}) {
		return PrefillKernel(p, b)
	}
	st := packedAlign * p.State.Size()
	switch {
	case p.Shape.NTokens >= ChunkedMinTokens && validateCoreParams(chunkedCore, p) == nil:
		return KernelPrefillChunked
	case validateCoreParams(blockedCore, p) == nil && st > 0 && b.StateIn.Offset%st == 0 && b.StateOut.Offset%st == 0:
		return KernelPrefillBlocked
	case validateCoreParams(prefillCore, p) == nil:
		return KernelPrefill
	}
	return KernelPrefillChunked
}
