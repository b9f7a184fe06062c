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
// numbers involved; nothing has been encoded when one is returned.
var ErrInvalidArgument = errors.New("gdn: invalid argument")

// maxElems is the first element count the kernels' 32-bit unsigned indices
// cannot address.
const maxElems = 1 << 32

func invalid(arg, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidArgument, arg, fmt.Sprintf(format, a...))
}

// Kernel names one of the kernel variants a dispatch runs.
type Kernel int

const (
	// KernelPrefill is gated_delta_net_f32: any n_tokens, D_k and D_v at
	// most 128.
	KernelPrefill Kernel = iota
	// KernelDecode is gated_delta_net_decode_f32_{NSG}, indices rebuilt
	// every token; [Kernels.Decode] picks it at n_tokens == 1.
	KernelDecode
	// KernelDecodeSeq is gated_delta_net_decode_seq_f32_{NSG}, per-lane
	// pointers advanced once per token; [Kernels.Decode] picks it at
	// n_tokens >= 2.
	KernelDecodeSeq
	// KernelDecodeLegacy is gated_delta_net_decode_legacy_f32_{NSG}, the
	// index kernel kept for tests and benchmarks.
	KernelDecodeLegacy
	// KernelDecodeCapture is gated_delta_net_decode_capture_f32_{NSG},
	// which also writes the state after every token to the capture buffer.
	KernelDecodeCapture
)

// String returns the kernel's short name: "prefill", "decode", "seq",
// "legacy" or "capture".
func (k Kernel) String() string {
	switch k {
	case KernelPrefill:
		return "prefill"
	case KernelDecode:
		return "decode"
	case KernelDecodeSeq:
		return "seq"
	case KernelDecodeLegacy:
		return "legacy"
	case KernelDecodeCapture:
		return "capture"
	}
	return fmt.Sprintf("Kernel(%d)", int(k))
}

func (k Kernel) known() bool { return k >= KernelPrefill && k <= KernelDecodeCapture }

// decodeFamily reports whether k is one of the SIMD-group decode kernels.
func (k Kernel) decodeFamily() bool { return k.known() && k != KernelPrefill }

// bufferLength returns a buffer's length in bytes; tests replace it so that
// validation runs without a device.
var bufferLength = (*mtl.Buffer).Length

// Validate checks p and b for a dispatch of kernel k against every rule of
// the contract: positive dimensions, n_v_heads a multiple of n_k_heads, the
// kernel's limits on D_k and D_v, a known head mapping, a finite QScale, and
// for each view an f32 element type, an aligned offset, exactly the element
// count the shape implies (Capture: see [Kernels.DecodeWithCapture]), no
// count at or above 2^32, and a range inside its buffer. The one rule left
// to the dispatchers is prefill's D_v against the pipeline's
// maxTotalThreadsPerThreadgroup, which needs the compiled kernel. The error
// wraps [ErrInvalidArgument].
func Validate(k Kernel, p Params, b Buffers) error {
	if !k.known() {
		return invalid("kernel", "unknown kernel %d", int(k))
	}
	if err := p.Validate(); err != nil {
		var e *spec.ArgumentError
		errors.As(err, &e)
		return invalid(e.Arg, "%s", e.Detail)
	}
	if p.Activation != F32 || p.State != F32 {
		return invalid("Params", "activation %v, state %v: the kernels take f32 activations and an f32 state", p.Activation, p.State)
	}
	if p.Fused != (spec.Fused{}) {
		return invalid("Fused", "%+v: the kernels take q, k, g and beta as given (no fused part)", p.Fused)
	}
	if err := validateKernelShape(k, p.Shape); err != nil {
		return err
	}
	return validateBuffers(k, p.Shape, b)
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
	if s.DK > 128 {
		return invalid("Shape.DK", "%d, the prefill kernel takes at most 128", s.DK)
	}
	if s.DV > 128 {
		return invalid("Shape.DV", "%d, the prefill kernel takes at most 128", s.DV)
	}
	return nil
}

func validateBuffers(k Kernel, s Shape, b Buffers) error {
	type check struct {
		name    string
		v       View
		want    int // elements the shape implies (saturated, see spec.Shape)
		formula string
		maxLen  int // the most elements the view may have
	}
	exact := func(name string, v View, want int, formula string) check {
		return check{name, v, want, formula, want}
	}
	checks := []check{
		exact("Q", b.Q, s.QKLen(), "D_k*n_k_heads*n_tokens*n_seqs"),
		exact("K", b.K, s.QKLen(), "D_k*n_k_heads*n_tokens*n_seqs"),
		exact("V", b.V, s.VLen(), "D_v*n_v_heads*n_tokens*n_seqs"),
		exact("G", b.G, s.GateLen(), "n_v_heads*n_tokens*n_seqs"),
		exact("Beta", b.Beta, s.GateLen(), "n_v_heads*n_tokens*n_seqs"),
		exact("StateIn", b.StateIn, s.StateLen(), "D_k*D_v*n_v_heads*n_seqs"),
		exact("Output", b.Output, s.VLen(), "D_v*n_v_heads*n_tokens*n_seqs"),
		exact("StateOut", b.StateOut, s.StateLen(), "D_k*D_v*n_v_heads*n_seqs"),
	}
	if k == KernelDecodeCapture {
		// For several sequences the kernel's per-sequence stride is
		// n_tokens states, so the view must match exactly; for one it may
		// be longer (allocated once for the longest draft).
		c := exact("Capture", b.Capture, s.CaptureLen(), "D_k*D_v*n_v_heads*n_tokens*n_seqs")
		if s.NSeqs == 1 {
			c.maxLen = maxElems - 1
		}
		checks = append(checks, c)
	} else if b.Capture != (View{}) {
		return invalid("Capture", "set, but only the capture kernel writes it (the %s kernel does not)", k)
	}
	// The shape's counts first: a count beyond the indices is the shape's
	// fault, whatever the views hold.
	for _, c := range checks {
		if uint64(c.want) >= maxElems {
			return tooLarge(c.name, c.formula, c.want)
		}
	}
	for _, c := range checks {
		if err := validateView(c.name, c.v, c.want, c.formula, c.maxLen); err != nil {
			return err
		}
	}
	return nil
}

// validateView checks one view: a buffer, the f32 element type, an aligned
// offset, want <= Len <= maxLen elements (maxLen below 2^32) and the range
// inside the buffer.
func validateView(name string, v View, want int, formula string, maxLen int) error {
	if v.Buffer == nil {
		return invalid(name, "no buffer")
	}
	if v.Type != F32 {
		return invalid(name, "element type %v, the kernels take f32", v.Type)
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
	have := bufferLength(v.Buffer)
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
