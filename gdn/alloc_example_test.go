package gdn_test

import (
	"errors"
	"fmt"
	"log"
	"math"

	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/mtl"
)

// ExampleKernels_Decode's step, with every view made by NewBuffers:
// exactly as long as the Params imply, zero-filled, in shared storage,
// the state updated in place; one Release frees them.
func ExampleNewBuffers() {
	m := open()
	defer m.Release()

	p := gdn.Params{
		Shape:  gdn.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1},
		QScale: float32(1 / math.Sqrt(32)),
	}
	a, err := gdn.NewBuffers(m.dev, p, gdn.AllocOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Release()
	s := p.Shape
	unit := float32(1 / math.Sqrt(32))
	for i := range s.DK {
		mtl.Slice[float32](a.Q.Buffer)[i] = unit
		mtl.Slice[float32](a.K.Buffer)[i] = unit
	}
	for i := range mtl.Slice[float32](a.V.Buffer) {
		mtl.Slice[float32](a.V.Buffer)[i] = float32(1 + i/s.DV)
	}
	copy(mtl.Slice[float32](a.G.Buffer), []float32{0.1, 0.1})
	copy(mtl.Slice[float32](a.Beta.Buffer), []float32{0.5, 0.5})

	err = m.queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return m.k.Decode(enc, p, a.Buffers) })
	if err != nil {
		log.Fatal(err)
	}
	out := mtl.Slice[float32](a.Output.Buffer)
	fmt.Printf("head 0: %.4f, head 1: %.4f\n", out[0], out[s.DV])
	fmt.Println("state in place:", a.StateIn == a.StateOut, "elements:", a.StateIn.Len)
	// Output:
	// head 0: 0.0884, head 1: 0.1768
	// state in place: true elements: 2048
}

// A server's state pool: slots acquired as sequences arrive and freed as
// they finish, one decode dispatch per step for the sequences in flight.
// Each step: q and k the same unit vector, no decay, beta = 1/2, v = 1 for
// one sequence and 2 for the other; a fresh sequence outputs scale * v /
// 2, its second token 3 scale * v / 4.
func ExampleStatePool() {
	m := open()
	defer m.Release()

	p := gdn.Params{
		Shape: gdn.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 1, NTokens: 1, NSeqs: 2,
			NSlots: 4}, // room for 4 sequences, 2 in each dispatch
		QScale: float32(1 / math.Sqrt(32)),
	}
	pool, err := gdn.NewStatePool(m.dev, p, 1) // one layer
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Release()
	a, err := gdn.NewBuffers(m.dev, p, gdn.AllocOptions{State: pool.States[0]})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Release()
	unit := float32(1 / math.Sqrt(32))
	for i := range mtl.Slice[float32](a.Q.Buffer) {
		mtl.Slice[float32](a.Q.Buffer)[i] = unit
		mtl.Slice[float32](a.K.Buffer)[i] = unit
	}
	for i := range mtl.Slice[float32](a.V.Buffer) {
		mtl.Slice[float32](a.V.Buffer)[i] = float32(1 + i/32) // sequence 0: 1, sequence 1: 2
	}
	copy(mtl.Slice[float32](a.Beta.Buffer), []float32{0.5, 0.5})

	step := func(slots ...int32) {
		copy(mtl.Slice[int32](a.Slots.Buffer), slots)
		err := m.queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return m.k.Decode(enc, p, a.Buffers) })
		if err != nil {
			log.Fatal(err)
		}
		out := mtl.Slice[float32](a.Output.Buffer)
		fmt.Printf("slots %v: %.4f %.4f\n", slots, out[0], out[32])
	}
	x, _ := pool.Acquire()
	y, _ := pool.Acquire()
	step(x, y)
	step(x, y)
	pool.Free(x) // x's sequence is done
	z, _ := pool.Acquire()
	step(z, y) // z reuses x's slot, zeroed
	fmt.Println("in use:", pool.InUse(), "of", pool.Slots())

	pool.Acquire()
	pool.Acquire()
	_, err = pool.Acquire()
	fmt.Println(errors.Is(err, gdn.ErrNoFreeSlot), err)
	fmt.Println(pool.Free(7))
	// Output:
	// slots [0 1]: 0.0884 0.1768
	// slots [0 1]: 0.1326 0.2652
	// slots [0 1]: 0.0884 0.3094
	// in use: 2 of 4
	// true gdn: no free slot in the state pool: all 4 slots are in use
	// gdn: invalid argument: slot: 7 is outside the pool's slots [0, 4)
}
