package mtl

import (
	"errors"
	"sync/atomic"

	"github.com/puremetal/puremetal/objc"
)

// object is a reference to an Objective-C object that the Go value owns
// (one retain), released at most once.
type object struct{ id atomic.Uintptr }

func (o *object) set(id objc.ID) { o.id.Store(uintptr(id)) }

// ID returns the Objective-C object, or 0 after Release.
func (o *object) ID() objc.ID { return objc.ID(o.id.Load()) }

// Released reports whether Release was called.
func (o *object) Released() bool { return o.ID() == 0 }

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

// owned wraps id, an object retained for the caller (a getter's result,
// retained inside a pool), in a new *T; an id of 0 (the getter returned
// nil) is the error nilErr.
func owned[T any, P interface {
	*T
	set(objc.ID)
}](id objc.ID, nilErr string) (P, error) {
	if id == 0 {
		return nil, errors.New(nilErr)
	}
	o := P(new(T))
	o.set(id)
	return o, nil
}
