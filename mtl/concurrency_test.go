package mtl_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

// Device and CommandQueue are safe for concurrent use, as Metal's
// MTLDevice and MTLCommandQueue are: goroutines make buffers on one device
// and run command buffers on one queue at once, each its own, and every
// result is its own.
func TestConcurrentDeviceAndQueue(t *testing.T) {
	g := newGPU(t)
	fill := g.pipeline("fill")
	const workers, rounds, n = 4, 25, 256
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				x, err := g.D.NewBuffer(4*n, mtl.ResourceStorageModeShared)
				if err != nil {
					errs <- err
					return
				}
				err = g.Q.Run(testdevice.EncodeFill(fill, x, n))
				got := mtl.Slice[float32](x)
				bad := -1
				for i, v := range got[:n] {
					if v != 1+float32(i) {
						bad = i
						break
					}
				}
				x.Release()
				if err != nil || bad >= 0 {
					errs <- fmt.Errorf("worker %d round %d: %v, first wrong element %d", w, r, err, bad)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A buffer keeps working after its device's Release: each Metal object
// retains the device that made it, so the device lives until the last of
// them is released.
func TestBufferOutlivesDevice(t *testing.T) {
	g := newGPU(t)
	fill := g.pipeline("fill")
	x, err := g.D.NewBuffer(4*64, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Release()
	g.D.Release()
	if err := g.Q.Run(testdevice.EncodeFill(fill, x, 64)); err != nil {
		t.Fatalf("a dispatch after the device's Release: %v", err)
	}
	if got := mtl.Slice[float32](x); got[63] != 64 {
		t.Fatalf("x[63] = %v after the device's Release, want 64", got[63])
	}
}
