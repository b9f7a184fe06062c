package gdn_test

import (
	"fmt"
	"log"
	"math"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// put writes x into the view v of a shared buffer, rounded to the view's
// element type as the kernels round (View.Store).
func put(v gdn.View, x []float32) {
	if err := v.Store(x); err != nil {
		log.Fatal(err)
	}
}

// get reads the view v of a shared buffer, widened exactly to float32
// (View.Float32s).
func get(v gdn.View) []float32 {
	x, err := v.Float32s()
	if err != nil {
		log.Fatal(err)
	}
	return x
}

// One decode step of a Qwen3.5 layer's recurrent core as the layer hands
// it over: bf16 activations, an f32 state, the fused step (L2 norm of q
// and k, g from a, beta from b) in one dispatch, checked against the
// float32 reference. (The README's Gated DeltaNet snippet.)
func Example_decode() {
	dev, err := device() // the system's GPU, or the emulated device
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Release()
	queue, err := dev.NewCommandQueue()
	if err != nil {
		log.Fatal(err)
	}
	defer queue.Release()

	k, err := gdn.New(dev, nil) // nil: a pipeline registry of its own, released with k
	if err != nil {
		log.Fatal(err)
	}
	defer k.Release()
	p := gdn.Params{
		Shape:      gdn.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 1},
		HeadMap:    gdn.Block, // HF transformers, MLX
		QScale:     float32(1 / math.Sqrt(128)),
		Activation: gdn.BF16,     // q, k, v, output, a, b
		State:      gdn.F32,      // state_in, state_out, capture
		Fused:      gdn.FusedAll, // L2 norm of q and k, g from a, beta from b
	}
	bufs, err := gdn.NewBuffers(dev, p, gdn.AllocOptions{}) // every view p implies; the state updated in place
	if err != nil {
		log.Fatal(err)
	}
	defer bufs.Release()
	in, err := cpuref.RandomInputs(p, 1) // shaped like a real layer's
	if err != nil {
		log.Fatal(err)
	}
	put(bufs.Q, in.Q)
	put(bufs.K, in.K)
	put(bufs.V, in.V)
	put(bufs.G, in.G)       // a
	put(bufs.Beta, in.Beta) // b
	put(bufs.ALog, in.ALog)
	put(bufs.DtBias, in.DtBias)
	put(bufs.StateIn, in.StateIn)

	err = queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return k.Decode(enc, p, bufs.Buffers) })
	if err != nil {
		log.Fatal(err)
	}
	want, err := cpuref.Reference32(p, in, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("output within bf16's bound:", cpuref.MaxRelErr(get(bufs.Output), want.Output) <= spec.TolBF16)
	fmt.Println("state within f32's bound:", cpuref.MaxRelErr(get(bufs.StateOut), want.StateOut) <= spec.TolF32)
	// Output:
	// output within bf16's bound: true
	// state within f32's bound: true
}

// Serving: a pool of state slots, two requests prefilled in one dispatch
// with their tokens packed (cu_seqlens), then one decode step for both in
// their slots, checked against the float32 reference run the same way.
// (The README's serving snippet.)
func Example_serving() {
	dev, err := device()
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Release()
	queue, err := dev.NewCommandQueue()
	if err != nil {
		log.Fatal(err)
	}
	defer queue.Release()
	k, err := gdn.New(dev, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer k.Release()

	shape := gdn.Shape{DK: 64, DV: 64, NKHeads: 1, NVHeads: 2, NSeqs: 2, NSlots: 8}
	prefill := gdn.Params{Shape: shape, QScale: 0.125}
	prefill.NTokens, prefill.Varlen = 5, true // 5 tokens of 2 requests packed
	decode := gdn.Params{Shape: shape, QScale: 0.125}
	decode.NTokens = 1 // one token for each request

	pool, err := gdn.NewStatePool(dev, prefill, 1) // one layer's pool of 8 states
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Release()
	a, _ := pool.Acquire() // a request arrives: its state slot, zeroed
	b, _ := pool.Acquire()

	run := func(p gdn.Params, cuSeqlens []int32, seed uint64) bool {
		bufs, err := gdn.NewBuffers(dev, p, gdn.AllocOptions{State: pool.States[0]})
		if err != nil {
			log.Fatal(err)
		}
		defer bufs.Release()
		in, err := cpuref.RandomInputs(p, seed)
		if err != nil {
			log.Fatal(err)
		}
		in.Slots, in.CuSeqlens = []int32{a, b}, cuSeqlens
		in.StateIn = get(pool.States[0]) // the pool as the device holds it
		put(bufs.Q, in.Q)
		put(bufs.K, in.K)
		put(bufs.V, in.V)
		put(bufs.G, in.G)
		put(bufs.Beta, in.Beta)
		copy(mtl.Slice[int32](bufs.Slots.Buffer), in.Slots)
		if p.Varlen {
			copy(mtl.Slice[int32](bufs.CuSeqlens.Buffer), in.CuSeqlens)
		}
		err = queue.Run(func(enc *mtl.ComputeCommandEncoder) error {
			if p.Varlen {
				return k.Prefill(enc, p, bufs.Buffers)
			}
			return k.Decode(enc, p, bufs.Buffers)
		})
		if err != nil {
			log.Fatal(err)
		}
		want, err := cpuref.Reference32(p, in, false)
		if err != nil {
			log.Fatal(err)
		}
		return cpuref.MaxRelErr(get(bufs.Output), want.Output) <= spec.TolF32 &&
			cpuref.MaxRelErr(get(pool.States[0]), want.StateOut) <= spec.TolF32
	}
	fmt.Println("prefill of 3 + 2 tokens:", run(prefill, []int32{0, 3, 5}, 1))
	fmt.Println("decode of both:", run(decode, nil, 2))
	pool.Free(a) // a's request is done; its slot goes to the next one
	fmt.Println("slots in use:", pool.InUse())
	// Output:
	// prefill of 3 + 2 tokens: true
	// decode of both: true
	// slots in use: 1
}
