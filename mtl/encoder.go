package mtl

import (
	"math/bits"
	"sync"

	"github.com/puremetal/puremetal/objc"
)

// MaxBufferBindings is the number of buffer argument slots of a compute
// function (indices 0 to 30).
const MaxBufferBindings = 31

// MaxBytesLength is the most bytes SetBytes may pass (Apple: use a buffer
// for anything larger than 4 KiB).
const MaxBytesLength = 4096

// ComputeCommandEncoder is an MTLComputeCommandEncoder: it records compute
// dispatches and their arguments into a command buffer.
//
// An encoder checks its arguments before sending them. The first bad
// argument is recorded, nothing more is sent to Metal except endEncoding,
// and [ComputeCommandEncoder.EndEncoding] returns the error, so a dispatch
// never runs with an argument missing. Encoding after EndEncoding is such
// an error too: Metal has no encoder left to record it.
type ComputeCommandEncoder struct {
	commandEncoder
	pipeline *ComputePipelineState
}

// encoderScratch holds what setBytes: and setBuffers:offsets:withRange:
// read through pointers. Metal copies them during the message, so an
// encoder takes one from scratchPool at its first such message and gives
// it back at EndEncoding: encoding a command buffer after the first
// allocates none.
type encoderScratch struct {
	buffers [MaxBufferBindings]uintptr
	offsets [MaxBufferBindings]uintptr
	bytes   [MaxBytesLength]byte
}

var scratchPool = sync.Pool{New: func() any { return new(encoderScratch) }}

func (e *commandEncoder) scratchSpace() *encoderScratch {
	if e.scratch == nil {
		e.scratch = scratchPool.Get().(*encoderScratch)
	}
	return e.scratch
}

// SetComputePipelineState sets the pipeline that the following dispatches
// run (setComputePipelineState:). Setting the pipeline already set sends
// nothing.
func (e *ComputeCommandEncoder) SetComputePipelineState(p *ComputePipelineState) {
	if e.refuses("SetComputePipelineState") {
		return
	}
	switch {
	case p == nil:
		e.fail("SetComputePipelineState: nil pipeline")
		return
	case p.ID() == 0:
		e.failReleased("SetComputePipelineState: the pipeline was released")
		return
	case !sameDevice(p.dev, e.dev):
		e.fail("SetComputePipelineState: the pipeline belongs to %s, the encoder to %s", p.dev.describe(), e.dev.describe())
		return
	}
	if p == e.pipeline {
		return
	}
	e.pipeline = p
	e.send(sel.setComputePipelineState, uintptr(p.ID()))
}

func (e *ComputeCommandEncoder) checkIndex(what string, index, n int) bool {
	if index < 0 || n < 0 || index > MaxBufferBindings || n > MaxBufferBindings-index {
		e.fail("%s: buffer indices [%d, %s) outside [0, %d)", what, index, end(index, n), MaxBufferBindings)
		return false
	}
	return true
}

func (e *ComputeCommandEncoder) checkBuffer(what string, b *Buffer, offset, index int) bool {
	if !e.checkBufferAt(what, "buffer", index, b) {
		return false
	}
	if offset < 0 || offset > b.length {
		e.fail("%s: offset %d at index %d outside the buffer's %d bytes", what, offset, index, b.length)
		return false
	}
	return true
}

// SetBuffer binds a buffer, from byte offset on, to a buffer argument
// index (setBuffer:offset:atIndex:).
func (e *ComputeCommandEncoder) SetBuffer(b *Buffer, offset, index int) {
	if e.refuses("SetBuffer") || !e.checkIndex("SetBuffer", index, 1) || !e.checkBuffer("SetBuffer", b, offset, index) {
		return
	}
	e.send(sel.setBufferOffsetAtIndex, uintptr(b.ID()), uintptr(offset), uintptr(index))
}

// SetBuffers binds len(bufs) buffers to consecutive indices from start, in
// one message (setBuffers:offsets:withRange:); offsets[i] is the byte offset
// into bufs[i].
func (e *ComputeCommandEncoder) SetBuffers(bufs []*Buffer, offsets []int, start int) {
	if e.refuses("SetBuffers") || !e.checkIndex("SetBuffers", start, len(bufs)) {
		return
	}
	if len(offsets) != len(bufs) {
		e.fail("SetBuffers: %d buffers but %d offsets", len(bufs), len(offsets))
		return
	}
	s := e.scratchSpace()
	for i, b := range bufs {
		if !e.checkBuffer("SetBuffers", b, offsets[i], start+i) {
			return
		}
		s.buffers[i] = uintptr(b.ID())
		s.offsets[i] = uintptr(offsets[i])
	}
	e.sends++
	objc.SendArgs(e.ID(), sel.setBuffersOffsetsWithRange,
		objc.Word(objc.Pointer(&s.buffers)), objc.Word(objc.Pointer(&s.offsets)),
		objc.Struct16(uintptr(start), uintptr(len(bufs))))
}

