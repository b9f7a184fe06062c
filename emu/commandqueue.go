package emu

import (
	"sync"

	"github.com/puremetal/puremetal/objc"
)

// queue is an MTLCommandQueue's state: a goroutine runs its committed
// command buffers one after another, in commit order, as a GPU would.
type queue struct {
	dev  *device
	work chan *commandBuffer
	once sync.Once
	// callbacks runs the handlers of the queue's command buffers.
	callbacks callbackThread
}

func newQueue(d *device) *queue { return &queue{dev: d} }

func (q *queue) submit(cb *commandBuffer) {
	q.once.Do(func() {
		q.work = make(chan *commandBuffer, 64)
		go func(work <-chan *commandBuffer) {
			for cb := range work {
				cb.run()
			}
		}(q.work)
	})
	q.work <- cb
}

func (q *queue) free() {
	if q.work != nil {
		close(q.work) // the worker finishes what was committed, then stops
	}
	q.callbacks.stop()
}

func queueCommandBuffer(self objc.ID, _ objc.SEL) objc.ID {
	q := stateOf[queue](self)
	if q == nil {
		return 0
	}
	cb := &commandBuffer{queue: q, queueID: self.Retain(), done: make(chan struct{})}
	return newObject(classes.commandBuffer, cb).Autorelease()
}
