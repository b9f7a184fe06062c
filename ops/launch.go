package ops

import (
	"fmt"
	"math"

	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// setPipeline sets entry's pipeline state on enc after checking that it
// runs threadgroups of threads threads; field and formula name where that
// number comes from, for the message. On an error nothing is encoded.
func (k *Kernels) setPipeline(enc *mtl.ComputeCommandEncoder, entry string, threads int, field, formula string) error {
	pso, err := k.pipeline(entry)
	if err != nil {
		return err
	}
	if m := pso.MaxTotalThreadsPerThreadgroup(); threads > m {
		return tensor.Invalid(field, "%s = %d threads per threadgroup, more than the %d the %s pipeline allows", formula, threads, m, entry)
	}
	enc.SetComputePipelineState(pso)
	return nil
}

// finish returns the encoder's error, if any, naming the kernel.
func finish(enc *mtl.ComputeCommandEncoder, entry string) error {
	if err := enc.Err(); err != nil {
		return fmt.Errorf("ops: %s: %w", entry, err)
	}
	return nil
}

// simdWidth is the SIMD-group width the kernels are written for: Apple
// GPUs run 32 threads per SIMD-group.
const simdWidth = 32

// roundUp returns n rounded up to a multiple of m.
func roundUp(n, m int) int { return (n + m - 1) / m * m }

// finite refuses a NaN or infinite parameter.
func finite(field string, x float32) error {
	if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
		return tensor.Invalid(field, "%v, must be finite", x)
	}
	return nil
}

// dim is a named size of a shape.
type dim struct {
	name string
	n    int
}

// positive returns an error naming the first of dims below 1.
func positive(dims ...dim) error {
	for _, d := range dims {
		if d.n < 1 {
			return tensor.Invalid(d.name, "%d, must be at least 1", d.n)
		}
	}
	return nil
}

// elems returns the product of dims, or tensor.MaxElems once it reaches
// it, so that a huge shape is refused by tensor.Check instead of wrapping
// around; a dimension below 1 gives 0 (the dispatchers refuse those
// first).
func elems(dims ...int) int {
	p := 1
	for _, d := range dims {
		if d < 1 {
			return 0
		}
		if d >= tensor.MaxElems || p > (tensor.MaxElems-1)/d {
			return tensor.MaxElems
		}
		p *= d
	}
	return p
}

// ceilDiv returns ceil(a / b) for positive b.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

// named is a view and the argument's name.
type named struct {
	name string
	v    tensor.View
}

// floatTypes refuses the first of views whose element type is not a
// float type (f32, f16, bf16).
func floatTypes(views ...named) error {
	for _, n := range views {
		if err := tensor.FloatType(n.name, n.v.Type); err != nil {
			return err
		}
	}
	return nil
}
