package emu

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/puremetal/puremetal/objc"
)

// The emulated device's GPU capture (MTLCaptureManager): between
// startCaptureWithDescriptor:error: and stopCapture it records each
// command buffer committed to what the descriptor's captureObject names (a
// device: all its queues; a queue; a capture scope: its queue, between
// beginScope and endScope), and stopCapture writes the record to the
// descriptor's outputURL, a .gputrace bundle (a directory, as Xcode's is)
// holding capture.txt: for each command buffer, in commit order, its label
// and queue, and each command with its arguments (a dispatch's kernel,
// grid and threadgroup size, buffer bindings with their labels, lengths
// and offsets, setBytes bytes, threadgroup memory; barriers, blits and
// event waits and signals). It is text, for reading and diffing, not a
// document Xcode opens. Only MTLCaptureDestinationGPUTraceDocument is
// supported.
var capture struct {
	mu      sync.Mutex
	active  bool
	object  objc.ID // retained while capturing
	path    string
	record  strings.Builder
	buffers int
	queues  map[*queue]int
}

// The MTLCaptureDestination values and the codes of MTLCaptureErrorDomain.
const (
	captureDestinationDeveloperTools   = 1
	captureDestinationGPUTraceDocument = 2

	captureErrorNotSupported      = 1
	captureErrorAlreadyCapturing  = 2
	captureErrorInvalidDescriptor = 3
)

var sharedManager struct {
	once sync.Once
	id   objc.ID
}

// captureManagerSharedCaptureManager is +[MTLCaptureManager
// sharedCaptureManager]: one manager for the process, never deallocated.
func captureManagerSharedCaptureManager(objc.ID, objc.SEL) objc.ID {
	// Not an emulated object with state: the manager lives as long as the
	// process, so LiveObjects does not count it.
	sharedManager.once.Do(func() { sharedManager.id = classes.captureManager.New() })
	return sharedManager.id
}

func captureManagerSupportsDestination(_ objc.ID, _ objc.SEL, dest uintptr) uintptr {
	if dest == captureDestinationGPUTraceDocument {
		return 1
	}
	return 0
}

func captureManagerIsCapturing(objc.ID, objc.SEL) uintptr {
	capture.mu.Lock()
	defer capture.mu.Unlock()
	if capture.active {
		return 1
	}
	return 0
}

func captureManagerStartCaptureWithDescriptorError(_ objc.ID, _ objc.SEL, desc objc.ID, errOut uintptr) uintptr {
	fail := func(code int, why string) uintptr {
		storeOut(errOut, newNSError("MTLCaptureErrorDomain", code, "startCaptureWithDescriptor:error: "+why))
		return 0
	}
	d := stateOf[captureDescriptor](desc)
	if d == nil {
		return fail(captureErrorInvalidDescriptor, "the descriptor is not one of the emulated device's MTLCaptureDescriptors")
	}
	if d.destination != captureDestinationGPUTraceDocument {
		return fail(captureErrorNotSupported, fmt.Sprintf("destination %d: the emulated device captures only to a GPU trace document (MTLCaptureDestinationGPUTraceDocument)", d.destination))
	}
	path := urlPath(d.outputURL)
	switch {
	case path == "":
		return fail(captureErrorInvalidDescriptor, "a GPU trace document needs an outputURL")
	case filepath.Ext(path) != ".gputrace":
		return fail(captureErrorInvalidDescriptor, fmt.Sprintf("outputURL %s does not end in .gputrace", path))
	}
	if _, err := os.Stat(path); err == nil {
		return fail(captureErrorInvalidDescriptor, fmt.Sprintf("outputURL %s already exists", path))
	}
	if d.object == 0 || (stateOf[device](d.object) == nil && stateOf[queue](d.object) == nil && stateOf[captureScope](d.object) == nil) {
		return fail(captureErrorInvalidDescriptor, "captureObject is not an emulated device, command queue or capture scope")
	}
	capture.mu.Lock()
	defer capture.mu.Unlock()
	if capture.active {
		return fail(captureErrorAlreadyCapturing, "a capture is already running")
	}
	capture.active, capture.object, capture.path = true, d.object.Retain(), path
	capture.record.Reset()
	capture.buffers, capture.queues = 0, map[*queue]int{}
	fmt.Fprintf(&capture.record, "puremetal emulated GPU capture\ndevice: %s\ncapture object: %s\n", Name, describeCaptureObject(d.object))
	return 1
}

func describeCaptureObject(id objc.ID) string {
	switch {
	case stateOf[device](id) != nil:
		return "device"
	case stateOf[queue](id) != nil:
		return "command queue"
	}
	s := stateOf[captureScope](id)
	if s.label != "" {
		return fmt.Sprintf("capture scope %q", s.label)
	}
	return "capture scope"
}

// captureManagerStopCapture writes the record and ends the capture.
func captureManagerStopCapture(objc.ID, objc.SEL) {
	capture.mu.Lock()
	if !capture.active {
		capture.mu.Unlock()
		return
	}
	fmt.Fprintf(&capture.record, "end of capture: %d command buffers\n", capture.buffers)
	path, text, object := capture.path, capture.record.String(), capture.object
	capture.active, capture.object = false, 0
	capture.record.Reset()
	capture.mu.Unlock()
	object.Release()
	if err := os.MkdirAll(path, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "emu: writing the GPU capture: %v\n", err)
		return
	}
	if err := os.WriteFile(filepath.Join(path, "capture.txt"), []byte(text), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "emu: writing the GPU capture: %v\n", err)
	}
}