// SetBytes copies b into the command buffer as the argument at a buffer
// index (setBytes:length:atIndex:): for small constant data such as a
// kernel's parameters, without allocating a buffer. At most 4 KiB.
func (e *ComputeCommandEncoder) SetBytes(b []byte, index int) {
	if e.refuses("SetBytes") || !e.checkIndex("SetBytes", index, 1) {
		return
	}
	if len(b) == 0 || len(b) > MaxBytesLength {
		e.fail("SetBytes: %d bytes at index %d; want 1 to %d", len(b), index, MaxBytesLength)
		return
	}
	s := e.scratchSpace()
	copy(s.bytes[:], b)
	e.send(sel.setBytesLengthAtIndex, objc.Pointer(&s.bytes), uintptr(len(b)), uintptr(index))
}

// SetThreadgroupMemoryLength sets the size in bytes of the threadgroup
// memory argument at index (setThreadgroupMemoryLength:atIndex:). Metal
// requires the length to be a multiple of 16 bytes.
func (e *ComputeCommandEncoder) SetThreadgroupMemoryLength(length, index int) {
	if e.refuses("SetThreadgroupMemoryLength") || !e.checkIndex("SetThreadgroupMemoryLength", index, 1) {
		return
	}
	if length < 0 || length%16 != 0 {
		e.fail("SetThreadgroupMemoryLength: length %d at index %d is not a non-negative multiple of 16 bytes", length, index)
		return
	}
	e.send(sel.setThreadgroupMemoryLengthAtIndex, uintptr(length), uintptr(index))
}

func (e *ComputeCommandEncoder) checkDispatch(what string, grid, group Size) bool {
	if e.refuses(what) {
		return false
	}
	if e.pipeline == nil {
		e.fail("%s: no compute pipeline set", what)
		return false
	}
	if !grid.positive() || !group.positive() {
		e.fail("%s: grid %v or threadgroup %v has a dimension that is not positive", what, grid, group)
		return false
	}
	if n, ok := group.threads(); !ok || n > uint64(e.pipeline.maxTotal) {
		e.fail("%s: threadgroup %v has %s threads, more than the pipeline's maxTotalThreadsPerThreadgroup %d", what, group, group.threadsText(), e.pipeline.maxTotal)
		return false
	}
	if _, ok := grid.threads(); !ok {
		e.fail("%s: grid %v has more than 2^64-1 elements", what, grid)
		return false
	}
	return true
}

// DispatchThreadgroups runs the pipeline over a grid of threadgroups
// (dispatchThreadgroups:threadsPerThreadgroup:).
func (e *ComputeCommandEncoder) DispatchThreadgroups(threadgroupsPerGrid, threadsPerThreadgroup Size) {
	if !e.checkDispatch("DispatchThreadgroups", threadgroupsPerGrid, threadsPerThreadgroup) {
		return
	}
	groups, _ := threadgroupsPerGrid.threads()
	perGroup, _ := threadsPerThreadgroup.threads()
	if hi, _ := bits.Mul64(groups, perGroup); hi != 0 {
		e.fail("DispatchThreadgroups: %v threadgroups of %v threads is more than 2^64-1 threads", threadgroupsPerGrid, threadsPerThreadgroup)
		return
	}
	e.sends++
	objc.SendArgs(e.ID(), sel.dispatchThreadgroups, threadgroupsPerGrid.struct24(), threadsPerThreadgroup.struct24())
}

// DispatchThreads runs the pipeline over a grid of threads that need not be
// a multiple of the threadgroup size: the threadgroups at the edges are
// smaller (dispatchThreads:threadsPerThreadgroup:).
func (e *ComputeCommandEncoder) DispatchThreads(threadsPerGrid, threadsPerThreadgroup Size) {
	if !e.checkDispatch("DispatchThreads", threadsPerGrid, threadsPerThreadgroup) {
		return
	}
	e.sends++
	objc.SendArgs(e.ID(), sel.dispatchThreads, threadsPerGrid.struct24(), threadsPerThreadgroup.struct24())
}

// MemoryBarrier makes the following dispatches see the memory writes of
// the earlier ones, for the given resources (memoryBarrierWithScope:).
func (e *ComputeCommandEncoder) MemoryBarrier(scope BarrierScope) {
	if e.refuses("MemoryBarrier") {
		return
	}
	e.send(sel.memoryBarrierWithScope, uintptr(scope))
}
