package gdn

import (
	"errors"
	"fmt"
	"math"

	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// ErrInvalidArgument is wrapped by every error that reports a bad argument
// to a dispatcher or to [Validate]. Such errors name the argument and the
// numbers involved; nothing has been encoded when one is returned. They
// are also a [*spec.ArgumentError], whose Arg and Detail errors.As gives:
//
//	var ae *spec.ArgumentError
//	if errors.As(err, &ae) && ae.Arg == "Shape.DK" { ... }
//
// A released device or buffer also matches mtl.ErrReleased.
var ErrInvalidArgument = errors.New("gdn: invalid argument")

// maxElems is the first element count the kernels' 32-bit unsigned indices
// cannot address.
const maxElems = 1 << 32

// invalid is the error for a refused argument arg, its detail formatted
// as fmt.Sprintf does (spec.Refused with ErrInvalidArgument).
func invalid(arg, format string, a ...any) error {
	return spec.Refused(ErrInvalidArgument, &spec.ArgumentError{Arg: arg, Detail: fmt.Sprintf(format, a...)}, nil)
}

// releasedArg is invalid for a released object, matching mtl.ErrReleased.
func releasedArg(arg, format string, a ...any) error {
	return spec.Refused(ErrInvalidArgument, &spec.ArgumentError{Arg: arg, Detail: fmt.Sprintf(format, a...)}, mtl.ErrReleased)
}

// Kernel names one of the kernel families a dispatch runs; Params'
// activation and state types choose the variant (entry point
// gated_delta_net_..._{A}_{S}, gated_delta_net_..._f32 for f32/f32; see
// package kernels).
type Kernel int

const (
	// KernelPrefill is gated_delta_net_{A}_{S}: any n_tokens, D_k and D_v
	// at most 128.
	KernelPrefill Kernel = iota
	// KernelDecode is gated_delta_net_decode_{A}_{S}_{NSG}, indices
	// rebuilt every token; [Kernels.Decode] picks it at n_tokens == 1.
	KernelDecode
	// KernelDecodeSeq is gated_delta_net_decode_seq_{A}_{S}_{NSG}, per-lane
	// pointers advanced once per token; [Kernels.Decode] picks it at
	// n_tokens >= 2.
	KernelDecodeSeq
	// KernelDecodeLegacy is gated_delta_net_decode_legacy_{A}_{S}_{NSG},
	// the index kernel kept for tests and benchmarks.
	KernelDecodeLegacy
	// KernelDecodeCapture is gated_delta_net_decode_capture_{A}_{S}_{NSG},
	// which also writes the state after every token to the capture buffer.
	KernelDecodeCapture
	// KernelPrefillChunked is gated_delta_net_chunked_{A}_{S}, the chunked (WY
	// form) prefill: same limits as KernelPrefill, tokens taken
	// kernels.ChunkLen at a time; [Kernels.Prefill] picks it from
	// [ChunkedMinTokens] tokens on.
	KernelPrefillChunked
	// KernelDecodePacked is gated_delta_net_decode_packed_{A}_{S}_{NSG}: 8
	// rows of the state per SIMD-group, 4 lanes per row, indices rebuilt
	// every token; D_k 64 or 128, D_v a multiple of 32. [Kernels.Decode]
	// picks it at n_tokens == 1 where it applies.
	KernelDecodePacked
	// KernelDecodePackedSeq is gated_delta_net_decode_packed_seq_{A}_{S}_{NSG},
	// the packed layout with pointers advanced once per token;
	// [Kernels.Decode] picks it at n_tokens >= 2 where it applies.
	KernelDecodePackedSeq
	// KernelDecodePackedCapture is
	// gated_delta_net_decode_packed_capture_{A}_{S}_{NSG}, the packed layout
	// writing the state after every token; [Kernels.DecodeWithCapture]
	// picks it where it applies.
	KernelDecodePackedCapture
	// KernelPrefillBlocked is gated_delta_net_prefill_blocked_{A}_{S}_{NSG}:
	// the packed layout, tokens staged in threadgroup memory in blocks;
	// D_k 64 or 128, D_v a multiple of 32. [Kernels.Prefill] picks it
	// below [ChunkedMinTokens] tokens where it applies.
	KernelPrefillBlocked
)

// String returns the kernel's short name: "prefill", "decode", "seq",
// "legacy", "capture", "chunked", "packed", "packed_seq", "packed_capture"
// or "blocked".
func (k Kernel) String() string {
	if k.known() {
		return kernelNames[k]
	}
	return fmt.Sprintf("Kernel(%d)", int(k))
}

var kernelNames = [...]string{
	KernelPrefill: "prefill", KernelDecode: "decode", KernelDecodeSeq: "seq",
	KernelDecodeLegacy: "legacy", KernelDecodeCapture: "capture", KernelPrefillChunked: "chunked",
	KernelDecodePacked: "packed", KernelDecodePackedSeq: "packed_seq",
	KernelDecodePackedCapture: "packed_capture", KernelPrefillBlocked: "blocked",
}

func (k Kernel) known() bool { return k >= KernelPrefill && k <= KernelPrefillBlocked }

// prefillFamily reports whether k is one of the kernels of one
// threadgroup per value head and sequence: the prefill and chunked
// prefill kernels.
func (k Kernel) prefillFamily() bool { return k == KernelPrefill || k == KernelPrefillChunked }

// decodeFamily reports whether k is one of the one-row-per-SIMD-group
// decode kernels.
func (k Kernel) decodeFamily() bool { return k >= KernelDecode && k <= KernelDecodeCapture }

// packed reports whether k is one of the kernels of the packed layout.
func (k Kernel) packed() bool { return k >= KernelDecodePacked && k <= KernelPrefillBlocked }

// captures reports whether k writes the capture buffer.
func (k Kernel) captures() bool { return k == KernelDecodeCapture || k == KernelDecodePackedCapture }

// packedAlign is the alignment, in elements, of the views the packed
// kernels read and write 4 elements at a time: Q, K, StateIn, StateOut and
// Capture.
const packedAlign = 4

// bufferInfo returns a buffer's length in bytes and whether it is still
// live (not released: its object ID is not 0); tests replace it so that
// validation runs without a device.
var bufferInfo = func(b *mtl.Buffer) (length int, live bool) { return b.Length(), b.ID() != 0 }

// Validate checks p and b for a dispatch of kernel k against every rule of
// the contract: positive dimensions, n_v_heads a multiple of n_k_heads, the
// kernel's limits on D_k and D_v, a known head mapping, a finite QScale,
// known element types; for each view a live (not released) buffer, the
// element type Params gives it (Params.Activation for Q, K, V, G, Beta and
// Output, Params.State for StateIn, StateOut and Capture, f32 for ALog and
// DtBias), an aligned offset, exactly the element count the shape implies
// (Capture: see [Kernels.DecodeWithCapture]), no count at or above 2^32
// but for the states (indexed with 64-bit offsets), and a range inside its
// buffer; ALog and DtBias set (n_v_heads each) exactly when
// Params.Fused.Gate is; Slots and CuSeqlens (int32) set exactly when the
// shape has a state pool or packed sequences, and in shared storage their
// values (see the package documentation on serving); and no written view
// (Output, StateOut, Capture) sharing a byte of its buffer with another
// view, except StateOut equal to StateIn (in-place update). The one rule
// left to the dispatchers is the threadgroup's size against the pipeline's
// maxTotalThreadsPerThreadgroup, which needs the compiled kernel. The error wraps [ErrInvalidArgument].
func Validate(k Kernel, p Params, b Buffers) error {
	if err := validateKernelParams(k, p); err != nil {
		return err
	}
	if err := validateBuffers(k, p, b); err != nil {
		return err
	}
	if err := validateServing(k, p, b); err != nil {
		return err
	}
	return nil
}

// validateKernelParams checks what does not depend on the buffers: a known
// kernel, valid parameters, and a shape the kernel takes.
func validateKernelParams(k Kernel, p Params) error {
	if !k.known() {
		return invalid("kernel", "unknown kernel %d", int(k))
	}
	if err := p.Validate(); err != nil {
		return asInvalid(err)
	}
	if err := validateCore(k, p); err != nil {
		return err
	}
	return validateKernelShape(k, p.Shape)
}

// asInvalid converts the *spec.ArgumentError of a Validate into the
// package's error, which also wraps ErrInvalidArgument.
func asInvalid(err error) error {
	var e *spec.ArgumentError
	if !errors.As(err, &e) {
		return err
	}
	return spec.Refused(ErrInvalidArgument, e, nil)
}

// validateKernelShape checks the kernel's own limits on D_k and D_v, for a
// shape that passed [spec.Shape.Validate].
func validateKernelShape(k Kernel, s Shape) error {
	if k.decodeFamily() {
		if s.DK != 32 && s.DK != 64 && s.DK != 128 {
			return invalid("Shape.DK", "%d, the %s kernel needs 32, 64 or 128 (D_k = 32 * NSG)", s.DK, k)
		}
		if nsg := nsg(s); s.DV%nsg != 0 {
			return invalid("Shape.DV", "%d is not a multiple of NSG = D_k/32 = %d, as the %s kernel needs", s.DV, nsg, k)
		}
		return nil
	}
	if k.packed() {
		if s.DK != 64 && s.DK != 128 {
			return invalid("Shape.DK", "%d, the %s kernel needs 64 or 128", s.DK, k)
		}
		if s.DV%packedRows != 0 {
			return invalid("Shape.DV", "%d is not a multiple of %d (the rows of one threadgroup), as the %s kernel needs", s.DV, packedRows, k)
		}
		return nil
	}
	if s.DK > 128 {
		return invalid("Shape.DK", "%d, the %s kernel takes at most 128", s.DK, k)
	}
	if s.DV > 128 {
		return invalid("Shape.DV", "%d, the %s kernel takes at most 128", s.DV, k)
	}
	return nil
}

// viewCheck is one view of a dispatch, its element type and the element
// counts it may have.
type viewCheck struct {
	name     string
	v        View
	elem     ElemType // the element type the kernel reads or writes
	elemFrom string   // the field elem comes from, "" when it is fixed: A_log, dt_bias
	missing  string   // why the view is needed, for the error when it has no buffer
	want     int      // elements the shape implies (saturated, see spec.Shape)
	formula  string
	maxLen   int // the most elements the view may have
	written  bool
	wide     bool // the kernels index it with 64-bit offsets: no 2^32 limit
}

func exact(name string, v View, elem ElemType, elemFrom string, want int, formula string, written bool) viewCheck {
	return viewCheck{name: name, v: v, elem: elem, elemFrom: elemFrom, want: want, formula: formula, maxLen: want, written: written}
}

// wideIndex marks a view the kernels index with 64-bit offsets (the
// states: a pool of states may pass 2^32 elements).
func (c viewCheck) wideIndex() viewCheck {
	c.wide = true
	return c
}

func validateBuffers(k Kernel, p Params, b Buffers) error {
	s := p.Shape
	const act, state, fixed = "Params.Activation", "Params.State", ""
	a, st := p.Activation, p.State
	// The views every kernel binds, then Capture, then ALog and DtBias.
	checks := [...]viewCheck{
		exact("Q", b.Q, a, act, s.QKLen(), formula(s, "D_k*n_k_heads*n_tokens*n_seqs", "D_k*n_k_heads*n_tokens (packed)"), false),
		exact("K", b.K, a, act, s.QKLen(), formula(s, "D_k*n_k_heads*n_tokens*n_seqs", "D_k*n_k_heads*n_tokens (packed)"), false),
		exact("V", b.V, a, act, s.VLen(), formula(s, "D_v*n_v_heads*n_tokens*n_seqs", "D_v*n_v_heads*n_tokens (packed)"), false),
		exact("G", b.G, a, act, s.GateLen(), formula(s, "n_v_heads*n_tokens*n_seqs", "n_v_heads*n_tokens (packed)"), false),
		exact("Beta", b.Beta, a, act, s.GateLen(), formula(s, "n_v_heads*n_tokens*n_seqs", "n_v_heads*n_tokens (packed)"), false),
		exact("StateIn", b.StateIn, st, state, s.StateLen(), stateFormula(s), false).wideIndex(),
		exact("Output", b.Output, a, act, s.VLen(), formula(s, "D_v*n_v_heads*n_tokens*n_seqs", "D_v*n_v_heads*n_tokens (packed)"), true),
		exact("StateOut", b.StateOut, st, state, s.StateLen(), stateFormula(s), true).wideIndex(),
		exact("Capture", b.Capture, st, state, s.CaptureLen(), formula(s, "D_k*D_v*n_v_heads*n_tokens*n_seqs", "D_k*D_v*n_v_heads*n_tokens (packed)"), true),
		exact("ALog", b.ALog, F32, fixed, s.NVHeads, "n_v_heads", false),
		exact("DtBias", b.DtBias, F32, fixed, s.NVHeads, "n_v_heads", false),
	}
	const capture, aLog = 8, 9 // indices in checks
	for i := aLog; i < len(checks); i++ {
		checks[i].missing = "Params.Fused.Gate computes g from A_log and dt_bias, [n_v_heads] f32 each"
	}
	// Gather the views this dispatch binds at the front of checks.
	n := capture
	if k.captures() {
		// For several sequences the kernel's per-sequence stride is
		// n_tokens states, so the view must match exactly; for one it may
		// be longer (allocated once for the longest draft).
		if s.NSeqs == 1 {
			checks[capture].maxLen = maxElems - 1
		}
		n++
	} else if b.Capture != (View{}) {
		return invalid("Capture", "set, but only the capture kernel writes it (the %s kernel does not)", k)
	}
	if p.Fused.Gate {
		checks[n], checks[n+1] = checks[aLog], checks[aLog+1]
		n += 2
	} else {
		for _, c := range checks[aLog:] {
			if c.v != (View{}) {
				return invalid(c.name, "set, but Params.Fused.Gate is off (G holds g itself)")
			}
		}
	}
	views := checks[:n]
	// The shape's counts first: a count beyond the indices is the shape's
	// fault, whatever the views hold.
	for i := range views {
		if c := &views[i]; uint64(c.want) >= maxElems && !c.wide {
			return tooLarge(c.name, c.formula, c.want)
		}
	}
	for i := range views {
		c := &views[i]
		if err := validateView(c); err != nil {
			return err
		}
	}
	if k.packed() {
		if err := validatePackedAlignment(k, views); err != nil {
			return err
		}
	}
	return validateOverlaps(views)
}

// validatePackedAlignment checks the views the packed kernels access 4 elements
// at a time (vector loads and stores): Q, K, StateIn, StateOut and, for
// the capture kernel, Capture (views[8]). The views have passed
// validateView.
func validatePackedAlignment(k Kernel, views []viewCheck) error {
	vector := [...]int{0, 1, 5, 7, 8}
	n := len(vector)
	if !k.captures() {
		n-- // views[8] is ALog, read one element at a time
	}
	for _, i := range vector[:n] {
		c := &views[i]
		if align := packedAlign * c.elem.Size(); c.v.Offset%align != 0 {
			return invalid(c.name, "offset %d bytes, the %s kernel reads and writes it %d elements at a time: it must be a multiple of %d", c.v.Offset, k, packedAlign, align)
		}
	}
	return nil
}

// formula returns the element count's formula of a view for the shape's
// token layout: per sequence, or packed.
func formula(s Shape, perSeq, packed string) string {
	if s.Varlen {
		return packed
	}
	return perSeq
}

// stateFormula is the element count's formula of the state views.
func stateFormula(s Shape) string {
	if s.NSlots > 0 {
		return "D_k*D_v*n_v_heads*n_slots"
	}
	return "D_k*D_v*n_v_heads*n_seqs"
}

// validateOverlaps checks that no written view shares a byte with another
// view of the same buffer: the kernels' threads would then read what other
// threads write, or write the same cells, and the result would depend on
// their scheduling. The one alias allowed is StateOut equal to StateIn (the
// same buffer, offset and length), the in-place update, which is safe
// because each thread reads its own state cells before it writes them. The
// views have passed validateView.
func validateOverlaps(views []viewCheck) error {
	for i := range views {
		w := &views[i]
		if !w.written {
			continue
		}
		for j := range views {
			o := &views[j]
			if j == i || (o.written && j < i) || o.v.Buffer != w.v.Buffer {
				continue // each pair of written views once
			}
			if w.name == "StateOut" && o.name == "StateIn" && w.v == o.v {
				continue
			}
			wlo, whi := byteRange(w.v)
			olo, ohi := byteRange(o.v)
			if wlo < ohi && olo < whi {
				return invalid(w.name, "bytes [%d, %d) overlap %s's bytes [%d, %d) in the same buffer; only StateOut may alias StateIn, as the same view", wlo, whi, o.name, olo, ohi)
			}
		}
	}
	return nil
}

// byteRange returns the bytes [lo, hi) of a view's buffer the view covers.
func byteRange(v View) (lo, hi int) {
	return v.Offset, v.Offset + v.Len*v.Type.Size()
}

// validateView checks one view: a live buffer, the element type c.elem, an
// aligned offset, want <= Len <= maxLen elements (maxLen below 2^32) and the
// range inside the buffer.
func validateView(c *viewCheck) error {
	name, v, want, formula, maxLen := c.name, c.v, c.want, c.formula, c.maxLen
	if v.Buffer == nil {
		if c.missing != "" {
			return invalid(name, "no buffer; %s", c.missing)
		}
		return invalid(name, "no buffer")
	}
	have, live := bufferInfo(v.Buffer)
	if !live {
		return releasedArg(name, "the buffer was released")
	}
	if v.Type != c.elem {
		if c.elemFrom == "" {
			return invalid(name, "element type %v, must be %v", v.Type, c.elem)
		}
		return invalid(name, "element type %v, %s is %v", v.Type, c.elemFrom, c.elem)
	}
	size := v.Type.Size()
	if v.Offset < 0 || v.Offset%size != 0 {
		return invalid(name, "offset %d bytes, must be a non-negative multiple of %d", v.Offset, size)
	}
	n := v.Len
	switch {
	case n < 0 || (n != want && want == maxLen):
		return invalid(name, "%d elements, the shape implies %s = %d", v.Len, formula, want)
	case n < want:
		return invalid(name, "%d elements, fewer than %s = %d", v.Len, formula, want)
	case n > maxLen:
		return invalid(name, "%d elements, at or beyond 2^32, which the kernels' 32-bit indices cannot address", v.Len)
	}
	if end := uint64(v.Offset) + uint64(n)*uint64(size); end > uint64(have) {
		return invalid(name, "offset %d + %d elements * %d bytes = %d bytes, beyond the buffer's %d bytes", v.Offset, v.Len, size, end, have)
	}
	return nil
}

func tooLarge(name, formula string, want int) error {
	if want == math.MaxInt {
		return invalid(name, "the shape implies %s > 2^63 elements, beyond the 2^32 the kernels' 32-bit indices address", formula)
	}
	return invalid(name, "the shape implies %s = %d elements, at or beyond 2^32, which the kernels' 32-bit indices cannot address", formula, want)
}
