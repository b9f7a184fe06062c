package mtl_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/floats"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// kernelsSource holds the fill and add_into kernels.
const kernelsSource = testdevice.BindingKernels

func size(w, h, d int) mtl.Size { return mtl.Size{Width: w, Height: h, Depth: d} }

// encodeFill returns an encode function, for CommandQueue.Run, that runs
// the fill kernel over the first n floats of x: x[i] = 1 + i.
var encodeFill = testdevice.EncodeFill

// one is 1.0 as a float's bytes, for SetBytes.
var one = []byte{0, 0, 0x80, 0x3f}

// newPipeline makes the pipeline of one of kernelsSource's kernels, the
// caller's to release.
func newPipeline(t testing.TB, d *mtl.Device, name string) *mtl.ComputePipelineState {
	t.Helper()
	return testdevice.Pipeline(t, d, kernelsSource, mtl.CompileOptions{LanguageVersion: mtl.LanguageVersion3_1}, name)
}

// gpu is an emulated device and a command queue on it (testdevice.GPU),
// with the kernels of kernelsSource.
type gpu struct{ *testdevice.GPU }

// newGPU returns an emulated device and a queue, and checks when the test
// ends that everything the test made was released.
func newGPU(t testing.TB) *gpu {
	t.Helper()
	return &gpu{testdevice.NewEmulated(t, emu.Options{})}
}

// pipeline makes the pipeline of one of kernelsSource's kernels, released
// when the test ends.
func (g *gpu) pipeline(name string) *mtl.ComputePipelineState {
	g.T.Helper()
	return g.Pipeline(kernelsSource, mtl.CompileOptions{LanguageVersion: mtl.LanguageVersion3_1}, name)
}

func TestDeviceProperties(t *testing.T) {
	d := testdevice.Emulated(t, emu.Options{})
	if d.Name() == "" || d.RegistryID() == 0 {
		t.Errorf("name %q, registry ID %d", d.Name(), d.RegistryID())
	}
	if !d.HasUnifiedMemory() || d.RecommendedMaxWorkingSetSize() == 0 || d.MaxBufferLength() < 1<<30 {
		t.Errorf("unified %v, working set %d, max buffer %d", d.HasUnifiedMemory(), d.RecommendedMaxWorkingSetSize(), d.MaxBufferLength())
	}
	if !d.SupportsFamily(mtl.GPUFamilyApple7) || d.SupportsFamily(mtl.GPUFamilyMac2) {
		t.Errorf("SupportsFamily: Apple7 %v, Mac2 %v", d.SupportsFamily(mtl.GPUFamilyApple7), d.SupportsFamily(mtl.GPUFamilyMac2))
	}
}

func TestBuffers(t *testing.T) {
	d := newGPU(t).D
	src := []byte("puremetal buffers hold bytes \x00\x01\x02")
	b, err := d.NewBufferWithBytes(src, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Contents(), src) || b.Length() != len(src) {
		t.Errorf("contents %q, length %d", b.Contents(), b.Length())
	}
	nc, err := d.NewBufferNoCopy(100, mtl.ResourceStorageModeManaged)
	if err != nil {
		t.Fatal(err)
	}
	if nc.Length()%4096 != 0 || len(mtl.Slice[float32](nc)) != nc.Length()/4 {
		t.Errorf("no-copy length %d not rounded to pages, or typed view wrong", nc.Length())
	}
	if err := nc.DidModifyRange(0, 16); err != nil {
		t.Error(err)
	}
	if err := nc.DidModifyRange(10, nc.Length()); err == nil {
		t.Error("DidModifyRange past the end gave no error")
	}
	priv, err := d.NewBuffer(64, mtl.ResourceStorageModePrivate)
	if err != nil {
		t.Fatal(err)
	}
	if priv.Contents() != nil {
		t.Error("a private buffer has CPU-visible contents")
	}
	if err := b.SetLabel("weights: layer 0 ✓"); err != nil {
		t.Fatal(err)
	}
	if got := b.Label(); got != "weights: layer 0 ✓" {
		t.Errorf("label %q", got)
	}
	if _, err := d.NewBuffer(0, 0); err == nil || !strings.Contains(err.Error(), "0") {
		t.Errorf("zero-length buffer: %v", err)
	}
	if _, err := d.NewBufferNoCopy(64, mtl.ResourceStorageModePrivate); err == nil {
		t.Error("a private no-copy buffer was made")
	}
	for _, x := range []*mtl.Buffer{b, nc, priv} {
		x.Release()
		x.Release()
	}
}

