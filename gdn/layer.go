package gdn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// Core says which parts of a layer's core around the step a kernel runs:
// the short convolution and the gated RMSNorm; see [spec.Core].
type Core = spec.Core

// QwenCore returns the core of a Qwen3-Next or Qwen3.5 linear-attention
// layer: the convolution (K = 4) and the gated RMSNorm with silu(z), eps
// 1e-6; see [spec.QwenCore].
func QwenCore() Core { return spec.QwenCore() }

// Gates of the gated RMSNorm; see [spec.NormGate].
const (
	GateSiLU    = spec.GateSiLU
	GateSigmoid = spec.GateSigmoid
)

// CoreBuffers are the views of the layer core (SPEC section 13) beside
// [Buffers], all of type Params.Activation:
//
//	MixedQKV      [conv_dim, n_tokens, n_seqs] (packed: [conv_dim, n_tokens])   read with Core.Conv
//	ConvWeight    [K, conv_dim], K fastest (HF's conv1d.weight squeezed)       read with Core.Conv
//	ConvStateIn   [conv_dim, K-1, states], oldest input first                  read with Core.Conv
//	ConvStateOut  the same shape                                               written with Core.Conv
//	Z             [D_v, n_v_heads, n_tokens, n_seqs] (as Output)               read with Core.Norm
//	NormWeight    [D_v]                                                        read with Core.Norm
//
// conv_dim = 2 n_k_heads D_k + n_v_heads D_v (q, then k, then v); states
// are n_seqs, or n_slots with a state pool: the conv state of a sequence
// is indexed by the same slot as its recurrent state. With the
// convolution, Buffers.Q, K and V stay empty. ConvStateOut may be the same
// view as ConvStateIn (in place), with grouped heads too: then
// [Kernels.DecodeCore] runs one threadgroup per key head and its value heads,
// which reads and writes the key head's conv state once and alone. The
// prefills ([Kernels.EncodeCore]) keep one threadgroup per value head and
// refuse it with grouped heads: there the two must be apart.
type CoreBuffers struct {
	MixedQKV, ConvWeight      View
	ConvStateIn, ConvStateOut View
	Z, NormWeight             View
}

// Buffer indices of the core kernel (kernels/gdn_core.metal).
const (
	coreFirstIndex  = 14 // mixed_qkv; then conv weight, conv state in, out, z, norm_w
	coreParamsIndex = 20 // the core parameters, bound with setBytes
)

// Bits of the core parameters' flags (GDN_CORE_* in kernels/gdn_core.metal).
const (
	coreConv        = 1 << 0
	coreNorm        = 1 << 1
	coreSigmoid     = 1 << 2
	coreCapture     = 1 << 3
	coreGroupedFlag = 1 << 4
)

// coreMaxDV is the largest D_v of the core kernel (GDN_CORE_MAX_DV): its
// threadgroup runs 4 D_v threads.
const coreMaxDV = 256

// validateCore refuses a layer core (Params.Core) on a dispatch without
// [CoreBuffers]: the core kernel ([Kernels.DecodeCore]) and the prefills (token
// by token, chunked, blocked) through [Kernels.EncodeCore] run it.
func validateCore(k Kernel, p Params) error {
	if p.Core == (spec.Core{}) {
		return nil
	}
	if k.takesCore() {
		return invalid("Params.Core", "%+v: the %s kernel runs the core through Kernels.EncodeCore, which takes its CoreBuffers", p.Core, k)
	}
	return invalid("Params.Core", "%+v: the %s kernel runs neither the convolution nor the gated norm; Kernels.DecodeCore and the prefills (Kernels.EncodeCore) run them", p.Core, k)
}

