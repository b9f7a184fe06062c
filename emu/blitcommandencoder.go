package emu

import (
	"fmt"
	"unsafe"

	"github.com/puremetal/puremetal/objc"
)

// blitEncoder is an MTLBlitCommandEncoder's state.
type blitEncoder struct{ commandEncoder }

// openBlitEncoder returns the state of a blit encoder that may still
// record.
func openBlitEncoder(self objc.ID) *blitEncoder { return openState[blitEncoder](self) }

// blitEncoderSynchronizeResource records the copy of a managed buffer's
// GPU memory to its CPU memory; other buffers need none.
func blitEncoderSynchronizeResource(self objc.ID, _ objc.SEL, resource objc.ID) {
	e := openBlitEncoder(self)
	if e == nil {
		return
	}
	b := stateOf[buffer](resource)
	if b == nil {
		e.refuse(fmt.Errorf("synchronizeResource: %#x is not a buffer of the emulated device", uintptr(resource)))
		return
	}
	if err := otherDevice("synchronizeResource: buffer", resource, b.dev, e.cb.queue.dev); err != nil {
		e.refuse(err)
		return
	}
	if b.cpu == nil {
		return
	}
	e.cb.retain(resource)
	e.record(command{blit: b.synchronize})
}

// blitEncoderCopyFromBufferSourceOffsetToBufferDestinationOffsetSize
// records a copy between buffers, checked as Metal's validation checks it:
// both buffers of the command buffer's device, both ranges inside their
// buffers, offsets and size multiples of 4 (the macOS rule), and within one
// buffer ranges that do not overlap (Metal leaves such a copy undefined).
func blitEncoderCopyFromBufferSourceOffsetToBufferDestinationOffsetSize(self objc.ID, _ objc.SEL, src objc.ID, srcOffset uintptr, dst objc.ID, dstOffset, size uintptr) {
	e := openBlitEncoder(self)
	if e == nil {
		return
	}
	s, d := stateOf[buffer](src), stateOf[buffer](dst)
	var err error
	switch {
	case s == nil || d == nil:
		err = fmt.Errorf("source %#x or destination %#x is not a buffer of the emulated device", uintptr(src), uintptr(dst))
	case srcOffset > uintptr(s.length) || size > uintptr(s.length)-srcOffset:
		err = fmt.Errorf("source range [%d, %d+%d) outside the buffer's %d bytes", srcOffset, srcOffset, size, s.length)
	case dstOffset > uintptr(d.length) || size > uintptr(d.length)-dstOffset:
		err = fmt.Errorf("destination range [%d, %d+%d) outside the buffer's %d bytes", dstOffset, dstOffset, size, d.length)
	case srcOffset%4 != 0 || dstOffset%4 != 0 || size%4 != 0:
		err = fmt.Errorf("source offset %d, destination offset %d and size %d must be multiples of 4", srcOffset, dstOffset, size)
	case s == d && size > 0 && srcOffset < dstOffset+size && dstOffset < srcOffset+size:
		err = fmt.Errorf("source range [%d, %d) and destination range [%d, %d) overlap in the same buffer, which Metal leaves undefined", srcOffset, srcOffset+size, dstOffset, dstOffset+size)
	default:
		if err = otherDevice("source buffer", src, s.dev, e.cb.queue.dev); err == nil {
			err = otherDevice("destination buffer", dst, d.dev, e.cb.queue.dev)
		}
	}
	if err != nil {
		e.refuse(fmt.Errorf("copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size: %w", err))
		return
	}
	e.cb.retain(src)
	e.cb.retain(dst)
	e.record(command{blit: func() {
		copy(unsafe.Slice((*byte)(cptr(d.data+dstOffset)), size), unsafe.Slice((*byte)(cptr(s.data+srcOffset)), size))
	}})
}

func blitEncoderEndEncoding(self objc.ID, _ objc.SEL) {
	if e := stateOf[blitEncoder](self); e != nil {
		e.end()
	}
}