func TestLibraryErrors(t *testing.T) {
	d := testdevice.Emulated(t, emu.Options{})
	lib, err := d.NewLibraryWithSource(kernelsSource, mtl.CompileOptions{FastMath: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Release()
	if names := lib.FunctionNames(); strings.Join(names, ",") != "add_into,fill" {
		t.Errorf("function names %v", names)
	}
	_, err = lib.NewFunction("fil")
	if err == nil || !strings.Contains(err.Error(), `"fil"`) || !strings.Contains(err.Error(), "add_into, fill") {
		t.Errorf("missing function error %v does not name it and list the library's functions", err)
	}
	_, err = d.NewLibraryWithSource("kernel void k(device float *x [[buffer(0)]]) { x[0] = undefined_name; }", mtl.CompileOptions{})
	var ce *mtl.CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Log, "undefined_name") {
		t.Errorf("compile error %v does not hold the compiler's log", err)
	}
	if _, err := d.NewLibraryWithSource("a\x00b", mtl.CompileOptions{}); err == nil {
		t.Error("source with a NUL byte accepted")
	}
	if _, err := d.NewComputePipelineState(nil); err == nil {
		t.Error("pipeline from a nil function")
	}
}

// TestEncoderRefusesBadArguments shows that a bad argument is recorded,
// nothing after it is sent, and EndEncoding reports it.
func TestEncoderRefusesBadArguments(t *testing.T) {
	g := newGPU(t)
	p, x, q := g.pipeline("fill"), g.Buffer(4*64, 0), g.Q
	for _, tc := range []struct {
		name string
		bad  func(e *mtl.ComputeCommandEncoder)
		want string
	}{
		{"index", func(e *mtl.ComputeCommandEncoder) { e.SetBuffer(x, 0, 31) }, "[31, 32)"},
		{"offset", func(e *mtl.ComputeCommandEncoder) { e.SetBuffer(x, 300, 0) }, "offset 300"},
		{"bytes", func(e *mtl.ComputeCommandEncoder) { e.SetBytes(make([]byte, 5000), 1) }, "5000 bytes"},
		{"offsets", func(e *mtl.ComputeCommandEncoder) { e.SetBuffers([]*mtl.Buffer{x}, nil, 0) }, "1 buffers but 0 offsets"},
		{"group", func(e *mtl.ComputeCommandEncoder) {
			e.SetComputePipelineState(p)
			e.DispatchThreadgroups(size(1, 1, 1), size(2048, 1, 1))
		}, "2048 threads"},
		{"pipeline", func(e *mtl.ComputeCommandEncoder) { e.DispatchThreads(size(1, 1, 1), size(1, 1, 1)) }, "no compute pipeline"},
	} {
		cb, _ := q.CommandBuffer()
		e, _ := cb.ComputeCommandEncoder()
		tc.bad(e)
		sends := e.Sends()
		e.SetComputePipelineState(p)
		e.SetBuffer(x, 0, 0)
		e.DispatchThreads(size(64, 1, 1), size(64, 1, 1))
		if e.Sends() != sends {
			t.Errorf("%s: %d messages sent after the bad argument", tc.name, e.Sends()-sends)
		}
		err := e.EndEncoding()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: EndEncoding error %v, want one mentioning %q", tc.name, err, tc.want)
		}
		cb.Release()
	}
}

// TestDispatchesRunInOrder runs two dependent dispatches with a barrier
// and checks the command buffer's status and the result. It goes through
// the command buffer's own methods, the path of callers that keep several
// command buffers in flight; CommandQueue.Run is that sequence in one call.
func TestDispatchesRunInOrder(t *testing.T) {
	g := newGPU(t)
	fill, add := g.pipeline("fill"), g.pipeline("add_into")
	const n = 96
	a, b := g.Buffer(4*n, 0), g.Buffer(4*n, 0)
	cb, _ := g.Q.CommandBuffer()
	defer cb.Release()
	if err := cb.SetLabel("token 0"); err != nil || cb.Label() != "token 0" {
		t.Errorf("label %q, %v", cb.Label(), err)
	}
	e, _ := cb.ComputeCommandEncoder()
	e.SetComputePipelineState(fill)
	e.SetBuffer(a, 0, 0)
	e.SetBytes(one, 1)
	e.DispatchThreads(size(n, 1, 1), size(32, 1, 1))
	e.SetBuffer(b, 0, 0)
	e.SetBytes([]byte{0, 0, 0, 0x40}, 1) // 2.0f
	e.DispatchThreads(size(n, 1, 1), size(32, 1, 1))
	e.MemoryBarrier(mtl.BarrierScopeBuffers)
	e.SetComputePipelineState(add)
	e.SetBuffers([]*mtl.Buffer{a, b}, []int{0, 0}, 0)
	e.DispatchThreadgroups(size(n/32, 1, 1), size(32, 1, 1))
	if err := e.EndEncoding(); err != nil {
		t.Fatal(err)
	}
	if cb.Status() != mtl.CommandBufferStatusNotEnqueued {
		t.Errorf("status before commit %v", cb.Status())
	}
	cb.Commit()
	cb.WaitUntilCompleted()
	if cb.Status() != mtl.CommandBufferStatusCompleted {
		t.Fatalf("status %v: %v", cb.Status(), cb.Error())
	}
	got := mtl.Slice[float32](b)
	for i := range n {
		if want := float32(3 + 2*i); got[i] != want {
			t.Fatalf("b[%d] = %v, want %v", i, got[i], want)
		}
	}
}

