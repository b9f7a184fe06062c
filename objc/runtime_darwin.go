package objc

import (
	"runtime"

	"github.com/ebitengine/purego"
)

// Apple's runtime: one entry point, objc_msgSend, finds the method and
// jumps to it with the caller's arguments in place.

func load() error {
	const hint = " (Metal needs macOS 13 or later)"
	// CoreGraphics must be loaded before Metal, or MTLCreateSystemDefaultDevice
	// returns nil in a command-line process; then Metal, then Foundation,
	// before any class is looked up.
	for _, lib := range []string{
		"/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics",
		"/System/Library/Frameworks/Metal.framework/Metal",
		"/System/Library/Frameworks/Foundation.framework/Foundation",
	} {
		if _, err := dlopen(lib, hint); err != nil {
			return err
		}
	}
	const lib = "/usr/lib/libobjc.A.dylib"
	h, err := dlopen(lib, hint)
	if err != nil {
		return err
	}
	syms := runtimeSymbols(
		symbol{"objc_msgSend", &rt.msgSend},
		symbol{"objc_msgSendSuper", &rt.msgSendSuper},
		symbol{"object_getClass", &rt.objectGetClass},
	)
	if runtime.GOARCH == "amd64" {
		syms = append(syms, symbol{"objc_msgSend_stret", &rt.msgSendStret})
	}
	return resolve(h, lib, syms)
}

// lookup returns the function to call for a send: always objc_msgSend.
func lookup(ID, SEL) uintptr { return rt.msgSend }

// lookupStret returns the function to call for a send whose result is a
// struct returned through a hidden pointer.
func lookupStret(ID, SEL) uintptr {
	if runtime.GOARCH == "amd64" {
		return rt.msgSendStret
	}
	return rt.msgSend
}

// lookupSuper returns the function and the receiver argument for a send to
// the superclass's implementation: objc_msgSendSuper takes a pointer to an
// objc_super in place of the receiver.
func lookupSuper(sup *objcSuper, sel SEL) (fn, receiver uintptr) {
	return rt.msgSendSuper, Pointer(sup)
}

func objectClass(id ID) Class {
	r, _, _ := purego.SyscallN(rt.objectGetClass, uintptr(id))
	return Class(r)
}
