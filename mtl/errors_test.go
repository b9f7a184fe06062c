package mtl_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/half"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// wantErr checks that err matches every target of errors.Is and holds
// every one of want.
func wantErr(t *testing.T, what string, err error, targets []error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Errorf("%s: %v does not match %v", what, err, target)
		}
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not mention %q", what, err, w)
		}
	}
}

var (
	invalidArg  = []error{mtl.ErrInvalidArgument}
	releasedArg = []error{mtl.ErrInvalidArgument, mtl.ErrReleased}
	releasedObj = []error{mtl.ErrReleased}
)

// Every argument an encoder refuses is an error wrapping
// ErrInvalidArgument whose message names the argument and its numbers.
func TestEncoderRefusalsWrapErrInvalidArgument(t *testing.T) {
	g := newGPU(t)
	p, x := g.pipeline("fill"), g.Buffer(64, 0)
	gone := g.Buffer(64, 0)
	gone.Release()
	for _, c := range []struct {
		name    string
		encode  func(e *mtl.ComputeCommandEncoder)
		targets []error
		want    []string
	}{
		{"index", func(e *mtl.ComputeCommandEncoder) { e.SetBuffer(x, 0, 31) }, invalidArg, []string{"SetBuffer", "[31, 32)", "[0, 31)"}},
		{"offset", func(e *mtl.ComputeCommandEncoder) { e.SetBuffer(x, 68, 0) }, invalidArg, []string{"offset 68", "64 bytes"}},
		{"nil buffer", func(e *mtl.ComputeCommandEncoder) { e.SetBuffer(nil, 0, 2) }, invalidArg, []string{"nil buffer for index 2"}},
		{"released buffer", func(e *mtl.ComputeCommandEncoder) { e.SetBuffers([]*mtl.Buffer{x, gone}, []int{0, 0}, 0) }, releasedArg, []string{"SetBuffers", "buffer for index 1 was released"}},
		{"bytes", func(e *mtl.ComputeCommandEncoder) { e.SetBytes(make([]byte, 4097), 1) }, invalidArg, []string{"4097 bytes", "4096"}},
		{"threadgroup memory", func(e *mtl.ComputeCommandEncoder) { e.SetThreadgroupMemoryLength(24, 0) }, invalidArg, []string{"length 24"}},
		{"no pipeline", func(e *mtl.ComputeCommandEncoder) { e.DispatchThreads(mtl.Sz(4, 1, 1), mtl.Sz(4, 1, 1)) }, invalidArg, []string{"no compute pipeline"}},
		{"negative size", func(e *mtl.ComputeCommandEncoder) {
			e.SetComputePipelineState(p)
			e.DispatchThreads(mtl.Sz(-4, 1, 1), mtl.Sz(4, 1, 1))
		}, invalidArg, []string{"{-4 1 1}", "not positive"}},
		{"value with a pointer", func(e *mtl.ComputeCommandEncoder) {
			mtl.SetValue(e, struct {
				N    int32
				Name string
			}{}, 1)
		}, invalidArg, []string{"SetValue", "field Name: a string"}},
		{"value too large", func(e *mtl.ComputeCommandEncoder) { mtl.SetValue(e, [1025]float32{}, 1) }, invalidArg, []string{"4100 bytes at index 1"}},
	} {
		cb, e := g.Encoder()
		c.encode(e)
		wantErr(t, c.name, e.EndEncoding(), c.targets, c.want...)
		cb.Release()
	}
}

