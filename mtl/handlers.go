package mtl

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ebitengine/purego"
	"github.com/puremetal/puremetal/objc"
)

// Completion is what a command buffer's handler learns: its status when
// the handler runs, the error it failed with (nil unless Status is
// CommandBufferStatusError) and, for a completed handler, when the GPU
// started and finished running it (GPUStartTime and GPUEndTime, 0 in a
// scheduled handler).
type Completion struct {
	Status                   CommandBufferStatus
	Err                      error
	GPUStartTime, GPUEndTime float64
}

// GPUSeconds is GPUEndTime - GPUStartTime: how long the GPU ran the
// command buffer.
func (c Completion) GPUSeconds() float64 { return c.GPUEndTime - c.GPUStartTime }

// handlers holds the Go handlers added to command buffers not yet run, by
// command buffer and kind. Metal is given one block per command buffer and
// kind, shared by every command buffer: the block's argument, the command
// buffer, names the handlers to run. So however many command buffers a
// program commits, it makes two blocks and two callbacks in all.
var handlers struct {
	once   sync.Once
	err    error
	blocks [2]objc.Block // completed, scheduled

	mu      sync.Mutex
	pending [2]map[objc.ID][]func(Completion)
	count   atomic.Int64 // handlers added and not yet run or dropped
}

const (
	completedKind = 0
	scheduledKind = 1
)

func handlerBlocks() error {
	handlers.once.Do(func() {
		for kind := range handlers.blocks {
			invoke := purego.NewCallback(func(_, cb uintptr) { runHandlers(kind, objc.ID(cb)) })
			if handlers.blocks[kind], handlers.err = objc.NewBlock(invoke); handlers.err != nil {
				return
			}
			handlers.pending[kind] = map[objc.ID][]func(Completion){}
		}
	})
	return handlers.err
}

// PendingHandlers returns how many handlers have been added to command
// buffers and have neither run nor been dropped (with a command buffer
// released before it was committed): a program that commits and releases
// its command buffers sees it return to where it was.
func PendingHandlers() int { return int(handlers.count.Load()) }

// AddCompletedHandler adds h to the handlers Metal calls once the command
// buffer has completed or failed (addCompletedHandler:). Add it before
// Commit: Metal refuses handlers added later, and so does this method.
//
// The handlers of a command buffer run in the order they were added (one
// block given to Metal runs them all), on a thread of Metal's (a Metal
// dispatch queue on a Mac, a goroutine locked to its own OS thread on the
// emulated device), never on the goroutine that committed, inside an
// autorelease pool; they must return quickly and not block,
// for the handlers of later command buffers wait for them. h is given the
// command buffer's status, its error, and its GPU start and end times; the
// command buffer stays alive while h runs, even if the program released
// its *CommandBuffer after Commit. h must not panic.
func (c *CommandBuffer) AddCompletedHandler(h func(Completion)) error {
	return c.addHandler(completedKind, "AddCompletedHandler", h)
}

// AddScheduledHandler adds h to the handlers Metal calls once the command
// buffer has been scheduled to run: its dependencies are resolved and the
// GPU is about to run it (addScheduledHandler:). The rules of
// [CommandBuffer.AddCompletedHandler] apply; h's Completion has the status
// (Scheduled, or later if the GPU was quick) and no times.
func (c *CommandBuffer) AddScheduledHandler(h func(Completion)) error {
	return c.addHandler(scheduledKind, "AddScheduledHandler", h)
}

func (c *CommandBuffer) addHandler(kind int, what string, h func(Completion)) error {
	if c == nil || c.ID() == 0 {
		return fmt.Errorf("mtl: %s: nil or released command buffer", what)
	}
	if h == nil {
		return fmt.Errorf("mtl: %s: nil handler", what)
	}
	if err := handlerBlocks(); err != nil {
		return fmt.Errorf("mtl: %s: %w", what, err)
	}
	var err error
	inPool(func() {
		id := c.ID()
		if s := CommandBufferStatus(id.SendWord(sel.status)); s != CommandBufferStatusNotEnqueued {
			err = fmt.Errorf("mtl: %s: the command buffer is %v; add handlers before Commit", what, s)
			return
		}
		handlers.mu.Lock()
		list := handlers.pending[kind][id]
		handlers.pending[kind][id] = append(list, h)
		handlers.mu.Unlock()
		handlers.count.Add(1)
		switch { // Metal copies the block
		case len(list) > 0:
		case kind == completedKind:
			id.Send(asel.addCompletedHandler, uintptr(handlers.blocks[kind]))
		default:
			id.Send(asel.addScheduledHandler, uintptr(handlers.blocks[kind]))
		}
	})
	return err
}

// runHandlers is the blocks' function: it runs the handlers of kind added
// to the command buffer cb, once.
func runHandlers(kind int, cb objc.ID) {
	handlers.mu.Lock()
	list := handlers.pending[kind][cb]
	delete(handlers.pending[kind], cb)
	handlers.mu.Unlock()
	if len(list) == 0 {
		return
	}
	var c Completion
	inPool(func() {
		c.Status = CommandBufferStatus(cb.SendWord(sel.status))
		if c.Status == CommandBufferStatusError {
			c.Err = (&CommandBuffer{}).withID(cb).failure()
		}
		if kind == completedKind {
			c.GPUStartTime = objc.SendFloat64(cb, sel.gpuStartTime)
			c.GPUEndTime = objc.SendFloat64(cb, sel.gpuEndTime)
		}
	})
	for _, h := range list {
		h(c)
		handlers.count.Add(-1)
	}
}

