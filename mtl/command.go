package mtl

import (
	"fmt"

	"github.com/puremetal/puremetal/objc"
)

// CommandQueue is an MTLCommandQueue: it makes command buffers and runs
// them in the order they are committed.
type CommandQueue struct{ object }

// CommandBuffer makes a command buffer (commandBuffer), retained for the
// caller, who releases it when done with it.
func (q *CommandQueue) CommandBuffer() (*CommandBuffer, error) {
	var id objc.ID
	inPool(func() { id = objc.ID(q.ID().Send(sel.commandBuffer)).Retain() })
	if id == 0 {
		return nil, fmt.Errorf("mtl: commandBuffer returned nil")
	}
	c := &CommandBuffer{}
	c.set(id)
	return c, nil
}

// CommandBuffer is an MTLCommandBuffer: encoded work that the GPU runs
// once committed.
type CommandBuffer struct{ object }

// ComputeCommandEncoder starts encoding compute work into the command
// buffer (computeCommandEncoder). Finish with EndEncoding.
func (c *CommandBuffer) ComputeCommandEncoder() (*ComputeCommandEncoder, error) {
	var id objc.ID
	inPool(func() { id = objc.ID(c.ID().Send(sel.computeCommandEncoder)).Retain() })
	if id == 0 {
		return nil, fmt.Errorf("mtl: computeCommandEncoder returned nil (is another encoder still open, or was the buffer committed?)")
	}
	e := &ComputeCommandEncoder{}
	e.set(id)
	return e, nil
}

// Commit submits the command buffer to its queue to run.
func (c *CommandBuffer) Commit() { c.ID().Send(sel.commit) }

// WaitUntilCompleted blocks until the command buffer has run (or failed).
func (c *CommandBuffer) WaitUntilCompleted() { c.ID().Send(sel.waitUntilCompleted) }

// Status returns where the command buffer is in its life.
func (c *CommandBuffer) Status() CommandBufferStatus {
	return CommandBufferStatus(c.ID().Send(sel.status))
}

// Error returns the error that stopped the command buffer, or nil; it holds
// Metal's NSError domain, code and description.
func (c *CommandBuffer) Error() error {
	var err error
	inPool(func() { err = objc.ErrorFromNSError(objc.ID(c.ID().Send(sel.errorSel))) })
	if err != nil {
		return fmt.Errorf("mtl: command buffer failed: %w", err)
	}
	return nil
}

// GPUStartTime returns when the GPU started running the command buffer, in
// seconds of the host's monotonic clock (CFTimeInterval).
func (c *CommandBuffer) GPUStartTime() float64 { return objc.SendFloat64(c.ID(), sel.gpuStartTime) }

// GPUEndTime returns when the GPU finished running the command buffer, in
// the same clock as GPUStartTime.
func (c *CommandBuffer) GPUEndTime() float64 { return objc.SendFloat64(c.ID(), sel.gpuEndTime) }

// SetLabel names the command buffer for debugging tools.
func (c *CommandBuffer) SetLabel(label string) error { return setLabel(c.ID(), label) }

// Label returns the command buffer's label.
func (c *CommandBuffer) Label() string { return getLabel(c.ID()) }
