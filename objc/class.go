package objc

import (
	"fmt"
	"reflect"
	"runtime"
	"sync"

	"github.com/ebitengine/purego"
)

// A Method is one method of a class built with [RegisterClass].
type Method struct {
	// Sel is the selector's name, such as "setBuffer:offset:atIndex:".
	Sel string
	// Fn implements the method: a Go function whose first two parameters
	// are the receiver (ID) and the selector (SEL), followed by the
	// method's arguments (integers, pointers, and structs of them such as
	// NSRange and MTLSize), with at most one integer, pointer or struct
	// result. It becomes a C function through purego.NewCallback.
	//
	// On arm64, purego's callbacks misread integer arguments that follow a
	// 16-byte struct passed on the stack because only one register was
	// left for it; [RegisterClass] rejects such a Fn with an error.
	Fn any
	// IMP, when not 0, is a C function to use instead of Fn, for results
	// that a Go callback cannot return (such as double).
	IMP IMP
	// Types is the method's type encoding, such as "v@:Q" for a method
	// taking an NSUInteger and returning nothing. It must be given.
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
	// Every method is checked, and its Go function made callable from C,
	// before the class is allocated, so that a bad method leaves no
	// half-built class behind.
	imps := make([]IMP, len(methods))
	for i, m := range methods {
		if m.Types == "" {
			return 0, fmt.Errorf("objc: method %q of class %q has no type encoding (Types)", m.Sel, name)
		}
		imps[i] = m.IMP
		if imps[i] == 0 {
			var err error
			if imps[i], err = newCallback(name, m); err != nil {
				return 0, err
			}
		}
	}
	b := cstring(name)
	r, _, _ := purego.SyscallN(rt.allocateClassPair, uintptr(super), uintptr(ptr(b)), 0)
	cls := Class(r)
	classes.keep = append(classes.keep, b)
	if cls == 0 {
		return 0, fmt.Errorf("objc: objc_allocateClassPair(%s, %q) failed", super.Name(), name)
	}
	for i, m := range methods {
		types := cstring(m.Types)
		classes.keep = append(classes.keep, types)
		ok, _, _ := purego.SyscallN(rt.classAddMethod, uintptr(cls), uintptr(RegisterName(m.Sel)), uintptr(imps[i]), uintptr(ptr(types)))
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

// newCallback makes the C function for a method implemented in Go, or
// returns an error when Fn is not a function purego can call back.
func newCallback(class string, m Method) (imp IMP, err error) {
	where := fmt.Sprintf("objc: method %q of class %q", m.Sel, class)
	t := reflect.TypeOf(m.Fn)
	if t == nil || t.Kind() != reflect.Func {
		return 0, fmt.Errorf("%s: Fn is %T, not a function (or set IMP)", where, m.Fn)
	}
	if t.NumIn() < 2 || t.In(0).Kind() != reflect.Uintptr || t.In(1).Kind() != reflect.Uintptr {
		return 0, fmt.Errorf("%s: Fn is %v; its first two parameters must be the receiver (ID) and the selector (SEL)", where, t)
	}
	if runtime.GOARCH == "arm64" {
		if i := arm64StackStructHazard(t); i >= 0 {
			return 0, fmt.Errorf("%s: Fn is %v; on arm64 parameter %d follows a 16-byte struct passed on the stack, which purego callbacks read from a register: reorder the parameters or implement the method in C (IMP)", where, t, i)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			imp, err = 0, fmt.Errorf("%s: Fn is %v: %v", where, t, r)
		}
	}()
	return IMP(purego.NewCallback(m.Fn)), nil
}

// arm64StackStructHazard returns the index of the first parameter of fn
// that purego's callbacks would read from the wrong place on arm64, or -1.
// AAPCS64 passes a struct of at most 16 bytes that does not fit in the
// integer registers left on the stack and then uses no more integer
// registers (rule C.13); purego's callbacks keep reading later integer
// arguments from the registers.
func arm64StackStructHazard(fn reflect.Type) int {
	const nregs = 8
	used, spilled := 0, false
	for i := range fn.NumIn() {
		p := fn.In(i)
		switch {
		case p.Kind() == reflect.Float32 || p.Kind() == reflect.Float64 || isFloatStruct(p):
			continue
		case p.Kind() == reflect.Struct && p.Size() <= 16:
			n := int(p.Size()+7) / 8
			if used+n > nregs {
				if used < nregs {
					spilled = true
				}
				continue
			}
			if spilled {
				return i
			}
			used += n
		default:
			if spilled && used < nregs {
				return i
			}
			used++
		}
	}
	return -1
}

// isFloatStruct reports whether t is a struct of floating-point fields
// only, which the C convention passes in floating-point registers.
func isFloatStruct(t reflect.Type) bool {
	if t.Kind() != reflect.Struct || t.NumField() == 0 {
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i).Type
		if f.Kind() != reflect.Float32 && f.Kind() != reflect.Float64 && !isFloatStruct(f) {
			return false
		}
	}
	return true
}
