package emu_test

import (
	"fmt"
	"log"
	"os"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/mtl"
)

// TestMain leaves the examples out where the emulated device does not
// open, unless in strict mode (testenv.RunMain).
func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, testdevice.EmulatedOpens)) }

// Run a kernel on the emulated device through package mtl, and read the
// memory traffic of its dispatch.
func ExampleDispatchCounters() {
	d, err := emu.NewDeviceWithOptions(emu.Options{Order: msl.Shuffled, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Release()
	lib, err := d.NewLibraryWithSource(`#include <metal_stdlib>
using namespace metal;

kernel void square(device float* x [[buffer(0)]],
                   uint i [[thread_position_in_grid]]) {
    x[i] = x[i] * x[i];
}
`, mtl.CompileOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer lib.Release()
	fn, err := lib.NewFunction("square")
	if err != nil {
		log.Fatal(err)
	}
	defer fn.Release()
	p, err := d.NewComputePipelineState(fn)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Release()
	x, err := d.NewBuffer(4*100, mtl.ResourceStorageModeShared)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Release()
	xs := mtl.Slice[float32](x)
	for i := range xs {
		xs[i] = float32(i)
	}
	q, err := d.NewCommandQueue()
	if err != nil {
		log.Fatal(err)
	}
	defer q.Release()
	cb, err := q.CommandBuffer()
	if err != nil {
		log.Fatal(err)
	}
	defer cb.Release()
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		log.Fatal(err)
	}
	enc.SetComputePipelineState(p)
	enc.SetBuffer(x, 0, 0)
	enc.DispatchThreads(mtl.Size{Width: 100, Height: 1, Depth: 1}, mtl.Size{Width: 32, Height: 1, Depth: 1})
	if err := enc.EndEncoding(); err != nil {
		log.Fatal(err)
	}
	cb.Commit()
	cb.WaitUntilCompleted()
	if err := cb.Error(); err != nil {
		log.Fatal(err)
	}
	counters, err := emu.DispatchCounters(cb)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(xs[7], counters[0].Loaded[0], counters[0].Stored[0])
	// Output: 49 400 400
}
