package mtl

import (
	"fmt"

	"github.com/ebitengine/purego"
	"github.com/puremetal/puremetal/objc"
)

// CreateSystemDefaultDevice returns the system's default Metal device
// (MTLCreateSystemDefaultDevice), owned by the caller.
func CreateSystemDefaultDevice() (*Device, error) {
	if err := objc.Load(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDevice, err)
	}
	const lib = "/System/Library/Frameworks/Metal.framework/Metal"
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot load %s: %v", ErrNoDevice, lib, err)
	}
	fn, err := purego.Dlsym(h, "MTLCreateSystemDefaultDevice")
	if err != nil {
		return nil, fmt.Errorf("%w: %s has no MTLCreateSystemDefaultDevice: %v", ErrNoDevice, lib, err)
	}
	r, _, _ := purego.SyscallN(fn)
	if r == 0 {
		return nil, fmt.Errorf("%w: MTLCreateSystemDefaultDevice returned nil (no GPU that supports Metal)", ErrNoDevice)
	}
	loadSels()
	return newDevice(objc.ID(r)), nil
}
