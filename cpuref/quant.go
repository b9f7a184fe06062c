package cpuref

import "fmt"

// Dequantize64 expands an MLX affine-quantized matrix (SPEC section 14):
// words [rows][cols*bits/32] uint32, element j of a word at bits
// [j*bits, (j+1)*bits) (the first element lowest); scales and biases
// [rows][cols/groupSize], one per group of groupSize consecutive elements
// of a row; w = scale * q + bias. Returns [rows][cols]. bits is 2, 4 or 8,
// the widths that divide a word (SPEC section 14's packing).
func Dequantize64(words []uint32, scales, biases []float64, rows, cols, bits, groupSize int) []float64 {
	switch bits {
	case 2, 4, 8:
	default:
		panic(fmt.Sprintf("cpuref.Dequantize64: %d bits, want 2, 4 or 8", bits))
	}
	if groupSize <= 0 || cols%groupSize != 0 || cols*bits%32 != 0 {
		panic(fmt.Sprintf("cpuref.Dequantize64: %d columns are not groups of %d packed in 32-bit words at %d bits", cols, groupSize, bits))
	}
	wpr, gpr := cols*bits/32, cols/groupSize
	mustLen("Dequantize64", "words", len(words), rows*wpr)
	mustLen("Dequantize64", "scales", len(scales), rows*gpr)
	mustLen("Dequantize64", "biases", len(biases), rows*gpr)
	w := make([]float64, rows*cols)
	mask := uint32(1)<<bits - 1
	for r := 0; r < rows; r++ {
		row := words[r*wpr : (r+1)*wpr]
		for c := 0; c < cols; c++ {
			bit := c * bits
			v := row[bit/32] >> (bit % 32)
			g := r*gpr + c/groupSize
			w[r*cols+c] = scales[g]*float64(v&mask) + biases[g]
		}
	}
	return w
}
