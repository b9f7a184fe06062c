package mtl

import "github.com/puremetal/puremetal/objc"

// BlitCommandEncoder is an MTLBlitCommandEncoder: it records copies between
// buffers, and the synchronization of managed buffers, into a command
// buffer. Like [ComputeCommandEncoder] it checks its arguments before
// sending them; the first bad one stops the encoding and
// [BlitCommandEncoder.EndEncoding] returns it.
type BlitCommandEncoder struct{ commandEncoder }

// BlitCommandEncoder starts encoding copies and synchronizations into the
// command buffer (blitCommandEncoder). Finish with EndEncoding.
func (c *CommandBuffer) BlitCommandEncoder() (*BlitCommandEncoder, error) {
	if c == nil || c.ID() == 0 {
		return nil, c.unusable("CommandBuffer.BlitCommandEncoder")
	}
	var id objc.ID
	inPool(func() { id = c.ID().Send(sel.blitCommandEncoder).Retain() })
	enc, err := owned[BlitCommandEncoder](id, "mtl: blitCommandEncoder returned nil"+noEncoderHint)
	if err == nil {
		enc.opened(c)
	}
	return enc, err
}

// SynchronizeResource makes the GPU's writes to a managed buffer visible
// to the CPU through Contents once the command buffer completes
// (synchronizeResource:). Managed storage, on Macs whose GPU has memory of
// its own, keeps a CPU copy and a GPU copy; the other storage modes need
// no call, and for them it sends nothing.
func (e *BlitCommandEncoder) SynchronizeResource(b *Buffer) {
	if e.refuses("SynchronizeResource") {
		return
	}
	if !e.checkResource("SynchronizeResource", "buffer", b) {
		return
	}
	if b.opts&storageModeMask != ResourceStorageModeManaged {
		return
	}
	e.send(sel.synchronizeResource, uintptr(b.ID()))
}

// CopyFromBuffer copies size bytes from src at srcOffset to dst at dstOffset
// (copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:). Both
// ranges must lie inside their buffers and, as macOS requires, the offsets
// and the size must be multiples of 4 bytes; within one buffer the ranges
// must not overlap (Metal leaves such a copy undefined). Both buffers must
// be the command buffer's device's. A size of 0 sends nothing.
func (e *BlitCommandEncoder) CopyFromBuffer(src *Buffer, srcOffset int, dst *Buffer, dstOffset, size int) {
	if e.refuses("CopyFromBuffer") {
		return
	}
	for _, r := range []struct {
		what   string
		b      *Buffer
		offset int
	}{{"source", src, srcOffset}, {"destination", dst, dstOffset}} {
		if !e.checkResource("CopyFromBuffer", r.what+" buffer", r.b) {
			return
		}
		if r.offset < 0 || size < 0 || r.offset > r.b.length || size > r.b.length-r.offset {
			e.fail("CopyFromBuffer: %s range [%d, %s) outside the buffer's %d bytes", r.what, r.offset, end(r.offset, size), r.b.length)
			return
		}
	}
	if srcOffset%4 != 0 || dstOffset%4 != 0 || size%4 != 0 {
		e.fail("CopyFromBuffer: source offset %d, destination offset %d and size %d must be multiples of 4", srcOffset, dstOffset, size)
		return
	}
	if src.ID() == dst.ID() && size > 0 && srcOffset < dstOffset+size && dstOffset < srcOffset+size {
		e.fail("CopyFromBuffer: source range [%d, %d) and destination range [%d, %d) overlap in the same buffer, which Metal leaves undefined", srcOffset, srcOffset+size, dstOffset, dstOffset+size)
		return
	}
	if size == 0 {
		return
	}
	e.send(sel.copyFromBufferToBuffer, uintptr(src.ID()), uintptr(srcOffset), uintptr(dst.ID()), uintptr(dstOffset), uintptr(size))
}
