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

	// spare holds the recording storage of deallocated command buffers,
	// for the next ones: a steady stream of command buffers records its
	// commands with no allocation.
	spareMu sync.Mutex
	spare   []recordStorage
}

// recordStorage is a command buffer's recording: its commands, the bytes
// setBytes bound, and the objects it retains.
type recordStorage struct {
	commands []command
	bytes    []byte
	retained map[objc.ID]bool
}

// maxSpare is how many recordings a queue keeps for reuse.
const maxSpare = 8

// takeStorage returns a spare recording, emptied, or none.
func (q *queue) takeStorage() recordStorage {
	q.spareMu.Lock()
	defer q.spareMu.Unlock()
	n := len(q.spare)
	if n == 0 {
		return recordStorage{}
	}
	r := q.spare[n-1]
	q.spare[n-1] = recordStorage{}
	q.spare = q.spare[:n-1]
	return r
}

// keepStorage takes back the recording of a deallocated command buffer,
// its commands zeroed so that it holds no state alive.
func (q *queue) keepStorage(r recordStorage) {
	clear(r.commands)
	clear(r.retained)
	r.commands, r.bytes = r.commands[:0], r.bytes[:0]
	q.spareMu.Lock()
	defer q.spareMu.Unlock()
	if len(q.spare) < maxSpare {
		q.spare = append(q.spare, r)
	}
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
	cb.recordStorage = q.takeStorage()
	return newObject(classes.commandBuffer, cb).Autorelease()
}
