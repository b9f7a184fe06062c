package kernels

import "github.com/puremetal/puremetal/gdn/spec"

// SwiGLUFile is the source of the SwiGLU activation.
const SwiGLUFile = "swiglu.metal"

// SwiGLUOf returns the name of the SwiGLU kernel for activation type x:
// swiglu_{x}.
func SwiGLUOf(x spec.ElemType) string { return swigluNames.name(x) }

var swigluNames = newTypedNames("swiglu", 1)
