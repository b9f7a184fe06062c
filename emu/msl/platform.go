package msl

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// ErrUnsupportedPlatform is the error of [Compile], and of the emulated
// device built on it, on a system the engine does not run on. The engine
// runs on Linux, on x86-64 and arm64: its runtime switches fibers in
// assembly written for ELF on those two architectures, and it builds and
// loads ELF shared objects. On macOS the system's Metal device runs the
// same kernels.
var ErrUnsupportedPlatform = errors.New("msl: the emulated device runs on Linux (x86-64 and arm64) only")

// UnsupportedEnv is the environment variable that, set to 1, makes the
// engine refuse to run as it does where it cannot, so that a program's or
// a test suite's behaviour without the emulated device can be checked on
// Linux.
const UnsupportedEnv = "PUREMETAL_EMU_UNSUPPORTED"

// Supported returns nil where the engine runs, and otherwise an error
// wrapping [ErrUnsupportedPlatform] that names the system.
func Supported() error {
	if os.Getenv(UnsupportedEnv) == "1" {
		return fmt.Errorf("%w (%s=1)", ErrUnsupportedPlatform, UnsupportedEnv)
	}
	return supportedOn(runtime.GOOS, runtime.GOARCH)
}

func supportedOn(goos, goarch string) error {
	if goos == "linux" && (goarch == "amd64" || goarch == "arm64") {
		return nil
	}
	hint := ""
	if goos == "darwin" {
		hint = "; on macOS the system's Metal device runs the kernels"
	}
	return fmt.Errorf("%w, not on %s/%s%s", ErrUnsupportedPlatform, goos, goarch, hint)
}
