package mtl

import (
	"sync/atomic"
	"unsafe"

	"github.com/puremetal/puremetal/objc"
)

// object is a reference to an Objective-C object that the Go value owns
// (one retain), released at most once.
type object struct{ id atomic.Uintptr }

func (o *object) set(id objc.ID) { o.id.Store(uintptr(id)) }

// ID returns the Objective-C object, or 0 after Release.
func (o *object) ID() objc.ID { return objc.ID(o.id.Load()) }

// Release releases the Go value's reference to the object. A second call
// does nothing.
func (o *object) Release() {
	if id := o.id.Swap(0); id != 0 {
		objc.ID(id).Release()
	}
}

// inPool runs f inside an autorelease pool on a locked OS thread: Metal
// getters that return autoreleased objects are called inside one, and their
// results retained, so that nothing depends on a pool of the caller's.
func inPool(f func()) { objc.WithAutoreleasePool(f) }

// sendInPool sends a message inside an autorelease pool, so that whatever
// Metal autoreleases while answering it is released when it returns.
func sendInPool(id objc.ID, s objc.SEL, args ...uintptr) (r uintptr) {
	inPool(func() { r = id.Send(s, args...) })
	return r
}

// sendBoolInPool is sendInPool for a BOOL result.
func sendBoolInPool(id objc.ID, s objc.SEL, args ...uintptr) (r bool) {
	inPool(func() { r = objc.SendBool(id, s, args...) })
	return r
}

// escape forces p's memory onto the heap. Pointers handed to Objective-C
// methods are passed as integers, which escape analysis cannot follow; a
// method implemented in Go (the emulated device) runs on the calling
// goroutine's stack and may grow it, which would move stack memory under
// the integer.
func escape(p unsafe.Pointer) {
	if escapeSinkOn {
		escapeSink = p
	}
}

var (
	escapeSinkOn bool
	escapeSink   unsafe.Pointer
)

// newOutID returns heap memory for an NSError** out-parameter.
func newOutID() *objc.ID {
	p := new(objc.ID)
	escape(unsafe.Pointer(p))
	return p
}

func uintptrOf[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }
