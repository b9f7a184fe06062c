package gdn_test

import (
	"fmt"
	"log"
	"math"

	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/mtl"
)

// A prefill of three sequences in one dispatch, as a server batches them:
// the states live in a pool of 4 slots, the prompts (2 tokens, none, 1
// token) are packed along one token axis with cu_seqlens, and the second
// sequence is padding (slot -1), which the kernel skips. One value head
// of D_k = D_v = 32 from a zero state, q and k the same unit vector, no
// decay (g = 0) and beta = 1/2: the first token outputs scale / 2, the
// second 3 scale / 4.
func ExampleKernels_Prefill_slots() {
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
		Shape: gdn.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 1,
			NTokens: 3, NSeqs: 3, // 3 tokens in all, packed
			NSlots: 4, Varlen: true},
		QScale: float32(1 / math.Sqrt(32)),
	}
	var buffers []*mtl.Buffer
	defer func() {
		for _, b := range buffers {
			b.Release()
		}
	}()
	buffer := func(n int) *mtl.Buffer {
		b, err := dev.NewBuffer(4*n, mtl.ResourceStorageModeShared)
		if err != nil {
			log.Fatal(err)
		}
		buffers = append(buffers, b)
		return b
	}
	floats := func(n int, x float32) gdn.View {
		b := buffer(n)
		for i := range mtl.Slice[float32](b) {
			mtl.Slice[float32](b)[i] = x
		}
		return gdn.F32View(b, 0, n)
	}
	ints := func(x ...int32) gdn.View {
		b := buffer(len(x))
		copy(mtl.Slice[int32](b), x)
		return gdn.I32View(b, 0, len(x))
	}
	unit := float32(1 / math.Sqrt(32))
	pool := floats(p.StateLen(), 0) // 4 states
	b := gdn.Buffers{
		Q: floats(p.QKLen(), unit), K: floats(p.QKLen(), unit), V: floats(p.VLen(), 1),
		G: floats(p.GateLen(), 0), Beta: floats(p.GateLen(), 0.5),
		StateIn: pool, StateOut: pool, // the pool, updated in place
		Output:    floats(p.VLen(), float32(math.NaN())),
		Slots:     ints(3, -1, 0),   // sequence 0 in slot 3, sequence 1 padding, sequence 2 in slot 0
		CuSeqlens: ints(0, 2, 2, 3), // tokens 0-1, none, token 2
	}
	queue, err := dev.NewCommandQueue()
	if err != nil {
		log.Fatal(err)
	}
	defer queue.Release()
	if err := queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return k.Prefill(enc, p, b) }); err != nil {
		log.Fatal(err)
	}
	out := mtl.Slice[float32](b.Output.Buffer)
	fmt.Printf("sequence 0 (slot 3): %.4f %.4f\n", out[0], out[32])
	fmt.Printf("sequence 2 (slot 0): %.4f\n", out[64])
	state := mtl.Slice[float32](pool.Buffer)
	for slot := range 4 {
		fmt.Printf("slot %d: S[0][0] = %.4f\n", slot, state[slot*32*32])
	}

	// A repeated slot in shared storage is refused before anything runs.
	copy(mtl.Slice[int32](b.Slots.Buffer), []int32{3, 0, 3})
	err = queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return k.Prefill(enc, p, b) })
	fmt.Println(err)
	// Output:
	// sequence 0 (slot 3): 0.0884 0.1326
	// sequence 2 (slot 0): 0.0884
	// slot 0: S[0][0] = 0.0884
	// slot 1: S[0][0] = 0.0000
	// slot 2: S[0][0] = 0.0000
	// slot 3: S[0][0] = 0.1326
	// gdn: invalid argument: Slots: sequences 0 and 2 both name slot 3: they would race on one state
}
