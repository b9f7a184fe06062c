package emu

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// sharedEvent is an MTLSharedEvent's state: a 64-bit value that command
// buffers of any queue, and the CPU, signal and wait for.
type sharedEvent struct {
	labeled
	mu       sync.Mutex
	changed  *sync.Cond
	value    uint64
	notifies []notification
}

// notification is a notifyListener:atValue:block: not yet delivered: the
// block and the listener are retained until it is.
type notification struct {
	at         uint64
	block      objc.Block
	listener   *listener
	listenerID objc.ID
}

func newSharedEvent() *sharedEvent {
	e := &sharedEvent{}
	e.changed = sync.NewCond(&e.mu)
	return e
}

func (e *sharedEvent) free() {
	e.mu.Lock()
	list := e.notifies
	e.notifies = nil
	e.mu.Unlock()
	for _, n := range list {
		n.block.Release()
		n.listenerID.Release()
	}
}

func deviceNewSharedEvent(self objc.ID, _ objc.SEL) objc.ID {
	if stateOf[device](self) == nil {
		return 0
	}
	return newObject(classes.sharedEvent, newSharedEvent())
}

func sharedEventSignaledValue(self objc.ID, _ objc.SEL) uintptr {
	e := stateOf[sharedEvent](self)
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return uintptr(e.value)
}

func sharedEventSetSignaledValue(self objc.ID, _ objc.SEL, v uintptr) {
	if e := stateOf[sharedEvent](self); e != nil {
		e.signal(self, uint64(v))
	}
}

// signal sets the event's value, wakes the command buffers waiting for it
// and posts the notifications whose value it reached to their listeners.
func (e *sharedEvent) signal(self objc.ID, v uint64) {
	e.mu.Lock()
	e.value = v
	var due []notification
	keep := e.notifies[:0]
	for _, n := range e.notifies {
		if n.at <= v {
			due = append(due, n)
		} else {
			keep = append(keep, n)
		}
	}
	e.notifies = keep
	e.mu.Unlock()
	e.changed.Broadcast()
	for _, n := range due {
		e.deliver(self, n, v)
	}
}

// deliver runs a notification's block on its listener's thread, with the
// event (retained until then) and the value.
func (e *sharedEvent) deliver(self objc.ID, n notification, v uint64) {
	self.Retain()
	n.listener.thread.post(func() {
		n.block.Invoke(uintptr(self), uintptr(v))
		n.block.Release()
		self.Release()
		n.listenerID.Release()
	})
}

