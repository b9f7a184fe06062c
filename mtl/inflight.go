package mtl

import (
	"context"
	"fmt"
	"sync"
)

// InFlight keeps up to N command buffers of one queue in flight: committed
// and not yet completed. [InFlight.Submit] commits the next command buffer
// without waiting for the previous ones, and blocks (back-pressure) while N
// are in flight, so a program encodes step t+1 while the GPU runs step t
// and never runs more than N ahead. The queue runs the command buffers in
// the order they were submitted. An InFlight is safe for concurrent use.
//
// Each command buffer is made, encoded and committed inside an
// autorelease pool of its own, on a locked OS thread, and released by its
// completed handler (see [CommandQueue.Submit]), so a loop that submits
// forever keeps its memory flat.
type InFlight struct {
	q     *CommandQueue
	slots chan struct{}

	mu    sync.Mutex
	err   error // the first command buffer's error
	peak  int
	count int
}

// NewInFlight returns an InFlight that keeps up to n command buffers of q
// in flight. n must be at least 1; Metal's own limit is the queue's
// maxCommandBufferCount (64 for newCommandQueue), which n should not
// exceed.
func NewInFlight(q *CommandQueue, n int) (*InFlight, error) {
	if q == nil || q.ID() == 0 {
		return nil, fmt.Errorf("mtl: NewInFlight: nil or released command queue")
	}
	if n < 1 || n > 64 {
		return nil, fmt.Errorf("mtl: NewInFlight: %d command buffers in flight; want 1 to 64 (a queue's default maxCommandBufferCount)", n)
	}
	return &InFlight{q: q, slots: make(chan struct{}, n)}, nil
}

// Max returns N, the most command buffers kept in flight.
func (f *InFlight) Max() int { return cap(f.slots) }

// Len returns how many command buffers are in flight now.
func (f *InFlight) Len() int { return len(f.slots) }

// Peak returns the most command buffers that were in flight at once.
func (f *InFlight) Peak() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peak
}

// Submit waits until fewer than N command buffers are in flight (or ctx is
// done: then it returns ctx's error and commits nothing), then encodes and
// commits one, as [CommandQueue.Submit] does, and returns its Pending. A
// nil ctx is taken as context.Background().
func (f *InFlight) Submit(ctx context.Context, encode func(cb *CommandBuffer) error) (*Pending, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	select {
	case f.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("mtl: InFlight.Submit: waiting for one of %d command buffers in flight: %w", cap(f.slots), ctx.Err())
	}
	f.mu.Lock()
	f.count++
	f.peak = max(f.peak, f.count)
	f.mu.Unlock()
	return f.q.submit("InFlight.Submit", encode, func(p *Pending) {
		if p != nil {
			if c, _ := p.Completion(); c.Err != nil {
				f.mu.Lock()
				if f.err == nil {
					f.err = c.Err
				}
				f.mu.Unlock()
			}
		}
		f.mu.Lock()
		f.count--
		f.mu.Unlock()
		<-f.slots
	})
}

// Wait waits until no command buffer submitted through f is in flight, or
// ctx is done, and returns the first error any of them failed with (or
// ctx's error). Submit calls that run while Wait waits wait with it.
func (f *InFlight) Wait(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	taken := 0
	defer func() {
		for range taken {
			<-f.slots
		}
	}()
	for taken < cap(f.slots) {
		select {
		case f.slots <- struct{}{}:
			taken++
		case <-ctx.Done():
			return fmt.Errorf("mtl: InFlight.Wait: %d command buffers still in flight: %w", cap(f.slots)-taken, ctx.Err())
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
