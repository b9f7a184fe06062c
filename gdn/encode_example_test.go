package gdn_test

import (
	"fmt"
	"log"
	"math"

	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/mtl"
)

// Decode picks the packed kernel at D_k = 128 and D_v = 32 (8 rows of the
// state per SIMD-group); Encode runs the kernel of one row per SIMD-group
// on the same inputs, the reference the packed kernels are checked
// against. The two sum in different orders and agree to float32 rounding.
func ExampleKernels_Encode() {
	dev, err := device()
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Release()
	k, err := gdn.New(dev, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer k.Release()
	queue, err := dev.NewCommandQueue()
	if err != nil {
		log.Fatal(err)
	}
	defer queue.Release()

	p := gdn.Params{
		Shape:  gdn.Shape{DK: 128, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1},
		QScale: float32(1 / math.Sqrt(128)),
	}
	var buffers []*mtl.Buffer
	defer func() {
		for _, b := range buffers {
			b.Release()
		}
	}()
	view := func(n int, f func(i int) float32) gdn.View {
		b, err := dev.NewBuffer(4*n, mtl.ResourceStorageModeShared)
		if err != nil {
			log.Fatal(err)
		}
		buffers = append(buffers, b)
		x := mtl.Slice[float32](b)
		for i := range x {
			x[i] = f(i)
		}
		return gdn.F32View(b, 0, n)
	}
	wave := func(i int) float32 { return float32(math.Sin(float64(i))) / 12 }
	in := gdn.Buffers{
		Q: view(p.QKLen(), wave), K: view(p.QKLen(), func(i int) float32 { return wave(3*i + 1) }),
		V: view(p.VLen(), wave), G: view(p.GateLen(), func(int) float32 { return 0.2 }),
		Beta: view(p.GateLen(), func(int) float32 { return 0.7 }), StateIn: view(p.StateLen(), wave),
	}
	run := func(encode func(enc *mtl.ComputeCommandEncoder, b gdn.Buffers) error) []float32 {
		b := in
		b.Output = view(p.VLen(), func(int) float32 { return float32(math.NaN()) })
		b.StateOut = view(p.StateLen(), func(int) float32 { return float32(math.NaN()) })
		if err := queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return encode(enc, b) }); err != nil {
			log.Fatal(err)
		}
		return mtl.Slice[float32](b.Output.Buffer)
	}
	packed := run(func(enc *mtl.ComputeCommandEncoder, b gdn.Buffers) error { return k.Decode(enc, p, b) })
	oneRow := run(func(enc *mtl.ComputeCommandEncoder, b gdn.Buffers) error {
		return k.Encode(enc, gdn.KernelDecode, p, b)
	})
	largest, diff := 0.0, 0.0
	for i := range packed {
		largest = max(largest, math.Abs(float64(oneRow[i])))
		diff = max(diff, math.Abs(float64(packed[i]-oneRow[i])))
	}
	fmt.Printf("%d outputs, within 1e-6 of the largest: %v\n", len(packed), diff <= 1e-6*largest)
	// Output: 64 outputs, within 1e-6 of the largest: true
}
