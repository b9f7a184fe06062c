package emu

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// queue is an MTLCommandQueue's state: a goroutine runs its committed
// command buffers one after another, in commit order, as a GPU would.
type queue struct {
	dev  *device
	work chan *commandBuffer
	once sync.Once
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
}

func queueCommandBuffer(self objc.ID, _ objc.SEL) objc.ID {
	q := stateOf[queue](self)
	if q == nil {
		return 0
	}
	cb := &commandBuffer{queue: q, queueID: self.Retain(), done: make(chan struct{})}
	return newObject(classes.commandBuffer, cb).Autorelease()
}

// commandBuffer is an MTLCommandBuffer's state.
type commandBuffer struct {
	labeled
	queue   *queue
	queueID objc.ID
	self    objc.ID // set by commit
	status  atomic.Uint64
	done    chan struct{}

	encoding bool
	commands []command
	retained map[objc.ID]bool // buffers and pipelines the commands use, retained as Metal does

	// Set by the queue's goroutine before done is closed.
	err        error
	start, end float64
	counters   []msl.Counters
}

// command is one recorded dispatch, or a memory barrier (pipeline nil).
type command struct {
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
	cb.retained = nil
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

// clock is the GPU timestamps' clock: seconds on the monotonic clock.
var clockStart = time.Now()

func clock() float64 { return time.Since(clockStart).Seconds() }

// KernelFault is the code of a kernel's fault in MTLCommandBufferErrorDomain
// (MTLCommandBufferErrorPageFault for an out-of-bounds access, Internal
// otherwise).
const (
	commandBufferErrorInternal  = 1
	commandBufferErrorPageFault = 3
)

// run executes the command buffer's dispatches in order.
func (cb *commandBuffer) run() {
	cb.status.Store(uint64(mtl.CommandBufferStatusScheduled))
	cb.start = clock()
	opts := cb.queue.dev.opts
	for i := range cb.commands {
		if cb.err != nil {
			break // committed with an encoder open: nothing runs
		}
		c := &cb.commands[i]
		if c.pipeline == nil {
			continue // a memory barrier: dispatches already run in order
		}
		d := msl.Dispatch{Grid: c.grid, Order: opts.Order, Seed: opts.Seed, CountSegments: opts.CountSegments}
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
	// that releases the command buffer after waiting frees it at once.
	cb.self.Release()
	close(cb.done)
}

func commandBufferEncoder(self objc.ID, _ objc.SEL) objc.ID {
	cb := stateOf[commandBuffer](self)
	if cb == nil || cb.encoding || cb.status.Load() != uint64(mtl.CommandBufferStatusNotEnqueued) {
		return 0 // Metal allows one open encoder, and none after commit
	}
	cb.encoding = true
	return newObject(classes.encoder, &encoder{cb: cb, cbID: self.Retain()}).Autorelease()
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
	// The queue keeps a committed command buffer, and so what it uses,
	// alive until it has run, even if the program releases it first.
	cb.self = self.Retain()
	cb.queue.submit(cb)
}

func commandBufferWait(self objc.ID, _ objc.SEL) {
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
	code := commandBufferErrorInternal
	if ke := (*msl.KernelError)(nil); errors.As(cb.err, &ke) && ke.OutOfBounds() {
		code = commandBufferErrorPageFault
	}
	return newNSError("MTLCommandBufferErrorDomain", code, cb.err.Error())
}

// doubleResult answers GPUStartTime and GPUEndTime through csrc/imps.c, as
// float64 bits: 0 before the command buffer has completed, as Metal does.
func doubleResult(self objc.ID, cmd objc.SEL) uint64 {
	cb := stateOf[commandBuffer](self)
	if cb == nil {
		return 0
	}
	if s := cb.status.Load(); s != uint64(mtl.CommandBufferStatusCompleted) && s != uint64(mtl.CommandBufferStatusError) {
		return 0
	}
	t := cb.start
	if cmd == fsel.gpuEndTime {
		t = cb.end
	}
	return math.Float64bits(t)
}

// sizeResult answers maxThreadsPerThreadgroup through csrc/imps.c.
func sizeResult(self objc.ID, _ objc.SEL, out uintptr) {
	*(*[3]uint64)(cptr(out)) = [3]uint64{maxThreadsPerThreadgroup, maxThreadsPerThreadgroup, maxThreadsPerThreadgroup}
}

// encoder is an MTLComputeCommandEncoder's state: the arguments set so far,
// copied into each dispatch it records.
type encoder struct {
	cb       *commandBuffer
	cbID     objc.ID
	pipeline *pipeline
	current  command
	ended    bool
}

func (e *encoder) free() {
	if !e.ended {
		e.cb.encoding = false
	}
	e.cbID.Release()
}

// openEncoder returns the state of an encoder that may still record: not
// ended, and its command buffer not committed.
func openEncoder(self objc.ID) *encoder {
	if e := stateOf[encoder](self); e != nil && !e.ended && e.cb.status.Load() == uint64(mtl.CommandBufferStatusNotEnqueued) {
		return e
	}
	return nil
}

func encoderSetPipeline(self objc.ID, _ objc.SEL, p objc.ID) {
	e := openEncoder(self)
	ps := stateOf[pipeline](p)
	if e == nil || ps == nil {
		return
	}
	e.cb.retain(p)
	e.current.pipeline = ps
}

func (e *encoder) setBuffer(id objc.ID, offset, index uintptr) {
	if index >= mtl.MaxBufferBindings {
		return
	}
	b := stateOf[buffer](id)
	if b == nil {
		e.current.buffers[index] = binding{}
		return
	}
	e.cb.retain(id)
	e.current.buffers[index] = binding{buf: b, offset: int(offset)}
}

func encoderSetBuffer(self objc.ID, _ objc.SEL, buf objc.ID, offset, index uintptr) {
	if e := openEncoder(self); e != nil {
		e.setBuffer(buf, offset, index)
	}
}

// twoPointersRange answers setBuffers:offsets:withRange: through csrc/imps.c.
func twoPointersRange(self objc.ID, _ objc.SEL, bufsPtr, offsetsPtr, location, length uintptr) {
	e := openEncoder(self)
	if e == nil || location+length > mtl.MaxBufferBindings {
		return
	}
	b := unsafe.Slice((*uintptr)(cptr(bufsPtr)), length)
	o := unsafe.Slice((*uintptr)(cptr(offsetsPtr)), length)
	for i := range int(length) {
		e.setBuffer(objc.ID(b[i]), o[i], location+uintptr(i))
	}
}

// oneRange answers didModifyRange: through csrc/imps.c.
func oneRange(self objc.ID, _ objc.SEL, location, length uintptr) {
	if b := stateOf[buffer](self); b != nil {
		b.modified++
	}
}

func encoderSetBytes(self objc.ID, _ objc.SEL, bytes, length, index uintptr) {
	e := openEncoder(self)
	if e == nil || index >= mtl.MaxBufferBindings || bytes == 0 || length == 0 {
		return
	}
	cp := make([]byte, length)
	copy(cp, unsafe.Slice((*byte)(cptr(bytes)), int(length)))
	e.current.buffers[index] = binding{bytes: cp}
}

func encoderSetThreadgroupMemoryLength(self objc.ID, _ objc.SEL, length, index uintptr) {
	if e := openEncoder(self); e != nil && index < mtl.MaxBufferBindings {
		e.current.tgMemory[index] = int(length)
	}
}

// twoSizes answers dispatchThreadgroups:threadsPerThreadgroup: and
// dispatchThreads:threadsPerThreadgroup: through csrc/imps.c.
func twoSizes(self objc.ID, cmd objc.SEL, aPtr, bPtr uintptr) {
	a, b := (*[3]uint64)(cptr(aPtr)), (*[3]uint64)(cptr(bPtr))
	e := openEncoder(self)
	if e == nil || e.current.pipeline == nil {
		return
	}
	c := e.current
	tg := [3]int{int(b[0]), int(b[1]), int(b[2])}
	if cmd == fsel.dispatchThreads {
		c.grid = msl.ThreadsGrid([3]int{int(a[0]), int(a[1]), int(a[2])}, tg)
	} else {
		c.grid = msl.ThreadgroupsGrid([3]int{int(a[0]), int(a[1]), int(a[2])}, tg)
	}
	e.cb.commands = append(e.cb.commands, c)
}

func encoderMemoryBarrier(self objc.ID, _ objc.SEL, scope uintptr) {
	if e := openEncoder(self); e != nil {
		e.cb.commands = append(e.cb.commands, command{})
	}
}

func encoderEndEncoding(self objc.ID, _ objc.SEL) {
	if e := stateOf[encoder](self); e != nil && !e.ended {
		e.ended = true
		e.cb.encoding = false
	}
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
