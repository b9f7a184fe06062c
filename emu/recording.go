package emu

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/puremetal/puremetal/objc"
)

// recordingSlots is PM_SLOTS of csrc/imps.c: how many compute encoders may
// record in C at once; those beyond it are answered by the Go methods.
const recordingSlots = 64

// recording is csrc/imps.c's pm_recording: the messages an open compute
// encoder was sent since it opened, appended by the C methods without a
// call into Go (a call into Go allocates), and read at endEncoding.
type recording struct {
	self      atomic.Uintptr // the encoder, or 0: the slot is free
	msgs      uintptr        // *message, n of a capacity C keeps
	n, _      uint64
	bytes     uintptr // setBytes copies, nbytes of a capacity C keeps
	nbytes, _ uint64
	failed    uint64 // the C storage could not grow
}

// message is pm_msg: one recorded message, its arguments in v.
type message struct {
	op uint64
	v  [6]uint64
}

// The ops of message, as csrc/imps.c numbers them.
const (
	opPipeline        = iota + 1 // v0 = pipeline (retained)
	opBuffer                     // v0 = buffer (retained, or 0), v1 = offset, v2 = index
	opBuffersRange               // v0 = location, v1 = length: outside the table
	opBytes                      // v0 = offset in bytes (^0: not copied), v1 = length, v2 = index, v3 = the caller's pointer
	opTGMemory                   // v0 = length, v1 = index
	opDispatchGroups             // v0..2 = threadgroups per grid, v3..5 = threads per threadgroup
	opDispatchThreads            // v0..2 = threads per grid, v3..5 = threads per threadgroup
	opBarrier                    // v0 = scope
)

// openRecording claims a free slot for the encoder self, whose messages
// the C methods then record there; nil if every slot is taken.
func openRecording(self objc.ID) *recording {
	if support.recordings == nil {
		return nil
	}
	for i := range support.recordings {
		if r := &support.recordings[i]; r.self.CompareAndSwap(0, uintptr(self)) {
			return r
		}
	}
	return nil
}

// replay applies the messages recorded in C to the encoder, in the order
// they were sent, as the Go methods apply them (what they refuse, replay
// refuses), releases the objects the C methods retained, and frees the
// slot, keeping its storage for the next encoder.
func (e *encoder) replay() {
	r := e.rec
	if r == nil {
		return
	}
	e.rec = nil
	msgs := unsafe.Slice((*message)(cptr(r.msgs)), r.n)
	bytes := unsafe.Slice((*byte)(cptr(r.bytes)), r.nbytes)
	live := e.recording()
	if live && r.failed != 0 {
		e.refuse(fmt.Errorf("the host's memory could not hold the encoder's %d messages and %d bytes of setBytes", r.n, r.nbytes))
		live = false
	}
	for i := range msgs {
		m := &msgs[i]
		if live {
			e.apply(m, bytes)
		}
		if m.op == opPipeline || m.op == opBuffer {
			objc.ID(m.v[0]).Release()
		}
	}
	r.n, r.nbytes, r.failed = 0, 0, 0
	r.self.Store(0)
}

// apply applies one recorded message.
func (e *encoder) apply(m *message, bytes []byte) {
	switch m.op {
	case opPipeline:
		e.setPipeline(objc.ID(m.v[0]))
	case opBuffer:
		e.setBuffer(objc.ID(m.v[0]), uintptr(m.v[1]), uintptr(m.v[2]))
	case opBuffersRange:
		e.refuse(buffersRangeError(uintptr(m.v[0]), uintptr(m.v[1])))
	case opBytes:
		var b []byte
		if m.v[0] != ^uint64(0) {
			b = bytes[m.v[0] : m.v[0]+m.v[1]]
		}
		e.setBytes(b, uintptr(m.v[3]), uintptr(m.v[1]), uintptr(m.v[2]))
	case opTGMemory:
		e.setThreadgroupMemoryLength(uintptr(m.v[0]), uintptr(m.v[1]))
	case opDispatchGroups, opDispatchThreads:
		e.dispatch([3]uint64(m.v[0:3]), [3]uint64(m.v[3:6]), m.op == opDispatchThreads)
	case opBarrier:
		e.record(command{})
	}
}
