package gdn

import "github.com/puremetal/puremetal/gdn/spec"

// Core says which parts of a layer's core around the step a kernel runs:
// the short convolution and the gated RMSNorm; see [spec.Core].
type Core = spec.Core

// validateCore refuses a layer core (Params.Core) on a kernel that does
// not run it.
func validateCore(k Kernel, p Params) error {
	if p.Core == (spec.Core{}) {
		return nil
	}
	return invalid("Params.Core", "%+v: the %s kernel runs neither the convolution nor the gated norm", p.Core, k)
}
