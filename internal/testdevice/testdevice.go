// Package testdevice gives tests the Metal devices to run on: the emulated
// device everywhere its prerequisites are installed, and the system's GPU
// on a Mac.
package testdevice

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/internal/clang"
	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// Emulated returns an emulated device with the given options, released
// when the test ends. A missing prerequisite (the GNU Objective-C runtime,
// clang) skips the test, or fails it in strict mode; a system the emulated
// device does not run on (macOS) skips it.
func Emulated(t testing.TB, opts emu.Options) *mtl.Device {
	t.Helper()
	d, missing, err := openEmulated(opts)
	if errors.Is(missing, testenv.ErrPlatform) {
		t.Skip(missing)
	}
	if missing != nil {
		testenv.SkipOrFail(t, missing.Error())
	}
	if err != nil {
		t.Fatalf("emulated device: %v", err)
	}
	t.Cleanup(d.Release)
	return d
}

// openEmulated opens an emulated device. missing says which prerequisite
// is not installed (the GNU Objective-C runtime, clang), or wraps
// testenv.ErrPlatform where the emulated device does not run (macOS); err
// is any other failure.
func openEmulated(opts emu.Options) (d *mtl.Device, missing, err error) {
	if err := msl.Supported(); err != nil {
		return nil, fmt.Errorf("%w: %w", testenv.ErrPlatform, err), nil
	}
	if err := objc.Load(); err != nil {
		return nil, fmt.Errorf("the emulated device needs the GNU Objective-C runtime: %w", err), nil
	}
	d, err = emu.NewDeviceWithOptions(opts)
	if errors.Is(err, clang.ErrNoCompiler) {
		return nil, fmt.Errorf("the emulated device needs clang: %w", err), nil
	}
	return d, nil, err
}

// EmulatedOpens returns nil when an emulated device opens here, and
// otherwise why not: the prerequisite of a TestMain whose examples run on
// the emulated device ([testenv.RunMain]).
func EmulatedOpens() error {
	d, missing, err := openEmulated(emu.Options{})
	if d != nil {
		d.Release()
	}
	return errors.Join(missing, err)
}

// DeviceOpens returns nil when the system's Metal device opens, or else an
// emulated device, and otherwise why neither does: the prerequisite of a
// TestMain whose examples run on whichever opens.
func DeviceOpens() error {
	if d, err := mtl.CreateSystemDefaultDevice(); err == nil {
		d.Release()
		return nil
	}
	if err := EmulatedOpens(); err != nil {
		return fmt.Errorf("no Metal device and no emulated device: %w", err)
	}
	return nil
}

// Metal returns the system's Metal device, released when the test ends. It
// skips the test, saying why, where there is none (any system but macOS):
// that is the platform, not a missing prerequisite, so strict mode does not
// turn it into a failure — except on macOS, where a missing device fails.
func Metal(t testing.TB) *mtl.Device {
	t.Helper()
	d, err := mtl.CreateSystemDefaultDevice()
	if err != nil {
		if runtime.GOOS != "darwin" && errors.Is(err, mtl.ErrNoDevice) {
			t.Skipf("real-Metal test: no Metal on %s/%s (this suite runs on a Mac; the emulated-device suite covers Linux)", runtime.GOOS, runtime.GOARCH)
		}
		testenv.SkipOrFail(t, "no Metal device: "+err.Error())
	}
	t.Cleanup(d.Release)
	return d
}

// NewMetal returns the system's Metal device (see [Metal]) and a command
// queue on it, released when the test ends.
func NewMetal(t testing.TB) *GPU {
	t.Helper()
	d := Metal(t)
	q, err := d.NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Release)
	return &GPU{T: t, D: d, Q: q}
}

// Orders are the two scheduling orders parity tests run the emulated device
// in: forward, and shuffled with a fixed seed. A race on threadgroup memory
// is a fault in either; results that depend on the schedule in ways the
// emulator does not check (threadgroups racing on device memory) differ
// between them.
var Orders = []emu.Options{{Order: msl.Forward}, {Order: msl.Shuffled, Seed: 0x9e3779b97f4a7c15}}

// CheckReleased checks, once the test's cleanups registered after this
// call have run, that as many emulated objects are alive as when it was
// called: call it before making anything the test must release. A
// command buffer with handlers is released by its queue's handler thread
// once they have returned, which may be just after the test is done with
// it, so the check waits up to ten seconds for the count to come back.
func CheckReleased(t testing.TB) {
	before := emu.LiveObjects()
	t.Cleanup(func() {
		for deadline := time.Now().Add(10 * time.Second); emu.LiveObjects() != before && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if after := emu.LiveObjects(); after != before {
			t.Errorf("live emulated objects: %d before the test, %d after releasing everything", before, after)
		}
	})
}

