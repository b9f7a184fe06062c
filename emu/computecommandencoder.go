package emu

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// encoder is an MTLComputeCommandEncoder's state: the arguments set so far,
// copied into each dispatch it records.
type encoder struct {
	commandEncoder
	current command
	rec     *recording // where the C methods record its messages; nil: the Go methods answer
}

// free replays what the encoder recorded (an encoder released without
// endEncoding), then drops its references.
func (e *encoder) free() {
	e.replay()
	e.commandEncoder.free()
}

// openEncoder returns the state of a compute encoder that may still
// record.
func openEncoder(self objc.ID) *encoder { return openState[encoder](self) }

// The methods below answer an encoder's messages when the C methods of
// csrc/imps.c do not record them (see recording); replay applies the
// recorded ones through the same encoder methods.

func encoderSetComputePipelineState(self objc.ID, _ objc.SEL, p objc.ID) {
	if e := openEncoder(self); e != nil {
		e.setPipeline(p)
	}
}

func (e *encoder) setPipeline(p objc.ID) {
	ps := stateOf[pipeline](p)
	if ps == nil {
		return
	}
	if err := otherDevice("setComputePipelineState: pipeline", p, ps.dev, e.cb.queue.dev); err != nil {
		e.refuse(err)
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
	if b.dev != e.cb.queue.dev {
		e.refuse(otherDevice(fmt.Sprintf("buffer at index %d:", index), id, b.dev, e.cb.queue.dev))
		return
	}
	e.cb.retain(id)
	e.current.buffers[index] = binding{buf: b, offset: int(offset)}
}

func encoderSetBufferOffsetAtIndex(self objc.ID, _ objc.SEL, buf objc.ID, offset, index uintptr) {
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
		e.refuse(buffersRangeError(location, length))
		return
	}
	b := unsafe.Slice((*uintptr)(cptr(bufsPtr)), length)
	o := unsafe.Slice((*uintptr)(cptr(offsetsPtr)), length)
	for i := range int(length) {
		e.setBuffer(objc.ID(b[i]), o[i], location+uintptr(i))
	}
}

// buffersRangeError is the refusal of setBuffers:offsets:withRange: with a
// range outside the argument table.
func buffersRangeError(location, length uintptr) error {
	return fmt.Errorf("setBuffers:offsets:withRange: range {%d, %d} outside [0, %d)", location, length, mtl.MaxBufferBindings)
}

func encoderSetBytesLengthAtIndex(self objc.ID, _ objc.SEL, bytes, length, index uintptr) {
	e := openEncoder(self)
	if e == nil {
		return
	}
	var src []byte
	if bytes != 0 && length > 0 && length <= mtl.MaxBytesLength {
		src = unsafe.Slice((*byte)(cptr(bytes)), int(length))
	}
	e.setBytes(src, bytes, length, index)
}

// setBytes binds a copy of src, the length bytes at ptr (nil if they are
// not to be read), at index.
func (e *encoder) setBytes(src []byte, ptr, length, index uintptr) {
	if index >= mtl.MaxBufferBindings || ptr == 0 || length == 0 || length > mtl.MaxBytesLength || len(src) != int(length) {
		e.refuse(fmt.Errorf("setBytes:length:atIndex: %d bytes at %#x, index %d; want 1 to %d bytes at an index in [0, %d)", length, ptr, index, mtl.MaxBytesLength, mtl.MaxBufferBindings))
		return
	}
	e.current.buffers[index] = binding{bytes: e.cb.keep(src)}
}

func encoderSetThreadgroupMemoryLengthAtIndex(self objc.ID, _ objc.SEL, length, index uintptr) {
	if e := openEncoder(self); e != nil {
		e.setThreadgroupMemoryLength(length, index)
	}
}

func (e *encoder) setThreadgroupMemoryLength(length, index uintptr) {
	if index >= mtl.MaxBufferBindings {
		e.refuse(fmt.Errorf("threadgroup memory index %d outside [0, %d)", index, mtl.MaxBufferBindings))
		return
	}
	e.current.tgMemory[index] = int(length) // msl refuses a length that is not a multiple of 16
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
	if e := openEncoder(self); e != nil {
		e.dispatch(*(*[3]uint64)(cptr(gridPtr)), *(*[3]uint64)(cptr(groupPtr)), threads)
	}
}

// dispatch records a dispatch of grid a and threadgroup b, the grid
// counting threads or threadgroups.
func (e *encoder) dispatch(a, b [3]uint64, threads bool) {
	if e.current.pipeline == nil {
		e.refuse(fmt.Errorf("dispatch with no compute pipeline state set"))
		return
	}
	c := e.current
	if err := checkGrid(a, b, threads); err != nil {
		e.refuse(err)
		return
	}
	if err := checkValues(c); err != nil {
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

// checkValues refuses a value bound with setBytes to a reference
// parameter (constant T&) whose length is not sizeof(T): Metal reads the
// first bytes of a longer one without a word (a Go float64 where the
// kernel reads a float gives 0) and past the end of a shorter one.
func checkValues(c command) error {
	for _, p := range c.pipeline.fn.Params {
		if p.Kind != msl.Buffer || p.Size == 0 {
			continue
		}
		if v := c.buffers[p.Index].bytes; v != nil && len(v) != p.Size {
			return fmt.Errorf("%d bytes bound with setBytes at index %d, but parameter %s of %s is a reference to %d bytes: bind a value of its type (in Go, float32 for float, uint32 for uint)",
				len(v), p.Index, p.Name, c.pipeline.fn.Name, p.Size)
		}
	}
	return nil
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

func encoderMemoryBarrierWithScope(self objc.ID, _ objc.SEL, scope uintptr) {
	if e := openEncoder(self); e != nil {
		e.record(command{})
	}
}

func encoderEndEncoding(self objc.ID, _ objc.SEL) {
	if e := stateOf[encoder](self); e != nil {
		e.replay()
		e.end()
	}
}