// A coreTarget is a kernel that runs the layer core, with its own rules
// beside the contract's.
type coreTarget struct {
	name           string            // "core" or a Kernel's name, for the errors
	shape          func(Shape) error // the kernel's limits on D_k and D_v
	threads        func(Shape) int   // threads per threadgroup, each holding channels of the convolution
	channels       int               // the convolution's channels per thread
	normRows       int               // with the norm D_v must be a multiple of it (the rows of the SIMD-groups it sums), or 0
	vector         []string          // the views read or written 4 elements at a time: their offsets are multiples of 4 elements
	capture        bool              // takes Capture
	inPlaceGrouped bool              // takes ConvStateOut = ConvStateIn with grouped heads
	serving        Kernel            // the kernel whose serving rules apply
	entry          func(Params) string
	launch         func(Params) launch
}

// coreKernel is [Kernels.DecodeCore]'s target.
var coreKernel = coreTarget{
	name: "core",
	shape: func(s Shape) error {
		if s.DK != 32 && s.DK != 64 && s.DK != 128 {
			return invalid("Shape.DK", "%d, the core kernel needs 32, 64 or 128", s.DK)
		}
		if s.DV%packedRowsPerGroup != 0 || s.DV > coreMaxDV {
			return invalid("Shape.DV", "%d, the core kernel needs a multiple of %d up to %d (one threadgroup of 4 D_v threads per value head)", s.DV, packedRowsPerGroup, coreMaxDV)
		}
		return nil
	},
	threads: func(s Shape) int { return 4 * s.DV }, channels: coreChannelsPerThread, normRows: packedRowsPerGroup,
	vector:  []string{"Q", "K", "StateIn", "StateOut", "Capture"},
	capture: true, inPlaceGrouped: true, serving: KernelDecodePackedSeq,
}

// ValidateCore checks p, b and c for [Kernels.DecodeCore] against every rule of
// the contract, as [Validate] does for the other kernels: the parameters
// (Core among them: Conv 0 or 4, with Norm a known gate and a finite eps >
// 0), the core kernel's shape (D_k 32, 64 or 128, D_v a multiple of 8
// up to 256), every view's element type, exact element count, alignment and
// range, the views of the parts that are off left empty, and no written
// view sharing a byte with another but StateOut = StateIn and
// ConvStateOut = ConvStateIn (in place). The error wraps
// [ErrInvalidArgument] and names the field.
func ValidateCore(p Params, b Buffers, c CoreBuffers) error {
	return validateCoreFor(coreKernel, p, b, c)
}

// ValidateCoreOn checks p, b and c for [Kernels.EncodeCore] of kern as
// [ValidateCore] does for the core kernel, with kern's own limits. For
// the chunked prefill: D_k and D_v at most 128, D_v a multiple of 8 with
// Core.Norm (the norm sums SIMD-groups of 8 rows), with Core.Conv 2 D_k +
// D_v at most 8 D_v (its 4 D_v threads hold 2 channels each), no
// alignment rule beyond the element's. For the blocked prefill: D_k 64 or
// 128, D_v a multiple of 32 up to 256 whose 16-token stage fits 32 KiB of
// threadgroup memory (D_v at most 192 at D_k = 128), StateIn and StateOut
// at offsets of 4 elements. For the token-by-token prefill: D_k and D_v
// at most 128, with Core.Conv 2 D_k + D_v at most 4 D_v (its D_v threads
// hold 4 channels each). All: b.Capture empty, and with grouped heads
// ConvStateOut apart from ConvStateIn.
func ValidateCoreOn(kern Kernel, p Params, b Buffers, c CoreBuffers) error {
	t, err := coreTargetOf(kern)
	if err != nil {
		return err
	}
	return validateCoreFor(t, p, b, c)
}

// tokenFormulas holds the length formulas of the views with one value per
// token, per sequence and packed, by their per-token element count: built
// once, so that validating a dispatch does not build strings.
var tokenFormulas = func() map[string][2]string {
	m := map[string][2]string{}
	for _, perSeq := range []string{"D_k*n_k_heads", "D_v*n_v_heads", "n_v_heads", "conv_dim", "D_k*D_v*n_v_heads"} {
		m[perSeq] = [2]string{perSeq + "*n_tokens*n_seqs", perSeq + "*n_tokens (packed)"}
	}
	return m
}()

