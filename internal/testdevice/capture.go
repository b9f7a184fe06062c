package testdevice

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/puremetal/puremetal/mtl"
)

// CaptureSuite captures, on whichever device g has, the command buffers
// committed inside a capture scope to a GPU trace document, and returns
// its path once written; a second capture while one runs, and one to a
// path without the .gputrace extension, are refused. The caller checks
// the document's content where it can read it (the emulated device's).
// Three command buffers are committed: the two inside the scope fill a
// buffer labelled "captured x" with the fill kernel over 1000 floats, the
// one after the scope runs add_into.
func CaptureSuite(t *testing.T, g *GPU) string {
	m, err := mtl.SharedCaptureManager()
	if err != nil {
		t.Fatal(err)
	}
	if !m.SupportsDestination(mtl.CaptureDestinationGPUTraceDocument) {
		t.Skip("the device does not capture to a GPU trace document (on a Mac, set MTL_CAPTURE_ENABLED=1)")
	}
	opts := mtl.CompileOptions{LanguageVersion: mtl.LanguageVersion3_1}
	fill, add := g.Pipeline(BindingKernels, opts, "fill"), g.Pipeline(BindingKernels, opts, "add_into")
	const n = 1000
	x := g.Buffer(4*n, mtl.ResourceStorageModeShared)
	if err := x.SetLabel("captured x"); err != nil {
		t.Fatal(err)
	}
	scope, err := m.NewCaptureScope(g.Q)
	if err != nil {
		t.Fatal(err)
	}
	defer scope.Release()
	scope.SetLabel("one decode step")
	dir := t.TempDir()
	if err := m.StartCapture(mtl.CaptureDescriptor{Object: scope, Destination: mtl.CaptureDestinationGPUTraceDocument, OutputPath: filepath.Join(dir, "bad.trace")}); err == nil {
		m.StopCapture()
		t.Fatal("a capture to a path without .gputrace started")
	}
	path := filepath.Join(dir, "step.gputrace")
	if err := m.StartCapture(mtl.CaptureDescriptor{Object: scope, Destination: mtl.CaptureDestinationGPUTraceDocument, OutputPath: path}); err != nil {
		t.Fatal(err)
	}
	if !m.IsCapturing() {
		t.Error("isCapturing is false during a capture")
	}
	if err := m.StartCapture(mtl.CaptureDescriptor{Object: g.Q, Destination: mtl.CaptureDestinationGPUTraceDocument, OutputPath: filepath.Join(dir, "second.gputrace")}); err == nil {
		t.Error("a second capture started while one ran")
	}
	scope.Begin()
	for range 2 {
		if err := g.Q.Run(EncodeFill(fill, x, n)); err != nil {
			t.Fatal(err)
		}
	}
	scope.End()
	err = g.Q.Run(func(e *mtl.ComputeCommandEncoder) error {
		e.SetComputePipelineState(add)
		e.SetBuffer(x, 0, 0)
		e.SetBuffer(x, 0, 1)
		e.DispatchThreads(mtl.Sz(n, 1, 1), mtl.Sz(32, 1, 1))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m.StopCapture()
	if m.IsCapturing() {
		t.Error("isCapturing is true after stopCapture")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no GPU trace written: %v", err)
	}
	return path
}