// BenchmarkEncodeDispatch measures the host cost of encoding one dispatch
// shaped like a GDN decode step: nine buffers in one setBuffers, 36 bytes
// of parameters, one dispatchThreadgroups, pipeline unchanged. On the
// emulated device each send also runs a Go method, so this is an upper
// bound of the binding's own cost.
func BenchmarkEncodeDispatch(b *testing.B) {
	g := newGPU(b)
	p := g.pipeline("fill")
	bufs := make([]*mtl.Buffer, 9)
	offs := make([]int, 9)
	for i := range bufs {
		bufs[i] = g.Buffer(4096, 0)
	}
	params := make([]byte, 36)
	cb, _ := g.Q.CommandBuffer()
	defer cb.Release()
	e, _ := cb.ComputeCommandEncoder()
	e.SetComputePipelineState(p)
	start := e.Sends()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		e.SetComputePipelineState(p)
		e.SetBuffers(bufs, offs, 0)
		e.SetBytes(params, 8)
		e.DispatchThreadgroups(size(32, 32, 1), size(32, 4, 1))
	}
	b.StopTimer()
	b.ReportMetric(float64(e.Sends()-start)/float64(b.N), "sends/dispatch")
	e.EndEncoding()
}

// BenchmarkRun measures the host cost of an empty CommandQueue.Run: make,
// end, commit and wait for one command buffer, in one pool.
func BenchmarkRun(b *testing.B) {
	g := newGPU(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Q.Run(func(*mtl.ComputeCommandEncoder) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func TestQueueRun(t *testing.T) {
	g := newGPU(t)
	d, q, fill := g.D, g.Q, g.pipeline("fill")
	const n = 64
	x := g.Buffer(4*n, mtl.ResourceStorageModeShared)
	xs := mtl.Slice[float32](x)
	poison := func() {
		for i := range xs {
			xs[i] = -1
		}
	}
	encodeFill := encodeFill(fill, x, n)

	poison()
	if err := q.Run(encodeFill); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for i, got := range xs {
		if got != 1+float32(i) {
			t.Fatalf("after Run x[%d] = %v, want %v", i, got, 1+float32(i))
		}
	}
	poison()
	if secs, err := q.RunTimed(encodeFill); err != nil || secs < 0 {
		t.Fatalf("RunTimed: %v s, %v", secs, err)
	}
	if xs[n-1] != n {
		t.Errorf("after RunTimed x[%d] = %v, want %d", n-1, xs[n-1], n)
	}

	// encode's own error is returned and nothing is committed.
	poison()
	mine := errors.New("caller's error")
	err := q.Run(func(enc *mtl.ComputeCommandEncoder) error {
		if err := encodeFill(enc); err != nil {
			return err
		}
		return mine
	})
	if !errors.Is(err, mine) {
		t.Errorf("Run with a failing encode returned %v, want %v", err, mine)
	}
	if xs[0] != -1 {
		t.Errorf("Run committed after encode failed: x[0] = %v", xs[0])
	}

	// An argument the encoder refused is returned and nothing is committed.
	err = q.Run(func(enc *mtl.ComputeCommandEncoder) error {
		enc.SetComputePipelineState(fill)
		enc.SetBuffer(x, 0, 0)
		enc.SetBytes(nil, 1)
		enc.DispatchThreads(size(n, 1, 1), size(32, 1, 1))
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "SetBytes") {
		t.Errorf("Run with a refused argument returned %v, want the SetBytes error", err)
	}
	if xs[0] != -1 {
		t.Errorf("Run committed after the encoder refused an argument: x[0] = %v", xs[0])
	}

	released, err := d.NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	released.Release()
	if err := released.Run(encodeFill); err == nil {
		t.Error("Run on a released queue returned nil")
	}
}

// RunCommandBuffer runs a command buffer of several encoders, and commits
// nothing when encode fails, when an encoder refused an argument though
// encode ignored the error, or when encode leaves an encoder open (which it
// ends); every object it made is released on each path.
func TestQueueRunCommandBuffer(t *testing.T) {
	g := newGPU(t)
	q, fill := g.Q, g.pipeline("fill")
	const n = 64
	x, saved := g.Buffer(4*n, mtl.ResourceStorageModeShared), g.Buffer(4*n, mtl.ResourceStorageModeShared)
	xs, ss := mtl.Slice[float32](x), mtl.Slice[float32](saved)
	before := emu.LiveObjects()
	fillInto := func(cb *mtl.CommandBuffer) (*mtl.ComputeCommandEncoder, error) {
		e, err := cb.ComputeCommandEncoder()
		if err != nil {
			return nil, err
		}
		return e, encodeFill(fill, x, n)(e)
	}
	check := func(what string, got []float32, want func(i int) float32) {
		t.Helper()
		for i, v := range got {
			if v != want(i) {
				t.Fatalf("%s[%d] = %v, want %v", what, i, v, want(i))
			}
		}
	}
	filled := func(i int) float32 { return 1 + float32(i) }
	poisoned := func(int) float32 { return -1 }

	// Fill x and copy it to saved: two encoders in one command buffer.
	err := q.RunCommandBuffer(func(cb *mtl.CommandBuffer) error {
		e, err := fillInto(cb)
		if err == nil {
			err = e.EndEncoding()
		}
		if err != nil {
			return err
		}
		blit, err := cb.BlitCommandEncoder()
		if err != nil {
			return err
		}
		blit.CopyFromBuffer(x, 0, saved, 0, 4*n)
		return blit.EndEncoding()
	})
	if err != nil {
		t.Fatalf("RunCommandBuffer: %v", err)
	}
	check("saved", ss, filled)
	floats.Fill(xs, -1)
	runBlit(t, q, 1, func(_ *mtl.CommandBuffer, e *mtl.BlitCommandEncoder) { e.CopyFromBuffer(saved, 0, x, 0, 4*n) })
	check("x restored", xs, filled)

	// Each failure below would fill x if the command buffer ran.
	floats.Fill(xs, -1)
	mine := errors.New("caller's error")
	for _, tc := range []struct {
		name   string
		encode func(cb *mtl.CommandBuffer) error
		want   string
	}{
		{"encode fails", func(cb *mtl.CommandBuffer) error {
			if err := testdevice.EncodeFillIn(cb, fill, x, n); err != nil {
				return err
			}
			return mine
		}, "caller's error"},
		{"refusal ignored", func(cb *mtl.CommandBuffer) error {
			e, err := fillInto(cb)
			if err != nil {
				return err
			}
			e.SetBytes(nil, 1)
			e.EndEncoding() // its error not looked at
			return nil
		}, "SetBytes"},
		{"encoder left open", func(cb *mtl.CommandBuffer) error {
			_, err := fillInto(cb)
			return err
		}, "RunCommandBuffer: an encoder was left open"},
		{"dispatch after EndEncoding", func(cb *mtl.CommandBuffer) error {
			e, err := fillInto(cb)
			if err != nil {
				return err
			}
			if err := e.EndEncoding(); err != nil {
				return err
			}
			e.DispatchThreads(size(n, 1, 1), size(n, 1, 1)) // its refusal not looked at
			return nil
		}, "DispatchThreads: encoder used after EndEncoding"},
	} {
		err := q.RunCommandBuffer(tc.encode)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: RunCommandBuffer returned %v, want an error mentioning %q", tc.name, err, tc.want)
		}
		if tc.name == "encode fails" && !errors.Is(err, mine) {
			t.Errorf("%s: %v does not wrap encode's error", tc.name, err)
		}
		check(tc.name+": x, which a commit would fill,", xs, poisoned)
	}
	if after := emu.LiveObjects(); after != before {
		t.Errorf("live objects %d before, %d after", before, after)
	}

	released, err := g.D.NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	released.Release()
	err = released.RunCommandBuffer(func(*mtl.CommandBuffer) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "CommandQueue.RunCommandBuffer: the command queue was released") {
		t.Errorf("RunCommandBuffer on a released queue returned %v", err)
	}
}

// TestEncoderRefusesAppleViolations covers arguments that Metal's rules
// forbid even though the call shapes are fine: threadgroup memory lengths
// that are not multiples of 16, threadgroups and grids whose thread counts
// overflow 64 bits, and any encoding after EndEncoding. Each is an error
// naming the numbers, and the command buffer runs nothing.
func TestEncoderRefusesAppleViolations(t *testing.T) {
	g := newGPU(t)
	p, x, q := g.pipeline("fill"), g.Buffer(4*64, 0), g.Q
	xs := mtl.Slice[float32](x)
	for _, tc := range []struct {
		name string
		bad  func(e *mtl.ComputeCommandEncoder)
		want []string
	}{
		{"tg memory 20", func(e *mtl.ComputeCommandEncoder) { e.SetThreadgroupMemoryLength(20, 2) }, []string{"length 20", "index 2", "multiple of 16"}},
		{"tg memory 8", func(e *mtl.ComputeCommandEncoder) { e.SetThreadgroupMemoryLength(8, 0) }, []string{"length 8", "index 0"}},
		{"tg memory negative", func(e *mtl.ComputeCommandEncoder) { e.SetThreadgroupMemoryLength(-16, 1) }, []string{"length -16"}},
		{"group overflow", func(e *mtl.ComputeCommandEncoder) {
			e.SetComputePipelineState(p)
			e.DispatchThreadgroups(size(1, 1, 1), size(1<<22, 1<<21, 1<<21))
		}, []string{"{4194304 2097152 2097152}", "18446744073709551616 threads", "maxTotalThreadsPerThreadgroup 1024"}},
		{"threads group overflow", func(e *mtl.ComputeCommandEncoder) {
			e.SetComputePipelineState(p)
			e.DispatchThreads(size(64, 1, 1), size(1<<32, 1<<32, 1))
		}, []string{"18446744073709551616 threads"}},
		{"grid overflow", func(e *mtl.ComputeCommandEncoder) {
			e.SetComputePipelineState(p)
			e.DispatchThreads(size(1<<40, 1<<30, 1), size(32, 1, 1))
		}, []string{"grid {1099511627776 1073741824 1}", "2^64-1"}},
		{"threadgroups times threads overflow", func(e *mtl.ComputeCommandEncoder) {
			e.SetComputePipelineState(p)
			e.DispatchThreadgroups(size(1<<30, 1<<30, 1<<3), size(32, 1, 1))
		}, []string{"{1073741824 1073741824 8} threadgroups of {32 1 1} threads", "2^64-1"}},
		{"after EndEncoding", func(e *mtl.ComputeCommandEncoder) {
			e.SetComputePipelineState(p)
			e.SetBuffer(x, 0, 0)
			e.SetBytes(one, 1)
			if err := e.EndEncoding(); err != nil {
				t.Fatalf("EndEncoding of a valid encoder: %v", err)
			}
		}, []string{"SetComputePipelineState: encoder used after EndEncoding"}},
	} {
		for i := range xs {
			xs[i] = -1
		}
		cb, _ := q.CommandBuffer()
		e, _ := cb.ComputeCommandEncoder()
		tc.bad(e)
		e.SetComputePipelineState(p)
		e.SetBuffer(x, 0, 0)
		e.SetBytes(one, 1)
		e.DispatchThreads(size(64, 1, 1), size(64, 1, 1))
		if err := e.Err(); err == nil {
			t.Errorf("%s: Err() is nil", tc.name)
		}
		err := e.EndEncoding()
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: EndEncoding error %v, want one mentioning %q", tc.name, err, w)
			}
		}
		cb.Commit()
		cb.WaitUntilCompleted()
		if xs[0] != -1 {
			t.Errorf("%s: a dispatch ran: x[0] = %v", tc.name, xs[0])
		}
		cb.Release()
	}
	// Every method used after EndEncoding says so, by name.
	cb, _ := q.CommandBuffer()
	defer cb.Release()
	for name, use := range map[string]func(e *mtl.ComputeCommandEncoder){
		"SetBuffer:":                  func(e *mtl.ComputeCommandEncoder) { e.SetBuffer(x, 0, 0) },
		"SetBuffers:":                 func(e *mtl.ComputeCommandEncoder) { e.SetBuffers([]*mtl.Buffer{x}, []int{0}, 0) },
		"SetBytes:":                   func(e *mtl.ComputeCommandEncoder) { e.SetBytes(one, 1) },
		"SetThreadgroupMemoryLength:": func(e *mtl.ComputeCommandEncoder) { e.SetThreadgroupMemoryLength(16, 0) },
		"DispatchThreads:":            func(e *mtl.ComputeCommandEncoder) { e.DispatchThreads(size(1, 1, 1), size(1, 1, 1)) },
		"DispatchThreadgroups:":       func(e *mtl.ComputeCommandEncoder) { e.DispatchThreadgroups(size(1, 1, 1), size(1, 1, 1)) },
		"MemoryBarrier:":              func(e *mtl.ComputeCommandEncoder) { e.MemoryBarrier(mtl.BarrierScopeBuffers) },
	} {
		e, err := cb.ComputeCommandEncoder()
		if err != nil {
			t.Fatal(err)
		}
		e.SetComputePipelineState(p)
		if err := e.EndEncoding(); err != nil {
			t.Fatal(err)
		}
		use(e)
		if err := e.Err(); err == nil || !strings.Contains(err.Error(), name+" encoder used after EndEncoding") {
			t.Errorf("%s after EndEncoding: Err() = %v", name, err)
		}
		if err := e.EndEncoding(); err == nil {
			t.Errorf("%s after EndEncoding: a second EndEncoding returned nil", name)
		}
	}
}

// TestSystemDeviceFallback checks the choice CreateSystemDefaultDevice
// makes, with stand-ins for MTLCreateSystemDefaultDevice and
// MTLCopyAllDevices: the default device when there is one; else the first
// of all devices, retained, with the array released; else ErrNoDevice.
func TestSystemDeviceFallback(t *testing.T) {
	before := emu.LiveObjects()
	first := testdevice.Emulated(t, emu.Options{})
	second := testdevice.Emulated(t, emu.Options{})
	addObject := objc.RegisterName("addObject:")
	devices := func(ds ...*mtl.Device) objc.ID {
		arr := objc.GetClass("NSMutableArray").New()
		for _, d := range ds {
			objc.Send(arr, addObject, uintptr(d.ID()))
		}
		return arr
	}
	var arrays []objc.ID // each handed out with one extra retain, ours
	copyAll := func(ds ...*mtl.Device) func() objc.ID {
		return func() objc.ID {
			arr := devices(ds...)
			arrays = append(arrays, arr)
			return arr.Retain() // owned by the caller, as a Copy function's result
		}
	}
	none := func() objc.ID { return 0 }
	notCalled := func() objc.ID { t.Error("MTLCopyAllDevices called although there is a default device"); return 0 }

	d, err := mtl.SystemDevice(func() objc.ID { return second.ID().Retain() }, notCalled)
	if err != nil || d.ID() != second.ID() || d.Source() != "MTLCreateSystemDefaultDevice" {
		t.Fatalf("with a default device: %v from %q, %v; want the default device", d, d.Source(), err)
	}
	d.Release()

	d, err = mtl.SystemDevice(none, copyAll(first, second))
	if err != nil || d.ID() != first.ID() || d.Source() != "MTLCopyAllDevices" {
		t.Fatalf("without a default device: %v, %v; want the first of all devices", d, err)
	}
	if got := d.Name(); got != first.Name() {
		t.Errorf("the fallback device's name is %q", got)
	}
	d.Release()

	for name, all := range map[string]func() objc.ID{"nil array": none, "empty array": copyAll()} {
		d, err = mtl.SystemDevice(none, all)
		if !errors.Is(err, mtl.ErrNoDevice) || !strings.Contains(err.Error(), "MTLCopyAllDevices") {
			t.Errorf("%s: %v, %v; want ErrNoDevice naming both functions", name, d, err)
		}
	}
	for i, arr := range arrays {
		if rc := arr.RetainCount(); rc != 1 {
			t.Errorf("array %d: retain count %d after SystemDevice, want 1 (the caller's array released once)", i, rc)
		}
		arr.Release()
	}
	if first.Source() != "DeviceFromObject" {
		t.Errorf("an emulated device's Source is %q", first.Source())
	}
	first.Release()
	second.Release()
	if after := emu.LiveObjects(); after != before {
		t.Errorf("live objects %d before, %d after: a device was retained or released once too often", before, after)
	}
}

// mapped reports whether the page at p is mapped in the process: msync
// fails with ENOMEM for a page that is not.
func mapped(t *testing.T, p unsafe.Pointer) bool {
	t.Helper()
	switch err := unix.Msync(unsafe.Slice((*byte)(p), os.Getpagesize()), unix.MS_ASYNC); err {
	case nil:
		return true
	case unix.ENOMEM:
		return false
	default:
		t.Fatalf("msync: %v", err)
		return false
	}
}

// A no-copy buffer released while a command buffer still uses it keeps
// its memory until the command buffer is done with it; the deallocator
// block then unmaps it, exactly once.
func TestNoCopyBufferUnmappedAfterLastUse(t *testing.T) {
	g := newGPU(t)
	fill := g.pipeline("fill")
	const n = 1024
	b, err := g.D.NewBufferNoCopy(4*n, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	mem := unsafe.Pointer(&b.Contents()[0])
	xs := unsafe.Slice((*float32)(mem), n)
	for i := range xs {
		xs[i] = -1
	}
	unmappedBefore := mtl.Unmapped()
	cb, err := g.Q.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := cb.ComputeCommandEncoder()
	encodeFill(fill, b, n)(enc)
	if err := enc.EndEncoding(); err != nil {
		t.Fatal(err)
	}
	b.Release()
	if !mapped(t, mem) || mtl.Unmapped() != unmappedBefore {
		t.Fatal("the buffer's memory was unmapped at Release, while a command buffer holds the buffer")
	}
	cb.Commit()
	cb.WaitUntilCompleted()
	if err := cb.Error(); err != nil {
		t.Fatal(err)
	}
	if !mapped(t, mem) {
		t.Fatal("the memory was unmapped before the command buffer was released")
	}
	for i, x := range xs {
		if x != 1+float32(i) {
			t.Fatalf("x[%d] = %v, want %v", i, x, 1+float32(i))
		}
	}
	cb.Release()
	if mapped(t, mem) {
		t.Error("the memory is still mapped after the last command buffer using it was released")
	}
	if got := mtl.Unmapped() - unmappedBefore; got != 1 {
		t.Errorf("the deallocator unmapped %d times, want 1", got)
	}
}

// runEncoded commits cb, waits, and fails the test on a command buffer
// error; it releases cb.
func runEncoded(t *testing.T, cb *mtl.CommandBuffer) {
	t.Helper()
	defer cb.Release()
	cb.Commit()
	cb.WaitUntilCompleted()
	if err := cb.Error(); err != nil {
		t.Fatal(err)
	}
}

// runBlit runs one command buffer through RunCommandBuffer with one blit
// encoder that encode fills, and fails the test unless the encoder sent
// sends messages and the command buffer ran.
func runBlit(t *testing.T, q *mtl.CommandQueue, sends int, encode func(cb *mtl.CommandBuffer, e *mtl.BlitCommandEncoder)) {
	t.Helper()
	err := q.RunCommandBuffer(func(cb *mtl.CommandBuffer) error {
		e, err := cb.BlitCommandEncoder()
		if err != nil {
			return err
		}
		encode(cb, e)
		if e.Sends() != sends {
			t.Errorf("%d messages sent, want %d", e.Sends(), sends)
		}
		return e.EndEncoding()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Managed storage keeps a CPU copy and a GPU copy, as on an Intel Mac: the
// CPU's writes reach kernels through DidModifyRange, and the GPU's writes
// reach Contents through a blit encoder's SynchronizeResource.
func TestManagedBufferSynchronization(t *testing.T) {
	g := newGPU(t)
	q, fill, add := g.Q, g.pipeline("fill"), g.pipeline("add_into")
	const n = 64
	a, b := g.Buffer(4*n, mtl.ResourceStorageModeManaged), g.Buffer(4*n, mtl.ResourceStorageModeShared)
	as, bs := mtl.Slice[float32](a), mtl.Slice[float32](b)

	// The CPU writes a; only the range told to Metal reaches the kernel.
	for i := range as {
		as[i] = 10
	}
	if err := a.DidModifyRange(0, 4*n/2); err != nil {
		t.Fatal(err)
	}
	err := q.Run(func(e *mtl.ComputeCommandEncoder) error {
		e.SetComputePipelineState(add)
		e.SetBuffers([]*mtl.Buffer{a, b}, []int{0, 0}, 0)
		e.DispatchThreads(size(n, 1, 1), size(32, 1, 1))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range bs {
		want := float32(0)
		if i < n/2 {
			want = 10
		}
		if x != want {
			t.Fatalf("b[%d] = %v, want %v: DidModifyRange's range should reach the GPU, and only it", i, x, want)
		}
	}

	// The GPU writes a; Contents sees it only after SynchronizeResource.
	if err := q.Run(encodeFill(fill, a, n)); err != nil {
		t.Fatal(err)
	}
	if as[5] != 10 {
		t.Fatalf("a[5] = %v before synchronizeResource:, want the CPU copy's 10", as[5])
	}
	runBlit(t, q, 1, func(_ *mtl.CommandBuffer, blit *mtl.BlitCommandEncoder) {
		blit.SynchronizeResource(a)
		blit.SynchronizeResource(b) // shared: nothing to send
	})
	for i, x := range as {
		if x != 1+float32(i) {
			t.Fatalf("a[%d] = %v after synchronizeResource:, want %v", i, x, 1+float32(i))
		}
	}
}

// CopyFromBuffer copies exactly the bytes asked for, in command buffer
// order with the dispatches; bad ranges and alignments are refused,
// naming the numbers, and nothing runs.
func TestBlitCopy(t *testing.T) {
	g := newGPU(t)
	const n = 256
	src, dst, back := g.Buffer(n, mtl.ResourceStorageModeShared), g.Buffer(n, mtl.ResourceStorageModePrivate), g.Buffer(n, mtl.ResourceStorageModeShared)
	ss := src.Contents()
	for i := range ss {
		ss[i] = byte(i*7 + 3)
	}
	bs := back.Contents()
	for i := range bs {
		bs[i] = 0xEE
	}
	// src[16:80) to the private dst[100:164), back to back[0:64) and, within
	// back itself, back[0:64) to back[192:256).
	runBlit(t, g.Q, 3, func(cb *mtl.CommandBuffer, blit *mtl.BlitCommandEncoder) {
		if _, err := cb.ComputeCommandEncoder(); err == nil {
			t.Error("a compute encoder was made while a blit encoder is open")
		}
		blit.CopyFromBuffer(src, 16, dst, 100, 64)
		blit.CopyFromBuffer(dst, 100, back, 0, 64)
		blit.CopyFromBuffer(back, 0, back, 192, 64)
		blit.CopyFromBuffer(src, 0, back, 0, 0) // sends nothing
	})
	for i, x := range bs {
		want := byte(0xEE)
		switch {
		case i < 64:
			want = byte((16+i)*7 + 3)
		case i >= 192:
			want = byte((16+i-192)*7 + 3)
		}
		if x != want {
			t.Fatalf("back[%d] = %#x, want %#x", i, x, want)
		}
	}

	for _, tc := range []struct {
		name string
		bad  func(e *mtl.BlitCommandEncoder)
		want []string
	}{
		{"source range", func(e *mtl.BlitCommandEncoder) { e.CopyFromBuffer(src, 200, back, 0, 64) }, []string{"source range [200, 264)", "256 bytes"}},
		{"destination range", func(e *mtl.BlitCommandEncoder) { e.CopyFromBuffer(src, 0, back, 196, 64) }, []string{"destination range [196, 260)"}},
		{"negative offset", func(e *mtl.BlitCommandEncoder) { e.CopyFromBuffer(src, -4, back, 0, 4) }, []string{"source range [-4, 0)"}},
		{"size alignment", func(e *mtl.BlitCommandEncoder) { e.CopyFromBuffer(src, 0, back, 0, 6) }, []string{"size 6", "multiples of 4"}},
		{"offset alignment", func(e *mtl.BlitCommandEncoder) { e.CopyFromBuffer(src, 2, back, 0, 4) }, []string{"source offset 2"}},
		{"nil destination", func(e *mtl.BlitCommandEncoder) { e.CopyFromBuffer(src, 0, nil, 0, 4) }, []string{"nil destination buffer"}},
		{"overlap", func(e *mtl.BlitCommandEncoder) { e.CopyFromBuffer(back, 0, back, 32, 64) }, []string{"source range [0, 64) and destination range [32, 96) overlap in the same buffer"}},
		{"onto itself", func(e *mtl.BlitCommandEncoder) { e.CopyFromBuffer(back, 16, back, 16, 16) }, []string{"source range [16, 32) and destination range [16, 32) overlap"}},
		{"nil resource", func(e *mtl.BlitCommandEncoder) { e.SynchronizeResource(nil) }, []string{"SynchronizeResource: nil"}},
		{"after EndEncoding", func(e *mtl.BlitCommandEncoder) { e.EndEncoding() }, []string{"CopyFromBuffer: encoder used after EndEncoding"}},
	} {
		for i := range bs {
			bs[i] = 0xEE
		}
		cb, e := g.Blit()
		tc.bad(e)
		sends := e.Sends()
		e.CopyFromBuffer(src, 0, back, 0, 64)
		if e.Sends() != sends {
			t.Errorf("%s: a copy was sent after the bad argument", tc.name)
		}
		err := e.EndEncoding()
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: EndEncoding error %v, want one mentioning %q", tc.name, err, w)
			}
		}
		runEncoded(t, cb)
		if bs[0] != 0xEE {
			t.Errorf("%s: a copy ran", tc.name)
		}
	}
}

// Ranges whose ends overflow an int are refused, not wrapped into range.
func TestRangesOverflowRefused(t *testing.T) {
	g := newGPU(t)
	x := g.Buffer(4*64, mtl.ResourceStorageModeManaged)
	const maxInt = int(^uint(0) >> 1)
	if err := x.DidModifyRange(16, maxInt); err == nil || !strings.Contains(err.Error(), "[16, 9223372036854775823)") {
		t.Errorf("DidModifyRange(16, MaxInt): %v, want an error naming the range", err)
	}
	cb, _ := g.Q.CommandBuffer()
	defer cb.Release()
	e, _ := cb.ComputeCommandEncoder()
	e.SetBuffer(x, 0, maxInt)
	if err := e.EndEncoding(); err == nil || !strings.Contains(err.Error(), "[9223372036854775807, 9223372036854775808)") {
		t.Errorf("SetBuffer at index MaxInt: %v, want an error naming the indices", err)
	}
	blit, _ := cb.BlitCommandEncoder()
	blit.CopyFromBuffer(x, 4, x, 0, maxInt-3)
	if err := blit.EndEncoding(); err == nil || !strings.Contains(err.Error(), "source range [4, 9223372036854775808)") {
		t.Errorf("CopyFromBuffer of MaxInt-3 bytes: %v, want an error naming the range", err)
	}
}

func TestCommandBufferStatusNames(t *testing.T) {
	for s, want := range []string{"NotEnqueued", "Enqueued", "Committed", "Scheduled", "Completed", "Error", "CommandBufferStatus(6)"} {
		if got := mtl.CommandBufferStatus(s).String(); got != want {
			t.Errorf("CommandBufferStatus(%d).String() = %q, want %q", s, got, want)
		}
	}
}

// A panic inside the encode function of Run or RunCommandBuffer goes on up
// to the caller, after the encoder encode left open is ended and every
// object made for the command buffer released: twenty panics leak nothing
// and commit nothing.
func TestQueueRunEncodePanics(t *testing.T) {
	g := newGPU(t)
	q, fill := g.Q, g.pipeline("fill")
	const n = 64
	x := g.Buffer(4*n, mtl.ResourceStorageModeShared)
	xs := mtl.Slice[float32](x)
	floats.Fill(xs, -1)
	before := emu.LiveObjects()
	type boom struct{ i int }
	for i := 0; i < 20; i++ {
		func() {
			defer func() {
				if r := recover(); r != (boom{i}) {
					t.Fatalf("panic %d: recovered %v, want the encode function's panic", i, r)
				}
			}()
			switch i % 3 {
			case 0:
				q.Run(func(e *mtl.ComputeCommandEncoder) error {
					encodeFill(fill, x, n)(e)
					panic(boom{i})
				})
			case 1:
				q.RunCommandBuffer(func(cb *mtl.CommandBuffer) error {
					e, err := cb.ComputeCommandEncoder()
					if err != nil {
						return err
					}
					encodeFill(fill, x, n)(e)
					panic(boom{i})
				})
			default:
				q.RunCommandBuffer(func(cb *mtl.CommandBuffer) error { panic(boom{i}) })
			}
			t.Fatalf("panic %d did not reach the caller", i)
		}()
	}
	if after := emu.LiveObjects(); after != before {
		t.Errorf("live objects %d before 20 panics, %d after", before, after)
	}
	for i, v := range xs {
		if v != -1 {
			t.Fatalf("x[%d] = %v: a command buffer whose encode panicked ran", i, v)
		}
	}
	// the queue still runs work
	if err := q.Run(encodeFill(fill, x, n)); err != nil || xs[n-1] != n {
		t.Fatalf("Run after the panics: %v, x[%d] = %v", err, n-1, xs[n-1])
	}
}

// The command buffer is RunCommandBuffer's to commit and release: an
// encode function that releases it, or commits it, is told so, whether or
// not it left an encoder open, and nothing leaks.
func TestQueueRunCommandBufferMisuse(t *testing.T) {
	g := newGPU(t)
	q, fill := g.Q, g.pipeline("fill")
	const n = 64
	x := g.Buffer(4*n, mtl.ResourceStorageModeShared)
	xs := mtl.Slice[float32](x)
	before := emu.LiveObjects()
	for _, tc := range []struct {
		name   string
		encode func(cb *mtl.CommandBuffer) error
		want   string
	}{
		{"released", func(cb *mtl.CommandBuffer) error {
			if err := testdevice.EncodeFillIn(cb, fill, x, n); err != nil {
				return err
			}
			cb.Release()
			return nil
		}, "RunCommandBuffer: encode released the command buffer, so nothing ran"},
		{"released with an encoder open", func(cb *mtl.CommandBuffer) error {
			e, err := cb.ComputeCommandEncoder()
			if err != nil {
				return err
			}
			encodeFill(fill, x, n)(e)
			cb.Release()
			return nil
		}, "RunCommandBuffer: an encoder was left open"},
		{"released, nothing encoded", func(cb *mtl.CommandBuffer) error {
			cb.Release()
			return nil
		}, "encode released the command buffer"},
		{"committed", func(cb *mtl.CommandBuffer) error {
			cb.Commit()
			return nil
		}, "RunCommandBuffer: encode committed the command buffer"},
	} {
		floats.Fill(xs, -1)
		err := q.RunCommandBuffer(tc.encode)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: RunCommandBuffer returned %v, want an error saying %q", tc.name, err, tc.want)
		}
		if strings.HasPrefix(tc.name, "released") && xs[0] != -1 {
			t.Errorf("%s: x[0] = %v: the command buffer ran", tc.name, xs[0])
		}
	}
	if after := emu.LiveObjects(); after != before {
		t.Errorf("live objects %d before, %d after", before, after)
	}
}