// tokensFormula is the length formula of a view of perSeq elements per
// token, for the shape's layout.
func tokensFormula(s Shape, perSeq string) string {
	f, ok := tokenFormulas[perSeq]
	if !ok {
		f = [2]string{perSeq + "*n_tokens*n_seqs", perSeq + "*n_tokens (packed)"}
	}
	return formula(s, f[0], f[1])
}

// validateCoreFor is ValidateCore for the kernel t.
func validateCoreFor(t coreTarget, p Params, b Buffers, c CoreBuffers) error {
	if err := validateCoreParams(t, p); err != nil {
		return err
	}
	s := p.Shape
	if !t.capture && b.Capture != (View{}) {
		return invalid("Capture", "set, but the %s kernel does not write it (Kernels.DecodeCore does)", t.name)
	}
	const act, state, fixed = "Params.Activation", "Params.State", ""
	a, st := p.Activation, p.State
	conv, norm := p.Core.Conv > 0, p.Core.Norm
	tokens := func(perSeq string) string { return tokensFormula(s, perSeq) }
	states := "conv_dim*(K-1)*n_seqs"
	if s.NSlots > 0 {
		states = "conv_dim*(K-1)*n_slots"
	}
	type part struct {
		check viewCheck
		on    bool
		why   string
	}
	parts := [...]part{
		{exact("Q", b.Q, a, act, s.QKLen(), tokens("D_k*n_k_heads"), false), !conv, "Params.Core.Conv is set: the convolution makes q from MixedQKV"},
		{exact("K", b.K, a, act, s.QKLen(), tokens("D_k*n_k_heads"), false), !conv, "Params.Core.Conv is set: the convolution makes k from MixedQKV"},
		{exact("V", b.V, a, act, s.VLen(), tokens("D_v*n_v_heads"), false), !conv, "Params.Core.Conv is set: the convolution makes v from MixedQKV"},
		{exact("G", b.G, a, act, s.GateLen(), tokens("n_v_heads"), false), true, ""},
		{exact("Beta", b.Beta, a, act, s.GateLen(), tokens("n_v_heads"), false), true, ""},
		{exact("StateIn", b.StateIn, st, state, s.StateLen(), stateFormula(s), false).wideIndex(), true, ""},
		{exact("Output", b.Output, a, act, s.VLen(), tokens("D_v*n_v_heads"), true), true, ""},
		{exact("StateOut", b.StateOut, st, state, s.StateLen(), stateFormula(s), true).wideIndex(), true, ""},
		{exact("ALog", b.ALog, F32, fixed, s.NVHeads, "n_v_heads", false), p.Fused.Gate, "Params.Fused.Gate is off (G holds g itself)"},
		{exact("DtBias", b.DtBias, F32, fixed, s.NVHeads, "n_v_heads", false), p.Fused.Gate, "Params.Fused.Gate is off (G holds g itself)"},
		{exact("CoreBuffers.MixedQKV", c.MixedQKV, a, act, s.MixedLen(), tokens("conv_dim"), false), conv, "Params.Core.Conv is off"},
		{exact("CoreBuffers.ConvWeight", c.ConvWeight, a, act, p.ConvWeightLen(), "K*conv_dim", false), conv, "Params.Core.Conv is off"},
		{exact("CoreBuffers.ConvStateIn", c.ConvStateIn, a, act, p.ConvStateLen(), states, false), conv, "Params.Core.Conv is off"},
		{exact("CoreBuffers.ConvStateOut", c.ConvStateOut, a, act, p.ConvStateLen(), states, true), conv, "Params.Core.Conv is off"},
		{exact("CoreBuffers.Z", c.Z, a, act, s.ZLen(), tokens("D_v*n_v_heads"), false), norm, "Params.Core.Norm is off"},
		{exact("CoreBuffers.NormWeight", c.NormWeight, a, act, s.DV, "D_v", false), norm, "Params.Core.Norm is off"},
	}
	parts[8].check.missing = "Params.Fused.Gate computes g from A_log and dt_bias, [n_v_heads] f32 each"
	parts[9].check.missing = parts[8].check.missing
	var room [len(parts) + 1]viewCheck // the parts and Capture: no allocation per dispatch
	views := room[:0]
	for _, pt := range parts {
		if !pt.on {
			if pt.check.v != (View{}) {
				return invalid(pt.check.name, "set, but %s", pt.why)
			}
			continue
		}
		views = append(views, pt.check)
	}
	if b.Capture != (View{}) {
		capt := exact("Capture", b.Capture, st, state, s.CaptureLen(), tokens("D_k*D_v*n_v_heads"), true)
		if s.NSeqs == 1 {
			capt.maxLen = maxElems - 1 // one sequence: room for the longest draft
		}
		views = append(views, capt)
	}
	for i := range views {
		if c := &views[i]; uint64(c.want) >= maxElems && !c.wide {
			return tooLarge(c.name, c.formula, c.want)
		}
	}
	for i := range views {
		if err := validateView(&views[i]); err != nil {
			return err
		}
	}
	for i := range views {
		c := &views[i]
		vector := slices.Contains(t.vector, c.name)
		if align := packedAlign * c.elem.Size(); vector && c.v.Offset%align != 0 {
			return invalid(c.name, "offset %d bytes, the %s kernel reads and writes it %d elements at a time: it must be a multiple of %d", c.v.Offset, t.name, packedAlign, align)
		}
	}
	if conv && c.ConvStateOut == c.ConvStateIn {
		if s.NVHeads != s.NKHeads && !t.inPlaceGrouped {
			return invalid("CoreBuffers.ConvStateOut", "the same view as ConvStateIn, but with n_v_heads = %d over n_k_heads = %d the %s kernel's threadgroups of the value heads of a key head read its conv state while one writes it, with no order between them: use two buffers", s.NVHeads, s.NKHeads, t.name)
		}
		// In place: ConvStateOut's overlap checks cover ConvStateIn's.
		// With grouped heads Kernels.DecodeCore runs one threadgroup per key
		// head (coreGrouped), the only reader and writer of its conv state.
		for i := range views {
			if views[i].name == "CoreBuffers.ConvStateIn" {
				views = append(views[:i], views[i+1:]...)
				break
			}
		}
	}
	if err := validateOverlaps(views); err != nil {
		return err
	}
	if err := validateServing(t.serving, p, b); err != nil {
		return err
	}
	// The slot index and cu_seqlens against the conv state written.
	if conv {
		var room [3]viewCheck
		serving := append(room[:0], viewCheck{name: "CoreBuffers.ConvStateOut", v: c.ConvStateOut, written: true})
		for _, v := range []struct {
			name string
			v    View
		}{{"Slots", b.Slots}, {"CuSeqlens", b.CuSeqlens}} {
			if v.v != (View{}) {
				serving = append(serving, viewCheck{name: v.name, v: v.v})
			}
		}
		if err := validateOverlaps(serving); err != nil {
			return err
		}
	}
	return nil
}

