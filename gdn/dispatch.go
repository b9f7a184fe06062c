package gdn

import (
	"fmt"

	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// Buffer binding indices of the kernels.
const (
	paramsIndex = 8 // the nine parameter words, bound with setBytes
)

// Kernels dispatches the Gated DeltaNet kernels of one device. Its methods
// validate their arguments, fetch the pipeline state (compiling the kernel
// source on first use) and encode one dispatch; they never commit. A Kernels
// is safe for concurrent use as long as each goroutine encodes onto its own
// encoder. Make one with [New]: the methods of a nil or zero Kernels, which
// knows no device, return an error wrapping [ErrInvalidArgument].
type Kernels struct {
	pipelines pipelineSource
	own       *kernels.Registry // made by New, released by Release
	dev       *mtl.Device       // New's device: the views' buffers must be its
}

// pipelineSource finds the pipeline state of an entry point and its
// maxTotalThreadsPerThreadgroup.
type pipelineSource interface {
	pipeline(entry string) (pso *mtl.ComputePipelineState, maxThreads int, err error)
}

// encoder is the part of *mtl.ComputeCommandEncoder a dispatch uses, with
// the buffer bindings and the parameter bytes passed by value (setViews,
// setParams), so that they stay on the dispatcher's stack: a dispatch
// allocates nothing.
type encoder interface {
	SetComputePipelineState(p *mtl.ComputePipelineState)
	setViews(bufs [numViews]*mtl.Buffer, offsets [numViews]int, start int)
	setParams(b [paramsLen]byte, n, index int) // binds b[:n]
	SetThreadgroupMemoryLength(length, index int)
	DispatchThreadgroups(threadgroupsPerGrid, threadsPerThreadgroup mtl.Size)
	Err() error
}

// numViews is the number of buffers bound with one setBuffers, at indices
// 0 to 13: the eight views, a stand-in at 8 (the parameters, bound next
// with setBytes), the capture buffer at 9, A_log and dt_bias at 10 and 11,
// the slot index and cu_seqlens at 12 and 13.
const numViews = 14

// mtlEncoder is the encoder of a real dispatch.
type mtlEncoder struct{ *mtl.ComputeCommandEncoder }

func (e mtlEncoder) setViews(bufs [numViews]*mtl.Buffer, offsets [numViews]int, start int) {
	e.SetBuffers(bufs[:], offsets[:], start)
}

func (e mtlEncoder) setParams(b [paramsLen]byte, n, index int) { e.SetBytes(b[:n], index) }

type registrySource struct {
	dev *mtl.Device
	reg *kernels.Registry
}

// pipeline returns the pipeline of entry; one it must make after the
// device's Release is refused like a released argument.
func (r registrySource) pipeline(entry string) (*mtl.ComputePipelineState, int, error) {
	pso, err := r.reg.Pipeline(r.dev, entry)
	if err != nil {
		if r.dev.Released() {
			return nil, 0, releasedArg("device", "the device given to gdn.New was released before the %s pipeline was made", entry)
		}
		return nil, 0, err
	}
	return pso, pso.MaxTotalThreadsPerThreadgroup(), nil
}

// New returns the kernels of dev, with pipeline states taken from reg. With
// a nil reg, the Kernels makes a registry of its own, which [Kernels.Release]
// releases; a shared registry is left to its owner. A nil or released
// device is refused (an error wrapping [ErrInvalidArgument]; a released
// one matches mtl.ErrReleased too), and the dispatchers refuse views in
// buffers of another device. After the device's Release a dispatch whose
// pipeline is made already still runs; one that would make it refuses the
// device the same way.
func New(dev *mtl.Device, reg *kernels.Registry) (*Kernels, error) {
	if dev == nil {
		return nil, invalid("device", "nil device given to gdn.New")
	}
	if dev.Released() {
		return nil, releasedArg("device", "the device given to gdn.New was released")
	}
	k := &Kernels{dev: dev}
	if reg == nil {
		reg = kernels.NewRegistry()
		k.own = reg
	}
	k.pipelines = registrySource{dev: dev, reg: reg}
	return k, nil
}

// Release releases the registry New made, if any. It does nothing on a nil
// Kernels.
func (k *Kernels) Release() {
	if k != nil && k.own != nil {
		k.own.Release()
		k.own = nil
	}
}

// Prefill encodes a prefill kernel for any number of tokens, for the
// activation and state types of p: the chunked kernel
// ([KernelPrefillChunked], gated_delta_net_chunked_{A}_{S}) from
// [ChunkedMinTokens] tokens on (n_tokens: all the packed tokens with
// Shape.Varlen); below, the blocked kernel ([KernelPrefillBlocked],
// gated_delta_net_prefill_blocked_{A}_{S}_{NSG}: the packed layout, tokens
// staged in blocks) where it applies (D_k 64 or 128, D_v a multiple of 32,
// Q, K, StateIn and StateOut at offsets of 4 elements), and the
// token-by-token kernel ([KernelPrefill], gated_delta_net_{A}_{S})
// otherwise. All take state slots and packed sequences. The chunked and
// token-by-token kernels take D_k and D_v at most 128; the token-by-token
// kernel runs D_v threads per threadgroup, the chunked one 4 D_v, at most
// the pipeline's maxTotalThreadsPerThreadgroup. b.Capture must be empty.
// Like every dispatcher it takes p's types and fused parts (see
// [Buffers]).
func (k *Kernels) Prefill(enc *mtl.ComputeCommandEncoder, p Params, b Buffers) error {
	return k.encode(enc, PrefillKernel(p, b), p, b)
}

// PrefillChunked encodes the chunked prefill kernel whatever n_tokens is.
// Same rules as [Kernels.Prefill].
func (k *Kernels) PrefillChunked(enc *mtl.ComputeCommandEncoder, p Params, b Buffers) error {
	return k.encode(enc, KernelPrefillChunked, p, b)
}

// ChunkedMinTokens is the n_tokens from which [Kernels.Prefill] picks the
// chunked kernel. Per row of S and token, the token-by-token kernel does
// 4 D_k multiply-adds (decay, S k, update, S q) in one thread, in two sums
// whose every step waits for the one before, with two threadgroup
// barriers. The chunked kernel does D_k (3 + 1/C + (C+1)/D_v) + 2(C-1) +
// (C+1)/2 with C = 16 (0.87x at D_k = D_v = 128, 0.98x at 64) spread over
// four threads, its S_0 k and S_0 q sums independent across a chunk's
// tokens, with 3 barriers per chunk (3/16 per token) and 4 shuffle steps
// per token. Both read and write the state once per dispatch and read q,
// k and v once per token; the chunked kernel reads g and beta once per
// token where the other reads them once per row. These counts favour the
// chunked kernel from a few tokens on; what they leave out is the cost of
// filling and draining a chunk on a real GPU, so Prefill switches at 64
// tokens, four full chunks, where the barriers are over ten times fewer;
// BenchmarkMetalPrefill in package tests measures the ratio on a Mac.
const ChunkedMinTokens = 64

// PrefillKernel returns the kernel [Kernels.Prefill] encodes for p and b:
// its automatic choice. With zero Buffers (every offset 0) it is the
// choice for views at the start of their buffers, which [EntryPoint] and
// [Kernels.Prepare] take to make the pipeline before the first dispatch.
func PrefillKernel(p Params, b Buffers) Kernel {
	switch {
	case p.Shape.NTokens >= ChunkedMinTokens:
		return KernelPrefillChunked
	case packedFits(p, b):
		return KernelPrefillBlocked
	}
	return KernelPrefill
}

// Decode encodes the decode family's best kernel for the window: where the
// packed layout applies (D_k 64 or 128, D_v a multiple of 32, Q, K,
// StateIn and StateOut at offsets of 4 elements) the packed decode kernel
// at n_tokens == 1 and the packed seq kernel at n_tokens >= 2, otherwise
// the decode and seq kernels of one row per SIMD-group; seq (of either
// layout) for packed sequences (Shape.Varlen). Each
// pair gives bit-identical results. D_k must be 32, 64 or 128 and D_v a
// multiple of D_k/32. b.Capture must be empty.
func (k *Kernels) Decode(enc *mtl.ComputeCommandEncoder, p Params, b Buffers) error {
	return k.encode(enc, DecodeKernel(p, b), p, b)
}

// Encode encodes the kernel kern, whichever the shape would get from
// [Kernels.Prefill], [Kernels.Decode] or [Kernels.DecodeWithCapture]:
// for benchmarks, tests and the reference kernels. The rules of the
// kernel's dispatcher apply, and those of its layout ([KernelDecodePacked]).
func (k *Kernels) Encode(enc *mtl.ComputeCommandEncoder, kern Kernel, p Params, b Buffers) error {
	return k.encode(enc, kern, p, b)
}

// DecodeSeq encodes the seq kernel whatever n_tokens is. Same rules as
// [Kernels.Decode].
func (k *Kernels) DecodeSeq(enc *mtl.ComputeCommandEncoder, p Params, b Buffers) error {
	return k.encode(enc, KernelDecodeSeq, p, b)
}

// DecodeLegacy encodes the legacy index kernel, the reference the other
// decode kernels are compared with. Same rules as [Kernels.Decode].
func (k *Kernels) DecodeLegacy(enc *mtl.ComputeCommandEncoder, p Params, b Buffers) error {
	return k.encode(enc, KernelDecodeLegacy, p, b)
}

// DecodeWithCapture encodes a capture kernel, which also writes S after
// every token t to b.Capture[..., t, s] (layout [D_k, D_v, n_v_heads,
// n_tokens, n_seqs]); the last token's slot is byte-identical to StateOut.
// For several sequences b.Capture holds exactly n_tokens states per
// sequence; for one sequence it may be longer (allocated once for the
// longest draft). It is the packed capture kernel where [Kernels.Decode]
// would pick the packed layout (and Capture's offset is a multiple of 4
// elements too), bit-identical to it, and the capture kernel of one row
// per SIMD-group otherwise, bit-identical to that. Otherwise the rules of
// [Kernels.Decode] apply.
func (k *Kernels) DecodeWithCapture(enc *mtl.ComputeCommandEncoder, p Params, b Buffers) error {
	return k.encode(enc, CaptureKernel(p, b), p, b)
}

// CaptureKernel returns the kernel [Kernels.DecodeWithCapture] encodes for
// p and b: its automatic choice (see [PrefillKernel] for zero Buffers).
func CaptureKernel(p Params, b Buffers) Kernel {
	if packedFits(p, b) && b.Capture.Offset%(packedAlign*p.State.Size()) == 0 {
		return KernelDecodePackedCapture
	}
	return KernelDecodeCapture
}

// DecodeKernel returns the kernel [Kernels.Decode] encodes for p and b: its
// automatic choice (see [PrefillKernel] for zero Buffers).
func DecodeKernel(p Params, b Buffers) Kernel {
	packed := packedFits(p, b)
	switch {
	case packed && (p.Shape.NTokens >= 2 || p.Shape.Varlen): // packed_seq takes packed sequences
		return KernelDecodePackedSeq
	case packed:
		return KernelDecodePacked
	case p.Shape.NTokens >= 2 || p.Shape.Varlen: // of the two, only seq takes packed sequences
		return KernelDecodeSeq
	}
	return KernelDecode
}

// packedFits reports whether the packed kernels take the shape and the
// offsets of the views they access 4
// elements at a time; the rest is validated as for any kernel.
func packedFits(p Params, b Buffers) bool {
	s := p.Shape
	if (s.DK != 64 && s.DK != 128) || s.DV%packedRows != 0 {
		return false
	}
	a, st := packedAlign*p.Activation.Size(), packedAlign*p.State.Size()
	return a > 0 && st > 0 && b.Q.Offset%a == 0 && b.K.Offset%a == 0 &&
		b.StateIn.Offset%st == 0 && b.StateOut.Offset%st == 0
}

func (k *Kernels) encode(enc *mtl.ComputeCommandEncoder, kern Kernel, p Params, b Buffers) error {
	if err := k.checkEncoder(enc); err != nil {
		return err
	}
	return k.dispatch(mtlEncoder{enc}, kern, p, b)
}

// checkKernels refuses a nil or zero Kernels, which knows no device.
func (k *Kernels) checkKernels() error {
	if k == nil || k.pipelines == nil {
		return invalid("Kernels", "nil or zero, it knows no device: make one with gdn.New")
	}
	return nil
}

// checkEncoder refuses what no encoding method takes: a nil or zero
// Kernels and a nil encoder.
func (k *Kernels) checkEncoder(enc *mtl.ComputeCommandEncoder) error {
	if err := k.checkKernels(); err != nil {
		return err
	}
	if enc == nil {
		return invalid("encoder", "nil compute command encoder")
	}
	return nil
}

// EntryPoint returns the MSL entry point kern runs for p: the variant of
// the activation and state types, and of D_k / 32 SIMD-groups for the
// decode family and the packed kernels (gated_delta_net_decode_bf16_f32_4
// for Qwen3.5's decode step of one row per SIMD-group). An unknown kernel,
// invalid parameters or a shape the kernel does not take are an error
// wrapping [ErrInvalidArgument].
//
// With a non-zero Params.Core, kern must take the layer core
// ([Kernels.EncodeCore]): the name is then that of its core variant
// (gated_delta_net_chunked_core_bf16_f32), after the checks of
// [ValidateCoreOn] that need no buffers.
func EntryPoint(kern Kernel, p Params) (string, error) {
	if p.Core != (spec.Core{}) && kern.known() {
		t, err := coreTargetOf(kern)
		if err != nil {
			return "", err
		}
		if err := validateCoreParams(t, p); err != nil {
			return "", err
		}
		return t.entry(p), nil
	}
	if err := validateKernelParams(kern, p); err != nil {
		return "", err
	}
	return entryPoint(kern, p), nil
}

// Prepare makes the pipeline kern runs for p now (see [EntryPoint]), so
// that the first dispatch does not wait for Metal to compile it: a server
// prepares the kernels its first request will take, such as
// Prepare(DecodeKernel(p, Buffers{}), p).
func (k *Kernels) Prepare(kern Kernel, p Params) error {
	if err := k.checkKernels(); err != nil {
		return err
	}
	entry, err := EntryPoint(kern, p)
	if err != nil {
		return err
	}
	if _, _, err := k.pipelines.pipeline(entry); err != nil {
		return fmt.Errorf("gdn: %s kernel: %w", kern, err)
	}
	return nil
}

// entryPoint is EntryPoint for valid parameters.
func entryPoint(kern Kernel, p Params) string {
	return entryNames[kern](p.Activation, p.State, nsg(p.Shape))
}

// entryNames names each kernel's entry points in package kernels.
var entryNames = [...]func(act, state ElemType, nsg int) string{
	KernelPrefill:             func(act, state ElemType, _ int) string { return kernels.PrefillOf(act, state) },
	KernelDecode:              kernels.DecodeOf,
	KernelDecodeSeq:           kernels.DecodeSeqOf,
	KernelDecodeLegacy:        kernels.DecodeLegacyOf,
	KernelDecodeCapture:       kernels.DecodeCaptureOf,
	KernelPrefillChunked:      func(act, state ElemType, _ int) string { return kernels.PrefillChunkedOf(act, state) },
	KernelDecodePacked:        kernels.DecodePackedOf,
	KernelDecodePackedSeq:     kernels.DecodePackedSeqOf,
	KernelDecodePackedCapture: kernels.DecodePackedCaptureOf,
	KernelPrefillBlocked:      kernels.PrefillBlockedOf,
}

// dispatch validates, then encodes one dispatch of kern onto enc: the
// pipeline state (which the encoder sends only when it changes), buffers
// 0-13 in one call (the views at 0-7, the capture buffer at 9, A_log and
// dt_bias at 10 and 11, the slot index and cu_seqlens at 12 and 13), the
// parameters with setBytes at index 8, the prefill kernels' threadgroup
// memory, and the threadgroups: four sends at most, three when the
// pipeline state stays (the prefill kernels add one). Nothing reaches enc
// when an argument is invalid, nor for a packed batch of empty sequences
// (n_tokens 0), which writes nothing. An error
// the encoder recorded (an earlier call on it failed, for one) is returned,
// and does not wrap ErrInvalidArgument.
func (k *Kernels) dispatch(enc encoder, kern Kernel, p Params, b Buffers) error {
	if err := Validate(kern, p, b); err != nil {
		return err
	}
	if err := k.checkDevice(b); err != nil {
		return err
	}
	if p.Shape.Varlen && p.Shape.NTokens == 0 {
		return nil // every sequence is empty: nothing to read or write
	}
	entry := entryPoint(kern, p)
	pso, maxThreads, err := k.pipelines.pipeline(entry)
	if err != nil {
		return fmt.Errorf("gdn: %s kernel: %w", kern, err)
	}
	l := launchOf(kern, p)
	if n := l.group.Width * l.group.Height * l.group.Depth; n > maxThreads {
		return invalid(l.field, "at %v the %s kernel runs %s = %d threads per threadgroup, more than the %d the %s pipeline allows", p.Shape, kern, l.formula, n, maxThreads, entry)
	}

	enc.SetComputePipelineState(pso)
	// G's buffer stands in where the kernel reads nothing: index 9 but for
	// the capture kernels, A_log and dt_bias without the fused gate (so
	// that every argument of the function has a binding); Q's at 8, which
	// setBytes then binds.
	capture, aLog, dtBias := b.G, b.ALog, b.DtBias
	if kern.captures() {
		capture = b.Capture
	}
	if !p.Fused.Gate {
		aLog, dtBias = b.G, b.G
	}
	slots, cu := servingViews(p.Shape, b)
	views := [numViews]View{b.Q, b.K, b.V, b.G, b.Beta, b.StateIn, b.Output, b.StateOut, b.Q, capture, aLog, dtBias, slots, cu}
	var bufs [numViews]*mtl.Buffer
	var offsets [numViews]int
	for i, v := range views {
		bufs[i], offsets[i] = v.Buffer, v.Offset
	}
	enc.setViews(bufs, offsets, 0)
	enc.setParams(paramBytes(p), paramsLen, paramsIndex)
	if l.memory > 0 {
		enc.SetThreadgroupMemoryLength(l.memory, 0)
	}
	enc.DispatchThreadgroups(l.grid, l.group)
	if err := enc.Err(); err != nil {
		return fmt.Errorf("gdn: %s kernel: %w", kern, err)
	}
	return nil
}

// checkDevice refuses views in buffers of another device than New's (the
// views have passed Validate).
func (k *Kernels) checkDevice(b Buffers) error {
	views := [...]namedView{
		{"Q", b.Q}, {"K", b.K}, {"V", b.V}, {"G", b.G}, {"Beta", b.Beta}, {"StateIn", b.StateIn},
		{"Output", b.Output}, {"StateOut", b.StateOut}, {"Capture", b.Capture}, {"ALog", b.ALog},
		{"DtBias", b.DtBias}, {"Slots", b.Slots}, {"CuSeqlens", b.CuSeqlens},
	}
	return k.checkViewsDevice(views[:])
}

// A namedView is a view with the name an error gives it.
type namedView struct {
	name string
	v    View
}

// checkViewsDevice refuses the first of views whose buffer belongs to
// another device than New's; with no device known it accepts them all.
func (k *Kernels) checkViewsDevice(views []namedView) error {
	if k.dev == nil {
		return nil
	}
	for i := range views {
		if buf := views[i].v.Buffer; buf != nil && !buf.Device().Same(k.dev) {
			return invalid(views[i].name, "its buffer belongs to %v, the kernels to %v", buf.Device(), k.dev)
		}
	}
	return nil
}

// A launch is how one dispatch of a kernel runs: its grid of threadgroups,
// the size of a threadgroup, and the threadgroup memory it needs (0 for
// none). field and formula say what sets the threadgroup's size, for the
// error when it is more than the pipeline allows.
type launch struct {
	grid, group    mtl.Size
	memory         int
	field, formula string
}

// The chunked launch's formula says 4*D_v: this fails to compile if
// kernels.ChunkLanes is not 4.
var _ = [1]struct{}{}[kernels.ChunkLanes-4]

// launchOf returns the launch of kern for p.
func launchOf(kern Kernel, p Params) launch {
	s := p.Shape
	switch {
	case kern == KernelPrefill:
		grid, group := prefillGeometry(s)
		return launch{grid, group, prefillThreadgroupMemory(s), "Shape.DV", "D_v"}
	case kern == KernelPrefillChunked:
		grid, group := chunkedGeometry(s)
		return launch{grid, group, kernels.ChunkedThreadgroupMemory(s.DK, s.DV), "Shape.DV", "4*D_v"}
	case kern == KernelPrefillBlocked:
		grid, group := packedGeometry(s)
		return launch{grid, group, blockedThreadgroupMemory(p), "kernel", "4 SIMD-groups of 32"}
	case kern.packed():
		grid, group := packedGeometry(s)
		return launch{grid, group, 0, "kernel", "4 SIMD-groups of 32"}
	default:
		grid, group := decodeGeometry(s)
		return launch{grid, group, 0, "Shape.DK", "D_k/32 SIMD-groups of 32"}
	}
}
