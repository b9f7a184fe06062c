package mtl

import (
	"fmt"

	"github.com/puremetal/puremetal/objc"
)

// CommandQueue is an MTLCommandQueue: it makes command buffers and runs
// them in the order they are committed.
type CommandQueue struct {
	object
	dev *Device
}

// CommandBuffer makes a command buffer (commandBuffer), retained for the
// caller, who releases it when done with it. Encode it inside an
// autorelease pool of the caller's (see the package documentation), or
// use [CommandQueue.Run].
func (q *CommandQueue) CommandBuffer() (cb *CommandBuffer, err error) {
	if q == nil {
		return nil, invalidf("CommandQueue.CommandBuffer: nil command queue")
	}
	if q.ID() == 0 {
		return nil, released("CommandQueue.CommandBuffer", "command queue")
	}
	inPool(func() { cb, err = q.commandBuffer() })
	return cb, err
}

// The unexported forms of the command buffer's methods send without a pool
// of their own: CommandQueue.Run calls them inside the one pool it opens.

func (q *CommandQueue) commandBuffer() (*CommandBuffer, error) {
	cb, err := owned[CommandBuffer](q.ID().Send(sel.commandBuffer).Retain(), "mtl: commandBuffer returned nil")
	if err == nil {
		cb.dev = q.dev
	}
	return cb, err
}

// Device returns the device that made the queue.
func (q *CommandQueue) Device() *Device { return q.dev }

// CommandBuffer is an MTLCommandBuffer: encoded work that the GPU runs
// once committed.
type CommandBuffer struct {
	object
	dev *Device // the queue's
	// open is the encoder made and not yet ended; refused is the first
	// argument an ended encoder refused. CommandQueue.RunCommandBuffer reads
	// them before it commits.
	open    *commandEncoder
	refused error
}

// ComputeCommandEncoder starts encoding compute work into the command
// buffer (computeCommandEncoder). Finish with EndEncoding.
func (c *CommandBuffer) ComputeCommandEncoder() (enc *ComputeCommandEncoder, err error) {
	if c == nil || c.ID() == 0 {
		return nil, c.unusable("CommandBuffer.ComputeCommandEncoder")
	}
	inPool(func() { enc, err = c.computeCommandEncoder() })
	return enc, err
}

func (c *CommandBuffer) computeCommandEncoder() (*ComputeCommandEncoder, error) {
	enc, err := owned[ComputeCommandEncoder](c.ID().Send(sel.computeCommandEncoder).Retain(), "mtl: computeCommandEncoder returned nil"+noEncoderHint)
	if err == nil {
		enc.opened(c)
	}
	return enc, err
}

// unusable is the error of method on a nil or released command buffer.
func (c *CommandBuffer) unusable(method string) error {
	if c == nil {
		return invalidf("%s: nil command buffer", method)
	}
	return released(method, "command buffer")
}

// noEncoderHint says why a command buffer may return no encoder.
const noEncoderHint = " (is another encoder still open, or was the buffer committed?)"

// Commit submits the command buffer to its queue to run.
func (c *CommandBuffer) Commit() { inPool(c.commit) }

func (c *CommandBuffer) commit() { c.ID().Send(sel.commit) }

// WaitUntilCompleted blocks until the command buffer has run (or failed).
func (c *CommandBuffer) WaitUntilCompleted() { inPool(c.waitUntilCompleted) }

func (c *CommandBuffer) waitUntilCompleted() { c.ID().Send(sel.waitUntilCompleted) }

// Status returns where the command buffer is in its life.
func (c *CommandBuffer) Status() CommandBufferStatus {
	var s uintptr
	inPool(func() { s = c.ID().SendWord(sel.status) })
	return CommandBufferStatus(s)
}

// Error returns the error that stopped the command buffer, or nil: a
// [*CommandBufferError] holding Metal's NSError domain, code and
// description.
func (c *CommandBuffer) Error() (err error) {
	inPool(func() { err = c.failure() })
	return err
}

func (c *CommandBuffer) failure() error { return commandBufferError(c.ID().Send(sel.errorSel)) }

// GPUStartTime returns when the GPU started running the command buffer, in
// seconds of the host's monotonic clock (CFTimeInterval).
func (c *CommandBuffer) GPUStartTime() (t float64) {
	inPool(func() { t = c.gpuStartTime() })
	return t
}

func (c *CommandBuffer) gpuStartTime() float64 { return objc.SendFloat64(c.ID(), sel.gpuStartTime) }

// GPUEndTime returns when the GPU finished running the command buffer, in
// the same clock as GPUStartTime.
func (c *CommandBuffer) GPUEndTime() (t float64) {
	inPool(func() { t = c.gpuEndTime() })
	return t
}

func (c *CommandBuffer) gpuEndTime() float64 { return objc.SendFloat64(c.ID(), sel.gpuEndTime) }

// SetLabel names the command buffer for debugging tools.
func (c *CommandBuffer) SetLabel(label string) error {
	return setLabel(c.ID(), "CommandBuffer.SetLabel", "command buffer", label)
}

// Label returns the command buffer's label.
func (c *CommandBuffer) Label() string { return getLabel(c.ID()) }

