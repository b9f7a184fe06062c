package kernels

import "github.com/puremetal/puremetal/gdn/spec"

// RoPEFile is the source of the rotary position embedding.
const RoPEFile = "rope.metal"

// RoPEOf returns the name of the rotate-half RoPE kernel for activation
// type x: rope_{x}.
func RoPEOf(x spec.ElemType) string { return ropeNames.name(x) }

var ropeNames = newTypedNames("rope", 1)