// captured records a command buffer being committed, if the capture
// running covers it.
func (cb *commandBuffer) captured() {
	capture.mu.Lock()
	defer capture.mu.Unlock()
	if !capture.active {
		return
	}
	covered := false
	if d := stateOf[device](capture.object); d != nil {
		covered = d == cb.queue.dev
	} else if q := stateOf[queue](capture.object); q != nil {
		covered = q == cb.queue
	} else if s := stateOf[captureScope](capture.object); s != nil {
		s.mu.Lock()
		covered = s.queue == cb.queue && s.open
		s.mu.Unlock()
	}
	if !covered {
		return
	}
	qn, ok := capture.queues[cb.queue]
	if !ok {
		qn = len(capture.queues) + 1
		capture.queues[cb.queue] = qn
	}
	w := &capture.record
	fmt.Fprintf(w, "\ncommand buffer %d", capture.buffers)
	if cb.label != "" {
		fmt.Fprintf(w, " %q", cb.label)
	}
	fmt.Fprintf(w, " on queue %d: %d commands\n", qn, len(cb.commands))
	capture.buffers++
	for i, c := range cb.commands {
		switch {
		case c.err != nil:
			fmt.Fprintf(w, "  %d: refused: %v\n", i, c.err)
		case c.note != "":
			fmt.Fprintf(w, "  %d: %s\n", i, c.note)
		case c.blit != nil:
			fmt.Fprintf(w, "  %d: blit\n", i)
		case c.pipeline == nil:
			fmt.Fprintf(w, "  %d: memory barrier\n", i)
		default:
			g := c.grid
			if g.Threads != [3]int{} {
				fmt.Fprintf(w, "  %d: dispatchThreads kernel %s threads %s threads per threadgroup %s\n", i, c.pipeline.fn.Name, size3(g.Threads), size3(g.ThreadsPerThreadgroup))
			} else {
				fmt.Fprintf(w, "  %d: dispatchThreadgroups kernel %s threadgroups %s threads per threadgroup %s\n", i, c.pipeline.fn.Name, size3(g.Threadgroups), size3(g.ThreadsPerThreadgroup))
			}
			for j, b := range c.buffers {
				switch {
				case b.buf != nil:
					label := ""
					if b.buf.label != "" {
						label = fmt.Sprintf(" %q", b.buf.label)
					}
					fmt.Fprintf(w, "     buffer(%d): buffer%s length %d offset %d\n", j, label, b.buf.length, b.offset)
				case b.bytes != nil:
					fmt.Fprintf(w, "     buffer(%d): setBytes %d bytes %s\n", j, len(b.bytes), hexBytes(b.bytes))
				}
			}
			for j, n := range c.tgMemory {
				if n != 0 {
					fmt.Fprintf(w, "     threadgroup(%d): %d bytes\n", j, n)
				}
			}
		}
	}
}

func size3(s [3]int) string { return fmt.Sprintf("%dx%dx%d", s[0], s[1], s[2]) }

// hexBytes is b in hex, the first 64 bytes of a longer b.
func hexBytes(b []byte) string {
	if len(b) > 64 {
		return hex.EncodeToString(b[:64]) + fmt.Sprintf("... (%d more)", len(b)-64)
	}
	return hex.EncodeToString(b)
}

// captureScope is an MTLCaptureScope's state: its queue, and whether it is
// between beginScope and endScope.
type captureScope struct {
	labeled
	mu      sync.Mutex
	queue   *queue
	queueID objc.ID
	open    bool
}

func (s *captureScope) free() { s.queueID.Release() }

func captureManagerNewCaptureScopeWithCommandQueue(_ objc.ID, _ objc.SEL, q objc.ID) objc.ID {
	qs := stateOf[queue](q)
	if qs == nil {
		return 0
	}
	return newObject(classes.captureScope, &captureScope{queue: qs, queueID: q.Retain()})
}

func captureScopeBeginScope(self objc.ID, _ objc.SEL) { setScope(self, true) }

func captureScopeEndScope(self objc.ID, _ objc.SEL) { setScope(self, false) }

func setScope(self objc.ID, open bool) {
	if s := stateOf[captureScope](self); s != nil {
		s.mu.Lock()
		s.open = open
		s.mu.Unlock()
	}
}

// captureDescriptor is the state of the emulated MTLCaptureDescriptor.
type captureDescriptor struct {
	object, outputURL objc.ID // retained
	destination       uintptr
}

func (d *captureDescriptor) free() {
	d.object.Release()
	d.outputURL.Release()
}

var captureDescriptorInit = initState(func() *captureDescriptor {
	return &captureDescriptor{destination: captureDestinationDeveloperTools}
})

var captureDescriptorCaptureObject, captureDescriptorSetCaptureObject = objectProperty(func(d *captureDescriptor) *objc.ID { return &d.object })

var captureDescriptorDestination, captureDescriptorSetDestination = property(func(d *captureDescriptor) *uintptr { return &d.destination })

var captureDescriptorOutputURL, captureDescriptorSetOutputURL = objectProperty(func(d *captureDescriptor) *objc.ID { return &d.outputURL })
