package mtl_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/mtl"
)

// TestMain leaves the examples out where neither the system's Metal
// device nor the emulated device opens, unless in strict mode
// (testenv.RunMain).
func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, testdevice.DeviceOpens)) }

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

// vectorAdd opens the system's default Metal device, or the emulated
// device where there is none, and makes the compute pipeline state of
// vector_add on it: a library compiled from vectorAddSource, its function,
// and the pipeline from that function. The library and the function are
// released once the pipeline exists; the device and the pipeline are the
// caller's to release.
func vectorAdd() (*mtl.Device, *mtl.ComputePipelineState, error) {
	dev, err := mtl.CreateSystemDefaultDevice()
	if errors.Is(err, mtl.ErrNoDevice) {
		dev, err = emu.NewDevice()
	}
	if err != nil {
		return nil, nil, err
	}
	lib, err := dev.NewLibraryWithSource(vectorAddSource, mtl.CompileOptions{})
	if err != nil {
		dev.Release()
		return nil, nil, err
	}
	defer lib.Release()
	fn, err := lib.NewFunction("vector_add")
	if err != nil {
		dev.Release()
		return nil, nil, err
	}
	defer fn.Release()
	pso, err := dev.NewComputePipelineState(fn)
	if err != nil {
		dev.Release()
		return nil, nil, err
	}
	return dev, pso, nil
}

// Adds two vectors on the GPU: the system's on a Mac, the emulated device
// elsewhere.
func Example() {
	dev, pso, err := vectorAdd()
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Release()
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

// Saves a buffer before a dispatch changes it and restores it afterwards,
// as speculative decoding rolls back the state of rejected tokens: a blit
// encoder's copy and a compute encoder's dispatch in one command buffer,
// then a copy back in another, each run by RunCommandBuffer.
func ExampleBlitCommandEncoder_CopyFromBuffer() {
	dev, pso, err := vectorAdd()
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Release()
	defer pso.Release()
	queue, err := dev.NewCommandQueue()
	if err != nil {
		log.Fatal(err)
	}
	defer queue.Release()

	const n = 4
	state, _ := dev.NewBuffer(4*n, mtl.ResourceStorageModeShared)
	saved, _ := dev.NewBuffer(4*n, mtl.ResourceStorageModePrivate)
	defer state.Release()
	defer saved.Release()
	s := mtl.Slice[float32](state)
	copy(s, []float32{1, 2, 3, 4})
	copyBuffer := func(cb *mtl.CommandBuffer, from, to *mtl.Buffer) error {
		blit, err := cb.BlitCommandEncoder()
		if err != nil {
			return err
		}
		blit.CopyFromBuffer(from, 0, to, 0, 4*n)
		return blit.EndEncoding()
	}

	err = queue.RunCommandBuffer(func(cb *mtl.CommandBuffer) error {
		if err := copyBuffer(cb, state, saved); err != nil {
			return err
		}
		step, err := cb.ComputeCommandEncoder()
		if err != nil {
			return err
		}
		step.SetComputePipelineState(pso)
		step.SetBuffers([]*mtl.Buffer{state, state, state}, []int{0, 0, 0}, 0) // state += state
		step.DispatchThreads(mtl.Size{Width: n, Height: 1, Depth: 1}, mtl.Size{Width: n, Height: 1, Depth: 1})
		return step.EndEncoding()
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stepped:", s)

	err = queue.RunCommandBuffer(func(cb *mtl.CommandBuffer) error { return copyBuffer(cb, saved, state) })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("rolled back:", s)
	// Output:
	// stepped: [2 4 6 8]
	// rolled back: [1 2 3 4]
}