// A method of a released object, and an object released before it is
// passed, is an error saying so, wrapping ErrReleased.
func TestReleasedObjects(t *testing.T) {
	g := newGPU(t)
	lib, err := g.D.NewLibraryWithSource(kernelsSource, mtl.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := lib.NewFunction("fill")
	if err != nil {
		t.Fatal(err)
	}
	lib.Release()
	_, err = lib.NewFunction("fill")
	wantErr(t, "Library.NewFunction", err, releasedObj, "Library.NewFunction: the library was released")
	_, err = lib.NewFunctionWithConstants("fill", nil)
	wantErr(t, "Library.NewFunctionWithConstants", err, releasedObj, "the library was released")
	fn.Release()
	_, err = g.D.NewComputePipelineState(fn)
	wantErr(t, "NewComputePipelineState", err, releasedArg, `the function "fill" was released`)

	b := g.Buffer(64, 0)
	b.Release()
	wantErr(t, "Buffer.DidModifyRange", b.DidModifyRange(0, 4), releasedObj, "Buffer.DidModifyRange: the buffer was released")
	wantErr(t, "Buffer.SetLabel", b.SetLabel("x"), releasedObj, "Buffer.SetLabel: the buffer was released")

	q, err := g.D.NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	q.Release()
	_, err = q.CommandBuffer()
	wantErr(t, "CommandQueue.CommandBuffer", err, releasedObj, "the command queue was released")
	err = q.Run(func(*mtl.ComputeCommandEncoder) error { return nil })
	wantErr(t, "CommandQueue.Run", err, releasedObj, "CommandQueue.Run: the command queue was released")

	cb := g.CommandBuffer()
	cb.Release()
	_, err = cb.ComputeCommandEncoder()
	wantErr(t, "ComputeCommandEncoder", err, releasedObj, "CommandBuffer.ComputeCommandEncoder: the command buffer was released")
	_, err = cb.BlitCommandEncoder()
	wantErr(t, "BlitCommandEncoder", err, releasedObj, "CommandBuffer.BlitCommandEncoder: the command buffer was released")

	d, err := emu.NewDevice()
	if err != nil {
		t.Fatal(err)
	}
	if d.Released() {
		t.Error("a new device reports itself released")
	}
	d.Release()
	if !d.Released() {
		t.Error("a released device does not report itself released")
	}
	for _, c := range []struct {
		method string
		call   func() error
	}{
		{"Device.NewBuffer", func() error { _, err := d.NewBuffer(16, 0); return err }},
		{"Device.NewBufferWithBytes", func() error { _, err := d.NewBufferWithBytes([]byte{1}, 0); return err }},
		{"Device.NewBufferNoCopy", func() error { _, err := d.NewBufferNoCopy(16, 0); return err }},
		{"Device.NewCommandQueue", func() error { _, err := d.NewCommandQueue(); return err }},
		{"Device.NewLibraryWithSource", func() error { _, err := d.NewLibraryWithSource(kernelsSource, mtl.CompileOptions{}); return err }},
		{"Device.NewComputePipelineState", func() error { _, err := d.NewComputePipelineState(nil); return err }},
		{"NewBufferFromSlice", func() error { _, err := mtl.NewBufferFromSlice(d, []float32{1}, 0); return err }},
	} {
		wantErr(t, c.method, c.call(), releasedObj, c.method+": the device was released")
	}
}

// A buffer, a pipeline or a function of another device is refused, the
// error naming both devices.
func TestObjectsOfAnotherDevice(t *testing.T) {
	g := newGPU(t)
	other := newGPU(t)
	mine, theirs := g.pipeline("fill"), other.pipeline("fill")
	x, y := g.Buffer(64, 0), other.Buffer(64, 0)
	if x.Device() != g.D || theirs.Device() != other.D || g.Q.Device() != g.D {
		t.Error("Device() does not return the device that made the object")
	}
	for _, c := range []struct {
		name   string
		encode func(e *mtl.ComputeCommandEncoder)
		want   string
	}{
		{"pipeline", func(e *mtl.ComputeCommandEncoder) { e.SetComputePipelineState(theirs) }, "SetComputePipelineState: the pipeline belongs to device"},
		{"buffer", func(e *mtl.ComputeCommandEncoder) { e.SetBuffer(y, 0, 0) }, "SetBuffer: the buffer for index 0 belongs to device"},
		{"buffers", func(e *mtl.ComputeCommandEncoder) { e.SetBuffers([]*mtl.Buffer{x, y}, []int{0, 0}, 0) }, "SetBuffers: the buffer for index 1 belongs to device"},
	} {
		cb, e := g.Encoder()
		e.SetComputePipelineState(mine)
		sends := e.Sends()
		c.encode(e)
		if e.Sends() != sends {
			t.Errorf("%s: the refused argument was sent", c.name)
		}
		err := e.EndEncoding()
		wantErr(t, c.name, err, invalidArg, c.want, "the encoder to device", emu.Name)
		// Both devices are named, and told apart by their registry IDs.
		for _, d := range []*mtl.Device{g.D, other.D} {
			if id := fmt.Sprintf("(registry ID %#x)", d.RegistryID()); err != nil && !strings.Contains(err.Error(), id) {
				t.Errorf("%s: %q does not name the device %s", c.name, err, id)
			}
		}
		cb.Release()
	}
	cb, blit := g.Blit()
	blit.CopyFromBuffer(y, 0, x, 0, 4)
	wantErr(t, "CopyFromBuffer", blit.EndEncoding(), invalidArg, "CopyFromBuffer: the source buffer belongs to device")
	cb.Release()

	lib, err := other.D.NewLibraryWithSource(kernelsSource, mtl.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Release()
	fn := testdevice.Function(t, lib, "fill", nil)
	defer fn.Release()
	_, err = g.D.NewComputePipelineState(fn)
	wantErr(t, "NewComputePipelineState", err, invalidArg, `the function "fill" belongs to device`)
}

// A failed command buffer is a *CommandBufferError whose message names
// Metal's code, and which still unwraps to the NSError it was read from.
func TestCommandBufferError(t *testing.T) {
	g := newGPU(t)
	p, x := g.pipeline("fill"), g.Buffer(64, 0)
	err := g.Q.Run(func(e *mtl.ComputeCommandEncoder) error {
		e.SetComputePipelineState(p)
		e.SetBuffer(x, 0, 0)
		mtl.SetValue(e, float32(1), 1)
		e.DispatchThreads(mtl.Sz(64, 1, 1), mtl.Sz(32, 1, 1)) // 64 floats into 16
		return nil
	})
	var cbErr *mtl.CommandBufferError
	if !errors.As(err, &cbErr) {
		t.Fatalf("error %v (%T) is not a *mtl.CommandBufferError", err, err)
	}
	if cbErr.Domain != mtl.CommandBufferErrorDomain || cbErr.Code != mtl.CommandBufferErrorPageFault {
		t.Errorf("domain %q code %v, want %s %v", cbErr.Domain, cbErr.Code, mtl.CommandBufferErrorDomain, mtl.CommandBufferErrorPageFault)
	}
	if !strings.Contains(err.Error(), "(MTLCommandBufferErrorPageFault)") || !strings.Contains(err.Error(), "out-of-bounds") {
		t.Errorf("message %q does not name the code and the fault", err)
	}
	var oe *objc.Error
	if !errors.As(err, &oe) || oe.Code != 3 {
		t.Errorf("error %v does not unwrap to the NSError", err)
	}
	for code, name := range map[mtl.CommandBufferErrorCode]string{
		0: "MTLCommandBufferErrorNone", 1: "MTLCommandBufferErrorInternal", 2: "MTLCommandBufferErrorTimeout",
		3: "MTLCommandBufferErrorPageFault", 4: "MTLCommandBufferErrorAccessRevoked", 7: "MTLCommandBufferErrorNotPermitted",
		8: "MTLCommandBufferErrorOutOfMemory", 9: "MTLCommandBufferErrorInvalidResource", 10: "MTLCommandBufferErrorMemoryless",
		11: "MTLCommandBufferErrorDeviceRemoved", 12: "MTLCommandBufferErrorStackOverflow", 5: "MTLCommandBufferError(5)",
	} {
		if code.String() != name {
			t.Errorf("code %d is %q, want %q", int(code), code, name)
		}
	}
	other := &mtl.CommandBufferError{Domain: "SomeDomain", Code: 7, Description: "denied"}
	if got := other.Error(); got != "mtl: command buffer failed: denied (SomeDomain 7)" {
		t.Errorf("an error of another domain reads %q", got)
	}
}

// NewBufferFromSlice copies a slice of any pointer-free type; SetValue
// passes a scalar or a struct; both refuse types holding pointers.
func TestBufferFromSliceAndSetValue(t *testing.T) {
	g := newGPU(t)
	b, err := mtl.NewBufferFromSlice(g.D, []half.BFloat16{half.ToBFloat16(1.5), half.ToBFloat16(-2)}, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if got := mtl.Slice[half.BFloat16](b); b.Length() != 4 || len(got) != 2 || got[0].Float32() != 1.5 || got[1].Float32() != -2 {
		t.Errorf("buffer of %d bytes holds %v", b.Length(), got)
	}
	type pair struct {
		A int32
		B float32
	}
	pb, err := mtl.NewBufferFromSlice(g.D, []pair{{1, 2}, {3, 4}, {5, 6}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Release()
	if got := mtl.Slice[pair](pb); len(got) != 3 || got[2] != (pair{5, 6}) {
		t.Errorf("struct buffer holds %v", got)
	}
	_, err = mtl.NewBufferFromSlice(g.D, []*float32{nil}, 0)
	wantErr(t, "slice of pointers", err, invalidArg, "NewBufferFromSlice", "*float32 holds a ptr")
	_, err = mtl.NewBufferFromSlice(g.D, []float32{}, 0)
	wantErr(t, "empty slice", err, invalidArg, "float32 slice is empty")

	// fill writes v + i: v through SetValue.
	p, x := g.pipeline("fill"), g.Buffer(4*8, mtl.ResourceStorageModeShared)
	err = g.Q.Run(func(e *mtl.ComputeCommandEncoder) error {
		e.SetComputePipelineState(p)
		e.SetBuffer(x, 0, 0)
		mtl.SetValue(e, float32(10), 1)
		e.DispatchThreads(mtl.Sz(8, 1, 1), mtl.Sz(8, 1, 1))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range mtl.Slice[float32](x) {
		if v != 10+float32(i) {
			t.Fatalf("x[%d] = %v, want %v", i, v, 10+float32(i))
		}
	}
	// SetValue allocates no more than SetBytes of the same bytes, whose
	// allocations are the emulated device's own.
	cb, e := g.Encoder()
	e.SetComputePipelineState(p)
	raw := []byte{1, 0, 0, 0, 0, 0, 0, 0x40}
	direct := testing.AllocsPerRun(100, func() { e.SetBytes(raw, 1) })
	if n := testing.AllocsPerRun(100, func() { mtl.SetValue(e, pair{1, 2}, 1) }); n > direct {
		t.Errorf("SetValue allocates %v times per call, SetBytes %v", n, direct)
	}
	if err := e.EndEncoding(); err != nil {
		t.Error(err)
	}
	cb.Release()
}

// Function constants take package half's 16-bit types.
func TestFunctionConstantsOfHalfTypes(t *testing.T) {
	var v mtl.FunctionConstantValues
	for _, x := range []any{half.ToFloat16(1), half.ToBFloat16(1)} {
		if err := v.SetAtIndex(0, x); err != nil {
			t.Errorf("%T: %v", x, err)
		}
	}
	err := v.SetAtIndex(0, uintptr(1))
	wantErr(t, "uintptr constant", err, invalidArg, "uintptr", "half.Float16 or half.BFloat16")
	wantErr(t, "empty name", v.SetWithName("", int32(1)), invalidArg, "name is empty")
}
