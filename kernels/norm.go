package kernels

import "github.com/puremetal/puremetal/gdn/spec"

// NormFile is the source of the RMSNorm kernels.
const NormFile = "norm.metal"

// NormPerThread is the number of a row's elements each thread of an
// RMSNorm threadgroup keeps in registers (NORM_PER in norm.metal): a
// threadgroup of at most 1024 threads normalises rows of up to
// 1024 * NormPerThread elements.
const NormPerThread = 8

// RMSNormOf returns the name of the RMSNorm kernel for activation type x
// (input and output) and weight type w: rms_norm_{x}_{w}.
func RMSNormOf(x, w spec.ElemType) string { return rmsNormNames.name(x, w) }

// RMSNormResidualOf returns the name of the RMSNorm kernel that first adds
// the layer's output to the residual stream, for residual type h,
// activation type x (the layer's output and the normalised output) and
// weight type w: rms_norm_residual_{h}_{x}_{w}.
func RMSNormResidualOf(h, x, w spec.ElemType) string { return rmsNormResidualNames.name(h, x, w) }

// RMSNormRoPEOf returns the name of the kernel that normalises each head
// and then applies RoPE to it, in place, for activation type x and weight
// type w: rms_norm_rope_{x}_{w}.
func RMSNormRoPEOf(x, w spec.ElemType) string { return rmsNormRoPENames.name(x, w) }

// NormRoPEMaxRotary is the largest rotary_dim RMSNormRoPE takes
// (NORM_ROPE_MAX in norm.metal: the rotated elements pass through
// threadgroup memory).
const NormRoPEMaxRotary = 512

var (
	rmsNormRoPENames     = newTypedNames("rms_norm_rope", 2)
	rmsNormNames         = newTypedNames("rms_norm", 2)
	rmsNormResidualNames = newTypedNames("rms_norm_residual", 3)
)
