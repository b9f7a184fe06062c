package objc

import (
	"fmt"
	"sync"

	"github.com/ebitengine/purego"
)

// ID is a pointer to an Objective-C object; 0 is nil.
type ID uintptr

// Class is a pointer to an Objective-C class object.
type Class uintptr

// SEL is a registered selector: the name of a method.
type SEL uintptr

// IMP is a pointer to a method's implementation: a C function whose first
// two arguments are the receiver and the selector.
type IMP uintptr

// rt holds the addresses of the runtime functions this package calls.
var rt struct {
	once sync.Once
	err  error

	getClass             uintptr // objc_getClass(const char*) Class
	registerName         uintptr // sel_registerName(const char*) SEL
	msgSend              uintptr // Apple: objc_msgSend
	msgSendStret         uintptr // Apple amd64: objc_msgSend_stret
	msgSendSuper         uintptr // Apple: objc_msgSendSuper
	msgLookup            uintptr // GNU: objc_msg_lookup(id, SEL) IMP
	msgLookupSuper       uintptr // GNU: objc_msg_lookup_super(struct objc_super*, SEL) IMP
	allocateClassPair    uintptr
	registerClassPair    uintptr
	classAddMethod       uintptr
	classGetName         uintptr
	objectGetClass       uintptr
	classGetSuperclass   uintptr
	classRespondsToSel   uintptr
	classGetInstanceSize uintptr
}

// Load loads the Objective-C runtime and the frameworks puremetal uses. It
// is called by every function that needs the runtime, and may be called
// directly to learn early whether the runtime is there. The error names the
// library that could not be loaded and how to get it.
func Load() error {
	rt.once.Do(func() { rt.err = load() })
	return rt.err
}

func mustLoad() {
	if err := Load(); err != nil {
		panic(err)
	}
}

func dlopen(path, hint string) (uintptr, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return 0, fmt.Errorf("objc: cannot load %s: %v%s", path, err, hint)
	}
	return h, nil
}

func dlsym(h uintptr, lib, name string) (uintptr, error) {
	p, err := purego.Dlsym(h, name)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("objc: %s has no symbol %s: %v", lib, name, err)
	}
	return p, nil
}

// A symbol is a C function or variable to look up, and where its address
// goes.
type symbol struct {
	name string
	dst  *uintptr
}

// resolve looks up every symbol in the library h (named lib in errors),
// stopping at the first that is missing.
func resolve(h uintptr, lib string, syms []symbol) error {
	for _, s := range syms {
		p, err := dlsym(h, lib, s.name)
		if err != nil {
			return err
		}
		*s.dst = p
	}
	return nil
}

// runtimeSymbols are the runtime functions common to both runtimes, and
// then more.
func runtimeSymbols(more ...symbol) []symbol {
	return append([]symbol{
		{"objc_getClass", &rt.getClass},
		{"sel_registerName", &rt.registerName},
		{"objc_allocateClassPair", &rt.allocateClassPair},
		{"objc_registerClassPair", &rt.registerClassPair},
		{"class_addMethod", &rt.classAddMethod},
		{"class_getName", &rt.classGetName},
		{"class_getSuperclass", &rt.classGetSuperclass},
		{"class_respondsToSelector", &rt.classRespondsToSel},
		{"class_getInstanceSize", &rt.classGetInstanceSize},
	}, more...)
}

// GetClass returns the class with the given name, or 0 when the runtime
// has no such class (or the runtime cannot be loaded).
func GetClass(name string) Class {
	if Load() != nil {
		return 0
	}
	b := cstring(name)
	r, _, _ := purego.SyscallN(rt.getClass, uintptr(ptr(b)))
	return Class(r)
}

var selCache sync.Map // string -> SEL

// RegisterName returns the selector with the given name, registering it
// with the runtime the first time; later calls are served from a cache.
func RegisterName(name string) SEL {
	if s, ok := selCache.Load(name); ok {
		return s.(SEL)
	}
	mustLoad()
	b := cstring(name)
	r, _, _ := purego.SyscallN(rt.registerName, uintptr(ptr(b)))
	selCache.Store(name, SEL(r))
	return SEL(r)
}

// Name returns the name of the class.
func (c Class) Name() string {
	if c == 0 {
		return "nil"
	}
	r, _, _ := purego.SyscallN(rt.classGetName, uintptr(c))
	return gostring(r)
}

// Superclass returns the class's superclass, or 0 for a root class.
func (c Class) Superclass() Class {
	r, _, _ := purego.SyscallN(rt.classGetSuperclass, uintptr(c))
	return Class(r)
}

// InstancesRespondToSelector reports whether instances of the class answer
// sel (class_respondsToSelector).
func (c Class) InstancesRespondToSelector(sel SEL) bool {
	r, _, _ := purego.SyscallN(rt.classRespondsToSel, uintptr(c), uintptr(sel))
	return byte(r) != 0
}

// Class returns the class of the object (object_getClass).
func (id ID) Class() Class {
	if id == 0 {
		return 0
	}
	return objectClass(id)
}
