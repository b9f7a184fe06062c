package tests

import (
	"runtime"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

// The real-Metal suite under Apple's checkers: each test below runs the
// TestMetal... tests again in a child process with a checker switched on
// by its environment variables, and fails on what the checker prints.
// Neither checker exists elsewhere than on macOS, so the tests skip there,
// saying so.

// childSkip leaves the checking tests themselves out of the child.
const childSkip = "^TestMetal(ValidationLayer|NoMissingPools)$"

// TestMetalValidationLayer runs the real-Metal suite with Metal's API
// validation layer (MTL_DEBUG_LAYER=1), its errors and warnings logged
// rather than asserted so that one run reports them all, and fails on any
// report: an argument, binding or usage that Metal's rules forbid, which
// the GPU might otherwise run silently.
func TestMetalValidationLayer(t *testing.T) {
	onMacOnly(t, "Metal's validation layer (MTL_DEBUG_LAYER)")
	testdevice.Metal(t)
	checkChild(t, []string{"failed assertion", "MTLDebug", "-[MTL"},
		"MTL_DEBUG_LAYER=1", "MTL_DEBUG_LAYER_ERROR_MODE=nslog", "MTL_DEBUG_LAYER_WARNING_MODE=nslog")
}

// TestMetalNoMissingPools runs the real-Metal suite, TestMetalDecodeLoop
// among it, with the Objective-C runtime reporting every object
// autoreleased with no pool open (OBJC_DEBUG_MISSING_POOLS=YES), and fails
// on any report: such an object is never released, and a decode loop
// would grow without bound.
func TestMetalNoMissingPools(t *testing.T) {
	onMacOnly(t, "the Objective-C runtime's OBJC_DEBUG_MISSING_POOLS")
	testdevice.Metal(t)
	checkChild(t, []string{"MISSING POOLS", "autoreleased with no pool"}, "OBJC_DEBUG_MISSING_POOLS=YES")
}

func onMacOnly(t *testing.T, checker string) {
	t.Helper()
	if runtime.GOOS != "darwin" {
		t.Skipf("real-Metal test: %s exists only on macOS, this is %s/%s (on Linux, package mtl's TestNoSendOutsidePool checks pools on the emulated device)", checker, runtime.GOOS, runtime.GOARCH)
	}
}

// checkChild runs the TestMetal... tests in a child with env and fails if
// the child fails, runs none of them, or prints a line holding any of
// markers on stderr.
func checkChild(t *testing.T, markers []string, env ...string) {
	t.Helper()
	r := testdevice.RunChild(t, "^TestMetal", childSkip, env...)
	if r.Err != nil {
		t.Errorf("the real-Metal suite with %v failed: %v\nstdout:\n%s", env, r.Err, r.Stdout)
	}
	if !strings.Contains(r.Stdout, "--- PASS: TestMetal") {
		t.Errorf("the child ran no TestMetal test; stdout:\n%s", r.Stdout)
	}
	var reports []string
	for _, line := range strings.Split(r.Stderr, "\n") {
		for _, m := range markers {
			if strings.Contains(line, m) {
				reports = append(reports, line)
				break
			}
		}
	}
	if len(reports) > 0 {
		t.Errorf("%d reports with %v:\n%s", len(reports), env, strings.Join(reports, "\n"))
	}
}

// TestMetalDecodeLoop runs 2000 command buffers of a small dispatch
// through CommandQueue.Run, as a decode loop does once per token, and
// checks each result and that the Go heap stays flat. Under
// TestMetalNoMissingPools it also shows that nothing is autoreleased
// outside a pool.
func TestMetalDecodeLoop(t *testing.T) {
	d := testdevice.Metal(t)
	q, err := d.NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	defer q.Release()
	g := &testdevice.GPU{T: t, D: d, Q: q}
	p := g.Pipeline(`#include <metal_stdlib>
using namespace metal;
kernel void add_one(device float *x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] += 1.0f; }
`, mtl.CompileOptions{}, "add_one")
	const n = 256
	x := g.Buffer(4*n, mtl.ResourceStorageModeShared)
	xs := mtl.Slice[float32](x)
	step := func(e *mtl.ComputeCommandEncoder) error {
		e.SetComputePipelineState(p)
		e.SetBuffer(x, 0, 0)
		e.DispatchThreads(mtl.Size{Width: n, Height: 1, Depth: 1}, mtl.Size{Width: 64, Height: 1, Depth: 1})
		return nil
	}
	loop := func(count int) {
		for range count {
			if err := q.Run(step); err != nil {
				t.Fatal(err)
			}
		}
	}
	loop(200)
	heap0 := goHeap()
	const loops = 2000
	loop(loops)
	heap1 := goHeap()
	for i, v := range xs {
		if v != 200+loops {
			t.Fatalf("x[%d] = %v after %d steps", i, v, 200+loops)
		}
	}
	t.Logf("Go heap over %d command buffers: %d -> %d bytes", loops, heap0, heap1)
	if heap1 > heap0+512<<10 {
		t.Errorf("Go heap grew from %d to %d bytes over %d command buffers", heap0, heap1, loops)
	}
}

func goHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