// withID makes c a borrowed view of the command buffer id, for reading it
// inside a handler; it is never released.
func (c *CommandBuffer) withID(id objc.ID) *CommandBuffer {
	c.set(id)
	return c
}

// dropHandlers forgets the handlers of a command buffer that will never
// run them: one released before it was committed.
func dropHandlers(id objc.ID) {
	handlers.mu.Lock()
	defer handlers.mu.Unlock()
	for kind := range handlers.pending {
		if list, ok := handlers.pending[kind][id]; ok {
			handlers.count.Add(-int64(len(list)))
			delete(handlers.pending[kind], id)
		}
	}
}

func hasHandlers(id objc.ID) bool {
	handlers.mu.Lock()
	defer handlers.mu.Unlock()
	for kind := range handlers.pending {
		if len(handlers.pending[kind][id]) > 0 {
			return true
		}
	}
	return false
}

// Release releases the Go value's reference to the command buffer. A
// committed command buffer stays alive, retained by its queue, until it
// has run and its handlers have returned; the handlers of one released
// before it was committed are dropped, for they would never run. A second
// call does nothing.
func (c *CommandBuffer) Release() {
	if id := c.ID(); id != 0 && hasHandlers(id) {
		var s uintptr
		inPool(func() { s = id.SendWord(sel.status) })
		if CommandBufferStatus(s) == CommandBufferStatusNotEnqueued {
			dropHandlers(id)
		}
	}
	c.object.Release()
}

// Pending is a committed command buffer the program has not waited for:
// [CommandQueue.Submit] returns one. It holds no Metal object (its
// command buffer is released by its own completed handler), so a Pending
// that is never waited for leaks nothing.
type Pending struct {
	done chan struct{}
	c    Completion
}

// Done returns a channel closed once the command buffer has completed or
// failed and its Completion is known.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait waits until the command buffer has completed, or ctx is done, and
// returns the error the command buffer failed with, or ctx's error (the
// command buffer still runs: Metal cannot take back committed work). A
// nil ctx is taken as context.Background().
func (p *Pending) Wait(ctx context.Context) error {
	if ctx == nil {
		<-p.done
		return p.c.Err
	}
	select {
	case <-p.done:
		return p.c.Err
	case <-ctx.Done():
		return fmt.Errorf("mtl: waiting for a command buffer: %w", ctx.Err())
	}
}

// Completion returns the command buffer's Completion, and whether it has
// completed; before it has, the Completion is empty.
func (p *Pending) Completion() (Completion, bool) {
	select {
	case <-p.done:
		return p.c, true
	default:
		return Completion{}, false
	}
}

// Submit commits one command buffer without waiting for it: it makes a
// command buffer, calls encode with it, adds a completed handler and
// commits, on a locked OS thread inside one autorelease pool, as
// [CommandQueue.RunCommandBuffer] does up to its commit, with the same
// errors before the commit (then nothing is committed and the Pending is
// nil). The command buffer's own error, and its GPU times, are the
// Pending's. The command buffer is released by its completed handler, so
// the queue's order and Metal's retains are all that keep it: buffers
// and pipelines encode used may be released once Submit returns.
func (q *CommandQueue) Submit(encode func(cb *CommandBuffer) error) (*Pending, error) {
	return q.submit("Submit", encode, nil)
}

// submit is Submit, with then called (on the handler's thread) with the
// Pending once it is done, or with nil when nothing was committed.
func (q *CommandQueue) submit(what string, encode func(cb *CommandBuffer) error, then func(*Pending)) (*Pending, error) {
	if q == nil || q.ID() == 0 {
		if then != nil {
			then(nil)
		}
		return nil, fmt.Errorf("mtl: %s: nil or released command queue", what)
	}
	if encode == nil {
		if then != nil {
			then(nil)
		}
		return nil, invalidf("%s: nil encode function", what)
	}
	if err := handlerBlocks(); err != nil {
		if then != nil {
			then(nil)
		}
		return nil, fmt.Errorf("mtl: %s: %w", what, err)
	}
	p := &Pending{done: make(chan struct{})}
	var err error
	inPool(func() {
		var cb *CommandBuffer
		cb, err = q.commandBuffer()
		if err != nil {
			return
		}
		committed := false
		defer func() {
			if !committed {
				cb.Release()
			}
		}()
		err = cb.encode(what, encode)
		if err != nil {
			return
		}
		if err = cb.AddCompletedHandler(func(c Completion) {
			p.c = c
			cb.Release() // the queue keeps it until the handler returns
			close(p.done)
			if then != nil {
				then(p)
			}
		}); err != nil {
			return
		}
		committed = true
		cb.commit()
	})
	if err != nil {
		if then != nil {
			then(nil)
		}
		return nil, err
	}
	return p, nil
}
