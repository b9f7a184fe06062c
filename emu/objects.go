package emu

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/puremetal/puremetal/objc"
)

// objects maps each live emulated Objective-C object to its Go state.
var objects struct {
	sync.RWMutex
	m map[objc.ID]any
}

var live atomic.Int64

// LiveObjects returns how many emulated Metal objects exist now: devices,
// buffers, libraries, functions, pipelines, queues, command buffers and
// encoders. Tests compare it before and after to show that nothing leaks.
func LiveObjects() int { return int(live.Load()) }

// newObject allocates an instance of cls (owned by the caller, retain count
// one) and attaches state to it.
func newObject(cls objc.Class, state any) objc.ID {
	return attach(cls.New(), state)
}

// attach makes state the Go state of the new object id, counted as live
// until its -dealloc, and returns id.
func attach(id objc.ID, state any) objc.ID {
	objects.Lock()
	if objects.m == nil {
		objects.m = map[objc.ID]any{}
	}
	objects.m[id] = state
	objects.Unlock()
	live.Add(1)
	return id
}

// stateOf returns the Go state of an emulated object, or nil for any other
// object (or nil).
func stateOf[T any](id objc.ID) *T {
	objects.RLock()
	s := objects.m[id]
	objects.RUnlock()
	t, _ := s.(*T)
	return t
}

// releaser is state that holds references to be released when its object
// is deallocated.
type releaser interface{ free() }

// dealloc is the -dealloc of every emulated class: it drops the Go state,
// releases what the state holds, and calls NSObject's -dealloc.
func dealloc(self objc.ID, cmd objc.SEL) {
	objects.Lock()
	s := objects.m[self]
	delete(objects.m, self)
	objects.Unlock()
	if s != nil {
		live.Add(-1)
		if r, ok := s.(releaser); ok {
			r.free()
		}
	}
	objc.SendSuper(self, nsObject, cmd)
}

var nsObject objc.Class

// labeled is state with a label.
type labeled struct{ label string }

func (l *labeled) labelPtr() *labeled { return l }

type hasLabel interface{ labelPtr() *labeled }

func labelOf(self objc.ID) *labeled {
	objects.RLock()
	s := objects.m[self]
	objects.RUnlock()
	if h, ok := s.(hasLabel); ok {
		return h.labelPtr()
	}
	return nil
}

func setLabel(self objc.ID, _ objc.SEL, str objc.ID) {
	if l := labelOf(self); l != nil {
		l.label = objc.GoString(str)
	}
}

func label(self objc.ID, _ objc.SEL) objc.ID {
	l := labelOf(self)
	if l == nil || l.label == "" {
		return 0
	}
	return autoreleasedString(l.label)
}

// cptr converts an address given by the runtime into a pointer.
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