// coreChannelsPerThread is the number of the convolution's channels one
// thread of the core kernel holds in registers.
const coreChannelsPerThread = 2

// minConvDV is the least D_v (a multiple of step, or any with step 0)
// whose perRow D_v threads, holding channels each, hold the 2 D_k + D_v
// channels of a head's convolution.
func minConvDV(dk, channels, perRow, step int) int {
	step = max(step, 1)
	for dv := step; ; dv += step {
		if 2*dk+dv <= channels*perRow*dv {
			return dv
		}
	}
}

// packedRowsPerGroup is GDN_PACKED_ROWS: rows of the state per SIMD-group.
const packedRowsPerGroup = 8

// coreParamsLen is the size of the core parameters (gdn_core_params): four
// words.
const coreParamsLen = 16

// coreBytes returns the core parameters as the kernel reads them: flags,
// eps bits, conv_dim, a reserved 0, in the first coreParamsLen bytes of a
// block of paramsLen.
func coreBytes(p Params, capture, grouped bool) [paramsLen]byte {
	var flags uint32
	if p.Core.Conv > 0 {
		flags |= coreConv
	}
	if p.Core.Norm {
		flags |= coreNorm
	}
	if p.Core.NormGate == spec.GateSigmoid {
		flags |= coreSigmoid
	}
	if capture {
		flags |= coreCapture
	}
	if grouped {
		flags |= coreGroupedFlag
	}
	var b [paramsLen]byte
	binary.LittleEndian.PutUint32(b[0:], flags)
	binary.LittleEndian.PutUint32(b[4:], math.Float32bits(p.Core.NormEps))
	binary.LittleEndian.PutUint32(b[8:], uint32(p.ConvDim()))
	return b
}

