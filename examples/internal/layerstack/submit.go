package layerstack

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/mtl"
)

// Submitted is a step's command buffer committed without waiting
// ([Device.SubmitLayers]).
type Submitted struct {
	pending   *mtl.Pending
	Committed time.Time // when it was committed
	mu        sync.Mutex
	done      time.Time // when its completed handler ran
	// endCapture ends the capture of the step (CaptureEnv) once it is
	// done; it does nothing for a step not captured.
	endCapture func()
	endOnce    sync.Once
}

// SubmitLayers is [Device.RunLayers] without the wait: it encodes one
// command buffer carrying one dispatch of p per layer and commits it, so
// the caller prepares the next step while the device runs this one. The
// buffers bufs names must not be written until the step is done.
func (d *Device) SubmitLayers(dispatch Dispatcher, p gdn.Params, layers int, bufs func(l int) gdn.Buffers) (*Submitted, error) {
	return d.Submit(p, func(cb *mtl.CommandBuffer) error {
		enc, err := cb.ComputeCommandEncoder()
		if err != nil {
			return err
		}
		for l := range layers {
			if err := dispatch(d.Kernels, enc, p, bufs(l)); err != nil {
				enc.EndEncoding()
				return fmt.Errorf("layer %d: %w", l, err)
			}
		}
		return enc.EndEncoding()
	})
}

// Submit encodes one command buffer with encode and commits it without
// waiting, as [Device.SubmitLayers] does for any encoders (a step of the
// layer core); p names the step for
// CaptureEnv.
func (d *Device) Submit(p gdn.Params, encode func(cb *mtl.CommandBuffer) error) (*Submitted, error) {
	s := &Submitted{endCapture: d.capture.begin(d.Queue, p)}
	var err error
	s.pending, err = d.Queue.Submit(func(cb *mtl.CommandBuffer) error {
		// Runs before Submit's own handler, which makes the Pending done.
		if err := cb.AddCompletedHandler(func(mtl.Completion) {
			s.mu.Lock()
			s.done = time.Now()
			s.mu.Unlock()
		}); err != nil {
			return err
		}
		return encode(cb)
	})
	s.Committed = time.Now()
	if err != nil {
		s.endCapture()
		return nil, err
	}
	return s, nil
}

// Wait waits for the step and returns when the device finished it (its
// completed handler's time) and its error.
func (s *Submitted) Wait() (done time.Time, err error) {
	err = s.pending.Wait(context.Background())
	s.endOnce.Do(s.endCapture)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done, err
}
