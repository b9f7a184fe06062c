package kernels

import "github.com/puremetal/puremetal/gdn/spec"

// SampleFile is the source of argmax and of the sampler.
const SampleFile = "sample.metal"

// SampleMaxTopK is the largest top-k the sampler takes (SAMPLE_MAX_K in
// sample.metal): its candidates live in threadgroup memory.
const SampleMaxTopK = 64

// ArgmaxOf returns the name of the argmax kernel for logit type x:
// argmax_{x}.
func ArgmaxOf(x spec.ElemType) string { return argmaxNames.name(x) }

// SampleOf returns the name of the sampler for logit type x: sample_{x}.
func SampleOf(x spec.ElemType) string { return sampleNames.name(x) }

var (
	argmaxNames = newTypedNames("argmax", 1)
	sampleNames = newTypedNames("sample", 1)
)
