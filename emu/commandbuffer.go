package emu

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// commandBuffer is an MTLCommandBuffer's state.
type commandBuffer struct {
	labeled
	queue   *queue
	queueID objc.ID
	self    objc.ID // set by commit
	status  atomic.Uint64
	done    chan struct{}

	encoding bool
	// recordStorage holds the commands, the bytes their setBytes bound,
	// and the buffers and pipelines the commands use, retained as Metal
	// does; the queue reuses it once the command buffer is deallocated.
	recordStorage
	handlers handlers // addScheduledHandler: and addCompletedHandler: blocks

	// Set by the queue's goroutine before done is closed.
	err        error
	start, end float64
	counters   []msl.Counters
}

// command is one recorded dispatch, or a memory barrier (pipeline nil), or
// a blit (blit set), or a command the encoder refused (err set), which
// fails the command buffer when it is reached.
type command struct {
	err      error
	note     string // what a blit or event command does, for captures
	blit     func() // a blit encoder's copy or synchronization
	pipeline *pipeline
	buffers  [mtl.MaxBufferBindings]binding
	tgMemory [mtl.MaxBufferBindings]int
	grid     msl.Grid
}

// binding is a buffer argument: an emulated buffer and an offset, or bytes
// copied by setBytes:length:atIndex:.
type binding struct {
	buf    *buffer
	offset int
	bytes  []byte
}

func (cb *commandBuffer) free() {
	for id := range cb.retained {
		id.Release()
	}
	cb.queue.keepStorage(cb.recordStorage)
	cb.recordStorage = recordStorage{}
	cb.handlers.release()
	cb.queueID.Release()
}

// retain keeps id alive until the command buffer is deallocated; each
// object is retained once however often it is bound.
func (cb *commandBuffer) retain(id objc.ID) {
	if cb.retained[id] {
		return
	}
	if cb.retained == nil {
		cb.retained = map[objc.ID]bool{}
	}
	cb.retained[id.Retain()] = true
}

// keep returns a copy of src that lives as long as the command buffer's
// commands, in storage the queue reuses.
func (cb *commandBuffer) keep(src []byte) []byte {
	n := len(cb.bytes)
	if n+len(src) > cap(cb.bytes) {
		// A new block; the copies made so far keep the old one alive.
		cb.bytes, n = make([]byte, 0, max(2*cap(cb.bytes), len(src), 16<<10)), 0
	}
	cb.bytes = append(cb.bytes, src...)
	return cb.bytes[n : n+len(src) : n+len(src)]
}

// clockStart is when the GPU timestamps' clock started.
var clockStart = time.Now()

// clock returns the GPU timestamps' clock: seconds on the monotonic clock.
func clock() float64 { return time.Since(clockStart).Seconds() }

// run executes the command buffer's dispatches in order.
func (cb *commandBuffer) run() {
	cb.status.Store(uint64(mtl.CommandBufferStatusScheduled))
	cb.scheduled(cb.self)
	cb.start = clock()
	opts := cb.queue.dev.opts
	for i := range cb.commands {
		if cb.err != nil {
			break // committed with an encoder open: nothing runs
		}
		c := &cb.commands[i]
		if c.err != nil {
			cb.err = fmt.Errorf("command %d: %w", i, c.err)
			break
		}
		if c.blit != nil {
			c.blit()
			continue
		}
		if c.pipeline == nil {
			continue // a memory barrier: dispatches already run in order
		}
		d := msl.Dispatch{Grid: c.grid, Order: opts.Order, Seed: opts.Seed, Timeout: opts.Timeout, CountSegments: opts.CountSegments, DeviceRaces: opts.DeviceRaces}
		for j, b := range c.buffers {
			switch {
			case b.buf != nil:
				d.Buffers[j] = msl.Binding{Ptr: b.buf.data + uintptr(b.offset), Len: b.buf.length - b.offset}
			case b.bytes != nil:
				d.Buffers[j] = msl.Binding{Ptr: uintptr(unsafe.Pointer(&b.bytes[0])), Len: len(b.bytes)}
			}
		}
		d.ThreadgroupMemoryLength = c.tgMemory
		counters, err := c.pipeline.fn.Run(&d)
		cb.counters = append(cb.counters, counters)
		if err != nil {
			cb.err = fmt.Errorf("dispatch %d (%s): %w", i, c.pipeline.fn.Name, err)
			break
		}
	}
	cb.end = clock()
	if cb.err != nil {
		cb.status.Store(uint64(mtl.CommandBufferStatusError))
	} else {
		cb.status.Store(uint64(mtl.CommandBufferStatusCompleted))
	}
	// Drop the queue's reference before waiters wake, so that a program
	// that releases the command buffer after waiting frees it at once
	// (completed handlers hold one of their own until they have run).
	cb.completed(cb.self)
	cb.self.Release()
	close(cb.done)
}

func commandBufferComputeCommandEncoder(self objc.ID, _ objc.SEL) objc.ID {
	cb := stateOf[commandBuffer](self)
	if !cb.mayEncode() {
		return 0
	}
	e := &encoder{commandEncoder: cb.newEncoder(self)}
	id := newObject(classes.encoder, e)
	e.rec = openRecording(id)
	return id.Autorelease()
}

