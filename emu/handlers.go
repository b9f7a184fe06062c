package emu

import (
	"runtime"
	"sync"

	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// callbackThread runs blocks one after another, in the order posted, on a
// goroutine locked to an OS thread of its own: the emulated device's
// dispatch queue, on which a command queue's scheduled and completed
// handlers, and a shared event listener's notifications, run as Metal runs
// them on a queue of its own, never on the thread that committed.
type callbackThread struct {
	once sync.Once
	work chan func()
	done chan struct{}
}

// post runs f on the thread, after what was posted before it.
func (t *callbackThread) post(f func()) {
	t.once.Do(func() {
		t.work = make(chan func(), 64)
		t.done = make(chan struct{})
		go func(work <-chan func(), done chan<- struct{}) {
			runtime.LockOSThread()
			defer close(done)
			for f := range work {
				inPool(f)
			}
		}(t.work, t.done)
	})
	t.work <- f
}

// stop lets the thread finish what was posted, then end. Nothing may be
// posted afterwards.
func (t *callbackThread) stop() {
	t.once.Do(func() {}) // a thread never started is not started now
	if t.work != nil {
		close(t.work)
	}
}

// inPool runs f inside an autorelease pool, as a dispatch queue's thread
// drains one after each block.
func inPool(f func()) {
	pool := objc.NewAutoreleasePool()
	defer pool.Drain()
	f()
}

// handlers are the blocks added to a command buffer by
// addScheduledHandler: and addCompletedHandler:, copied as Metal copies
// them.
type handlers struct {
	mu                   sync.Mutex
	scheduled, completed []objc.Block
}

func (h *handlers) add(completed bool, block objc.Block) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if completed {
		h.completed = append(h.completed, block.Copy())
	} else {
		h.scheduled = append(h.scheduled, block.Copy())
	}
}

// take returns the blocks of one kind and forgets them.
func (h *handlers) take(completed bool) []objc.Block {
	h.mu.Lock()
	defer h.mu.Unlock()
	var list []objc.Block
	if completed {
		list, h.completed = h.completed, nil
	} else {
		list, h.scheduled = h.scheduled, nil
	}
	return list
}

// release releases the blocks of a command buffer that never ran them.
func (h *handlers) release() {
	for _, b := range append(h.take(false), h.take(true)...) {
		b.Release()
	}
}

func commandBufferAddCompletedHandler(self objc.ID, _ objc.SEL, block objc.Block) {
	addHandler(self, true, block)
}

func commandBufferAddScheduledHandler(self objc.ID, _ objc.SEL, block objc.Block) {
	addHandler(self, false, block)
}

// addHandler keeps a copy of a handler block of a command buffer not yet
// committed; Metal refuses one added later, and so does the emulator
// (the block is not kept, so it never runs).
func addHandler(self objc.ID, completed bool, block objc.Block) {
	cb := stateOf[commandBuffer](self)
	if cb == nil || block == 0 || cb.status.Load() != uint64(mtl.CommandBufferStatusNotEnqueued) {
		return
	}
	cb.handlers.add(completed, block)
}

// scheduled posts the command buffer's scheduled handlers to its queue's
// callback thread, with a reference to the command buffer that is released
// once they have run.
func (cb *commandBuffer) scheduled(self objc.ID) { cb.post(self, false) }

// completed posts the completed handlers the same way; it runs after the
// command buffer's status is final.
func (cb *commandBuffer) completed(self objc.ID) { cb.post(self, true) }

func (cb *commandBuffer) post(self objc.ID, completed bool) {
	list := cb.handlers.take(completed)
	if len(list) == 0 {
		return
	}
	self.Retain()
	cb.queue.callbacks.post(func() {
		for _, b := range list {
			b.Invoke(uintptr(self))
			b.Release()
		}
		self.Release()
	})
}
