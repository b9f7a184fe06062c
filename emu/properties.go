package emu

import "github.com/puremetal/puremetal/objc"

// initState returns the -init of an emulated class that a program makes
// with [[cls alloc] init]: NSObject's -init, then the Go state newState
// makes attached to the object.
func initState[T any](newState func() *T) func(self objc.ID, cmd objc.SEL) objc.ID {
	return func(self objc.ID, cmd objc.SEL) objc.ID {
		self = objc.SendSuper(self, nsObject, cmd)
		if self == 0 {
			return 0
		}
		return attach(self, newState())
	}
}

// property returns the getter and setter of a property kept in the state T
// of an emulated object, in the field that field points at. Sent to any
// other object, the getter answers zero and the setter does nothing.
func property[T, V any](field func(*T) *V) (get func(objc.ID, objc.SEL) V, set func(objc.ID, objc.SEL, V)) {
	return propertyStoring(field, func(dst *V, v V) { *dst = v })
}

// objectProperty is property for an object that the state retains: the
// setter retains the new object and releases the old one.
func objectProperty[T any](field func(*T) *objc.ID) (get func(objc.ID, objc.SEL) objc.ID, set func(objc.ID, objc.SEL, objc.ID)) {
	return propertyStoring(field, replace)
}

func propertyStoring[T, V any](field func(*T) *V, store func(dst *V, v V)) (get func(objc.ID, objc.SEL) V, set func(objc.ID, objc.SEL, V)) {
	get = func(self objc.ID, _ objc.SEL) V {
		if s := stateOf[T](self); s != nil {
			return *field(s)
		}
		var zero V
		return zero
	}
	set = func(self objc.ID, _ objc.SEL, v V) {
		if s := stateOf[T](self); s != nil {
			store(field(s), v)
		}
	}
	return get, set
}

// replace retains the new object, releases the old, and stores the new.
func replace(dst *objc.ID, id objc.ID) {
	id.Retain()
	dst.Release()
	*dst = id
}