// DecodeCoreEntryPoint returns the entry point [Kernels.DecodeCore] runs
// for p, gated_delta_net_core_packed_{A}_{S}_{NSG}, after checking p as
// [ValidateCore] does (without buffers).
func DecodeCoreEntryPoint(p Params) (string, error) {
	if err := p.Validate(); err != nil {
		var e *spec.ArgumentError
		errors.As(err, &e)
		return "", invalid(e.Arg, "%s", e.Detail)
	}
	if s := p.Shape; (s.DK != 32 && s.DK != 64 && s.DK != 128) || s.DV%packedRowsPerGroup != 0 || s.DV > coreMaxDV {
		return "", invalid("Shape", "%v: the core kernel needs D_k 32, 64 or 128 and D_v a multiple of %d up to %d", s, packedRowsPerGroup, coreMaxDV)
	}
	return kernels.CorePackedOf(p.Activation, p.State, nsg(p.Shape)), nil
}

// coreGeometry returns the grid (in threadgroups) and threadgroup size of
// the core kernel. Per value head (perPass 0): (1, n_v_heads, n_seqs)
// threadgroups of (32, D_v/8, 1), one per value head and sequence.
// Grouped: (1, n_k_heads, n_seqs) threadgroups of (32, perPass D_v/8, 1),
// one per key head and sequence, running its r = n_v_heads / n_k_heads
// value heads perPass at a time.
func coreGeometry(s Shape, perPass int) (grid, group mtl.Size) {
	if perPass > 0 {
		return mtl.Sz(1, s.NKHeads, s.NSeqs), mtl.Sz(32, perPass*s.DV/packedRowsPerGroup, 1)
	}
	return mtl.Sz(1, s.NVHeads, s.NSeqs), mtl.Sz(32, s.DV/packedRowsPerGroup, 1)
}

// coreGrouped reports whether [Kernels.DecodeCore] runs the grouped geometry for
// p and c: with the convolution, grouped heads (n_v_heads > n_k_heads) and
// the conv state updated in place (ConvStateOut = ConvStateIn).
//
// The choice. The grouped geometry is the only one that can update a
// grouped conv state in place, and it reads and writes the conv state
// exactly once ((K-1) conv_dim elements per sequence; per value head the r
// value heads of a key head each read its q and k conv state, 1.5x at
// Qwen3.5's shape) and mixed_qkv's q and k once per token when its r value
// heads fit one threadgroup. It has the same barriers and shuffles per
// token and SIMD-group, the same SIMD-groups in all, but r times fewer,
// r times larger threadgroups: at batch 1 decode with Qwen3.5's 16 key and
// 32 value heads, 16 threadgroups of 1024 threads instead of 32 of 512,
// half the GPU cores busy on a kernel that SPEC section 12 finds
// latency-bound, to save (r-1) (K-1) 2 n_k_heads D_k elements of conv
// state reads per sequence (24 KiB at bf16, against the 2 MiB the f32
// state moves each way).
// So the dispatcher takes it when the caller asks for in place (a state
// pool, where the two-buffer alternative costs a copy back of every
// touched slot) and keeps one threadgroup per value head when the conv
// state is written to a buffer of its own (two buffers swapped per step,
// as a single decoding sequence does).
func coreGrouped(p Params, c CoreBuffers) bool {
	return p.Core.Conv > 0 && p.NVHeads > p.NKHeads && c.ConvStateOut == c.ConvStateIn
}

