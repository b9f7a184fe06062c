// Package layerstacktest holds what the example programs' tests share: a
// program's flags parsed from a test's command line, a program's run with
// its report kept, and the emulated device wrapped as a
// layerstack.Device. Only tests import it, so that
// package testing stays out of the programs.
package layerstacktest

import (
	"bytes"
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

// Run runs run, a program's run (see layerstack.Main), on cfg and be with
// the progress discarded, and returns its result and its report; it fails
// t when run returns an error.
func Run[C, B, R any](t testing.TB, run func(cfg C, be B, stdout, stderr io.Writer) (R, error), cfg C, be B) (R, string) {
	t.Helper()
	var out bytes.Buffer
	res, err := run(cfg, be, &out, io.Discard)
	if err != nil {
		t.Fatalf("%v\n%s", err, &out)
	}
	return res, out.String()
}

// Device returns the emulated device as a layerstack.Device, for the
// caller to close before the test ends: the test then fails unless every
// emulated object made since is released (see testdevice.CheckReleased).
// Without the emulator's prerequisites it skips the test, or fails it in
// strict mode (see testdevice.Emulated).
func Device(t testing.TB) *layerstack.Device {
	t.Helper()
	testdevice.CheckReleased(t)
	d, err := layerstack.NewDevice(testdevice.Emulated(t, emu.Options{}), "emu (test)", false)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
