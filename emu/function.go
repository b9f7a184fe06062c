package emu

import (
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/objc"
)

// function is an MTLFunction's state.
type function struct {
	fn  *msl.Function
	dev *device
}

func functionName(self objc.ID, _ objc.SEL) objc.ID {
	if f := stateOf[function](self); f != nil {
		return autoreleasedString(f.fn.Name)
	}
	return 0
}