// corePerPass returns how many of a key head's r value heads the grouped
// geometry runs side by side: the largest divisor of r whose 4 D_v threads
// each fit maxThreads (the pipeline's maxTotalThreadsPerThreadgroup) and
// the kernel's threadgroup memory (perPass D_v <= GDN_CORE_MAX_DV); 0 when
// not even one does.
func corePerPass(s Shape, maxThreads int) int {
	r := s.NVHeads / s.NKHeads
	for n := r; n >= 1; n-- {
		if r%n == 0 && 4*n*s.DV <= maxThreads && n*s.DV <= coreMaxDV {
			return n
		}
	}
	return 0
}

// DecodeCore is [Kernels.Decode] with the layer core: it encodes the layer
// core of SPEC section 13 in one dispatch on the core kernel, for any
// number of tokens (a decode step, a window, a prefill; packed sequences
// and state slots as for the other kernels): with Params.Core.Conv the
// depthwise causal convolution of MixedQKV with its conv state and silu,
// split into q, k and v; the step of Params.Fused; with Params.Core.Norm
// the gated RMSNorm of each value head's output with Z and NormWeight.
// Everything runs in f32; the output (y with the norm) is rounded once to
// Params.Activation, the state once to Params.State. With b.Capture set it
// also writes the state after every token t to capture[..., t, s]
// (speculative decoding; capture's rules are
// [Kernels.DecodeWithCapture]'s), and [RollbackCore] restores both states
// for the accepted tokens. The rules are [ValidateCore]'s.
//
// Geometry. One threadgroup holds whole value heads (4 D_v threads each,
// the packed layout), so the norm's reduction over D_v stays in the
// dispatch. By default it is one threadgroup per value head and sequence.
// With grouped heads (n_v_heads = r n_k_heads, r > 1) and the conv state
// updated in place (c.ConvStateOut == c.ConvStateIn) it is one per key head
// and sequence, running the key head's r value heads side by side when
// their 4 r D_v threads fit the pipeline's maxTotalThreadsPerThreadgroup
// (and r D_v <= 256), else in passes of the largest divisor of r that
// fits: that threadgroup alone reads and writes the key head's conv state,
// so the conv state is read and written exactly once, (K-1) conv_dim
// elements per sequence, and in place is correct. Both give the same bytes.
// The grouped geometry is not the default because it runs r times fewer
// threadgroups: at batch 1 decode with Qwen3.5's 16 key and 32 value
// heads, 16 of 1024 threads where the default runs 32 of 512, on a kernel
// SPEC section 12 finds latency-bound, to save 24 KiB of conv state reads
// per sequence (each of a key head's r value heads reads its q and k conv
// state: 1.5x the conv state at r = 2) beside the 2 MiB the f32 state
// moves each way; in place it also spares a state pool the copy back of
// every touched slot that two buffers would need. The threadgroup's 4 D_v
// threads must be at most the pipeline's maxTotalThreadsPerThreadgroup.
func (k *Kernels) DecodeCore(enc *mtl.ComputeCommandEncoder, p Params, b Buffers, c CoreBuffers) error {
	if err := k.checkEncoder(enc); err != nil {
		return err
	}
	return k.dispatchCore(mtlEncoder{enc}, p, b, c)
}

func (k *Kernels) dispatchCore(enc encoder, p Params, b Buffers, c CoreBuffers) error {
	if err := ValidateCore(p, b, c); err != nil {
		return err
	}
	entry, err := DecodeCoreEntryPoint(p)
	if err != nil {
		return err
	}
	pso, maxThreads, err := k.pipelines.pipeline(entry)
	if err != nil {
		return fmt.Errorf("gdn: core kernel: %w", err)
	}
	if n := 4 * p.DV; n > maxThreads {
		return invalid("Shape.DV", "at %v the core kernel runs 4*D_v = %d threads per threadgroup, more than the %d the %s pipeline allows", p.Shape, n, maxThreads, entry)
	}
	perPass := 0
	if coreGrouped(p, c) {
		perPass = corePerPass(p.Shape, maxThreads)
	}
	grid, group := coreGeometry(p.Shape, perPass)
	enc.SetComputePipelineState(pso)
	bindCore(enc, p, b, c, perPass > 0)
	enc.DispatchThreadgroups(grid, group)
	if err := enc.Err(); err != nil {
		return fmt.Errorf("gdn: core kernel: %w", err)
	}
	return nil
}

