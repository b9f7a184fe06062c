package gdn_test

import (
	"fmt"
	"log"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/mtl"
)

// A 100-token prompt through Prefill, which takes the chunked kernel from
// gdn.ChunkedMinTokens tokens on (six chunks of 16 and one of 4), checked
// against the float32 token-by-token reference.
func ExampleKernels_Prefill() {
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

	p := gdn.Params{
		Shape:  gdn.Shape{DK: 64, DV: 64, NKHeads: 1, NVHeads: 1, NTokens: 100, NSeqs: 1},
		QScale: 0.125, // 1/sqrt(D_k)
	}
	in, err := cpuref.RandomInputs(p, 1) // L2-normalised q and k, real gates
	if err != nil {
		log.Fatal(err)
	}
	var buffers []*mtl.Buffer
	defer func() {
		for _, b := range buffers {
			b.Release()
		}
	}()
	view := func(values []float32) gdn.View {
		b, err := dev.NewBuffer(4*len(values), mtl.ResourceStorageModeShared)
		if err != nil {
			log.Fatal(err)
		}
		buffers = append(buffers, b)
		copy(mtl.Slice[float32](b), values)
		return gdn.F32View(b, 0, len(values))
	}
	b := gdn.Buffers{
		Q: view(in.Q), K: view(in.K), V: view(in.V), G: view(in.G), Beta: view(in.Beta),
		StateIn: view(in.StateIn), Output: view(make([]float32, p.VLen())), StateOut: view(make([]float32, p.StateLen())),
	}
	queue, err := dev.NewCommandQueue()
	if err != nil {
		log.Fatal(err)
	}
	defer queue.Release()
	if err := queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return k.Prefill(enc, p, b) }); err != nil {
		log.Fatal(err)
	}

	ref, err := cpuref.Reference32(p, in, false)
	if err != nil {
		log.Fatal(err)
	}
	out := cpuref.MaxRelErr(mtl.Slice[float32](b.Output.Buffer), ref.Output)
	state := cpuref.MaxRelErr(mtl.Slice[float32](b.StateOut.Buffer), ref.StateOut)
	fmt.Println("output within 1e-5:", out <= 1e-5)
	fmt.Println("state within 1e-5:", state <= 1e-5)
	// Output:
	// output within 1e-5: true
	// state within 1e-5: true
}
