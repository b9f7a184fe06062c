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
}

// opened records e as the open encoder of cb.
func (e *commandEncoder) opened(cb *CommandBuffer) {
	e.buffer = cb
	cb.open = e
}

func (e *commandEncoder) fail(format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf("mtl: "+format, args...)
	}
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
