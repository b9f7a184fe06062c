package mtl_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/mtl"
)

const scaleSource = `
#include <metal_stdlib>
using namespace metal;

struct ScaleParams {
    float a;
    float b;
    uint  n;
};

kernel void scale(device const float *x     [[buffer(0)]],
                  device float *y           [[buffer(1)]],
                  constant ScaleParams &p   [[buffer(2)]],
                  uint i [[thread_position_in_grid]]) {
    if (i < p.n) {
        y[i] = p.a * x[i] + p.b;
    }
}
`

// scaleParams is ScaleParams of scaleSource, field for field.
type scaleParams struct {
	A, B float32
	N    uint32
}

// openDevice opens the system's default Metal device, or the emulated
// device where there is none.
func openDevice() (*mtl.Device, error) {
	dev, err := mtl.CreateSystemDefaultDevice()
	if errors.Is(err, mtl.ErrNoDevice) {
		dev, err = emu.NewDevice()
	}
	return dev, err
}

// scaleRun is what the examples of scaleSource run on: a device (see
// openDevice), the pipeline of scaleSource's kernel and a command queue.
type scaleRun struct {
	dev   *mtl.Device
	pso   *mtl.ComputePipelineState
	queue *mtl.CommandQueue
}

// openScale opens a device and makes scaleSource's pipeline and a command
// queue on it; Release releases all three.
func openScale() (*scaleRun, error) {
	dev, err := openDevice()
	if err != nil {
		return nil, err
	}
	s := &scaleRun{dev: dev}
	if s.pso, err = newScale(dev); err == nil {
		s.queue, err = dev.NewCommandQueue()
	}
	if err != nil {
		s.Release()
		return nil, err
	}
	return s, nil
}

// Release releases the queue, the pipeline and the device.
func (s *scaleRun) Release() {
	if s.queue != nil {
		s.queue.Release()
	}
	if s.pso != nil {
		s.pso.Release()
	}
	s.dev.Release()
}

// newScale makes the pipeline of scaleSource's kernel.
func newScale(dev *mtl.Device) (*mtl.ComputePipelineState, error) {
	lib, err := dev.NewLibraryWithSource(scaleSource, mtl.CompileOptions{})
	if err != nil {
		return nil, err
	}
	defer lib.Release()
	fn, err := lib.NewFunction("scale")
	if err != nil {
		return nil, err
	}
	defer fn.Release()
	return dev.NewComputePipelineState(fn)
}

// Passes a struct of parameters to a kernel with SetValue, and its input
// with NewBufferFromSlice: no bytes encoded by hand.
func ExampleSetValue() {
	s, err := openScale()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Release()
	dev, pso, queue := s.dev, s.pso, s.queue

	x, err := mtl.NewBufferFromSlice(dev, []float32{1, 2, 3, 4, 5}, mtl.ResourceStorageModeShared)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Release()
	n := len(mtl.Slice[float32](x))
	y, err := dev.NewBuffer(4*n, mtl.ResourceStorageModeShared)
	if err != nil {
		log.Fatal(err)
	}
	defer y.Release()

	err = queue.Run(func(enc *mtl.ComputeCommandEncoder) error {
		enc.SetComputePipelineState(pso)
		enc.SetBuffers([]*mtl.Buffer{x, y}, []int{0, 0}, 0)
		mtl.SetValue(enc, scaleParams{A: 2, B: 0.5, N: uint32(n)}, 2)
		enc.DispatchThreads(mtl.Sz(n, 1, 1), mtl.Sz(32, 1, 1))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(mtl.Slice[float32](y))
	// Output: [2.5 4.5 6.5 8.5 10.5]
}

// Every argument an encoder refuses matches ErrInvalidArgument, and its
// message names the argument; nothing is committed.
func ExampleErrInvalidArgument() {
	s, err := openScale()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Release()
	dev, pso, queue := s.dev, s.pso, s.queue
	y, err := dev.NewBuffer(16, mtl.ResourceStorageModeShared)
	if err != nil {
		log.Fatal(err)
	}
	defer y.Release()

	err = queue.Run(func(enc *mtl.ComputeCommandEncoder) error {
		enc.SetComputePipelineState(pso)
		enc.SetBuffer(y, 32, 1) // past the buffer's end
		return nil
	})
	fmt.Println(errors.Is(err, mtl.ErrInvalidArgument))
	fmt.Println(err)

	y.Release()
	err = y.SetLabel("y")
	fmt.Println(errors.Is(err, mtl.ErrReleased), err)
	// Output:
	// true
	// mtl: SetBuffer: offset 32 at index 1 outside the buffer's 16 bytes
	// true mtl: Buffer.SetLabel: the buffer was released
}
