package kernels

import (
	"strconv"

	"github.com/puremetal/puremetal/gdn/spec"
)

// QuantFile holds the MLX affine-quantized matrix products and the
// embedding lookups: quant_matvec, quant_gather_matvec, quant_matmul and
// quant_embed for every activation type, scale type and bit width
// ({T}_{S}_{bits}), and embed for every table and output type ({W}_{T}).
const QuantFile = "quant.metal"

// QuantBits lists the bit widths of the quantized kernels.
var QuantBits = [...]int{4, 8}

// QuantKernel names one quantized kernel family of [QuantFile].
type QuantKernel int

// The quantized kernel families.
const (
	QuantMatVec       QuantKernel = iota // decode: up to 8 rows of x per pass over W
	QuantGatherMatVec                    // decode over stacked experts picked by ids
	QuantMatMul                          // prefill: 32 x 32 tiles, simdgroup_matrix
	QuantEmbed                           // embedding lookup from a quantized table
	numQuantKernels
)

var quantBases = [numQuantKernels]string{"quant_matvec", "quant_gather_matvec", "quant_matmul", "quant_embed"}

// String returns the family's base name, e.g. "quant_matvec".
func (q QuantKernel) String() string {
	if q < 0 || q >= numQuantKernels {
		return "QuantKernel(?)"
	}
	return quantBases[q]
}

// quantNames holds every entry point's name, so that a dispatcher finds
// one without building a string: [family][act][scale][bits 4, 8].
var quantNames = func() (n [numQuantKernels][len(ElemTypes)][len(ElemTypes)][len(QuantBits)]string) {
	for q := range numQuantKernels {
		for a, act := range ElemTypes {
			for s, sc := range ElemTypes {
				for b, bits := range QuantBits {
					n[q][a][s][b] = quantBases[q] + "_" + act.String() + "_" + sc.String() + "_" + strconv.Itoa(bits)
				}
			}
		}
	}
	return n
}()

// embedNames are embed_{table}_{out}.
var embedNames = newTypedNames("embed", 2)

// QuantOf returns the entry point of family q for activation type act,
// scale and bias type scale and bits 4 or 8, e.g. quant_matvec_f16_bf16_4;
// "" for a type or width the kernels do not have.
func QuantOf(q QuantKernel, act, scale spec.ElemType, bits int) string {
	a, s, b := elemIndex(act), elemIndex(scale), bitsIndex(bits)
	if q < 0 || q >= numQuantKernels || a < 0 || s < 0 || b < 0 {
		return ""
	}
	return quantNames[q][a][s][b]
}

// EmbedOf returns the entry point of the dense embedding lookup from a
// table of type table into an output of type out, e.g. embed_bf16_f32.
func EmbedOf(table, out spec.ElemType) string { return embedNames.name(table, out) }

// quantEntries returns every entry point of QuantFile.
func quantEntries() []string {
	var e []string
	for q := range numQuantKernels {
		for a := range ElemTypes {
			for s := range ElemTypes {
				e = append(e, quantNames[q][a][s][:]...)
			}
		}
	}
	return append(e, embedNames.all()...)
}

// elemIndex returns t's index in ElemTypes, or -1.
func elemIndex(t spec.ElemType) int {
	for i, e := range ElemTypes {
		if e == t {
			return i
		}
	}
	return -1
}

// bitsIndex returns bits' index in QuantBits, or -1.
func bitsIndex(bits int) int {
	for i, b := range QuantBits {
		if b == bits {
			return i
		}
	}
	return -1
}
