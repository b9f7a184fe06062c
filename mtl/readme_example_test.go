package mtl_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/mtl"
)

// axpySource is a kernel with a buffer it reads, one it updates and a
// scalar argument.
const axpySource = `
#include <metal_stdlib>
using namespace metal;

kernel void axpy(device const float *x [[buffer(0)]],
                 device float *y       [[buffer(1)]],
                 constant float &a     [[buffer(2)]],
                 uint i [[thread_position_in_grid]]) {
    y[i] += a * x[i];
}
`

// The whole of a small compute program from Go values: buffers from
// slices, a scalar argument, one command buffer; on the system's GPU on a
// Mac and on the emulated device elsewhere. (The README's first snippet.)
func Example_fromGoValues() {
	dev, err := mtl.CreateSystemDefaultDevice()
	if errors.Is(err, mtl.ErrNoDevice) {
		dev, err = emu.NewDevice() // Linux: the emulated device
	}
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Release()

	lib, err := dev.NewLibraryWithSource(axpySource, mtl.CompileOptions{})
	if err != nil {
		log.Fatal(err) // a *mtl.CompileError holds the compiler's log
	}
	defer lib.Release()
	fn, err := lib.NewFunction("axpy")
	if err != nil {
		log.Fatal(err)
	}
	defer fn.Release()
	pso, err := dev.NewComputePipelineState(fn)
	if err != nil {
		log.Fatal(err)
	}
	defer pso.Release()

	x, err := mtl.NewBufferFromSlice(dev, []float32{1, 2, 3, 4}, mtl.ResourceStorageModeShared)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Release()
	y, err := mtl.NewBufferFromSlice(dev, []float32{10, 20, 30, 40}, mtl.ResourceStorageModeShared)
	if err != nil {
		log.Fatal(err)
	}
	defer y.Release()

	queue, err := dev.NewCommandQueue()
	if err != nil {
		log.Fatal(err)
	}
	defer queue.Release()
	err = queue.Run(func(enc *mtl.ComputeCommandEncoder) error {
		enc.SetComputePipelineState(pso)
		enc.SetBuffer(x, 0, 0)
		enc.SetBuffer(y, 0, 1)
		mtl.SetValue(enc, float32(0.5), 2) // constant float &a
		enc.DispatchThreads(mtl.Sz(4, 1, 1), mtl.Sz(4, 1, 1))
		return nil
	}) // the first refused argument (errors.Is mtl.ErrInvalidArgument), or the command buffer's error (*mtl.CommandBufferError)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(mtl.Slice[float32](y))
	// Output: [10.5 21 31.5 42]
}
