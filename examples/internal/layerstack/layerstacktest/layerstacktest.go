// Package layerstacktest holds what the example programs' tests share: a
// program's flags parsed from a test's command line, and the emulated
// device wrapped as a layerstack.Device. Only tests import it, so that
// package testing stays out of the programs.
package layerstacktest

import (
	"io"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/examples/internal/layerstack"
	"github.com/puremetal/puremetal/internal/testdevice"
)

// Flags returns what parse, a program's parser of its flags, makes of the
// flags base followed by extra, and fails t when it returns an error.
func Flags[C any](t testing.TB, parse func(args []string, stderr io.Writer) (C, error), base []string, extra ...string) C {
	t.Helper()
	cfg, err := parse(slices.Concat(base, extra), io.Discard)
	if err != nil {
		t.Fatalf("%q: %v", slices.Concat(base, extra), err)
	}
	return cfg
}

// Device returns the emulated device as a layerstack.Device, for the
// caller to close. Without the emulator's prerequisites it skips the test,
// or fails it in strict mode (see testdevice.Emulated).
func Device(t testing.TB) *layerstack.Device {
	t.Helper()
	d, err := layerstack.NewDevice(testdevice.Emulated(t, emu.Options{}), "emu (test)", false)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
