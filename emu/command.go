package emu

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
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

// command is one recorded dispatch, or a memory barrier (pipeline nil), or
// a blit (blit set), or a command the encoder refused (err set), which
// fails the command buffer when it is reached.
type command struct {
	err      error
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

// clockStart is when the GPU timestamps' clock started.
var clockStart = time.Now()

// clock returns the GPU timestamps' clock: seconds on the monotonic clock.
func clock() float64 { return time.Since(clockStart).Seconds() }

// The codes of a failed command buffer in MTLCommandBufferErrorDomain:
// MTLCommandBufferErrorPageFault for an out-of-bounds access,
// MTLCommandBufferErrorInternal for every other fault.
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
		d := msl.Dispatch{Grid: c.grid, Order: opts.Order, Seed: opts.Seed}
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
	if !cb.mayEncode() {
		return 0
	}
	return newObject(classes.encoder, &encoder{commandEncoder: cb.newEncoder(self)}).Autorelease()
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

// commandEncoder is the state every encoder has (MTLCommandEncoder): its
// command buffer, retained, and whether it has ended.
type commandEncoder struct {
	cb    *commandBuffer
	cbID  objc.ID
	ended bool
}

func (e *commandEncoder) free() {
	e.end()
	e.cbID.Release()
}

// end ends the encoding (endEncoding), after which the command buffer may
// make another encoder.
func (e *commandEncoder) end() {
	if !e.ended {
		e.ended = true
		e.cb.encoding = false
	}
}

// recording reports whether the encoder may still record: not ended, and
// its command buffer not committed.
func (e *commandEncoder) recording() bool {
	return !e.ended && e.cb.status.Load() == uint64(mtl.CommandBufferStatusNotEnqueued)
}

// record appends a command to the command buffer.
func (e *commandEncoder) record(c command) { e.cb.commands = append(e.cb.commands, c) }

// refuse records an argument that Metal's validation refuses: the command
// buffer fails when it reaches it, naming it, instead of running with the
// argument missing.
func (e *commandEncoder) refuse(err error) { e.record(command{err: err}) }

// encoder is an MTLComputeCommandEncoder's state: the arguments set so far,
// copied into each dispatch it records.
type encoder struct {
	commandEncoder
	pipeline *pipeline
	current  command
}

// openEncoder returns the state of a compute encoder that may still
// record.
func openEncoder(self objc.ID) *encoder {
	if e := stateOf[encoder](self); e != nil && e.recording() {
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
		e.refuse(fmt.Errorf("buffer index %d outside [0, %d)", index, mtl.MaxBufferBindings))
		return
	}
	b := stateOf[buffer](id)
	if b == nil {
		e.current.buffers[index] = binding{}
		return
	}
	if offset > uintptr(b.length) {
		e.refuse(fmt.Errorf("offset %d at buffer index %d outside the buffer's %d bytes", offset, index, b.length))
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

// encoderSetBuffersOffsetsWithRange answers setBuffers:offsets:withRange:
// through csrc/imps.c.
func encoderSetBuffersOffsetsWithRange(self objc.ID, _ objc.SEL, bufsPtr, offsetsPtr, location, length uintptr) {
	e := openEncoder(self)
	if e == nil {
		return
	}
	if location > mtl.MaxBufferBindings || length > mtl.MaxBufferBindings-location {
		e.refuse(fmt.Errorf("setBuffers:offsets:withRange: range {%d, %d} outside [0, %d)", location, length, mtl.MaxBufferBindings))
		return
	}
	b := unsafe.Slice((*uintptr)(cptr(bufsPtr)), length)
	o := unsafe.Slice((*uintptr)(cptr(offsetsPtr)), length)
	for i := range int(length) {
		e.setBuffer(objc.ID(b[i]), o[i], location+uintptr(i))
	}
}

// bufferDidModifyRange answers didModifyRange: through csrc/imps.c.
func bufferDidModifyRange(self objc.ID, _ objc.SEL, location, length uintptr) {
	if b := stateOf[buffer](self); b != nil {
		b.didModifyRange(location, length)
	}
}

func encoderSetBytes(self objc.ID, _ objc.SEL, bytes, length, index uintptr) {
	e := openEncoder(self)
	if e == nil {
		return
	}
	if index >= mtl.MaxBufferBindings || bytes == 0 || length == 0 || length > mtl.MaxBytesLength {
		e.refuse(fmt.Errorf("setBytes:length:atIndex: %d bytes at %#x, index %d; want 1 to %d bytes at an index in [0, %d)", length, bytes, index, mtl.MaxBytesLength, mtl.MaxBufferBindings))
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

// encoderDispatchThreadgroupsThreadsPerThreadgroup answers
// dispatchThreadgroups:threadsPerThreadgroup: through csrc/imps.c.
func encoderDispatchThreadgroupsThreadsPerThreadgroup(self objc.ID, _ objc.SEL, threadgroupsPerGrid, threadsPerThreadgroup uintptr) {
	dispatch(self, threadgroupsPerGrid, threadsPerThreadgroup, false)
}

// encoderDispatchThreadsThreadsPerThreadgroup answers
// dispatchThreads:threadsPerThreadgroup: through csrc/imps.c.
func encoderDispatchThreadsThreadsPerThreadgroup(self objc.ID, _ objc.SEL, threadsPerGrid, threadsPerThreadgroup uintptr) {
	dispatch(self, threadsPerGrid, threadsPerThreadgroup, true)
}

// dispatch records a dispatch of the grid and threadgroup sizes at gridPtr
// and groupPtr (MTLSize), the grid counting threads or threadgroups.
func dispatch(self objc.ID, gridPtr, groupPtr uintptr, threads bool) {
	a, b := (*[3]uint64)(cptr(gridPtr)), (*[3]uint64)(cptr(groupPtr))
	e := openEncoder(self)
	if e == nil {
		return
	}
	if e.current.pipeline == nil {
		e.refuse(fmt.Errorf("dispatch with no compute pipeline state set"))
		return
	}
	c := e.current
	if err := checkGrid(*a, *b, threads); err != nil {
		e.refuse(err)
		return
	}
	tg := [3]int{int(b[0]), int(b[1]), int(b[2])}
	if threads {
		c.grid = msl.ThreadsGrid([3]int{int(a[0]), int(a[1]), int(a[2])}, tg)
	} else {
		c.grid = msl.ThreadgroupsGrid([3]int{int(a[0]), int(a[1]), int(a[2])}, tg)
	}
	e.record(c)
}

// checkGrid refuses a dispatch whose threadgroup has more threads than the
// device allows, or whose grid has more threads than an int counts
// (products computed without overflow). grid counts threads for
// dispatchThreads:threadsPerThreadgroup:, threadgroups otherwise.
func checkGrid(grid, group [3]uint64, threads bool) error {
	perGroup, ok := product(group[0], group[1], group[2])
	if !ok || perGroup == 0 || perGroup > maxThreadsPerThreadgroup {
		return fmt.Errorf("threadgroup %v: want 1 to %d threads in all", group, maxThreadsPerThreadgroup)
	}
	total, ok := product(grid[0], grid[1], grid[2])
	if ok && !threads {
		total, ok = product(total, perGroup, 1)
	}
	if !ok || total == 0 {
		return fmt.Errorf("grid %v of threadgroup %v: the thread count is 0 or overflows", grid, group)
	}
	return nil
}

// product returns a*b*c, and false if it exceeds math.MaxInt.
func product(a, b, c uint64) (uint64, bool) {
	hi, ab := bits.Mul64(a, b)
	if hi != 0 {
		return 0, false
	}
	hi, abc := bits.Mul64(ab, c)
	return abc, hi == 0 && abc <= math.MaxInt
}

func encoderMemoryBarrier(self objc.ID, _ objc.SEL, scope uintptr) {
	if e := openEncoder(self); e != nil {
		e.record(command{})
	}
}

func encoderEndEncoding(self objc.ID, _ objc.SEL) {
	if e := stateOf[encoder](self); e != nil {
		e.end()
	}
}

// DispatchCounters returns the emulator's counters for each dispatch that
// a completed command buffer ran, in order: bytes loaded and stored per
// buffer binding, SIMD-group operations and barriers. It is how tests
// measure a kernel's memory traffic. The command buffer must come from an
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
