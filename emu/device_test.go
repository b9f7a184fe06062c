package emu_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

const vectorAdd = `
#include <metal_stdlib>
using namespace metal;

kernel void vector_add(device const float *a [[buffer(0)]],
                       device const float *b [[buffer(1)]],
                       device float *out     [[buffer(2)]],
                       constant uint &n      [[buffer(3)]],
                       uint i [[thread_position_in_grid]]) {
    if (i < n) {
        out[i] = a[i] + b[i];
    }
}

kernel void scale_oob(device float *x [[buffer(0)]],
                      uint i [[thread_position_in_grid]]) {
    x[i + 1] = 2.0f * x[i];
}
`

// newDevice returns an emulated device, or skips (fails in strict mode)
// when its prerequisites are missing.
func newDevice(t *testing.T) *mtl.Device {
	t.Helper()
	if err := objc.Load(); err != nil {
		testenv.SkipOrFail(t, "the emulated device needs the GNU Objective-C runtime: "+err.Error())
	}
	d, err := emu.NewDevice()
	if err != nil {
		if strings.Contains(err.Error(), "clang") {
			testenv.SkipOrFail(t, err.Error())
		}
		t.Fatal(err)
	}
	return d
}

func pipeline(t *testing.T, d *mtl.Device, src, name string) *mtl.ComputePipelineState {
	t.Helper()
	lib, err := d.NewLibraryWithSource(src, mtl.CompileOptions{})
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

func TestVectorAddThroughMetalAPI(t *testing.T) {
	before := emu.LiveObjects()
	d := newDevice(t)
	if !strings.Contains(d.Name(), "emulated") {
		t.Errorf("device name %q does not say it is emulated", d.Name())
	}
	if got := d.MaxThreadsPerThreadgroup(); got != (mtl.Size{Width: 1024, Height: 1024, Depth: 1024}) {
		t.Errorf("MaxThreadsPerThreadgroup = %v", got)
	}
	p := pipeline(t, d, vectorAdd, "vector_add")
	if p.ThreadExecutionWidth() != 32 || p.MaxTotalThreadsPerThreadgroup() != 1024 {
		t.Errorf("pipeline width %d, max threads %d", p.ThreadExecutionWidth(), p.MaxTotalThreadsPerThreadgroup())
	}
	const n = 1000 // not a multiple of the threadgroup size
	a, _ := d.NewBuffer(4*n, mtl.ResourceStorageModeShared)
	b, _ := d.NewBufferNoCopy(4*n, mtl.ResourceStorageModeShared)
	out, _ := d.NewBuffer(4*n, mtl.ResourceStorageModeShared)
	av, bv, ov := mtl.Slice[float32](a), mtl.Slice[float32](b), mtl.Slice[float32](out)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		av[i], bv[i] = r.Float32()*2-1, r.Float32()*2-1
		ov[i] = float32(nanPoison())
	}
	q, err := d.NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	cb, err := q.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		t.Fatal(err)
	}
	enc.SetComputePipelineState(p)
	enc.SetBuffers([]*mtl.Buffer{a, b, out}, []int{0, 0, 0}, 0)
	nb := []byte{n & 0xff, n >> 8, 0, 0}
	enc.SetBytes(nb, 3)
	enc.DispatchThreads(mtl.Size{Width: n, Height: 1, Depth: 1}, mtl.Size{Width: 256, Height: 1, Depth: 1})
	if err := enc.EndEncoding(); err != nil {
		t.Fatal(err)
	}
	if s := enc.Sends(); s != 5 {
		t.Errorf("encoding sent %d messages, want 5 (pipeline, buffers, bytes, dispatch, end)", s)
	}
	cb.Commit()
	cb.WaitUntilCompleted()
	if st := cb.Status(); st != mtl.CommandBufferStatusCompleted {
		t.Fatalf("status %v, error %v", st, cb.Error())
	}
	if cb.Error() != nil {
		t.Errorf("completed buffer has error %v", cb.Error())
	}
	if s, e := cb.GPUStartTime(), cb.GPUEndTime(); !(s > 0 && e >= s) {
		t.Errorf("GPU times start %v end %v", s, e)
	}
	for i := range n {
		if ov[i] != av[i]+bv[i] {
			t.Fatalf("out[%d] = %v, want %v", i, ov[i], av[i]+bv[i])
		}
	}
	counters, err := emu.DispatchCounters(cb)
	if err != nil || len(counters) != 1 {
		t.Fatalf("counters %v, %v", counters, err)
	}
	if c := counters[0]; c.Loaded[0] != 4*n || c.Loaded[1] != 4*n || c.Stored[2] != 4*n {
		t.Errorf("counters: loaded %d %d, stored %d; want %d each", c.Loaded[0], c.Loaded[1], c.Stored[2], 4*n)
	}
	for _, o := range []interface{ Release() }{cb, q, a, b, out, p, d} {
		o.Release()
		o.Release() // a second release does nothing
	}
	if after := emu.LiveObjects(); after != before {
		t.Errorf("live emulated objects: %d before, %d after releasing everything", before, after)
	}
}

func nanPoison() float64 { return float64(float32FromBits(0x7fc00001)) }

func TestCompileErrorKeepsLog(t *testing.T) {
	d := newDevice(t)
	defer d.Release()
	_, err := d.NewLibraryWithSource("kernel void broken(device float *x [[buffer(0)]]) {\n  x[0] = ;\n}\n", mtl.CompileOptions{})
	var ce *mtl.CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *mtl.CompileError", err)
	}
	if !strings.Contains(ce.Log, ":2:") {
		t.Errorf("compile log does not point at line 2:\n%s", ce.Log)
	}
}

func TestKernelFaultSetsStatusError(t *testing.T) {
	before := emu.LiveObjects()
	d := newDevice(t)
	p := pipeline(t, d, vectorAdd, "scale_oob")
	x, _ := d.NewBuffer(4*64, mtl.ResourceStorageModeShared)
	q, _ := d.NewCommandQueue()
	cb, _ := q.CommandBuffer()
	enc, _ := cb.ComputeCommandEncoder()
	enc.SetComputePipelineState(p)
	enc.SetBuffer(x, 0, 0)
	enc.DispatchThreadgroups(mtl.Size{Width: 2, Height: 1, Depth: 1}, mtl.Size{Width: 32, Height: 1, Depth: 1})
	if err := enc.EndEncoding(); err != nil {
		t.Fatal(err)
	}
	cb.Commit()
	cb.WaitUntilCompleted()
	if st := cb.Status(); st != mtl.CommandBufferStatusError {
		t.Fatalf("status %v, want Error", st)
	}
	err := cb.Error()
	if err == nil || !strings.Contains(err.Error(), "out-of-bounds") || !strings.Contains(err.Error(), "scale_oob") {
		t.Errorf("error %v does not name the kernel and the out-of-bounds access", err)
	}
	var oe *objc.Error
	if !errors.As(err, &oe) || oe.Domain != "MTLCommandBufferErrorDomain" {
		t.Errorf("error %#v does not carry Metal's domain", err)
	}
	for _, o := range []interface{ Release() }{cb, q, x, p, d} {
		o.Release()
	}
	if after := emu.LiveObjects(); after != before {
		t.Errorf("live emulated objects: %d before, %d after", before, after)
	}
}
