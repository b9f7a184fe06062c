package spec

// Accuracy bounds of the contract (SPEC.md section 9), each relative to
// the largest magnitude of the reference a result is compared with (as
// cpuref.MaxRelErr measures). Tests and callers that check kernels take
// them from here.
const (
	// TolF32 bounds an f32 result (output or state) against the float32
	// reference (cpuref.Reference32), and an f32 state against a float64
	// loop over the same, already rounded, inputs.
	TolF32 = 1e-5
	// TolF32Output bounds an f32 output against a float64 loop over the
	// same inputs, such as the golden sets' truth: the two differ only in
	// summation order.
	TolF32Output = 1e-6
	// TolBF16 bounds a bf16 output against the float64 loop, and a bf16
	// state after one token: 2^-8.
	TolBF16 = 0x1p-8
	// TolF16 bounds an f16 output against the float64 loop, and an f16
	// state after one token: 2^-10.
	TolF16 = 0x1p-10
)

// OutputTolerance returns the bound on an output of activation type t
// against the float64 loop: TolF32Output, TolF16 or TolBF16, and 0 for a
// type that is none of them.
func OutputTolerance(t ElemType) float64 {
	switch t {
	case F32:
		return TolF32Output
	case F16:
		return TolF16
	case BF16:
		return TolBF16
	}
	return 0
}

// StateTolerance returns the bound on a state of type t after one token
// against the float64 loop: TolF32, TolF16 or TolBF16, and 0 for a type
// that is none of them. (A 16-bit state's drift over many tokens grows
// past it; see SPEC.md section 9.)
func StateTolerance(t ElemType) float64 {
	switch t {
	case F32:
		return TolF32
	case F16:
		return TolF16
	case BF16:
		return TolBF16
	}
	return 0
}
