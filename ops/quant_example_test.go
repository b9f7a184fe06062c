package ops_test

import (
	"fmt"

	"github.com/puremetal/puremetal/ops"
)

// A quantized weight's shape is checked before its views: 2000 inputs do
// not cut into groups of 64, and MLX's affine kernels here take 4 or 8
// bits.
func ExampleQuantWeight_Check() {
	w := ops.QuantWeight{Rows: 2048, Cols: 2000, Bits: 4, GroupSize: 64}
	fmt.Println(w.Check())
	w.Cols, w.Bits = 2048, 3
	fmt.Println(w.Check())
	// Output:
	// invalid argument: W.Cols: 2000 columns, not a multiple of the group size 64
	// invalid argument: W.Bits: 3 bits, must be 4 or 8
}
