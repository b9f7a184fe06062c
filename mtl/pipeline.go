package mtl

import (
	"fmt"

	"github.com/puremetal/puremetal/objc"
)

// ComputePipelineState is an MTLComputePipelineState: a compute function
// compiled for the device, ready to dispatch.
type ComputePipelineState struct {
	object
	dev             *Device
	maxTotal, width int
}

// Device returns the device the pipeline was made for.
func (p *ComputePipelineState) Device() *Device { return p.dev }

// NewComputePipelineState compiles a compute function for the device
// (newComputePipelineStateWithFunction:error:). A failure is an error
// holding Metal's NSError text.
func (d *Device) NewComputePipelineState(f *Function) (*ComputePipelineState, error) {
	if err := d.usable("Device.NewComputePipelineState"); err != nil {
		return nil, err
	}
	switch {
	case f == nil:
		return nil, invalidf("Device.NewComputePipelineState: nil function")
	case f.ID() == 0:
		return nil, releasedArg("Device.NewComputePipelineState: the function %q was released", f.name)
	case !sameDevice(f.dev, d):
		return nil, invalidf("Device.NewComputePipelineState: the function %q belongs to %s, not to %s", f.name, f.dev.describe(), d.describe())
	}
	var p *ComputePipelineState
	var err error
	inPool(func() {
		nserr := new(objc.ID)
		id := d.ID().Send(sel.newComputePipelineStateWithFunc, uintptr(f.ID()), objc.Pointer(nserr))
		if id == 0 {
			err = fmt.Errorf("mtl: compute pipeline for %q: %s", f.Name(), errorText(*nserr, "newComputePipelineStateWithFunction:error: returned nil"))
			return
		}
		p = &ComputePipelineState{
			dev:      d,
			maxTotal: int(id.SendWord(sel.maxTotalThreadsPerThreadgroup)),
			width:    int(id.SendWord(sel.threadExecutionWidth)),
		}
		p.set(id)
	})
	return p, err
}

// MaxTotalThreadsPerThreadgroup returns the most threads a threadgroup of
// this pipeline may have, which depends on the function's register use.
func (p *ComputePipelineState) MaxTotalThreadsPerThreadgroup() int { return p.maxTotal }

// ThreadExecutionWidth returns the SIMD-group width: the number of threads
// that execute together (32 on Apple GPUs).
func (p *ComputePipelineState) ThreadExecutionWidth() int { return p.width }
