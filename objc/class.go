package objc

import (
	"fmt"
	"sync"

	"github.com/ebitengine/purego"
)

// A Method is one method of a class built with [RegisterClass].
type Method struct {
	// Sel is the selector's name, such as "setBuffer:offset:atIndex:".
	Sel string
	// Fn implements the method: a Go function whose first two parameters
	// are the receiver (ID) and the selector (SEL), followed by the
	// method's arguments, with at most one integer or pointer result. It
	// becomes a C function through purego.NewCallback.
	Fn any
	// IMP, when not 0, is a C function to use instead of Fn, for results
	// that a Go callback cannot return (such as double).
	IMP IMP
	// Types is the method's type encoding, such as "v@:Q" ("v@:" when
	// empty is not allowed: it must be given).
	Types string
}

var classes struct {
	sync.Mutex
	byName map[string]Class
	// keep holds the C strings given to the runtime, which may keep
	// pointers to them for the life of the process.
	keep [][]byte
}

// RegisterClass creates and registers a class named name, subclass of
// super, whose methods are implemented by Go functions. A process can make
// only a limited number of Go callbacks (about 2000), so each class is
// built once: a second call with the same name returns the class built by
// the first and ignores methods.
func RegisterClass(name string, super Class, methods []Method) (Class, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	classes.Lock()
	defer classes.Unlock()
	if c, ok := classes.byName[name]; ok {
		return c, nil
	}
	if GetClass(name) != 0 {
		return 0, fmt.Errorf("objc: a class named %q already exists", name)
	}
	if super == 0 {
		return 0, fmt.Errorf("objc: class %q needs a superclass", name)
	}
	b := cstring(name)
	r, _, _ := purego.SyscallN(rt.allocateClassPair, uintptr(super), uintptr(ptr(b)), 0)
	cls := Class(r)
	classes.keep = append(classes.keep, b)
	if cls == 0 {
		return 0, fmt.Errorf("objc: objc_allocateClassPair(%s, %q) failed", super.Name(), name)
	}
	for _, m := range methods {
		imp := m.IMP
		if imp == 0 {
			imp = IMP(purego.NewCallback(m.Fn))
		}
		types := cstring(m.Types)
		classes.keep = append(classes.keep, types)
		ok, _, _ := purego.SyscallN(rt.classAddMethod, uintptr(cls), uintptr(RegisterName(m.Sel)), uintptr(imp), uintptr(ptr(types)))
		if byte(ok) == 0 {
			return 0, fmt.Errorf("objc: class_addMethod(%q, %q) failed", name, m.Sel)
		}
	}
	purego.SyscallN(rt.registerClassPair, uintptr(cls))
	if classes.byName == nil {
		classes.byName = map[string]Class{}
	}
	classes.byName[name] = cls
	return cls, nil
}
