package emu_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/internal/floats"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// The tests of this package use the emulated device only through package
// mtl, as a program uses a GPU: device, library, function, pipeline,
// queue, command buffer, encoder, commit, wait, then status, error and
// buffer contents. Their kernels are the .metal files in testdata.

// orders are the scheduling orders the tests run kernels in.
var orders = []emu.Options{
	{Order: msl.Forward},
	{Order: msl.Reverse},
	{Order: msl.Shuffled, Seed: 0x9e3779b97f4a7c15},
}

// source returns the text of a kernel file in testdata.
func source(t testing.TB, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// gpu is an emulated device and a command queue (testdevice.GPU), with
// the kernels of testdata.
type gpu struct{ *testdevice.GPU }

// newGPU returns an emulated device with opts and a queue on it, and
// checks when the test ends that everything the test made was released
// (testdevice.NewEmulated): call it before anything else in the test.
func newGPU(t *testing.T, opts emu.Options) *gpu {
	t.Helper()
	return &gpu{testdevice.NewEmulated(t, opts)}
}

// pipeline compiles a testdata file and makes the pipeline of one of its
// kernels, released when the test ends.
func (g *gpu) pipeline(file, kernel string) *mtl.ComputePipelineState {
	g.T.Helper()
	return g.Pipeline(source(g.T, file), mtl.CompileOptions{}, kernel)
}

// buffer makes a shared buffer of n elements of T, released when the test
// ends, and returns it with its contents.
func buffer[T any](g *gpu, n int) (*mtl.Buffer, []T) {
	g.T.Helper()
	var zero T
	b := g.Buffer(n*int(unsafe.Sizeof(zero)), mtl.ResourceStorageModeShared)
	return b, mtl.Slice[T](b)
}

// run runs one command buffer of encode's work through
// mtl.CommandQueue.Run and returns Run's error: the encoder's refusal or
// the command buffer's error.
func (g *gpu) run(encode func(enc *mtl.ComputeCommandEncoder)) error {
	return g.Q.Run(func(enc *mtl.ComputeCommandEncoder) error {
		encode(enc)
		return nil
	})
}

// ended returns the error of a command buffer that was committed and
// waited for, after checking that its status agrees: Completed without an
// error, or Error with one.
func ended(t testing.TB, cb *mtl.CommandBuffer) error {
	t.Helper()
	st, err := cb.Status(), cb.Error()
	if (st != mtl.CommandBufferStatusCompleted || err != nil) && (st != mtl.CommandBufferStatusError || err == nil) {
		t.Fatalf("command buffer status %v with error %v", st, err)
	}
	return err
}

// completed fails the test unless the command buffer behind err (from
// gpu.run, or ended) completed without an error.
func completed(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("command buffer failed: %v", err)
	}
}

// failed checks that err (from gpu.run, or ended) is a Metal command
// buffer error of the given code, whose description holds every one of
// want; it returns the description.
func failed(t testing.TB, err error, code int, want ...string) string {
	t.Helper()
	var oe *objc.Error
	if !errors.As(err, &oe) {
		t.Fatalf("command buffer error %v (%T) carries no NSError", err, err)
	}
	if oe.Domain != "MTLCommandBufferErrorDomain" || oe.Code != code {
		t.Errorf("error domain %q code %d, want MTLCommandBufferErrorDomain %d", oe.Domain, oe.Code, code)
	}
	for _, w := range want {
		if !strings.Contains(oe.Description, w) {
			t.Errorf("error %q does not contain %q", oe.Description, w)
		}
	}
	return oe.Description
}

// Metal's command buffer error codes.
const (
	errorInternal  = int(mtl.CommandBufferErrorInternal)
	errorTimeout   = int(mtl.CommandBufferErrorTimeout)
	errorPageFault = int(mtl.CommandBufferErrorPageFault)
)

// compileError compiles src and returns the compiler's log, failing the
// test unless compilation failed with a *mtl.CompileError.
func (g *gpu) compileError(src string) string {
	g.T.Helper()
	lib, err := g.D.NewLibraryWithSource(src, mtl.CompileOptions{})
	if err == nil {
		lib.Release()
		g.T.Fatalf("the source compiled; want a compile error")
	}
	var ce *mtl.CompileError
	if !errors.As(err, &ce) {
		g.T.Fatalf("error %v (%T) is not a *mtl.CompileError", err, err)
	}
	return ce.Log
}

// newScaleGPU is newGPU with the default options, the pipeline of
// vector_add.metal's scale kernel and a buffer of 64 floats.
func newScaleGPU(t *testing.T) (g *gpu, scale *mtl.ComputePipelineState, x *mtl.Buffer, xv []float32) {
	t.Helper()
	g = newGPU(t, emu.Options{})
	scale = g.pipeline("vector_add.metal", "scale")
	x, xv = buffer[float32](g, 64)
	return g, scale, x, xv
}

// setScale sets up vector_add.metal's scale kernel, pipeline p, to
// multiply x by s in place: the dispatch is the caller's.
func setScale(enc *mtl.ComputeCommandEncoder, p *mtl.ComputePipelineState, x *mtl.Buffer, s float32) {
	enc.SetComputePipelineState(p)
	enc.SetBuffer(x, 0, 0)
	enc.SetBytes(f32Bytes(s), 1)
}

func size1(n int) mtl.Size { return mtl.Size{Width: n, Height: 1, Depth: 1} }

// u32Bytes is the little-endian encoding of v, for SetBytes.
func u32Bytes(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

// f32Bytes, the poison nan and poison come from package floats.
var (
	f32Bytes = floats.Bytes
	nan      = floats.NaN
	poison   = floats.Poison
)

// poisonU32 fills x with a value no test kernel writes.
func poisonU32(x []uint32) {
	for i := range x {
		x[i] = 0xDEADBEEF
	}
}

// halfNaN is a half-precision quiet NaN.
const halfNaN = 0x7e00

func poisonHalf(x []uint16) {
	for i := range x {
		x[i] = halfNaN
	}
}