// sharedEventNotifyListenerAtValueBlock keeps a copy of the block, as
// Metal does, and runs it on the listener's thread once the event's value
// is at least value: at once if it already is.
func sharedEventNotifyListenerAtValueBlock(self objc.ID, _ objc.SEL, listenerID objc.ID, value uintptr, block objc.Block) {
	e, l := stateOf[sharedEvent](self), stateOf[listener](listenerID)
	if e == nil || l == nil || block == 0 {
		return
	}
	n := notification{at: uint64(value), block: block.Copy(), listener: l, listenerID: listenerID.Retain()}
	e.mu.Lock()
	v := e.value
	if v < n.at {
		e.notifies = append(e.notifies, n)
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	e.deliver(self, n, v)
}

// wait blocks until the event's value is at least v, or timeout passes
// (a negative timeout never does); it reports whether the value came.
func (e *sharedEvent) wait(v uint64, timeout time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	var expired bool
	if timeout >= 0 {
		t := time.AfterFunc(timeout, func() {
			e.mu.Lock()
			expired = true
			e.mu.Unlock()
			e.changed.Broadcast()
		})
		defer t.Stop()
	}
	for e.value < v && !expired {
		e.changed.Wait()
	}
	return e.value >= v
}

// listener is an MTLSharedEventListener's state: the thread its
// notifications run on, as Metal runs them on the listener's dispatch
// queue.
type listener struct {
	thread callbackThread
}

func (l *listener) free() { l.thread.stop() }

// listenerInit is -init of the emulated MTLSharedEventListener: a
// listener with a dispatch queue (here a thread) of its own.
var listenerInit = initState(func() *listener { return &listener{} })

// commandBufferEncodeSignalEventValue records the signal of event to
// value once the work encoded before it has run, as Metal does; the queue
// goes on with later command buffers without waiting for anyone.
func commandBufferEncodeSignalEventValue(self objc.ID, _ objc.SEL, event objc.ID, value uintptr) {
	encodeEvent(self, event, "encodeSignalEvent:value:", value, func(_ *commandBuffer, e *sharedEvent) func() {
		return func() { e.signal(event, uint64(value)) }
	})
}

// commandBufferEncodeWaitForEventValue records a wait: the command buffer,
// and so the queue, does not go past it until the event's value is at
// least value, signalled by another queue's command buffer or the CPU. A
// wait longer than the device's timeout fails the command buffer with
// MTLCommandBufferErrorTimeout, as a GPU stops a hung command buffer.
func commandBufferEncodeWaitForEventValue(self objc.ID, _ objc.SEL, event objc.ID, value uintptr) {
	encodeEvent(self, event, "encodeWaitForEvent:value:", value, func(cb *commandBuffer, e *sharedEvent) func() {
		timeout := cb.queue.dev.opts.Timeout
		if timeout == 0 {
			timeout = msl.DefaultTimeout
		}
		return func() {
			if !e.wait(uint64(value), timeout) {
				cb.err = &eventTimeout{value: uint64(value), timeout: timeout}
			}
		}
	})
}

// encodeEvent records the event command that run makes, sent as sel to
// the command buffer self with event and value: refused where event is
// not one of the emulated device's shared events, dropped or refused
// where the command buffer may not encode it (eventEncodable). The command
// buffer holds event until it is released.
func encodeEvent(self objc.ID, event objc.ID, sel string, value uintptr, run func(cb *commandBuffer, e *sharedEvent) func()) {
	cb := stateOf[commandBuffer](self)
	if cb == nil {
		return
	}
	e := stateOf[sharedEvent](event)
	switch {
	case e == nil:
		cb.refuseEvent(sel + " was given an event that is not one of the emulated device's MTLSharedEvents")
	case cb.eventEncodable(sel):
		cb.retain(event)
		note := fmt.Sprintf("%s %s value %d", strings.TrimSuffix(sel, ":value:"), eventName(e), value)
		cb.commands = append(cb.commands, command{note: note, blit: run(cb, e)})
	}
}

// eventName names an event in a capture: by its label, if it has one.
func eventName(e *sharedEvent) string {
	if e.label != "" {
		return fmt.Sprintf("event %q", e.label)
	}
	return fmt.Sprintf("event %p", e)
}

// eventTimeout is the error of a command buffer whose wait for an event
// lasted longer than the device's timeout.
type eventTimeout struct {
	value   uint64
	timeout time.Duration
}

func (e *eventTimeout) Error() string {
	return fmt.Sprintf("encodeWaitForEvent: the event did not reach %d within %v", e.value, e.timeout)
}

// eventEncodable reports whether the command buffer may encode an event
// command: not committed, and no encoder open (Metal requires both); an
// open encoder fails the command buffer, naming what.
func (cb *commandBuffer) eventEncodable(what string) bool {
	if cb.status.Load() != uint64(mtl.CommandBufferStatusNotEnqueued) {
		return false
	}
	if cb.encoding {
		cb.refuseEvent(what + " was sent while an encoder was open; end it first")
		return false
	}
	return true
}

func (cb *commandBuffer) refuseEvent(why string) {
	if cb.status.Load() == uint64(mtl.CommandBufferStatusNotEnqueued) {
		cb.commands = append(cb.commands, command{err: fmt.Errorf("%s", why)})
	}
}
