package mtl

import (
	"fmt"

	"github.com/puremetal/puremetal/objc"
)

// CaptureManager is the process's MTLCaptureManager: it captures the GPU
// work of a device, a command queue or a capture scope into a GPU trace
// that Xcode opens (a .gputrace document). On a Mac, capturing outside
// Xcode needs MTL_CAPTURE_ENABLED=1 in the environment (or
// MetalCaptureEnabled in the app's Info.plist). The emulated device writes
// a readable record of the dispatches and their arguments instead (see
// package emu).
type CaptureManager struct{ id objc.ID }

// CaptureDestination is MTLCaptureDestination: where a capture goes.
type CaptureDestination int

// Capture destinations.
const (
	CaptureDestinationDeveloperTools   CaptureDestination = 1
	CaptureDestinationGPUTraceDocument CaptureDestination = 2
)

// SharedCaptureManager returns the process's capture manager
// ([MTLCaptureManager sharedCaptureManager]), which is never released. On
// Linux make an emulated device first: it provides the class.
func SharedCaptureManager() (*CaptureManager, error) {
	if err := objc.Load(); err != nil {
		return nil, fmt.Errorf("mtl: SharedCaptureManager: %w", err)
	}
	loadSels()
	cls := objc.GetClass("MTLCaptureManager")
	if cls == 0 {
		return nil, fmt.Errorf("mtl: the runtime has no MTLCaptureManager class (make a device first: the emulated device provides one)")
	}
	var id objc.ID
	inPool(func() { id = cls.Send(asel.sharedCaptureManager) })
	if id == 0 {
		return nil, fmt.Errorf("mtl: sharedCaptureManager returned nil")
	}
	return &CaptureManager{id}, nil
}

// SupportsDestination reports whether captures may go to d
// (supportsDestination:).
func (m *CaptureManager) SupportsDestination(d CaptureDestination) (ok bool) {
	inPool(func() { ok = objc.SendBool(m.id, asel.supportsDestination, uintptr(d)) })
	return ok
}

// IsCapturing reports whether a capture is running (isCapturing).
func (m *CaptureManager) IsCapturing() (ok bool) {
	inPool(func() { ok = objc.SendBool(m.id, asel.isCapturing) })
	return ok
}

// Capturable is what a capture may cover: a *Device (all its queues), a
// *CommandQueue, or a *CaptureScope (its queue, between Begin and End).
type Capturable interface{ ID() objc.ID }

// CaptureDescriptor is an MTLCaptureDescriptor, as a Go value: what to
// capture, to which destination, and, for a GPU trace document, the file
// (a path ending in .gputrace, which must not exist yet).
type CaptureDescriptor struct {
	Object      Capturable
	Destination CaptureDestination
	OutputPath  string
}

// StartCapture starts capturing (startCaptureWithDescriptor:error:). A
// capture already running, an unsupported destination or a bad output
// path is an error holding Metal's reason.
func (m *CaptureManager) StartCapture(desc CaptureDescriptor) error {
	if desc.Object == nil || desc.Object.ID() == 0 {
		return fmt.Errorf("mtl: StartCapture: nothing to capture (a nil or released object)")
	}
	var err error
	inPool(func() {
		d, nerr := newInstance("MTLCaptureDescriptor")
		if nerr != nil {
			err = nerr
			return
		}
		defer d.Release()
		d.Send(asel.setCaptureObject, uintptr(desc.Object.ID()))
		d.Send(asel.setDestination, uintptr(desc.Destination))
		if desc.OutputPath != "" {
			url, uerr := fileURL(desc.OutputPath)
			if uerr != nil {
				err = fmt.Errorf("mtl: StartCapture: %w", uerr)
				return
			}
			d.Send(asel.setOutputURL, uintptr(url))
		}
		nserr := new(objc.ID)
		if !objc.SendBool(m.id, asel.startCaptureWithDescriptorError, uintptr(d), objc.Pointer(nserr)) {
			err = fmt.Errorf("mtl: starting the GPU capture to %q: %s", desc.OutputPath, errorText(*nserr, "startCaptureWithDescriptor:error: returned NO"))
		}
	})
	return err
}

// StopCapture ends the capture running (stopCapture), which writes its
// document.
func (m *CaptureManager) StopCapture() { inPool(func() { m.id.Send(asel.stopCapture) }) }

// CaptureScope is an MTLCaptureScope: a range of a queue's command
// buffers, between Begin and End, that a capture of the scope covers.
type CaptureScope struct{ object }

// NewCaptureScope makes a capture scope of the queue
// (newCaptureScopeWithCommandQueue:).
func (m *CaptureManager) NewCaptureScope(q *CommandQueue) (*CaptureScope, error) {
	if q == nil || q.ID() == 0 {
		return nil, fmt.Errorf("mtl: NewCaptureScope: nil or released command queue")
	}
	var id objc.ID
	inPool(func() { id = m.id.Send(asel.newCaptureScopeWithCommandQueue, uintptr(q.ID())) })
	return owned[CaptureScope](id, "mtl: newCaptureScopeWithCommandQueue: returned nil")
}

// Begin opens the scope (beginScope): command buffers of its queue
// committed from now until End are captured.
func (s *CaptureScope) Begin() { inPool(func() { s.ID().Send(asel.beginScope) }) }

// End closes the scope (endScope).
func (s *CaptureScope) End() { inPool(func() { s.ID().Send(asel.endScope) }) }

// SetLabel names the scope, as Xcode lists it.
func (s *CaptureScope) SetLabel(label string) error {
	return setLabel(s.ID(), "CaptureScope.SetLabel", "capture scope", label)
}
