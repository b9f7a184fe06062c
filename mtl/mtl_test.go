package mtl_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

const kernelsSource = `
#include <metal_stdlib>
using namespace metal;

kernel void fill(device float *x [[buffer(0)]],
                 constant float &v [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) {
    x[i] = v + float(i);
}

kernel void add_into(device const float *a [[buffer(0)]],
                     device float *b       [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
    b[i] += a[i];
}
`

func size(w, h, d uint) mtl.Size { return mtl.Size{Width: w, Height: h, Depth: d} }

func newPipeline(t testing.TB, d *mtl.Device, name string) *mtl.ComputePipelineState {
	t.Helper()
	lib, err := d.NewLibraryWithSource(kernelsSource, mtl.CompileOptions{LanguageVersion: mtl.LanguageVersion3_1})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Release()
	fn, err := lib.NewFunction(name)
	if err != nil {
		t.Fatal(err)
	}
	defer fn.Release()
	p, err := d.NewComputePipelineState(fn)
	if err != nil {
		t.Fatal(err)
	}
	return p
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
	before := emu.LiveObjects()
	d := testdevice.Emulated(t, emu.Options{})
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
	d.Release()
	if after := emu.LiveObjects(); after != before {
		t.Errorf("live objects %d before, %d after", before, after)
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
	d := testdevice.Emulated(t, emu.Options{})
	p := newPipeline(t, d, "fill")
	defer p.Release()
	x, _ := d.NewBuffer(4*64, 0)
	defer x.Release()
	q, _ := d.NewCommandQueue()
	defer q.Release()
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
	d := testdevice.Emulated(t, emu.Options{})
	fill, add := newPipeline(t, d, "fill"), newPipeline(t, d, "add_into")
	defer fill.Release()
	defer add.Release()
	const n = 96
	a, _ := d.NewBuffer(4*n, 0)
	b, _ := d.NewBuffer(4*n, 0)
	defer a.Release()
	defer b.Release()
	q, _ := d.NewCommandQueue()
	defer q.Release()
	cb, _ := q.CommandBuffer()
	defer cb.Release()
	if err := cb.SetLabel("token 0"); err != nil || cb.Label() != "token 0" {
		t.Errorf("label %q, %v", cb.Label(), err)
	}
	e, _ := cb.ComputeCommandEncoder()
	e.SetComputePipelineState(fill)
	e.SetBuffer(a, 0, 0)
	e.SetBytes([]byte{0, 0, 0x80, 0x3f}, 1) // 1.0f
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
	d := testdevice.Emulated(b, emu.Options{})
	p := newPipeline(b, d, "fill")
	defer p.Release()
	bufs := make([]*mtl.Buffer, 9)
	offs := make([]int, 9)
	for i := range bufs {
		bufs[i], _ = d.NewBuffer(4096, 0)
		defer bufs[i].Release()
	}
	params := make([]byte, 36)
	q, _ := d.NewCommandQueue()
	defer q.Release()
	cb, _ := q.CommandBuffer()
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

func TestQueueRun(t *testing.T) {
	before := emu.LiveObjects()
	d := testdevice.Emulated(t, emu.Options{})
	fill := newPipeline(t, d, "fill")
	defer fill.Release()
	q, err := d.NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	defer q.Release()
	const n = 64
	x, err := d.NewBuffer(4*n, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Release()
	xs := mtl.Slice[float32](x)
	poison := func() {
		for i := range xs {
			xs[i] = -1
		}
	}
	v := []byte{0, 0, 0x80, 0x3f} // 1.0f
	encodeFill := func(enc *mtl.ComputeCommandEncoder) error {
		enc.SetComputePipelineState(fill)
		enc.SetBuffer(x, 0, 0)
		enc.SetBytes(v, 1)
		enc.DispatchThreads(size(n, 1, 1), size(32, 1, 1))
		return nil
	}

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
	err = q.Run(func(enc *mtl.ComputeCommandEncoder) error {
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
	x.Release()
	fill.Release()
	q.Release()
	d.Release()
	if after := emu.LiveObjects(); after != before {
		t.Errorf("live objects: %d before, %d after", before, after)
	}
}
