package half_test

import (
	"fmt"

	"github.com/puremetal/puremetal/half"
)

// Rounding to the 16-bit formats: 1/3 keeps 11 significant bits in float16
// and 8 in bfloat16; 70000 is past float16's largest finite value, 65504,
// but well inside bfloat16's range.
func Example() {
	for _, x := range []float32{1.0 / 3, 70000} {
		h := half.ToFloat16(x)
		b := half.ToBFloat16(x)
		fmt.Printf("%g: float16 %#04x = %g, bfloat16 %#04x = %g\n", x, uint16(h), h.Float32(), uint16(b), b.Float32())
	}
	// Output:
	// 0.33333334: float16 0x3555 = 0.33325195, bfloat16 0x3eab = 0.33398438
	// 70000: float16 0x7c00 = +Inf, bfloat16 0x4789 = 70144
}

// Filling a buffer of bfloat16 elements, such as mtl.Slice[uint16] of a
// Metal buffer or a []byte of its contents, and reading it back.
func ExampleNarrowBFloat16() {
	values := []float32{0.1, -2.5, 1e-3}
	buf := make([]uint16, len(values))
	half.NarrowBFloat16(buf, values)

	raw := make([]byte, 2*len(values))
	half.EncodeBFloat16(raw, values)

	back := make([]float32, len(values))
	half.WidenBFloat16(back, buf)
	fmt.Printf("%#04x\n% x\n%g\n", buf, raw, back)
	// Output:
	// [0x3dcd 0xc020 0x3a83]
	// cd 3d 20 c0 83 3a
	// [0.100097656 -2.5 0.0009994507]
}
