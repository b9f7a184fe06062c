package mtl

import (
	"fmt"

	"github.com/puremetal/puremetal/objc"
)

// commandEncoder is what every encoder of a command buffer has
// (MTLCommandEncoder): the first argument it refused, whether it has
// ended, and a count of the messages it sent.
type commandEncoder struct {
	object
	err   error
	ended bool
	sends int
	// buffer is the command buffer the encoder records into, which keeps
	// track of its open encoder for CommandQueue.RunCommandBuffer.
	buffer *CommandBuffer
	// dev is the device of the command buffer's queue: buffers and
	// pipelines of another device are refused.
	dev *Device
	// scratch, while held, is the encoder's encoderScratch.
	scratch *encoderScratch
}

// opened records e as the open encoder of cb.
func (e *commandEncoder) opened(cb *CommandBuffer) {
	e.buffer = cb
	e.dev = cb.dev
	cb.open = e
}

// fail records the first refusal, an error wrapping ErrInvalidArgument.
func (e *commandEncoder) fail(format string, args ...any) {
	if e.err == nil {
		e.refused(invalidf(format, args...))
	}
}

// failReleased records the first refusal of a released argument, an error
// wrapping ErrInvalidArgument and ErrReleased.
func (e *commandEncoder) failReleased(format string, args ...any) {
	if e.err == nil {
		e.refused(releasedArg(format, args...))
	}
}

// refused records err as the encoder's first refusal. Once the encoder
// has ended (a use after EndEncoding) it is the command buffer's too, so
// that CommandQueue.RunCommandBuffer commits nothing: the caller meant
// that work to run.
func (e *commandEncoder) refused(err error) {
	e.err = err
	if cb := e.buffer; e.ended && cb != nil && cb.refused == nil {
		cb.refused = err
	}
}

// checkResource refuses a nil or released buffer, or one of another device
// than the encoder's; what names the method, noun the argument.
func (e *commandEncoder) checkResource(what, noun string, b *Buffer) bool {
	return e.checkBufferAt(what, noun, -1, b)
}

// checkBufferAt is checkResource for the buffer bound at index (none if
// negative): the noun is formatted only on a refusal.
func (e *commandEncoder) checkBufferAt(what, noun string, index int, b *Buffer) bool {
	if b != nil && b.ID() != 0 && (b.dev == e.dev || sameDevice(b.dev, e.dev)) {
		return true
	}
	if index >= 0 {
		noun = fmt.Sprintf("%s for index %d", noun, index)
	}
	switch {
	case b == nil:
		e.fail("%s: nil %s", what, noun)
	case b.ID() == 0:
		e.failReleased("%s: the %s was released", what, noun)
	case !sameDevice(b.dev, e.dev):
		e.fail("%s: the %s belongs to %s, the encoder to %s", what, noun, b.dev.describe(), e.dev.describe())
	default:
		return true
	}
	return false
}

// refuses reports whether the encoder records nothing more: it has
// refused an argument, or it has ended, which is an error of the method
// what that was called after EndEncoding.
func (e *commandEncoder) refuses(what string) bool {
	if e.ended {
		e.fail("%s: encoder used after EndEncoding", what)
	}
	return e.err != nil
}

func (e *commandEncoder) send(s objc.SEL, args ...uintptr) {
	e.sends++
	objc.Send(e.ID(), s, args...)
}

// Err returns the first bad argument the encoder refused, or the first use
// after EndEncoding, or nil.
func (e *commandEncoder) Err() error { return e.err }

// Sends returns how many messages the encoder has sent to Metal: the host
// cost of what was encoded.
func (e *commandEncoder) Sends() int { return e.sends }

// EndEncoding finishes the encoder (endEncoding) and releases it; the
// command buffer can then be committed or given another encoder. It
// returns the first bad argument the encoder refused, in which case the
// command buffer lacks work the caller meant to encode and should not be
// committed. Any use of the encoder after EndEncoding is an error, which
// Err and a second EndEncoding return.
func (e *commandEncoder) EndEncoding() error {
	if !e.ended {
		e.ended = true
		e.send(sel.endEncoding)
		e.object.Release()
		if e.scratch != nil {
			scratchPool.Put(e.scratch)
			e.scratch = nil
		}
		if cb := e.buffer; cb != nil {
			if cb.open == e {
				cb.open = nil
			}
			if cb.refused == nil {
				cb.refused = e.err
			}
		}
	}
	return e.err
}

// Release ends encoding if EndEncoding was not called (Metal requires
// endEncoding before an encoder goes away) and releases the encoder. A
// second call does nothing.
func (e *commandEncoder) Release() { e.EndEncoding() }
