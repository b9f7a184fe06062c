package emu

import (
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/objc"
)

// library is an MTLLibrary's state.
type library struct {
	lib *msl.Library
}

func libraryNewFunctionWithName(self objc.ID, _ objc.SEL, name objc.ID) objc.ID {
	l := stateOf[library](self)
	if l == nil {
		return 0
	}
	f, err := l.lib.Function(objc.GoString(name))
	if err != nil {
		return 0
	}
	return newObject(classes.function, &function{fn: f})
}

func libraryFunctionNames(self objc.ID, _ objc.SEL) objc.ID {
	l := stateOf[library](self)
	if l == nil {
		return 0
	}
	arr := objc.GetClass("NSMutableArray").New()
	for _, n := range l.lib.FunctionNames() {
		s, err := objc.NewNSString(n)
		if err != nil {
			continue
		}
		objc.Send(arr, fsel.addObject, uintptr(s))
		s.Release()
	}
	return arr.Autorelease()
}