// bindCore binds the views of a layer-core dispatch, valid for p: 0-13 as
// every kernel (G's buffer standing in where the kernel reads nothing: Q, K
// and V with the convolution, A_log and dt_bias without the fused gate,
// Capture when it is empty), the core's views at 14-19 (stand-ins for the
// parts that are off), the parameters at 8 and the core parameters at 20
// (with grouped, the core kernel's flag for one threadgroup per key head).
func bindCore(enc encoder, p Params, b Buffers, c CoreBuffers, grouped bool) {
	stand := b.G // bound where the kernel reads nothing
	q, kk, v := b.Q, b.K, b.V
	if p.Core.Conv > 0 {
		q, kk, v = stand, stand, stand
	}
	aLog, dtBias := b.ALog, b.DtBias
	if !p.Fused.Gate {
		aLog, dtBias = stand, stand
	}
	slots, cu := servingViews(p.Shape, b)
	capture := stand
	if b.Capture != (View{}) {
		capture = b.Capture
	}
	views := [numViews]View{q, kk, v, b.G, b.Beta, b.StateIn, b.Output, b.StateOut, stand, capture, aLog, dtBias, slots, cu}
	core := [numViews]View{c.MixedQKV, c.ConvWeight, c.ConvStateIn, c.ConvStateOut, c.Z, c.NormWeight}
	if p.Core.Conv == 0 {
		core[0], core[1], core[2], core[3] = stand, stand, stand, stand
	}
	if !p.Core.Norm {
		core[4], core[5] = stand, stand
	}
	for i := 6; i < numViews; i++ {
		core[i] = stand
	}
	var bufs [numViews]*mtl.Buffer
	var offsets [numViews]int
	for i, v := range views {
		bufs[i], offsets[i] = v.Buffer, v.Offset
	}
	enc.setViews(bufs, offsets, 0)
	for i, v := range core {
		bufs[i], offsets[i] = v.Buffer, v.Offset
	}
	enc.setViews(bufs, offsets, coreFirstIndex)
	enc.setParams(paramBytes(p), paramsLen, paramsIndex)
	enc.setParams(coreBytes(p, b.Capture != View{}, grouped), coreParamsLen, coreParamsIndex)
}

// validateCoreParams checks what validateCoreFor checks without the
// buffers: the parameters and t's shape.
func validateCoreParams(t coreTarget, p Params) error {
	if err := p.Validate(); err != nil {
		var e *spec.ArgumentError
		errors.As(err, &e)
		return invalid(e.Arg, "%s", e.Detail)
	}
	s := p.Shape
	if err := t.shape(s); err != nil {
		return err
	}
	if p.Core.Norm && t.normRows > 0 && s.DV%t.normRows != 0 {
		return invalid("Shape.DV", "%d, the %s kernel's gated norm sums the outputs of SIMD-groups of %d rows: D_v must be a multiple of %d", s.DV, t.name, t.normRows, t.normRows)
	}
	if ch, nt := 2*s.DK+s.DV, t.threads(s); p.Core.Conv > 0 && ch > t.channels*nt {
		return invalid("Shape.DV", "%d: the convolution's 2*D_k + D_v = %d channels of a head are more than the %s kernel's %d threads hold (%d each): D_v must be at least %d with D_k = %d", s.DV, ch, t.name, nt, t.channels, minConvDV(s.DK, t.channels, nt/s.DV, t.normRows), s.DK)
	}
	return nil
}
