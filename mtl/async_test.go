package mtl_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

// TestEmulatedAsyncSuite runs testdevice.AsyncSuite (handlers, Submit,
// shared events across two queues, InFlight) on the emulated device.
func TestEmulatedAsyncSuite(t *testing.T) { testdevice.AsyncSuite(t, newGPU(t).GPU) }

// TestMetalAsyncSuite runs testdevice.AsyncSuite on the system's GPU (a
// Mac; it skips elsewhere): go test ./mtl -run Metal -v
func TestMetalAsyncSuite(t *testing.T) { testdevice.AsyncSuite(t, testdevice.NewMetal(t)) }

// A command buffer that faults tells its completed handler, and its
// Pending, the error it failed with.
func TestHandlerSeesTheError(t *testing.T) {
	g := newGPU(t)
	fill := g.pipeline("fill")
	x := g.Buffer(16, mtl.ResourceStorageModeShared)
	var got mtl.Completion
	var wg sync.WaitGroup
	wg.Add(1)
	p, err := g.Q.Submit(func(cb *mtl.CommandBuffer) error {
		if err := cb.AddCompletedHandler(func(c mtl.Completion) { got = c; wg.Done() }); err != nil {
			return err
		}
		return testdevice.EncodeFillIn(cb, fill, x, 1024) // 1024 floats into a 16-byte buffer
	})
	if err != nil {
		t.Fatal(err)
	}
	werr := p.Wait(context.Background())
	wg.Wait()
	if got.Status != mtl.CommandBufferStatusError || got.Err == nil || werr == nil || werr.Error() != got.Err.Error() {
		t.Fatalf("handler told %+v; Wait returned %v", got, werr)
	}
	if !strings.Contains(got.Err.Error(), "fill") {
		t.Errorf("the error %q does not name the kernel", got.Err)
	}
}

// Handlers added to a command buffer released without being committed are
// dropped, with their blocks' references.
func TestHandlersOfUncommittedBuffer(t *testing.T) {
	g := newGPU(t)
	before := mtl.PendingHandlers()
	cb, err := g.Q.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := cb.AddCompletedHandler(func(mtl.Completion) { ran = true }); err != nil {
		t.Fatal(err)
	}
	if err := cb.AddCompletedHandler(nil); err == nil {
		t.Error("a nil handler was accepted")
	}
	if mtl.PendingHandlers() != before+1 {
		t.Errorf("%d pending handlers, want %d", mtl.PendingHandlers(), before+1)
	}
	cb.Release()
	if mtl.PendingHandlers() != before || ran {
		t.Errorf("after Release: %d pending handlers (want %d), ran %v", mtl.PendingHandlers(), before, ran)
	}
}