func commandBufferBlitCommandEncoder(self objc.ID, _ objc.SEL) objc.ID {
	cb := stateOf[commandBuffer](self)
	if !cb.mayEncode() {
		return 0
	}
	return newObject(classes.blitEncoder, &blitEncoder{cb.newEncoder(self)}).Autorelease()
}

// mayEncode reports whether the command buffer may make an encoder: Metal
// allows one open encoder, and none after commit.
func (cb *commandBuffer) mayEncode() bool {
	return cb != nil && !cb.encoding && cb.status.Load() == uint64(mtl.CommandBufferStatusNotEnqueued)
}

// newEncoder opens an encoder of the command buffer self.
func (cb *commandBuffer) newEncoder(self objc.ID) commandEncoder {
	cb.encoding = true
	return commandEncoder{cb: cb, cbID: self.Retain()}
}

func commandBufferCommit(self objc.ID, _ objc.SEL) {
	cb := stateOf[commandBuffer](self)
	if cb == nil || cb.status.Load() != uint64(mtl.CommandBufferStatusNotEnqueued) {
		return
	}
	if cb.encoding {
		// Metal stops the program here; the emulator fails the command
		// buffer instead, without running any of it.
		cb.err = fmt.Errorf("commit: the command buffer has an encoder that was not ended (call endEncoding before commit)")
		cb.encoding = false
	}
	cb.status.Store(uint64(mtl.CommandBufferStatusCommitted))
	cb.captured()
	// The queue keeps a committed command buffer, and so what it uses,
	// alive until it has run, even if the program releases it first.
	cb.self = self.Retain()
	cb.queue.submit(cb)
}

func commandBufferWaitUntilCompleted(self objc.ID, _ objc.SEL) {
	cb := stateOf[commandBuffer](self)
	if cb == nil || cb.status.Load() < uint64(mtl.CommandBufferStatusCommitted) {
		return // Metal returns at once for a buffer that was not committed
	}
	<-cb.done
}

func commandBufferStatus(self objc.ID, _ objc.SEL) uintptr {
	if cb := stateOf[commandBuffer](self); cb != nil {
		return uintptr(cb.status.Load())
	}
	return 0
}

func commandBufferError(self objc.ID, _ objc.SEL) objc.ID {
	cb := stateOf[commandBuffer](self)
	if cb == nil || cb.status.Load() != uint64(mtl.CommandBufferStatusError) {
		return 0
	}
	// MTLCommandBufferErrorPageFault for an out-of-bounds access,
	// MTLCommandBufferErrorTimeout for a dispatch past its time limit,
	// MTLCommandBufferErrorInternal for every other fault
	code := mtl.CommandBufferErrorInternal
	if ke := (*msl.KernelError)(nil); errors.As(cb.err, &ke) {
		switch {
		case ke.OutOfBounds():
			code = mtl.CommandBufferErrorPageFault
		case ke.Timeout():
			code = mtl.CommandBufferErrorTimeout
		}
	}
	if et := (*eventTimeout)(nil); errors.As(cb.err, &et) {
		code = mtl.CommandBufferErrorTimeout
	}
	return newNSError(mtl.CommandBufferErrorDomain, int(code), cb.err.Error())
}

// commandBufferGPUStartTime answers GPUStartTime through csrc/imps.c, as
// float64 bits: 0 before the command buffer has completed, as Metal does.
func commandBufferGPUStartTime(self objc.ID, _ objc.SEL) uint64 {
	return gpuTime(stateOf[commandBuffer](self), func(cb *commandBuffer) float64 { return cb.start })
}

// commandBufferGPUEndTime answers GPUEndTime through csrc/imps.c, as
// commandBufferGPUStartTime does.
func commandBufferGPUEndTime(self objc.ID, _ objc.SEL) uint64 {
	return gpuTime(stateOf[commandBuffer](self), func(cb *commandBuffer) float64 { return cb.end })
}

// gpuTime returns a time of a command buffer that has run, as float64 bits,
// or 0.
func gpuTime(cb *commandBuffer, t func(*commandBuffer) float64) uint64 {
	if cb == nil {
		return 0
	}
	if s := cb.status.Load(); s != uint64(mtl.CommandBufferStatusCompleted) && s != uint64(mtl.CommandBufferStatusError) {
		return 0
	}
	return math.Float64bits(t(cb))
}

// DispatchCounters returns the emulator's counters for each dispatch that
// a completed command buffer ran, in order: bytes loaded and stored per
// buffer binding, SIMD-group operations (by kind) and barriers, the grid,
// threadgroup and private memory, and with Options.CountSegments how the
// accesses coalesce. It is how tests measure a kernel's memory traffic and
// structure. The command buffer must come from an
// emulated device and have completed.
func DispatchCounters(cb *mtl.CommandBuffer) ([]msl.Counters, error) {
	s := stateOf[commandBuffer](cb.ID())
	if s == nil {
		return nil, fmt.Errorf("emu: the command buffer is not from an emulated device")
	}
	switch mtl.CommandBufferStatus(s.status.Load()) {
	case mtl.CommandBufferStatusCompleted, mtl.CommandBufferStatusError:
		return s.counters, nil
	}
	return nil, fmt.Errorf("emu: the command buffer has not completed (status %v)", mtl.CommandBufferStatus(s.status.Load()))
}