// RunCommandBuffer runs one command buffer and waits for it: it makes a
// command buffer, calls encode with it, commits, waits until the command
// buffer has completed and releases it, on every path. encode makes the
// command buffer's encoders, compute and blit, one after the other, and
// ends each. RunCommandBuffer returns the first error: making the command
// buffer, encode's own error, an argument any of its encoders refused
// (whether or not encode looked at EndEncoding's error), an encoder encode
// left open (RunCommandBuffer ends it), or the error the command buffer
// failed with. When anything fails before the commit, nothing is
// committed. The command buffer is RunCommandBuffer's to commit and
// release: an encode that commits or releases it makes RunCommandBuffer
// return an error saying so. If encode panics, RunCommandBuffer ends the
// encoder it left open, releases the command buffer and lets the panic go
// on.
//
// Like [CommandQueue.Run], the whole sequence runs inside one autorelease
// pool on a locked OS thread.
func (q *CommandQueue) RunCommandBuffer(encode func(cb *CommandBuffer) error) error {
	_, err := q.run("RunCommandBuffer", encode, false)
	return err
}

// Run runs one command buffer of compute work and waits for it: it makes a
// command buffer and a compute command encoder, calls encode, ends
// encoding, commits, waits until the command buffer has completed and
// releases both, on every path. It returns the first error: making the
// command buffer or encoder, encode's own error, an argument the encoder
// refused, or the error the command buffer failed with. When encode or the
// encoder fails, nothing is committed. If encode panics, Run ends and
// releases what it made and lets the panic go on.
//
// The whole sequence runs inside one autorelease pool on a locked OS
// thread, so whatever Metal autoreleases while encoding, committing and
// waiting is drained when Run returns: a decode loop calling Run once per
// token keeps its memory flat. Callers that keep several command buffers in
// flight (commit the next before the previous completes) use
// [CommandQueue.CommandBuffer] and its methods directly; work that needs
// more than one encoder uses [CommandQueue.RunCommandBuffer].
func (q *CommandQueue) Run(encode func(enc *ComputeCommandEncoder) error) error {
	_, err := q.run("Run", computeWork(encode), false)
	return err
}

// RunTimed is [CommandQueue.Run] that also returns how long the GPU ran the
// command buffer: GPUEndTime - GPUStartTime, in seconds.
func (q *CommandQueue) RunTimed(encode func(enc *ComputeCommandEncoder) error) (gpuSeconds float64, err error) {
	return q.run("RunTimed", computeWork(encode), true)
}

// computeWork returns the encoding of a command buffer with one compute
// encoder, which encode fills; nil for a nil encode, which run refuses.
func computeWork(encode func(enc *ComputeCommandEncoder) error) func(cb *CommandBuffer) error {
	if encode == nil {
		return nil
	}
	return func(cb *CommandBuffer) error {
		enc, err := cb.computeCommandEncoder()
		if err != nil {
			return err
		}
		err = encode(enc)
		if endErr := enc.EndEncoding(); err == nil {
			err = endErr
		}
		return err
	}
}

// encode runs encode on the command buffer for the queue's method what,
// and returns encode's error, else an error for an encoder that encode
// left open (which encode ends), else the command buffer's refusal of a
// command (refused).
func (cb *CommandBuffer) encode(what string, encode func(cb *CommandBuffer) error) error {
	err := encode(cb)
	if open := cb.open; open != nil {
		open.EndEncoding()
		if err == nil {
			err = fmt.Errorf("mtl: %s: an encoder was left open; end every encoder before returning", what)
		}
	}
	if err == nil {
		err = cb.refused
	}
	return err
}

func (q *CommandQueue) run(what string, encode func(cb *CommandBuffer) error, timed bool) (gpuSeconds float64, err error) {
	if q == nil {
		return 0, invalidf("CommandQueue.%s: nil command queue", what)
	}
	if q.ID() == 0 {
		return 0, released("CommandQueue."+what, "command queue")
	}
	if encode == nil {
		return 0, invalidf("CommandQueue.%s: nil encode function", what)
	}
	// One pool for the whole command buffer: the methods below send
	// without pools of their own.
	inPool(func() {
		var cb *CommandBuffer
		cb, err = q.commandBuffer()
		if err != nil {
			return
		}
		defer cb.Release()
		// An encoder encode leaves open is ended (and released) on every
		// path, a panic of encode's included, which then goes on up.
		defer func() {
			if open := cb.open; open != nil {
				open.EndEncoding()
			}
		}()
		err = cb.encode(what, encode)
		if err == nil && cb.ID() == 0 {
			err = fmt.Errorf("mtl: %s: encode released the command buffer, so nothing ran; %s releases it", what, what)
		}
		if err != nil {
			return
		}
		if s := CommandBufferStatus(cb.ID().SendWord(sel.status)); s != CommandBufferStatusNotEnqueued {
			cb.waitUntilCompleted()
			err = fmt.Errorf("mtl: %s: encode committed the command buffer (status %v); %s commits it", what, s, what)
			return
		}
		cb.commit()
		cb.waitUntilCompleted()
		if err = cb.failure(); err != nil {
			return
		}
		if timed {
			gpuSeconds = cb.gpuEndTime() - cb.gpuStartTime()
		}
	})
	return gpuSeconds, err
}
