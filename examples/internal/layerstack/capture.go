package layerstack

import (
	"fmt"
	"os"
	"sync"

	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/mtl"
)

// CaptureEnv names the environment variable that makes an example capture
// one decode step: set to a path ending in .gputrace, the first command
// buffer of decode dispatches (one token per sequence) that
// [Device.RunLayers] or [Device.SubmitLayers] runs is captured there,
// through a capture scope of the device's queue. On a Mac the capture is a GPU trace document for
// Xcode, and Metal needs MTL_CAPTURE_ENABLED=1 as well; on the emulated
// device it is a readable record of the step's dispatches and their
// arguments. A capture that cannot start is reported on stderr and the
// step runs uncaptured.
const CaptureEnv = "PUREMETAL_CAPTURE"

// stepCapture is a capture armed by CaptureEnv, taken once.
type stepCapture struct {
	once sync.Once
	path string
}

// around runs step, captured if it is the first decode step since the
// capture was armed.
func (c *stepCapture) around(q *mtl.CommandQueue, p gdn.Params, step func() error) error {
	stop := c.begin(q, p)
	err := step()
	stop()
	return err
}

// begin starts the capture if p is the first decode step since it was
// armed, and returns what ends it (nothing to do otherwise): for a step
// committed without waiting, call it once the step is done.
func (c *stepCapture) begin(q *mtl.CommandQueue, p gdn.Params) (end func()) {
	end = func() {}
	if c == nil || c.path == "" || p.NTokens != 1 {
		return end
	}
	c.once.Do(func() {
		stop, err := startCapture(q, c.path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: not capturing: %v\n", CaptureEnv, err)
			return
		}
		end = func() {
			stop()
			fmt.Fprintf(os.Stderr, "%s: captured one decode step to %s\n", CaptureEnv, c.path)
		}
	})
	return end
}

// startCapture starts capturing the command buffers of q inside a scope
// opened now, and returns the function that closes the scope and stops
// (the step's command buffer committed by then).
func startCapture(q *mtl.CommandQueue, path string) (stop func(), err error) {
	m, err := mtl.SharedCaptureManager()
	if err != nil {
		return nil, err
	}
	scope, err := m.NewCaptureScope(q)
	if err != nil {
		return nil, err
	}
	scope.SetLabel("one decode step")
	if err := m.StartCapture(mtl.CaptureDescriptor{Object: scope, Destination: mtl.CaptureDestinationGPUTraceDocument, OutputPath: path}); err != nil {
		scope.Release()
		return nil, err
	}
	scope.Begin()
	return func() {
		scope.End()
		m.StopCapture()
		scope.Release()
	}, nil
}
