package mtl_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/mtl"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, func() error {
		if d, err := mtl.CreateSystemDefaultDevice(); err == nil {
			d.Release()
			return nil
		}
		d, err := emu.NewDevice()
		if err != nil {
			return fmt.Errorf("no Metal device and no emulated device: %w", err)
		}
		d.Release()
		return nil
	}))
}

const vectorAddSource = `
#include <metal_stdlib>
using namespace metal;

kernel void vector_add(device const float *a [[buffer(0)]],
                       device const float *b [[buffer(1)]],
                       device float *sum     [[buffer(2)]],
                       uint i [[thread_position_in_grid]]) {
    sum[i] = a[i] + b[i];
}
`

// Adds two vectors on the GPU: the system's on a Mac, the emulated device
// elsewhere.
func Example() {
	dev, err := mtl.CreateSystemDefaultDevice()
	if errors.Is(err, mtl.ErrNoDevice) {
		dev, err = emu.NewDevice()
	}
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Release()

	lib, err := dev.NewLibraryWithSource(vectorAddSource, mtl.CompileOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer lib.Release()
	fn, err := lib.NewFunction("vector_add")
	if err != nil {
		log.Fatal(err)
	}
	defer fn.Release()
	pso, err := dev.NewComputePipelineState(fn)
	if err != nil {
		log.Fatal(err)
	}
	defer pso.Release()

	const n = 8
	a, _ := dev.NewBuffer(4*n, mtl.ResourceStorageModeShared)
	b, _ := dev.NewBuffer(4*n, mtl.ResourceStorageModeShared)
	sum, _ := dev.NewBuffer(4*n, mtl.ResourceStorageModeShared)
	defer a.Release()
	defer b.Release()
	defer sum.Release()
	for i := range n {
		mtl.Slice[float32](a)[i] = float32(i)
		mtl.Slice[float32](b)[i] = 0.5
	}

	queue, err := dev.NewCommandQueue()
	if err != nil {
		log.Fatal(err)
	}
	defer queue.Release()
	err = queue.Run(func(enc *mtl.ComputeCommandEncoder) error {
		enc.SetComputePipelineState(pso)
		enc.SetBuffers([]*mtl.Buffer{a, b, sum}, []int{0, 0, 0}, 0)
		enc.DispatchThreads(mtl.Size{Width: n, Height: 1, Depth: 1}, mtl.Size{Width: n, Height: 1, Depth: 1})
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(mtl.Slice[float32](sum))
	// Output: [0.5 1.5 2.5 3.5 4.5 5.5 6.5 7.5]
}
