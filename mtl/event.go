package mtl

import (
	"context"
	"fmt"
	"sync"

	"github.com/ebitengine/purego"
	"github.com/puremetal/puremetal/objc"
)

// SharedEvent is an MTLSharedEvent: a 64-bit value that command buffers of
// any queue of the device, and the CPU, signal and wait for. A command
// buffer that waits for a value ([CommandBuffer.EncodeWaitForEvent]) does
// not run past the wait until another command buffer, of any queue, or
// the CPU ([SharedEvent.SetSignaledValue]) has signalled at least that
// value; the CPU waits for a value with a listener
// ([SharedEvent.NotifyListener], [SharedEvent.Wait]) instead of
// waitUntilCompleted.
type SharedEvent struct{ object }

// NewSharedEvent makes a shared event whose value is 0 (newSharedEvent).
func (d *Device) NewSharedEvent() (*SharedEvent, error) {
	var id objc.ID
	inPool(func() { id = d.ID().Send(asel.newSharedEvent) })
	return owned[SharedEvent](id, "mtl: newSharedEvent returned nil on "+d.Name())
}

// SignaledValue returns the event's value now (signaledValue).
func (e *SharedEvent) SignaledValue() (v uint64) {
	inPool(func() { v = uint64(e.ID().SendWord(asel.signaledValue)) })
	return v
}

// SetSignaledValue signals the event from the CPU (setSignaledValue:):
// command buffers waiting for at most v go on, and the listeners of
// values up to v are notified.
func (e *SharedEvent) SetSignaledValue(v uint64) {
	inPool(func() { e.ID().Send(asel.setSignaledValue, uintptr(v)) })
}

// SetLabel names the event for debugging tools.
func (e *SharedEvent) SetLabel(label string) error {
	return setLabel(e.ID(), "SharedEvent.SetLabel", "shared event", label)
}

// EncodeSignalEvent encodes a signal of the event to value
// (encodeSignalEvent:value:): once the GPU has run all the command
// buffer's work encoded before it, the event's value becomes value. Encode
// it between encoders, not while one is open.
func (c *CommandBuffer) EncodeSignalEvent(e *SharedEvent, value uint64) error {
	if err := c.eventEncodable("EncodeSignalEvent", e); err != nil {
		return err
	}
	inPool(func() { c.ID().Send(asel.encodeSignalEventValue, uintptr(e.ID()), uintptr(value)) })
	return nil
}

// EncodeWaitForEvent encodes a wait (encodeWaitForEvent:value:): the GPU
// runs none of the command buffer's work encoded after it, nor later
// command buffers of the queue, until the event's value is at least value.
// Encode it between encoders, not while one is open.
func (c *CommandBuffer) EncodeWaitForEvent(e *SharedEvent, value uint64) error {
	if err := c.eventEncodable("EncodeWaitForEvent", e); err != nil {
		return err
	}
	inPool(func() { c.ID().Send(asel.encodeWaitForEventVal, uintptr(e.ID()), uintptr(value)) })
	return nil
}

func (c *CommandBuffer) eventEncodable(what string, e *SharedEvent) error {
	switch {
	case c == nil || c.ID() == 0:
		return fmt.Errorf("mtl: %s: nil or released command buffer", what)
	case e == nil || e.ID() == 0:
		return fmt.Errorf("mtl: %s: nil or released event", what)
	case c.open != nil:
		return fmt.Errorf("mtl: %s: an encoder is open; end it before encoding an event", what)
	}
	return nil
}

// SharedEventListener is an MTLSharedEventListener: the dispatch queue on
// which Metal runs the notifications of shared events.
type SharedEventListener struct{ object }

// NewSharedEventListener makes a listener with a dispatch queue of its own
// ([[MTLSharedEventListener alloc] init]).
func NewSharedEventListener() (*SharedEventListener, error) {
	if err := objc.Load(); err != nil {
		return nil, fmt.Errorf("mtl: NewSharedEventListener: %w", err)
	}
	loadSels()
	var id objc.ID
	inPool(func() {
		if cls := objc.GetClass("MTLSharedEventListener"); cls != 0 {
			id = cls.New()
		}
	})
	return owned[SharedEventListener](id, "mtl: the runtime has no MTLSharedEventListener class (make a device first: the emulated device provides one)")
}

// notifications holds the Go functions of notifyListener:atValue:block:
// calls not yet delivered, by event. As for handlers, one block serves
// every call: Metal gives it the event and its value, and each delivery
// runs one waiting function of that event whose value has been reached.
var notifications struct {
	once  sync.Once
	err   error
	block objc.Block

	mu      sync.Mutex
	pending map[objc.ID][]notification
}

type notification struct {
	at uint64
	f  func(uint64)
}

func notifyBlock() error {
	notifications.once.Do(func() {
		invoke := purego.NewCallback(func(_, event, value uintptr) { deliver(objc.ID(event), uint64(value)) })
		notifications.block, notifications.err = objc.NewBlock(invoke)
		notifications.pending = map[objc.ID][]notification{}
	})
	return notifications.err
}

// deliver runs the earliest-registered function of event whose value v
// has reached: each delivery answers one notifyListener call, and every
// call whose value is at most v is due.
func deliver(event objc.ID, v uint64) {
	notifications.mu.Lock()
	list := notifications.pending[event]
	var f func(uint64)
	for i, n := range list {
		if n.at <= v {
			f = n.f
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(notifications.pending, event)
	} else {
		notifications.pending[event] = list
	}
	notifications.mu.Unlock()
	if f != nil {
		f(v)
	}
}

// NotifyListener asks Metal to call f on the listener's dispatch queue
// once the event's value is at least value, at once if it already is
// (notifyListener:atValue:block:). f is given the event's value then; it
// runs on the listener's thread, never the caller's, and must not block.
// The event must not be released before f has run.
func (e *SharedEvent) NotifyListener(l *SharedEventListener, value uint64, f func(v uint64)) error {
	switch {
	case e == nil || e.ID() == 0:
		return fmt.Errorf("mtl: NotifyListener: nil or released event")
	case l == nil || l.ID() == 0:
		return fmt.Errorf("mtl: NotifyListener: nil or released listener")
	case f == nil:
		return fmt.Errorf("mtl: NotifyListener: nil function")
	}
	if err := notifyBlock(); err != nil {
		return fmt.Errorf("mtl: NotifyListener: %w", err)
	}
	notifications.mu.Lock()
	notifications.pending[e.ID()] = append(notifications.pending[e.ID()], notification{value, f})
	notifications.mu.Unlock()
	inPool(func() {
		e.ID().Send(asel.notifyListenerAtValueBlock, uintptr(l.ID()), uintptr(value), uintptr(notifications.block))
	})
	return nil
}

// Wait waits on the CPU until the event's value is at least value, through
// a notification on l, or until ctx is done, and returns ctx's error then.
// A nil ctx is taken as context.Background(). A wait that ctx ends leaves its
// notification registered: it runs, harmlessly, when the value comes.
func (e *SharedEvent) Wait(ctx context.Context, l *SharedEventListener, value uint64) error {
	done := make(chan struct{})
	if err := e.NotifyListener(l, value, func(uint64) { close(done) }); err != nil {
		return err
	}
	if ctx == nil {
		<-done
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mtl: waiting for the event to reach %d (it is %d): %w", value, e.SignaledValue(), ctx.Err())
	}
}
