// Package layerstacktest holds what the example programs' tests share: a
// program's flags parsed from a test's command line, a program's run with
// its report kept, the emulated device wrapped as a layerstack.Device, and
// the element types and fused step every program's tests run. Only tests import it, so that
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

// A TypeCase is one combination of element types and fused step a
// program's tests run: its flags and the start of the report's types line
// for the step alone (Types) and with the whole layer core (CoreTypes).
type TypeCase struct {
	Name      string
	Args      []string
	Types     string
	CoreTypes string
}

// TypesOf returns the start of the report's types line with the whole
// layer core (core) or the step alone.
func (c TypeCase) TypesOf(core bool) string {
	if core {
		return c.CoreTypes
	}
	return c.Types
}

// TypeCases are the combinations every program's tests run: plain f32
// unfused, what a Qwen3.5 layer runs (the defaults: bf16 activations, an
// f32 state, fused), and f16 activations with a bf16 state, fused; each
// with a head map.
var TypeCases = []TypeCase{
	{"f32-f32-unfused", []string{"-dtype", "f32", "-state", "f32", "-fused=false", "-headmap", "block"},
		"types:   f32 activations (q, k, v, g, beta, output), f32 state; unfused: ",
		"types:   f32 activations (mixed_qkv, z, g, beta, output), f32 state; unfused: "},
	{"bf16-f32-fused", []string{"-headmap", "tiled"},
		"types:   bf16 activations (q, k, v, a, b, output), f32 state; fused step: ",
		"types:   bf16 activations (mixed_qkv, z, a, b, output), f32 state; fused step: "},
	{"f16-bf16-fused", []string{"-dtype", "f16", "-state", "bf16", "-headmap", "block"},
		"types:   f16 activations (q, k, v, a, b, output), bf16 state; fused step: ",
		"types:   f16 activations (mixed_qkv, z, a, b, output), bf16 state; fused step: "},
}

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

// Run runs run, a program's run (see layerstack.Command), on cfg and be with
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
