package mtl

import (
	"fmt"

	"github.com/ebitengine/purego"
	"github.com/puremetal/puremetal/objc"
)

// CreateSystemDefaultDevice returns the system's default Metal device
// (MTLCreateSystemDefaultDevice), owned by the caller. Where the system
// has no default device (MTLCreateSystemDefaultDevice returns nil in ssh
// sessions, daemons and some CI runners) it returns the first device of
// MTLCopyAllDevices; [Device.Source] says which.
func CreateSystemDefaultDevice() (*Device, error) {
	if err := objc.Load(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDevice, err)
	}
	const lib = "/System/Library/Frameworks/Metal.framework/Metal"
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot load %s: %v", ErrNoDevice, lib, err)
	}
	var fns [2]uintptr
	for i, name := range []string{"MTLCreateSystemDefaultDevice", "MTLCopyAllDevices"} {
		if fns[i], err = purego.Dlsym(h, name); err != nil {
			return nil, fmt.Errorf("%w: %s has no %s: %v", ErrNoDevice, lib, name, err)
		}
	}
	call := func(fn uintptr) func() objc.ID {
		return func() objc.ID {
			r, _, _ := purego.SyscallN(fn)
			return objc.ID(r)
		}
	}
	return systemDevice(call(fns[0]), call(fns[1]))
}
