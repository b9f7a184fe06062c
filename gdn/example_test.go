package gdn_test

import (
	"fmt"
	"math"

	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/mtl"
)

// One decode step of one layer with Qwen3.5-like shapes: 16 key heads, 32
// value heads, D_k = D_v = 128, the state updated in place.
func ExampleKernels_Decode() {
	dev, err := mtl.CreateSystemDefaultDevice()
	if err != nil {
		fmt.Println(err) // not a Mac: see package emu for the emulated device
		return
	}
	defer dev.Release()
	k, err := gdn.New(dev, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer k.Release()

	p := gdn.Params{
		Shape:   gdn.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 1},
		HeadMap: gdn.Block,                   // HF / MLX weights
		QScale:  float32(1 / math.Sqrt(128)), // q not scaled yet
	}
	s := p.Shape
	newView := func(n int) gdn.View {
		b, err := dev.NewBuffer(4*n, mtl.ResourceStorageModeShared)
		if err != nil {
			panic(err)
		}
		return gdn.F32View(b, 0, n)
	}
	state := newView(s.DK * s.DV * s.NVHeads * s.NSeqs)
	b := gdn.Buffers{
		Q:       newView(s.DK * s.NKHeads),
		K:       newView(s.DK * s.NKHeads),
		V:       newView(s.DV * s.NVHeads),
		G:       newView(s.NVHeads), // alpha = exp(-g): g = -g_fla for HF's log-decay
		Beta:    newView(s.NVHeads),
		StateIn: state, StateOut: state,
		Output: newView(s.DV * s.NVHeads),
	}
	// ... fill Q, K, V, G, Beta through mtl.Slice[float32](b.Q.Buffer) ...

	queue, _ := dev.NewCommandQueue()
	defer queue.Release()
	cb, _ := queue.CommandBuffer()
	defer cb.Release()
	enc, _ := cb.ComputeCommandEncoder()
	if err := k.Decode(enc, p, b); err != nil {
		fmt.Println(err)
	}
	if err := enc.EndEncoding(); err != nil {
		fmt.Println(err)
	}
	cb.Commit()
	cb.WaitUntilCompleted()
	fmt.Println(mtl.Slice[float32](b.Output.Buffer)[:4])
}
