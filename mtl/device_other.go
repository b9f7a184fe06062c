//go:build !darwin

package mtl

import (
	"fmt"
	"runtime"
)

// CreateSystemDefaultDevice returns the system's default Metal device. Metal
// exists only on Apple's systems; here it returns an error wrapping
// [ErrNoDevice] that says where the emulated device is.
func CreateSystemDefaultDevice() (*Device, error) {
	return nil, fmt.Errorf("%w: Metal needs macOS, this is %s/%s; to run Metal compute kernels on the CPU, "+
		"use the emulated device: emu.NewDevice() in github.com/puremetal/puremetal/emu", ErrNoDevice, runtime.GOOS, runtime.GOARCH)
}