// rssBytes returns the process's resident set size.
func rssBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("no /proc/self/statm: %v", err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

// 10,000 command buffers committed through InFlight, each with a
// dispatch and a completed handler, leave no emulated object, no handler
// and no memory behind: live objects and pending handlers return to where
// they were, and the resident set grows by less than 16 MiB after a
// warm-up of 1,000.
func TestNoLeakOverCommittedBuffers(t *testing.T) {
	g := newGPU(t)
	fill := g.pipeline("fill")
	x := g.Buffer(4*32, mtl.ResourceStorageModeShared)
	f, err := mtl.NewInFlight(g.Q, 3)
	if err != nil {
		t.Fatal(err)
	}
	var handled sync.WaitGroup
	run := func(count int) {
		for range count {
			handled.Add(1)
			_, err := f.Submit(context.Background(), func(cb *mtl.CommandBuffer) error {
				if err := cb.AddCompletedHandler(func(mtl.Completion) { handled.Done() }); err != nil {
					return err
				}
				return testdevice.EncodeFillIn(cb, fill, x, 32)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		handled.Wait()
	}
	// The last command buffers are released by the queue's handler
	// thread just after their handlers return.
	settle := func(want int) int {
		for deadline := time.Now().Add(10 * time.Second); emu.LiveObjects() != want && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		return emu.LiveObjects()
	}
	baseline := emu.LiveObjects() // device, queue, pipeline, buffer
	run(1000)
	runtime.GC()
	live, pending, rss := settle(baseline), mtl.PendingHandlers(), rssBytes(t)
	const n = 10000
	run(n)
	runtime.GC()
	live2, pending2, rss2 := settle(live), mtl.PendingHandlers(), rssBytes(t)
	t.Logf("%d command buffers with handlers: live emulated objects %d -> %d, pending handlers %d -> %d, RSS %.1f MiB -> %.1f MiB (%+.2f MiB), peak in flight %d",
		n, live, live2, pending, pending2, float64(rss)/(1<<20), float64(rss2)/(1<<20), float64(rss2-rss)/(1<<20), f.Peak())
	if live != baseline || live2 != live || pending2 != 0 || pending != 0 {
		t.Errorf("live objects %d before, %d after 1000, %d after %d more; pending handlers %d -> %d", baseline, live, live2, n, pending, pending2)
	}
	if rss2-rss > 16<<20 {
		t.Errorf("RSS grew by %.1f MiB over %d command buffers", float64(rss2-rss)/(1<<20), n)
	}
}

// TestEmulatedArchiveSuite runs testdevice.ArchiveSuite on the emulated
// device.
func TestEmulatedArchiveSuite(t *testing.T) { testdevice.ArchiveSuite(t, newGPU(t).GPU) }

// TestMetalArchiveSuite runs testdevice.ArchiveSuite on the system's GPU
// (a Mac; it skips elsewhere).
func TestMetalArchiveSuite(t *testing.T) { testdevice.ArchiveSuite(t, testdevice.NewMetal(t)) }

// The emulated device refuses an archive written for another target or
// device, naming both, as Metal refuses a file it cannot use.
func TestForeignArchiveRefused(t *testing.T) {
	g := newGPU(t)
	path := t.TempDir() + "/foreign.metallib"
	body := "puremetal emulated binary archive 1\n" + `{"Target":"darwin/arm64","Device":"Apple M3 Max","Libraries":[],"Functions":[]}`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := g.D.NewBinaryArchive(path)
	if err == nil {
		a.Release()
		t.Fatal("an archive written for darwin/arm64 loaded")
	}
	if !strings.Contains(err.Error(), "darwin/arm64") || !strings.Contains(err.Error(), runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("the error %q does not name both targets", err)
	}
}

// TestEmulatedCapture runs testdevice.CaptureSuite on the emulated device
// and reads its record: the two command buffers inside the scope, each
// with its dispatch of fill and its arguments, and not the one after.
func TestEmulatedCapture(t *testing.T) {
	path := testdevice.CaptureSuite(t, newGPU(t).GPU)
	b, err := os.ReadFile(filepath.Join(path, "capture.txt"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	t.Logf("%s:\n%s", path, text)
	for _, want := range []string{
		`capture object: capture scope "one decode step"`,
		"command buffer 0 on queue 1: 1 commands",
		"command buffer 1 on queue 1: 1 commands",
		"dispatchThreads kernel fill threads 1000x1x1 threads per threadgroup 32x1x1",
		`buffer(0): buffer "captured x" length 4000 offset 0`,
		"buffer(1): setBytes 4 bytes 0000803f",
		"end of capture: 2 command buffers",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the capture lacks %q", want)
		}
	}
	if strings.Contains(text, "add_into") {
		t.Error("the command buffer committed after endScope was captured")
	}
}

// TestMetalCapture runs testdevice.CaptureSuite on the system's GPU (a
// Mac with MTL_CAPTURE_ENABLED=1; it skips elsewhere).
func TestMetalCapture(t *testing.T) {
	g := testdevice.NewMetal(t)
	if os.Getenv("MTL_CAPTURE_ENABLED") != "1" {
		t.Skip("GPU capture outside Xcode needs MTL_CAPTURE_ENABLED=1")
	}
	testdevice.CaptureSuite(t, g)
}

// TestAsyncNoSendOutsidePool runs the handler, event, in-flight, archive
// and capture suites in a child process with no autorelease pool of the
// test's own, and fails on any GNUstep missing-pool warning: handlers,
// notifications and Submit must send inside pools, on every thread.
func TestAsyncNoSendOutsidePool(t *testing.T) {
	const name = "TestAsyncNoSendOutsidePool"
	if testdevice.InChild(name) {
		g := newGPU(t).GPU
		t.Run("async", func(t *testing.T) { testdevice.AsyncSuite(t, g) })
		t.Run("archive", func(t *testing.T) { testdevice.ArchiveSuite(t, g) })
		t.Run("capture", func(t *testing.T) { testdevice.CaptureSuite(t, g) })
		return
	}
	if runtime.GOOS != "linux" {
		t.Skipf("the missing-pool warning checked here is GNUstep's, on Linux; on %s the real-Metal suite checks OBJC_DEBUG_MISSING_POOLS", runtime.GOOS)
	}
	testdevice.Emulated(t, emu.Options{})
	r := testdevice.RunChild(t, "^"+name+"$", "")
	if r.Err != nil {
		t.Fatalf("child: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "--- PASS: "+name) && !strings.Contains(r.Stdout, "PASS") {
		t.Fatalf("the child ran nothing:\n%s", r.Stdout)
	}
	if n := strings.Count(r.Stderr, missingPool); n > 0 {
		t.Errorf("%d objects autoreleased with no pool open:\n%s", n, r.Stderr)
	}
}
