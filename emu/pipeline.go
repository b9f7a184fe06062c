package emu

import (
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/objc"
)

// pipeline is an MTLComputePipelineState's state.
type pipeline struct {
	fn  *msl.Function
	dev *device
}

func pipelineMaxTotalThreadsPerThreadgroup(self objc.ID, _ objc.SEL) uintptr {
	if p := stateOf[pipeline](self); p != nil {
		return uintptr(p.fn.MaxTotalThreadsPerThreadgroup)
	}
	return 0
}

func pipelineThreadExecutionWidth(self objc.ID, _ objc.SEL) uintptr {
	if p := stateOf[pipeline](self); p != nil {
		return uintptr(p.fn.ThreadExecutionWidth)
	}
	return 0
}
