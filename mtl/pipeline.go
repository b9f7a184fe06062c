package mtl

import (
	"fmt"

	"github.com/puremetal/puremetal/objc"
)

// ComputePipelineState is an MTLComputePipelineState: a compute function
// compiled for the device, ready to dispatch.
type ComputePipelineState struct {
	object
	maxTotal, width int
}

// NewComputePipelineState compiles a compute function for the device
// (newComputePipelineStateWithFunction:error:). A failure is an error
// holding Metal's NSError text.
func (d *Device) NewComputePipelineState(f *Function) (*ComputePipelineState, error) {
	if f == nil || f.ID() == 0 {
		return nil, fmt.Errorf("mtl: NewComputePipelineState needs a function, got nil or a released one")
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
