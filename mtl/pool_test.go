package mtl_test

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// missingPool is what GNUstep prints for an object autoreleased with no
// pool open. The emulated device autoreleases in every method but the
// encoders', as Metal's implementations may, so a send outside a pool
// shows here.
const missingPool = "autorelease called without pool"

// poolControlEnv makes the child send one message outside any pool, to
// show that the check sees a missing pool.
const poolControlEnv = "PUREMETAL_POOL_CONTROL"

// TestNoSendOutsidePool runs, in a child process, every method of the
// package once with no autorelease pool of the caller's, then a decode-like
// loop of 2000 CommandQueue.Run calls and 2000 command buffers encoded
// explicitly inside objc.WithAutoreleasePool. The child must print no
// missing-pool warning, and keep live objects, Go heap and resident memory
// flat over the loop.
func TestNoSendOutsidePool(t *testing.T) {
	const name = "TestNoSendOutsidePool"
	if testdevice.InChild(name) {
		poolChild(t)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skipf("the missing-pool warning checked here is GNUstep's, on Linux; on %s the real-Metal suite checks OBJC_DEBUG_MISSING_POOLS", runtime.GOOS)
	}
	testdevice.Emulated(t, emu.Options{}) // skips, or fails in strict mode, without the emulated device
	control := testdevice.RunChild(t, "^"+name+"$", "", poolControlEnv+"=1")
	if !strings.Contains(control.Stderr, missingPool) {
		t.Fatalf("a send outside any pool printed no %q; the check is blind. Child stderr:\n%s\nstdout:\n%s", missingPool, control.Stderr, control.Stdout)
	}
	r := testdevice.RunChild(t, "^"+name+"$", "")
	if r.Err != nil {
		t.Fatalf("child: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	if n := strings.Count(r.Stderr, missingPool); n > 0 {
		t.Errorf("%d objects autoreleased with no pool open:\n%s", n, r.Stderr)
	}
	for _, line := range strings.Split(r.Stdout, "\n") {
		if strings.Contains(line, "over 2000") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// poolChild is the child's part of TestNoSendOutsidePool.
func poolChild(t *testing.T) {
	d, err := emu.NewDevice()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	if os.Getenv(poolControlEnv) == "1" {
		objc.ID(d.ID().Send(objc.RegisterName("newCommandQueue"))).Release()
		return
	}
	// Every method once, outside any pool of ours.
	_, _, _, _ = d.Name(), d.RegistryID(), d.MaxThreadsPerThreadgroup(), d.HasUnifiedMemory()
	_, _, _ = d.RecommendedMaxWorkingSetSize(), d.MaxBufferLength(), d.SupportsFamily(mtl.GPUFamilyApple7)
	fill := newPipeline(t, d, "fill")
	defer fill.Release()
	_, _ = fill.MaxTotalThreadsPerThreadgroup(), fill.ThreadExecutionWidth()
	if _, err := d.NewLibraryWithSource("not metal", mtl.CompileOptions{}); err == nil {
		t.Error("bad source compiled")
	}
	// A library with macros and a function constant, specialized by index
	// and by name.
	spec, err := d.NewLibraryWithSource(`#include <metal_stdlib>
using namespace metal;
constant uint scale [[function_constant(0)]];
kernel void scaled(device uint* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = scale * i + OFFSET; }
`, mtl.CompileOptions{PreprocessorMacros: map[string]string{"OFFSET": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer spec.Release()
	for _, set := range []func(*mtl.FunctionConstantValues) error{
		func(v *mtl.FunctionConstantValues) error { return v.SetAtIndex(0, uint32(3)) },
		func(v *mtl.FunctionConstantValues) error { return v.SetWithName("scale", uint32(3)) },
	} {
		var values mtl.FunctionConstantValues
		if err := set(&values); err != nil {
			t.Fatal(err)
		}
		fn, err := spec.NewFunctionWithConstants("scaled", &values)
		if err != nil {
			t.Fatal(err)
		}
		fn.Release()
	}
	q, err := d.NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	defer q.Release()
	const n = 256
	x, err := d.NewBuffer(4*n, mtl.ResourceStorageModeManaged)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Release()
	withBytes, _ := d.NewBufferWithBytes(make([]byte, 64), mtl.ResourceStorageModeShared)
	noCopy, _ := d.NewBufferNoCopy(64, mtl.ResourceStorageModeShared)
	withBytes.Release()
	noCopy.Release()
	x.SetLabel("x")
	_ = x.Label()
	x.DidModifyRange(0, 16)
	encode := encodeFill(fill, x, n)
	explicit := func() {
		objc.WithAutoreleasePool(func() {
			cb, err := q.CommandBuffer()
			if err != nil {
				t.Fatal(err)
			}
			defer cb.Release()
			e, _ := cb.ComputeCommandEncoder()
			encode(e)
			if err := e.EndEncoding(); err != nil {
				t.Fatal(err)
			}
			blit, _ := cb.BlitCommandEncoder()
			blit.SynchronizeResource(x)
			blit.CopyFromBuffer(x, 0, x, 4*n/2, 4*n/2)
			if err := blit.EndEncoding(); err != nil {
				t.Fatal(err)
			}
			cb.Commit()
			cb.WaitUntilCompleted()
			if err := cb.Error(); err != nil || cb.Status() != mtl.CommandBufferStatusCompleted {
				t.Fatalf("status %v: %v", cb.Status(), err)
			}
			_ = cb.GPUEndTime() - cb.GPUStartTime()
		})
	}
	// Warm up, then measure a loop that a leak per command buffer would
	// make grow.
	for range 200 {
		if err := q.Run(encode); err != nil {
			t.Fatal(err)
		}
		explicit()
	}
	live0, heap0, rss0 := emu.LiveObjects(), heapInUse(), residentBytes(t)
	const loops = 2000
	for range loops {
		if err := q.Run(encode); err != nil {
			t.Fatal(err)
		}
		if _, err := q.RunTimed(encode); err != nil {
			t.Fatal(err)
		}
		explicit()
	}
	live1, heap1, rss1 := emu.LiveObjects(), heapInUse(), residentBytes(t)
	t.Logf("over %d loops: live objects %d -> %d, Go heap %d -> %d bytes, resident %d -> %d bytes", loops, live0, live1, heap0, heap1, rss0, rss1)
	if live1 != live0 {
		t.Errorf("live emulated objects grew from %d to %d", live0, live1)
	}
	// A leaked command buffer or encoder per loop would be 6000 objects of
	// state: far more than these bounds.
	if heap1 > heap0+512<<10 {
		t.Errorf("Go heap grew from %d to %d bytes", heap0, heap1)
	}
	if rss1 > rss0+4<<20 {
		t.Errorf("resident memory grew from %d to %d bytes", rss0, rss1)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// residentBytes reads the process's resident set size from /proc.
func residentBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}