// Pipeline compiles src on d and makes the compute pipeline of its
// function kernel, failing the test on any error; the library and the
// function are released once the pipeline exists, and the pipeline is
// the caller's to release.
func Pipeline(t testing.TB, d *mtl.Device, src string, opts mtl.CompileOptions, kernel string) *mtl.ComputePipelineState {
	t.Helper()
	return SpecializedPipeline(t, d, src, opts, kernel, nil)
}

// SpecializedPipeline is Pipeline for kernel specialised with the function
// constant values (none where values is nil).
func SpecializedPipeline(t testing.TB, d *mtl.Device, src string, opts mtl.CompileOptions, kernel string, values *mtl.FunctionConstantValues) *mtl.ComputePipelineState {
	t.Helper()
	lib, err := d.NewLibraryWithSource(src, opts)
	if err != nil {
		t.Fatalf("compiling the library of %s: %v", kernel, err)
	}
	defer lib.Release()
	return LibraryPipeline(t, d, lib, kernel, values)
}

// LibraryPipeline is SpecializedPipeline for kernel of a library made
// already; the library stays the caller's.
func LibraryPipeline(t testing.TB, d *mtl.Device, lib *mtl.Library, kernel string, values *mtl.FunctionConstantValues) *mtl.ComputePipelineState {
	t.Helper()
	fn := Function(t, lib, kernel, values)
	defer fn.Release()
	p, err := d.NewComputePipelineState(fn)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Function returns the function name of lib, specialised with the function
// constant values (none where values is nil), failing the test on any
// error; the function is the caller's to release.
func Function(t testing.TB, lib *mtl.Library, name string, values *mtl.FunctionConstantValues) *mtl.Function {
	t.Helper()
	var fn *mtl.Function
	var err error
	if values == nil {
		fn, err = lib.NewFunction(name)
	} else {
		fn, err = lib.NewFunctionWithConstants(name, values)
	}
	if err != nil {
		t.Fatal(err)
	}
	return fn
}

// A GPU is a Metal device and a command queue on it, for tests that encode
// through package mtl. What it makes is released when the test ends.
type GPU struct {
	T testing.TB
	D *mtl.Device
	Q *mtl.CommandQueue
}

// NewEmulated returns an emulated device with opts and a queue on it. It
// also checks, when the test ends, that every emulated object the test
// made was released (CheckReleased): call it before making anything else.
func NewEmulated(t testing.TB, opts emu.Options) *GPU {
	t.Helper()
	CheckReleased(t)
	d := Emulated(t, opts)
	q, err := d.NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Release)
	return &GPU{T: t, D: d, Q: q}
}

// Pipeline is the package's Pipeline on the GPU's device, the pipeline
// released when the test ends.
func (g *GPU) Pipeline(src string, opts mtl.CompileOptions, kernel string) *mtl.ComputePipelineState {
	g.T.Helper()
	p := Pipeline(g.T, g.D, src, opts, kernel)
	g.T.Cleanup(p.Release)
	return p
}

// Buffer makes a buffer of length bytes.
func (g *GPU) Buffer(length int, opts mtl.ResourceOptions) *mtl.Buffer {
	g.T.Helper()
	b, err := g.D.NewBuffer(length, opts)
	if err != nil {
		g.T.Fatal(err)
	}
	g.T.Cleanup(b.Release)
	return b
}

// CommandBuffer makes a command buffer on the queue; the test may release
// it before it ends (a second Release does nothing).
func (g *GPU) CommandBuffer() *mtl.CommandBuffer {
	g.T.Helper()
	cb, err := g.Q.CommandBuffer()
	if err != nil {
		g.T.Fatal(err)
	}
	g.T.Cleanup(cb.Release)
	return cb
}

// Encoder makes a command buffer and a compute command encoder on it.
func (g *GPU) Encoder() (*mtl.CommandBuffer, *mtl.ComputeCommandEncoder) {
	g.T.Helper()
	return encoderOn(g, (*mtl.CommandBuffer).ComputeCommandEncoder)
}

// Blit makes a command buffer and a blit command encoder on it.
func (g *GPU) Blit() (*mtl.CommandBuffer, *mtl.BlitCommandEncoder) {
	g.T.Helper()
	return encoderOn(g, (*mtl.CommandBuffer).BlitCommandEncoder)
}

// encoderOn makes a command buffer and, with start, an encoder on it.
func encoderOn[E any](g *GPU, start func(*mtl.CommandBuffer) (E, error)) (*mtl.CommandBuffer, E) {
	g.T.Helper()
	cb := g.CommandBuffer()
	e, err := start(cb)
	if err != nil {
		g.T.Fatal(err)
	}
	return cb, e
}
