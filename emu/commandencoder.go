package emu

import (
	"fmt"

	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

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
// its command buffer not committed. A message to an encoder that has ended
// is refused: the command buffer, if not committed yet, fails.
func (e *commandEncoder) recording() bool {
	if e.cb.status.Load() != uint64(mtl.CommandBufferStatusNotEnqueued) {
		return false
	}
	if e.ended {
		e.refuse(fmt.Errorf("a message sent to an encoder after its endEncoding"))
		return false
	}
	return true
}

// openState returns the state of type E of the encoder self if it may
// still record (see recording), else nil.
func openState[E any, P interface {
	*E
	recording() bool
}](self objc.ID) *E {
	if e := P(stateOf[E](self)); e != nil && e.recording() {
		return e
	}
	return nil
}

// record appends a command to the command buffer.
func (e *commandEncoder) record(c command) { e.cb.commands = append(e.cb.commands, c) }

// refuse records an argument that Metal's validation refuses: the command
// buffer fails when it reaches it, naming it, instead of running with the
// argument missing.
func (e *commandEncoder) refuse(err error) { e.record(command{err: err}) }
