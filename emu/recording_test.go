package emu_test

import (
	"testing"

	"github.com/puremetal/puremetal/mtl"
)

// TestRecordingBeyondSlots opens more compute encoders at once than the C
// recording has slots (64), so that the later ones are answered by the Go
// methods, encodes a dispatch in each, and checks every one ran.
func TestRecordingBeyondSlots(t *testing.T) {
	g, scale, _, _ := newScaleGPU(t)
	const n = 70
	cbs := make([]*mtl.CommandBuffer, n)
	encs := make([]*mtl.ComputeCommandEncoder, n)
	xs := make([][]float32, n)
	for i := range n {
		var x *mtl.Buffer
		x, xs[i] = buffer[float32](g, 64)
		for j := range xs[i] {
			xs[i][j] = float32(i + j)
		}
		cb, err := g.Q.CommandBuffer()
		if err != nil {
			t.Fatal(err)
		}
		defer cb.Release()
		if encs[i], err = cb.ComputeCommandEncoder(); err != nil {
			t.Fatal(err)
		}
		cbs[i] = cb
		setScale(encs[i], scale, x, 2)
	}
	for i := range n {
		encs[i].DispatchThreads(size1(64), size1(64))
		if err := encs[i].EndEncoding(); err != nil {
			t.Fatal(err)
		}
		cbs[i].Commit()
	}
	for i := range n {
		cbs[i].WaitUntilCompleted()
		completed(t, ended(t, cbs[i]))
		for j, v := range xs[i] {
			if want := 2 * float32(i+j); v != want {
				t.Fatalf("encoder %d of %d open at once: x[%d] = %v, want %v", i, n, j, v, want)
			}
		}
	}
}

// TestRecordedBufferOutlivesRelease releases a buffer right after binding
// it, before endEncoding: the encoder retains what it records, as Metal's
// does, so the dispatch still finds the buffer and the command buffer
// completes (and the device's release check finds nothing left).
func TestRecordedBufferOutlivesRelease(t *testing.T) {
	g, scale, _, _ := newScaleGPU(t)
	x, err := g.D.NewBuffer(64*4, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	completed(t, g.run(func(enc *mtl.ComputeCommandEncoder) {
		setScale(enc, scale, x, 3)
		x.Release()
		enc.DispatchThreads(size1(64), size1(64))
	}))
}
